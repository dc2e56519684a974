// Capture: the microphone's 128-sample render quanta -> 20 ms frames at the
// context's own rate, posted to the main thread (which sends them on the
// socket). The node is created with channelCount 1 / "explicit", so Web
// Audio has already mixed the input down to mono.
//
// Timing: process() runs every 128 / sampleRate s (2.7 ms at 48 kHz) on the
// audio thread; it must not allocate per call beyond the one frame it hands
// off, and never block. A frame is transferred, not copied.

import { FrameBatcher, frameSamples } from "./frame-batcher.js";
import { levels } from "./sdk/pcm.js";

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const frameMs = options.processorOptions?.frameMs ?? 20;
    this.batcher = new FrameBatcher(frameSamples(sampleRate, frameMs));
    this.frames = 0;
  }

  process(inputs) {
    const channel = inputs[0]?.[0]; // absent while the source is not connected
    if (channel) {
      for (const frame of this.batcher.push(channel)) {
        const { rms, peak } = levels(frame);
        this.frames++;
        // currentTime: the context time of this quantum, for latency figures.
        this.port.postMessage(
          { frame, rms, peak, seq: this.frames, time: currentTime },
          [frame.buffer],
        );
      }
    }
    return true; // keep running while the graph holds us
  }
}

registerProcessor("capture", CaptureProcessor);
