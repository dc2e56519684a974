import assert from "node:assert/strict";
import test from "node:test";

import { Playout } from "../../../web/playout.js";

// 1 kHz "sample rate" so 1 ms == 1 sample and the numbers read easily.
const RATE = 1000;
const Q = 8; // render block

function make(options = {}) {
  return new Playout({ sampleRate: RATE, prebufferMs: 20, fadeMs: 4, rampMs: 2, ...options });
}

function ones(n) {
  return new Float32Array(n).fill(1);
}

/** Render `blocks` blocks; returns [samples..., events...]. */
function run(p, blocks) {
  const samples = [];
  const events = [];
  for (let b = 0; b < blocks; b++) {
    const out = new Float32Array(Q).fill(NaN);
    for (const event of p.render(out)) events.push([b, event]);
    samples.push(...out);
  }
  return { samples, events };
}

test("silent and idle until audio comes", () => {
  const p = make();
  const { samples, events } = run(p, 3);
  assert.ok(samples.every((x) => x === 0));
  assert.deepEqual(events, []);
  assert.equal(p.state, "idle");
});

test("waits for the prebuffer, then plays with a short fade-in", () => {
  const p = make();
  p.enqueue(ones(12));
  let r = run(p, 2);
  assert.ok(r.samples.every((x) => x === 0), "12 < 20 samples: still prebuffering");
  p.enqueue(ones(12));
  r = run(p, 1);
  assert.deepEqual(r.events, [[0, "started"]]);
  assert.deepEqual(r.samples.slice(0, 3), [0, 0.5, 1]); // 2-sample ramp from 0
  assert.equal(p.stats.turnsStarted, 1);
  assert.equal(p.stats.samplesPlayed, Q);
});

test("plays the tail of a turn shorter than the prebuffer", () => {
  const p = make();
  p.enqueue(ones(5));
  p.endTurn();
  const { samples, events } = run(p, 2);
  assert.deepEqual(events, [[0, "started"], [0, "ended"]]);
  assert.equal(samples.filter((x) => x !== 0).length, 4); // first sample is the ramp's 0
  assert.equal(p.stats.samplesPlayed, 5);
  assert.equal(p.stats.underruns, 0);
  assert.equal(p.state, "idle");
});

test("an underrun fades out, re-prebuffers and resumes the same turn", () => {
  const p = make();
  p.enqueue(ones(20));
  let r = run(p, 3); // 24 samples wanted, 20 there
  assert.deepEqual(r.events, [[0, "started"], [2, "underrun"]]);
  const last = r.samples.slice(16, 20); // the 4 samples before running dry
  assert.ok(last[3] === 0 && last[2] < 1, `faded, not cut: ${last}`);
  assert.equal(p.stats.underruns, 1);
  assert.equal(p.state, "prebuffering");
  p.enqueue(ones(10));
  r = run(p, 2);
  assert.ok(r.samples.every((x) => x === 0), "waits for a full prebuffer again");
  p.enqueue(ones(10));
  r = run(p, 1);
  assert.deepEqual(r.events, [], "a resume is not a new turn");
  assert.equal(p.stats.turnsStarted, 1);
  assert.equal(r.samples[0], 0); // fades back in
});

test("flush fades out within fadeMs and drops the queue", () => {
  const p = make();
  p.enqueue(ones(100));
  run(p, 1);
  assert.equal(p.flush(), 4);
  const { samples, events } = run(p, 2);
  assert.deepEqual(events, [[0, "silent"]]);
  assert.deepEqual(samples.slice(0, 4), [0.75, 0.5, 0.25, 0]);
  assert.ok(samples.slice(4).every((x) => x === 0));
  assert.equal(p.silentFrom, 4);
  assert.equal(p.buffered, 0);
  assert.equal(p.state, "idle");
  assert.equal(p.stats.flushes, 1);
});

test("flush while prebuffering or idle is immediate", () => {
  const p = make();
  p.enqueue(ones(5));
  assert.equal(p.flush(), 0);
  assert.equal(p.buffered, 0);
  assert.equal(p.state, "idle");
  assert.equal(make().flush(), 0);
});

test("audio after a flush starts a new turn", () => {
  const p = make();
  p.enqueue(ones(50));
  run(p, 1);
  p.flush();
  run(p, 1);
  p.enqueue(ones(30));
  const { events } = run(p, 1);
  assert.deepEqual(events, [[0, "started"]]);
  assert.equal(p.stats.turnsStarted, 2);
});

test("a turn that streams steadily never underruns and is played in full", () => {
  const p = make();
  let played = 0;
  for (let b = 0; b < 200; b++) {
    if (b < 150) p.enqueue(ones(Q)); // one block per block, like a paced server
    if (b === 150) p.endTurn();
    const out = new Float32Array(Q);
    p.render(out);
    played += out.filter((x) => x !== 0).length;
  }
  assert.equal(p.stats.underruns, 0);
  assert.equal(p.stats.samplesPlayed, 150 * Q);
  assert.equal(played, 150 * Q - 1); // the fade-in's first sample is 0
});

test("overflow drops new audio and counts it", () => {
  const p = make({ capacityMs: 10 });
  assert.equal(p.enqueue(ones(15)), 5);
  assert.equal(p.stats.overflowSamples, 5);
  assert.equal(p.buffered, 10);
});

test("setPrebuffer changes the threshold", () => {
  const p = make();
  p.setPrebuffer(0);
  p.enqueue(ones(1));
  assert.deepEqual(run(p, 1).events, [[0, "started"], [0, "underrun"]]);
});
