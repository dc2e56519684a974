import assert from "node:assert/strict";
import test from "node:test";

import { FrameBatcher, frameSamples } from "../../../web/frame-batcher.js";
import { RingBuffer } from "../../../web/ring-buffer.js";

const ramp = (start, n) => Float32Array.from({ length: n }, (_, i) => start + i);

test("RingBuffer is FIFO across the wrap point", () => {
  const ring = new RingBuffer(5);
  assert.equal(ring.write(ramp(0, 3)), 3);
  const out = new Float32Array(2);
  assert.equal(ring.read(out), 2);
  assert.deepEqual(Array.from(out), [0, 1]);
  assert.equal(ring.write(ramp(3, 4)), 4); // wraps
  assert.equal(ring.available, 5);
  assert.equal(ring.space, 0);
  const all = new Float32Array(5);
  assert.equal(ring.read(all), 5);
  assert.deepEqual(Array.from(all), [2, 3, 4, 5, 6]);
  assert.equal(ring.available, 0);
});

test("RingBuffer writes only what fits and reads only what is there", () => {
  const ring = new RingBuffer(4);
  assert.equal(ring.write(ramp(0, 6)), 4);
  const out = new Float32Array(8).fill(-1);
  assert.equal(ring.read(out, 2, 6), 4);
  assert.deepEqual(Array.from(out), [-1, -1, 0, 1, 2, 3, -1, -1]);
  assert.equal(ring.read(out), 0);
});

test("RingBuffer matches an array model under random traffic", () => {
  let seed = 12345;
  const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
  const ring = new RingBuffer(37);
  const model = [];
  let next = 0;
  for (let step = 0; step < 2000; step++) {
    if (rand(2)) {
      const block = ramp(next, rand(20));
      const wrote = ring.write(block);
      assert.equal(wrote, Math.min(block.length, 37 - model.length));
      model.push(...block.subarray(0, wrote));
      next += block.length;
    } else {
      const out = new Float32Array(rand(20));
      const got = ring.read(out);
      assert.deepEqual(Array.from(out.subarray(0, got)), model.splice(0, got), `step ${step}`);
    }
    assert.equal(ring.available, model.length);
  }
});

test("RingBuffer.clear empties it and rejects a bad capacity", () => {
  const ring = new RingBuffer(3);
  ring.write(ramp(0, 2));
  ring.clear();
  assert.equal(ring.available, 0);
  assert.throws(() => new RingBuffer(0), /positive integer/);
  assert.throws(() => new RingBuffer(2.5), /positive integer/);
});

test("frameSamples: 20 ms at the usual rates", () => {
  assert.equal(frameSamples(48000, 20), 960);
  assert.equal(frameSamples(44100, 20), 882);
  assert.equal(frameSamples(16000, 20), 320);
});

test("FrameBatcher turns 128-sample quanta into exact 20 ms frames", () => {
  for (const rate of [48000, 44100, 16000]) {
    const size = frameSamples(rate, 20);
    const batcher = new FrameBatcher(size);
    const frames = [];
    const quanta = 100;
    for (let q = 0; q < quanta; q++) frames.push(...batcher.push(ramp(q * 128, 128)));
    assert.equal(frames.length, Math.floor((quanta * 128) / size), `${rate} Hz`);
    frames.forEach((frame, k) => {
      assert.equal(frame.length, size);
      assert.equal(frame[0], k * size); // no sample lost or repeated at a split
      assert.equal(frame[size - 1], (k + 1) * size - 1);
    });
    const rest = batcher.drain();
    assert.equal(rest.length, (quanta * 128) % size);
  }
});

test("FrameBatcher hands out fresh arrays (safe to transfer)", () => {
  const batcher = new FrameBatcher(4);
  const [a] = batcher.push(ramp(0, 4));
  const [b] = batcher.push(ramp(4, 4));
  assert.notEqual(a.buffer, b.buffer);
  assert.deepEqual(Array.from(a), [0, 1, 2, 3]);
});
