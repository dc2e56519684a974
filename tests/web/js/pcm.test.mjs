import assert from "node:assert/strict";
import test from "node:test";

import {
  Pcm16Decoder,
  base64ToBytes,
  float32ToPcm16,
  levels,
  pcm16Bytes,
} from "../../../web/sdk/pcm.js";

// Reference: numpy's np.rint(np.clip(x, -1, 1) * np.float32(32767)).astype('<i2').
const KNOWN = [
  [0, 0],
  [1, 32767],
  [-1, -32767],
  [0.5, 16384], // 16383.5 -> half to even
  [-0.5, -16384],
  [1 / 32767, 1],
  [1.5 / 32767, 2], // 1.5 -> 2 (even)
  [2.5 / 32767, 2], // 2.5 -> 2 (even)
  [-2.5 / 32767, -2],
  [1.2, 32767], // clipped, never wrapped to a negative value
  [-1.2, -32767],
  [1e9, 32767],
  [-Infinity, -32767],
  [Infinity, 32767],
  [NaN, 0],
];

test("float32ToPcm16 matches the numpy policy on known answers", () => {
  const input = new Float32Array(KNOWN.map(([x]) => x));
  const out = float32ToPcm16(input);
  assert.deepEqual(Array.from(out), KNOWN.map(([x, y]) => y));
});

test("float32ToPcm16 clips instead of wrapping over a sweep", () => {
  const n = 10001;
  const input = new Float32Array(n);
  for (let i = 0; i < n; i++) input[i] = -3 + (6 * i) / (n - 1);
  const out = float32ToPcm16(input);
  for (let i = 1; i < n; i++) assert.ok(out[i] >= out[i - 1], `not monotonic at ${input[i]}`);
  assert.equal(out[0], -32767);
  assert.equal(out[n - 1], 32767);
});

test("float32ToPcm16 writes into a given buffer and checks its size", () => {
  const out = new Int16Array(4);
  assert.equal(float32ToPcm16(new Float32Array([0.25, -0.25]), out), out);
  assert.deepEqual(Array.from(out), [8192, -8192, 0, 0]);
  assert.throws(() => float32ToPcm16(new Float32Array(5), out), /at least 5/);
});

test("pcm16Bytes is little-endian", () => {
  assert.deepEqual(Array.from(pcm16Bytes(new Int16Array([1, -2, 0x1234]))), [
    0x01, 0x00, 0xfe, 0xff, 0x34, 0x12,
  ]);
});

test("Pcm16Decoder converts s16 LE to float32 (x / 32768)", () => {
  const bytes = pcm16Bytes(new Int16Array([0, 1, -1, 32767, -32768, 16384]));
  const out = new Pcm16Decoder().decode(bytes);
  assert.deepEqual(Array.from(out), [0, 1 / 32768, -1 / 32768, 32767 / 32768, -1, 0.5]);
});

test("Pcm16Decoder carries an odd byte into the next chunk", () => {
  const samples = new Int16Array([300, -300, 12345, -32768, 32767, -1, 7]);
  const bytes = pcm16Bytes(samples);
  const whole = Array.from(new Pcm16Decoder().decode(bytes));
  // Every split into 1..3 byte pieces, including odd ones, gives the same samples.
  for (const size of [1, 3, 5]) {
    const decoder = new Pcm16Decoder();
    const got = [];
    for (let i = 0; i < bytes.length; i += size) {
      got.push(...decoder.decode(bytes.subarray(i, i + size)));
    }
    assert.deepEqual(got, whole, `pieces of ${size} bytes`);
    assert.equal(decoder.pending, false);
  }
});

test("Pcm16Decoder.reset drops a held half sample", () => {
  const decoder = new Pcm16Decoder();
  assert.equal(decoder.decode(new Uint8Array([0x01])).length, 0);
  assert.equal(decoder.pending, true);
  decoder.reset();
  assert.deepEqual(Array.from(decoder.decode(new Uint8Array([0x00, 0x40]))), [0.5]);
});

test("base64ToBytes takes both alphabets", () => {
  const bytes = new Uint8Array([0xfb, 0xff, 0xbf, 0x00, 0x10]);
  const standard = Buffer.from(bytes).toString("base64");
  const urlsafe = Buffer.from(bytes).toString("base64url");
  assert.notEqual(standard, urlsafe);
  assert.deepEqual(base64ToBytes(standard), bytes);
  assert.deepEqual(base64ToBytes(urlsafe + "="), bytes);
});

test("levels: RMS, peak and dBFS", () => {
  const sine = new Float32Array(480).map((_, i) => 0.5 * Math.sin((2 * Math.PI * i) / 48));
  const { rms, peak, dbfs } = levels(sine);
  assert.ok(Math.abs(rms - 0.5 / Math.SQRT2) < 1e-6);
  assert.ok(Math.abs(peak - 0.5) < 1e-6);
  assert.ok(Math.abs(dbfs - 20 * Math.log10(0.5 / Math.SQRT2)) < 1e-5);
  assert.equal(levels(new Float32Array(10)).dbfs, -Infinity);
});
