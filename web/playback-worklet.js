// Playback: agent audio (already float32 at the context's rate — the server
// resamples, so the browser never does) through a Playout ring buffer.
//
// Messages in:  {type:"push", samples: Float32Array}  (transferred)
//               {type:"end"}                           the turn's tail is queued
//               {type:"flush", id}                     barge-in: fade out now
//               {type:"prebuffer", ms}
// Messages out: {type:"started"|"underrun"|"ended"}    as they happen
//               {type:"silent", id, samples, ...}      a flush completed
//               {type:"stats", ...}                    ~every 50 ms and after each event
//
// Timing: a message posted to this port is handled between two render
// quanta, so a flush takes effect at the next quantum (<= 2.7 ms at 48 kHz)
// and the fade adds `fadeMs` (5 ms): silence within ~8 ms of the request,
// plus the output device's own latency.

import { Playout } from "./playout.js";

const STATS_EVERY_S = 0.05;

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = options.processorOptions ?? {};
    this.playout = new Playout({
      sampleRate,
      prebufferMs: o.prebufferMs ?? 60,
      fadeMs: o.fadeMs ?? 5,
    });
    this.flushId = null;
    this.flushAt = 0; // context time at which the flush was handled
    this.nextStats = 0;
    this.port.onmessage = (event) => this.onMessage(event.data);
  }

  onMessage(msg) {
    const p = this.playout;
    switch (msg.type) {
      case "push":
        p.enqueue(msg.samples);
        break;
      case "end":
        p.endTurn();
        break;
      case "flush": {
        const left = p.flush();
        this.flushAt = currentTime;
        if (left === 0) this.reportSilent(msg.id, 0);
        else this.flushId = msg.id;
        break;
      }
      case "prebuffer":
        p.setPrebuffer(msg.ms);
        break;
    }
  }

  reportSilent(id, extraSamples) {
    this.port.postMessage({
      type: "silent",
      id,
      // From the quantum that handled the flush to the first silent sample.
      fadeSamples: extraSamples,
      silentAt: this.flushAt + extraSamples / sampleRate,
      handledAt: this.flushAt,
    });
    this.flushId = null;
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    const events = this.playout.render(out);
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    for (const event of events) {
      if (event === "silent") {
        const played = Math.round((currentTime - this.flushAt) * sampleRate);
        this.reportSilent(this.flushId, played + this.playout.silentFrom);
      } else {
        this.port.postMessage({ type: event, time: currentTime });
      }
    }
    // Stats go out every ~50 ms, and at once after an event so that they
    // never lag behind it.
    if (events.length || currentTime >= this.nextStats) {
      this.nextStats = currentTime + STATS_EVERY_S;
      const p = this.playout;
      this.port.postMessage({
        type: "stats",
        state: p.state,
        bufferedSamples: p.buffered,
        ...p.stats,
      });
    }
    return true;
  }
}

registerProcessor("playback", PlaybackProcessor);
