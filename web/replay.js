// The answer's replay: the audio the page played during a turn, as a WAV
// shown after the answer (an audio element and a download link) — what the
// seed project's client makes its "Recorded Audio" file part of, from the
// finish chunk's `messageMetadata.audio` and the data-pcm it received.
//
// Same PCM policy as the stream: the server's PCM16 little-endian mono at the
// output rate, byte for byte, behind a 44-byte RIFF header (the layout of
// audiocore's wav_header). Bounded: past MAX_REPLAY_BYTES a turn's recording
// stops, and the replay says it is cut.

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

/**
 * The replay element for a turn: "Recorded Audio", its length, a player and
 * a download link. `reported`: the finish chunk's `messageMetadata.audio`
 * (what the server says it sent), kept on the element beside what was played.
 */
export function replayElement(doc, { pcm, cut }, sampleRate, reported, name) {
  const url = URL.createObjectURL(new Blob([wavFile(pcm, sampleRate)], { type: "audio/wav" }));
  const figure = doc.createElement("figure");
  figure.className = "replay";
  figure.dataset.bytes = String(pcm.length);
  figure.dataset.reportedBytes = String(reported?.bytes ?? "");
  const caption = doc.createElement("figcaption");
  const seconds = (pcm.length / 2 / sampleRate).toFixed(2);
  caption.textContent = `Recorded Audio · ${seconds} s${cut ? " (cut at the limit)" : ""}`;
  const audio = doc.createElement("audio");
  audio.controls = true;
  audio.preload = "metadata";
  audio.setAttribute("aria-label", `Recorded Audio of ${name}`);
  audio.src = url;
  const link = doc.createElement("a");
  link.href = url;
  link.download = `${name}.wav`;
  link.textContent = "Download WAV";
  figure.append(caption, audio, link);
  return figure;
}

export const MAX_REPLAYS = 20; // the log keeps the latest; older ones let their audio go

/** Append `figure` to `log`, dropping (and releasing) replays past MAX_REPLAYS. */
export function showReplay(log, figure) {
  log.append(figure);
  const shown = log.querySelectorAll("figure.replay");
  for (const old of [...shown].slice(0, Math.max(0, shown.length - MAX_REPLAYS))) {
    URL.revokeObjectURL(old.querySelector("audio").src);
    old.remove();
  }
  log.scrollTop = log.scrollHeight;
}
