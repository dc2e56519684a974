import assert from "node:assert/strict";
import test from "node:test";

import { TurnRecorder, wavFile } from "../../../web/replay.js";

// The header against audiocore's is tests/web/test_replay.py (node vs wav_header).

test("wavFile refuses odd bytes and a bad rate, saying what it expected", () => {
  assert.throws(() => wavFile(new Uint8Array(3), 24000), /expected whole 16-bit samples, got 3 bytes/);
  assert.throws(() => wavFile(new Uint8Array(2), 0), /expected a positive integer sample rate, got 0/);
  assert.throws(() => wavFile(new Uint8Array(2), 44100.5), /got 44100.5/);
});

test("TurnRecorder joins a turn's pieces in order, copies them, and starts again", () => {
  const recorder = new TurnRecorder();
  const first = Uint8Array.of(1, 2, 3);
  recorder.add(first);
  recorder.add(Uint8Array.of(4, 5, 6, 7, 8, 9));
  first.fill(0); // a reused socket buffer must not change the recording
  assert.deepEqual(recorder.take(), { pcm: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9), cut: false });
  assert.equal(recorder.take(), null);
});

test("TurnRecorder stops at its bound on a whole sample and says so", () => {
  const recorder = new TurnRecorder(6);
  recorder.add(Uint8Array.of(1, 2, 3, 4, 5));
  recorder.add(Uint8Array.of(6, 7, 8, 9));
  recorder.add(Uint8Array.of(10));
  assert.deepEqual(recorder.take(), { pcm: Uint8Array.of(1, 2, 3, 4, 5, 6), cut: true });
});
