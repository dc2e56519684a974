// A fixed-capacity FIFO of float32 samples. No allocation after construction,
// so it is safe on the audio rendering thread.

export class RingBuffer {
  /** @param {number} capacity samples */
  constructor(capacity) {
    if (!Number.isInteger(capacity) || capacity <= 0) {
      throw new RangeError(`capacity: expected a positive integer, got ${capacity}`);
    }
    this.data = new Float32Array(capacity);
    this.readIndex = 0;
    this.size = 0;
  }

  get capacity() {
    return this.data.length;
  }

  get available() {
    return this.size;
  }

  get space() {
    return this.data.length - this.size;
  }

  /**
   * Append as many samples as fit; returns how many were written. The caller
   * decides what dropping the rest means (the playout counts it as overflow).
   */
  write(samples) {
    const n = Math.min(samples.length, this.space);
    const cap = this.data.length;
    const start = (this.readIndex + this.size) % cap;
    const first = Math.min(n, cap - start);
    this.data.set(samples.subarray(0, first), start);
    if (n > first) this.data.set(samples.subarray(first, n), 0);
    this.size += n;
    return n;
  }

  /** Move up to ``count`` samples into ``out`` at ``offset``; returns how many. */
  read(out, offset = 0, count = out.length - offset) {
    const n = Math.min(count, this.size);
    const cap = this.data.length;
    const first = Math.min(n, cap - this.readIndex);
    out.set(this.data.subarray(this.readIndex, this.readIndex + first), offset);
    if (n > first) out.set(this.data.subarray(0, n - first), offset + first);
    this.readIndex = (this.readIndex + n) % cap;
    this.size -= n;
    return n;
  }

  clear() {
    this.readIndex = 0;
    this.size = 0;
  }
}
