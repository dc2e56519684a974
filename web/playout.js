// The playback buffer's logic, free of Web Audio so it can be unit-tested:
// the playback worklet feeds it the decoded agent audio and calls render()
// once per 128-sample render quantum.
//
// States:
//   idle          nothing to play; output silence
//   prebuffering  a turn (or a resume after an underrun) is collecting
//                 `prebuffer` samples before it starts, so network jitter
//                 does not turn into gaps
//   playing       samples flow; running dry mid-turn is an underrun: the
//                 last samples are faded out and we go back to prebuffering
//                 (a short pause instead of a click per missing quantum)
//   fading        a flush (barge-in): fade out over `fade` samples from the
//                 current position, then drop everything and go idle
//
// A turn's end is announced with endTurn(): the tail then plays to the last
// sample even if it is shorter than the prebuffer, and running dry after it
// is not an underrun.

import { RingBuffer } from "./ring-buffer.js";

const NONE = Object.freeze([]); // render() allocates only when something happened

export class Playout {
  /**
   * @param {object} options
   * @param {number} options.sampleRate
   * @param {number} [options.prebufferMs=60]
   * @param {number} [options.capacityMs=20000] audio held at most; beyond it new audio is dropped
   * @param {number} [options.fadeMs=5] flush fade-out
   * @param {number} [options.rampMs=2] fade-in at (re)start, fade-out at an underrun
   */
  constructor({ sampleRate, prebufferMs = 60, capacityMs = 20000, fadeMs = 5, rampMs = 2 }) {
    this.sampleRate = sampleRate;
    this.ring = new RingBuffer(Math.ceil((sampleRate * capacityMs) / 1000));
    this.fadeSamples = Math.max(1, Math.round((sampleRate * fadeMs) / 1000));
    this.rampSamples = Math.max(1, Math.round((sampleRate * rampMs) / 1000));
    this.setPrebuffer(prebufferMs);
    this.state = "idle";
    this.ending = false; // endTurn() seen: play the tail out
    this.resuming = false; // prebuffering again after an underrun, mid-turn
    this.rampIn = 0; // samples of fade-in left
    this.fadeLeft = 0; // samples of the flush fade left
    this.fadeTotal = 1; // length of the current flush fade
    this.stats = {
      samplesPlayed: 0, // samples taken from the buffer and sent to the output
      underruns: 0,
      overflowSamples: 0,
      turnsStarted: 0,
      flushes: 0,
    };
  }

  setPrebuffer(ms) {
    this.prebufferSamples = Math.max(0, Math.round((this.sampleRate * ms) / 1000));
  }

  get buffered() {
    return this.ring.available;
  }

  /** Queue decoded samples. Returns how many were dropped for lack of room. */
  enqueue(samples) {
    const dropped = samples.length - this.ring.write(samples);
    this.stats.overflowSamples += dropped;
    if (this.state === "fading") return dropped; // the flush drops them anyway
    this.ending = false; // more audio: the stream goes on
    if (this.state === "idle" && samples.length) this.state = "prebuffering";
    return dropped;
  }

  /** The turn is complete: whatever is queued is its tail. */
  endTurn() {
    if (this.state !== "idle" && this.state !== "fading") this.ending = true;
  }

  /**
   * Barge-in: fade out at once and drop the queue. Returns the number of
   * samples until silence (0 if already silent).
   */
  flush() {
    this.stats.flushes++;
    this.ending = false;
    this.resuming = false;
    if (this.state === "fading") return this.fadeLeft;
    if (this.state === "playing" && this.ring.available) {
      this.state = "fading";
      this.fadeLeft = this.fadeTotal = Math.min(this.fadeSamples, this.ring.available);
      return this.fadeLeft;
    }
    this.ring.clear();
    this.state = "idle";
    return 0;
  }

  /**
   * Fill one output block. Returns the events to report, in order (usually
   * none): "started" (first audio of a turn), "underrun", "ended" (the tail
   * played out), "silent" (a flush's fade completed).
   */
  render(out) {
    const n = out.length;
    switch (this.state) {
      case "idle":
        out.fill(0);
        return NONE;
      case "fading":
        return this.#renderFade(out);
      case "prebuffering": {
        const ready =
          this.ring.available >= this.prebufferSamples || (this.ending && this.ring.available > 0);
        if (!ready) {
          out.fill(0);
          return NONE;
        }
        const resumed = this.resuming;
        this.resuming = false;
        this.state = "playing";
        this.rampIn = this.rampSamples;
        const event = this.#renderPlaying(out, n);
        if (resumed) return event; // after an underrun: the same turn goes on
        this.stats.turnsStarted++;
        return ["started", ...event];
      }
      case "playing":
        return this.#renderPlaying(out, n);
    }
    return NONE;
  }

  #renderPlaying(out, n) {
    const got = this.ring.read(out, 0, n);
    this.stats.samplesPlayed += got;
    for (let i = 0; this.rampIn > 0 && i < got; i++, this.rampIn--) {
      out[i] *= 1 - this.rampIn / this.rampSamples;
    }
    if (got === n) return NONE;
    out.fill(0, got);
    if (this.ending) {
      this.state = "idle";
      this.resuming = false;
      this.ending = false;
      return ["ended"];
    }
    // Ran dry mid-turn: fade what we have (no step to zero), wait for a
    // fresh prebuffer, and do not count the resume as a new turn.
    const ramp = Math.min(got, this.rampSamples);
    for (let i = 0; i < ramp; i++) out[got - ramp + i] *= 1 - (i + 1) / ramp;
    this.stats.underruns++;
    this.state = "prebuffering";
    this.resuming = true;
    return ["underrun"];
  }

  #renderFade(out) {
    const got = this.ring.read(out, 0, Math.min(out.length, this.fadeLeft));
    this.stats.samplesPlayed += got;
    // Linear gain from the current fade position down to 0 at the last sample.
    for (let i = 0; i < got; i++) {
      out[i] *= (this.fadeLeft - i - 1) / this.fadeTotal;
    }
    this.fadeLeft -= got;
    out.fill(0, got);
    if (this.fadeLeft > 0 && this.ring.available > 0) return NONE;
    this.ring.clear();
    this.state = "idle";
    this.fadeLeft = 0;
    this.silentFrom = got; // index in this block where silence begins
    return ["silent"];
  }
}
