// PCM conversion, the wire's sample formats <-> Web Audio's float32.
//
// Policy (docs/audio.md, the same as audiocore's): float32 -> s16 clips to
// [-1, 1], scales by 32767 in float32 arithmetic and rounds half to even,
// so a sample never wraps around (1.2 becomes 32767, not -26215); NaN
// becomes 0. s16 -> float32 multiplies by 1/32768. s16 is little-endian on
// the wire whatever the platform's byte order.

const S16_SCALE = Math.fround(32767);
const S16_INV = 1 / 32768;

/** Round half to even, as numpy's rint does. */
function rintHalfEven(y) {
  const r = Math.round(y); // rounds .5 towards +Infinity
  return r - y === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * Float32 samples -> signed 16-bit PCM, clipped.
 * @param {ArrayLike<number>} input
 * @param {Int16Array} [out] written in place when given (at least input.length long)
 * @returns {Int16Array}
 */
export function float32ToPcm16(input, out = new Int16Array(input.length)) {
  if (out.length < input.length) {
    throw new RangeError(`out holds ${out.length} samples, expected at least ${input.length}`);
  }
  for (let i = 0; i < input.length; i++) {
    let x = input[i];
    if (x !== x) x = 0; // NaN
    else if (x > 1) x = 1;
    else if (x < -1) x = -1;
    out[i] = rintHalfEven(Math.fround(Math.fround(x) * S16_SCALE));
  }
  return out;
}

/** Little-endian s16 bytes of ``samples`` (an Int16Array), whatever the host's byte order. */
export function pcm16Bytes(samples) {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) view.setInt16(i * 2, samples[i], true);
  return bytes;
}

/**
 * Streaming s16 little-endian bytes -> float32.
 *
 * Network chunks need not hold whole samples: an odd trailing byte is kept
 * and completed by the first byte of the next chunk, so no sample is ever
 * assembled from the wrong bytes. ``reset()`` drops it (a new turn, a flush).
 */
export class Pcm16Decoder {
  #carry = -1; // the held low byte, or -1

  /** @param {Uint8Array} bytes @returns {Float32Array} */
  decode(bytes) {
    const carried = this.#carry >= 0 ? 1 : 0;
    const total = carried + bytes.length;
    const out = new Float32Array(total >> 1);
    let i = 0; // index into bytes
    let o = 0;
    if (carried && out.length) {
      out[o++] = toSigned(this.#carry | (bytes[0] << 8)) * S16_INV;
      i = 1;
      this.#carry = -1;
    }
    for (; i + 1 < bytes.length; i += 2) {
      out[o++] = toSigned(bytes[i] | (bytes[i + 1] << 8)) * S16_INV;
    }
    if (i < bytes.length) this.#carry = bytes[i];
    return out;
  }

  /** True while half a sample is held. */
  get pending() {
    return this.#carry >= 0;
  }

  reset() {
    this.#carry = -1;
  }
}

function toSigned(u16) {
  return (u16 << 16) >> 16;
}

/** Base64 (standard or URL-safe alphabet) -> bytes. */
export function base64ToBytes(text) {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** RMS and peak of a block, and the RMS in dBFS (-Infinity for silence). */
export function levels(samples) {
  let sum = 0;
  let peak = 0;
  for (let i = 0; i < samples.length; i++) {
    const x = samples[i];
    sum += x * x;
    const a = Math.abs(x);
    if (a > peak) peak = a;
  }
  const rms = samples.length ? Math.sqrt(sum / samples.length) : 0;
  return { rms, peak, dbfs: rms > 0 ? 20 * Math.log10(rms) : -Infinity };
}
