// Re-frames the audio thread's 128-sample render quanta into fixed frames
// (20 ms = 960 samples at 48 kHz, 882 at 44.1 kHz: not a multiple of 128, so
// a quantum is split across two frames when it has to be).

export class FrameBatcher {
  /** @param {number} frameSize samples per emitted frame */
  constructor(frameSize) {
    if (!Number.isInteger(frameSize) || frameSize <= 0) {
      throw new RangeError(`frameSize: expected a positive integer, got ${frameSize}`);
    }
    this.frameSize = frameSize;
    this.frame = new Float32Array(frameSize);
    this.filled = 0;
  }

  /**
   * Add samples; returns the frames completed by them (possibly none). Each
   * returned frame is a fresh array the caller owns and may transfer.
   */
  push(samples) {
    const done = [];
    let i = 0;
    while (i < samples.length) {
      const n = Math.min(this.frameSize - this.filled, samples.length - i);
      this.frame.set(samples.subarray(i, i + n), this.filled);
      this.filled += n;
      i += n;
      if (this.filled === this.frameSize) {
        done.push(this.frame);
        this.frame = new Float32Array(this.frameSize);
        this.filled = 0;
      }
    }
    return done;
  }

  /** The partial frame so far (a copy), and start over. */
  drain() {
    const rest = this.frame.slice(0, this.filled);
    this.filled = 0;
    return rest;
  }
}

/** Samples in a frame of ``ms`` milliseconds at ``sampleRate``. */
export function frameSamples(sampleRate, ms) {
  return Math.round((sampleRate * ms) / 1000);
}
