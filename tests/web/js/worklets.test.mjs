// The two AudioWorklet processors, run outside a browser: the globals of an
// AudioWorkletGlobalScope are stubbed, process() is called quantum by quantum.

import assert from "node:assert/strict";
import test from "node:test";

const registry = new Map();
const RATE = 48000;
globalThis.sampleRate = RATE;
globalThis.currentTime = 0;
globalThis.registerProcessor = (name, cls) => registry.set(name, cls);
globalThis.AudioWorkletProcessor = class {
  constructor() {
    this.posted = [];
    this.port = {
      onmessage: null,
      postMessage: (message) => this.posted.push(message),
    };
  }
};

await import("../../../web/capture-worklet.js");
await import("../../../web/playback-worklet.js");

const QUANTUM = 128;

function tick(processor, inputs, outputs) {
  const alive = processor.process(inputs, outputs);
  globalThis.currentTime += QUANTUM / RATE;
  return alive;
}

test("both processors register under the names the page uses", () => {
  assert.deepEqual([...registry.keys()].sort(), ["capture", "playback"]);
});

test("capture posts 20 ms frames with their level, transferring the buffer", () => {
  const Capture = registry.get("capture");
  const node = new Capture({ processorOptions: { frameMs: 20 } });
  const quantum = new Float32Array(QUANTUM).fill(0.25);
  for (let q = 0; q < 15; q++) assert.equal(tick(node, [[quantum]], []), true);
  // 15 quanta = 1920 samples = two 960-sample frames
  assert.equal(node.posted.length, 2);
  const [first] = node.posted;
  assert.equal(first.frame.length, 960);
  assert.equal(first.seq, 1);
  assert.ok(Math.abs(first.rms - 0.25) < 1e-6 && Math.abs(first.peak - 0.25) < 1e-6);
  assert.equal(typeof first.time, "number");
});

test("capture tolerates a quantum with no input channel", () => {
  const node = new (registry.get("capture"))({});
  assert.equal(tick(node, [[]], []), true);
  assert.equal(tick(node, [], []), true);
  assert.equal(node.posted.length, 0);
});

function playback(options = {}) {
  const node = new (registry.get("playback"))({ processorOptions: options });
  const send = (message) => node.port.onmessage({ data: message });
  const render = () => {
    const out = [new Float32Array(QUANTUM)];
    tick(node, [], [out]);
    return out[0];
  };
  return { node, send, render };
}

test("playback: prebuffer, play, end of turn, with events and stats", () => {
  const { node, send, render } = playback({ prebufferMs: 10 }); // 480 samples
  send({ type: "push", samples: new Float32Array(400).fill(0.5) });
  assert.ok(render().every((x) => x === 0));
  send({ type: "push", samples: new Float32Array(200).fill(0.5) });
  send({ type: "end" });
  let nonzero = 0;
  for (let q = 0; q < 6; q++) nonzero += render().filter((x) => x !== 0).length;
  assert.equal(nonzero, 599); // all 600, minus the fade-in's first (zero) sample
  const types = node.posted.map((m) => m.type).filter((t) => t !== "stats");
  assert.deepEqual(types, ["started", "ended"]);
  const stats = node.posted.filter((m) => m.type === "stats").at(-1);
  assert.equal(stats.samplesPlayed, 600);
  assert.equal(stats.underruns, 0);
  assert.equal(stats.state, "idle");
});

test("playback: a flush reports silence after the fade, with its id", () => {
  const { node, send, render } = playback({ prebufferMs: 0, fadeMs: 5 });
  send({ type: "push", samples: new Float32Array(RATE).fill(0.5) });
  render();
  send({ type: "flush", id: 7 });
  const first = render();
  const second = render();
  const silent = node.posted.find((m) => m.type === "silent");
  assert.equal(silent.id, 7);
  assert.equal(silent.fadeSamples, 240); // 5 ms at 48 kHz
  assert.ok(Math.abs(silent.silentAt - silent.handledAt - 0.005) < 1e-9);
  assert.ok(first[0] > 0 && first[0] < 0.5, "fading, not cut");
  assert.ok(second.subarray(240 - QUANTUM).every((x) => x === 0));
  assert.equal(node.posted.filter((m) => m.type === "stats").at(-1).bufferedSamples, 0);
});

test("playback: a flush with nothing playing reports silence at once", () => {
  const { node, send } = playback();
  send({ type: "flush", id: 1 });
  assert.deepEqual(
    node.posted.filter((m) => m.type === "silent").map((m) => [m.id, m.fadeSamples]),
    [[1, 0]],
  );
});
