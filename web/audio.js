// Web Audio for the page: one AudioContext at the device's native rate for
// both directions, the capture worklet (mic -> 20 ms frames) and the
// playback worklet (agent audio -> speakers).
//
// One context means capture, playback and the negotiated rates are the same
// number and the browser resamples nothing. The context must be created (or
// resumed) inside the click handler that starts the conversation: that user
// gesture is what autoplay policies ask for.

import { SUPPORTED_RATES } from "./sdk/session.js";

export const MIC_CONSTRAINTS = {
  audio: {
    channelCount: 1,
    echoCancellation: true, // the agent's voice must not come back as user speech
    noiseSuppression: true,
    autoGainControl: true,
  },
};

/**
 * The microphone's constraints. With the server cancelling the echo
 * (start.echoCancellation "server") the browser's own is off: two cancellers
 * in a row would have the server's take the browser's leftovers for the
 * room, and its gain control would change the echo path under it.
 */
export function micConstraints({ serverEchoCancellation = false } = {}) {
  if (!serverEchoCancellation) return MIC_CONSTRAINTS;
  return {
    audio: {
      ...MIC_CONSTRAINTS.audio,
      echoCancellation: false,
      autoGainControl: false,
    },
  };
}

/** A getUserMedia failure, in words for the user. */
export function describeMicError(error) {
  switch (error?.name) {
    case "NotAllowedError":
    case "SecurityError":
      return (
        "Microphone access was denied. Allow the microphone for this site (the icon in " +
        "the address bar) and connect again — or type below."
      );
    case "NotFoundError":
    case "OverconstrainedError":
      return "No microphone was found. Plug one in and connect again — or type below.";
    case "NotReadableError":
    case "AbortError":
      return "The microphone is busy or failed to start (another app may be using it).";
    case "NoMicApi":
      return "This page cannot use the microphone here: it needs https:// or localhost.";
    default:
      return `The microphone could not be opened: ${error?.message ?? error}`;
  }
}

export class AudioEngine {
  /**
   * Synchronous on purpose: call it directly from the click handler.
   * @param {object} options
   * @param {(msg: object) => void} options.onCaptureFrame  {frame, rms, peak, seq, time}
   * @param {(msg: object) => void} options.onPlaybackEvent worklet messages
   */
  constructor({ onCaptureFrame, onPlaybackEvent, prebufferMs = 60, serverEchoCancellation = false }) {
    let context = new AudioContext({ latencyHint: "interactive" });
    if (!SUPPORTED_RATES.includes(context.sampleRate)) {
      // A 88.2/96 kHz device: the server does not take that rate, so ask for
      // 48 kHz and let the browser resample (the one case where it does).
      context.close();
      context = new AudioContext({ latencyHint: "interactive", sampleRate: 48000 });
    }
    this.context = context;
    this.resumed = context.resume(); // still inside the user gesture
    this.onCaptureFrame = onCaptureFrame;
    this.onPlaybackEvent = onPlaybackEvent;
    this.prebufferMs = prebufferMs;
    this.serverEchoCancellation = serverEchoCancellation;
    this.stream = null;
    this.source = null;
    this.captureNode = null;
    this.playbackNode = null;
  }

  get sampleRate() {
    return this.context.sampleRate;
  }

  /** Load the worklets and start the playback path. */
  async startPlayback() {
    const ctx = this.context;
    await this.resumed;
    await Promise.all([
      ctx.audioWorklet.addModule(new URL("./capture-worklet.js", import.meta.url)),
      ctx.audioWorklet.addModule(new URL("./playback-worklet.js", import.meta.url)),
    ]);
    this.playbackNode = new AudioWorkletNode(ctx, "playback", {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { prebufferMs: this.prebufferMs },
    });
    this.playbackNode.port.onmessage = (e) => this.onPlaybackEvent(e.data);
    this.playbackNode.connect(ctx.destination);
  }

  /** Open the microphone into the capture worklet. Throws getUserMedia's errors. */
  async startCapture() {
    if (!navigator.mediaDevices?.getUserMedia) {
      const error = new Error("navigator.mediaDevices is not available");
      error.name = "NoMicApi";
      throw error;
    }
    this.stream = await navigator.mediaDevices.getUserMedia(
      micConstraints({ serverEchoCancellation: this.serverEchoCancellation }),
    );
    if (this.context.state === "closed") {
      this.#stopTracks(); // disconnected while the permission prompt was up
      return;
    }
    const ctx = this.context;
    this.source = ctx.createMediaStreamSource(this.stream);
    this.captureNode = new AudioWorkletNode(ctx, "capture", {
      numberOfInputs: 1,
      numberOfOutputs: 0, // a sink: rendered without being connected onwards
      channelCount: 1,
      channelCountMode: "explicit",
      channelInterpretation: "speakers",
      processorOptions: { frameMs: 20 },
    });
    this.captureNode.port.onmessage = (e) => this.onCaptureFrame(e.data);
    this.source.connect(this.captureNode);
  }

  get micTrack() {
    return this.stream?.getAudioTracks()[0] ?? null;
  }

  /** Queue agent audio (float32 at the context's rate). */
  play(samples) {
    this.playbackNode?.port.postMessage({ type: "push", samples }, [samples.buffer]);
  }

  endTurn() {
    this.playbackNode?.port.postMessage({ type: "end" });
  }

  flush(id) {
    this.playbackNode?.port.postMessage({ type: "flush", id });
  }

  setPrebuffer(ms) {
    this.prebufferMs = ms;
    this.playbackNode?.port.postMessage({ type: "prebuffer", ms });
  }

  #stopTracks() {
    for (const track of this.stream?.getTracks() ?? []) track.stop();
  }

  /** Release the microphone and close the context. */
  async close() {
    this.#stopTracks();
    for (const node of [this.source, this.captureNode, this.playbackNode]) node?.disconnect();
    if (this.captureNode) this.captureNode.port.onmessage = null;
    if (this.playbackNode) this.playbackNode.port.onmessage = null;
    if (this.context.state !== "closed") await this.context.close();
  }
}
