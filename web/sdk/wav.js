// A turn's audio as a WAV file: what the demo page's replay (../replay.js)
// and the chat transport's "Recorded Audio" file part are made of.
//
// Same PCM policy as the stream: the server's PCM16 little-endian mono at the
// output rate, byte for byte, behind a 44-byte RIFF header (the layout of
// audiocore's wav_header). Bounded: past MAX_REPLAY_BYTES a turn's recording
// stops, and says it is cut.

export const MAX_REPLAY_BYTES = 16 * 1024 * 1024; // 5.8 min at 24 kHz, 2.9 at 48 kHz
const HEADER_BYTES = 44;

/** A WAV file of PCM16 mono `pcm` (little-endian bytes) at `sampleRate`. */
export function wavFile(pcm, sampleRate) {
  if (!Number.isInteger(sampleRate) || sampleRate <= 0) {
    throw new RangeError(`expected a positive integer sample rate, got ${sampleRate}`);
  }
  if (pcm.length % 2) throw new RangeError(`expected whole 16-bit samples, got ${pcm.length} bytes`);
  const out = new Uint8Array(HEADER_BYTES + pcm.length);
  const view = new DataView(out.buffer);
  const ascii = (at, text) => [...text].forEach((c, i) => view.setUint8(at + i, c.charCodeAt(0)));
  ascii(0, "RIFF");
  view.setUint32(4, 36 + pcm.length, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true); // the PCM fmt chunk's size
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true); // bytes a second
  view.setUint16(32, 2, true); // bytes a frame
  view.setUint16(34, 16, true); // bits a sample
  ascii(36, "data");
  view.setUint32(40, pcm.length, true);
  out.set(pcm, HEADER_BYTES);
  return out;
}

/** One turn's played audio, as it arrived (PCM16 bytes), up to a bound. */
export class TurnRecorder {
  constructor(maxBytes = MAX_REPLAY_BYTES) {
    this.maxBytes = maxBytes;
    this.reset();
  }

  add(bytes) {
    if (this.cut) return;
    const room = this.maxBytes - this.size;
    if (bytes.length > room) {
      // The recording ends at the bound, on a whole sample.
      this.cut = true;
      bytes = bytes.subarray(0, room - ((this.size + room) % 2));
    }
    if (!bytes.length) return;
    this.parts.push(bytes.slice()); // the socket's buffer may be reused
    this.size += bytes.length;
  }

  /** The turn's audio (null if none), and a fresh recording for the next. */
  take() {
    if (!this.size) return null;
    const pcm = new Uint8Array(this.size);
    let at = 0;
    for (const part of this.parts) {
      pcm.set(part, at);
      at += part.length;
    }
    const taken = { pcm, cut: this.cut };
    this.reset();
    return taken;
  }

  reset() {
    this.parts = [];
    this.size = 0;
    this.cut = false;
  }
}
