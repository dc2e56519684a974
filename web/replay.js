// The answer's replay: the audio the page played during a turn, as a WAV
// shown after the answer (an audio element and a download link) — what the
// seed project's client makes its "Recorded Audio" file part of, from the
// finish chunk's `messageMetadata.audio` and the data-pcm it received.
// The WAV itself, and the bounded recording, are sdk/wav.js's (the chat
// transport makes its "Recorded Audio" file part of the same).

import { wavFile } from "./sdk/wav.js";

export { MAX_REPLAY_BYTES, TurnRecorder, wavFile } from "./sdk/wav.js";

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
