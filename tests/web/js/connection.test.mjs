// The page's connection lifecycle (web/connection.js) under node: the real
// PageState and ReconnectPolicy, fakes for what only a browser has (the audio
// engine, the music bus, the socket), and node's mock timers for the backoff.

import assert from "node:assert/strict";
import test from "node:test";

import { PageConnection, STATUS_EVERY_MS } from "../../../web/connection.js";
import { ReconnectPolicy } from "../../../web/sdk/reconnect.js";
import { PageState } from "../../../web/state.js";

/** An AudioEngine without audio: what the lifecycle calls, and what it closed. */
class FakeEngine {
  constructor({ micError = null } = {}) {
    this.sampleRate = 48000;
    this.micError = micError;
    this.track = { readyState: "live" };
    this.stream = { getTracks: () => [this.track] };
    this.micTrack = null;
    this.context = { state: "running", currentTime: 0 };
  }

  async startPlayback() {}

  async startCapture() {
    if (this.micError) throw this.micError;
  }

  async close() {
    this.track.readyState = "ended";
    this.context.state = "closed";
  }
}

/** A LiveSession whose socket the test opens, fails and drops by hand. */
class FakeSession extends EventTarget {
  constructor(options, announce) {
    super();
    this.options = options;
    this.announce = announce; // open() was called: the test may answer
    this.closes = [];
    this.opening = withResolvers();
  }

  open() {
    this.announce(this);
    return this.opening.promise;
  }

  accept(info) {
    this.opening.resolve(info);
  }

  refuse(detail) {
    const error = new Error(`closed ${detail.code}`);
    error.detail = detail;
    this.opening.reject(error);
  }

  drop(detail) {
    this.dispatchEvent(new CustomEvent("closed", { detail }));
  }

  close(code = 1000, reason = "client disconnect") {
    this.closes.push({ code, reason });
  }
}

function withResolvers() {
  let resolve, reject;
  const promise = new Promise((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

const INFO = { sessionId: "s1", resumed: false, output: { sampleRate: 48000 } };
const POLICY = { firstDelayMs: 1000, maxDelayMs: 8000, maxAttempts: 3, stableMs: 10_000 };

/**
 * A PageConnection on fakes. `sessions` lists every session made, in order;
 * `calls` every hook the page was given, by name.
 */
function harness({ secure = true, resumeId = null, engine = () => new FakeEngine() } = {}) {
  const state = new PageState({
    mode: "hands-free",
    settings: { prebufferMs: 60, binary: true, localBargeIn: false },
    resumeId,
  });
  const h = { state, sessions: [], engines: [], calls: [], renders: 0, clock: { t: 0 } };
  const hook =
    (name) =>
    (...args) =>
      h.calls.push([name, ...args]);
  h.connection = new PageConnection({
    state,
    render: () => h.renders++,
    showMessage: (text, kind) => state.showMessage(text, kind),
    reconnects: new ReconnectPolicy({ now: () => h.clock.t, random: () => 0.5, policy: POLICY }),
    secure,
    newEngine: () => {
      const made = engine();
      h.engines.push(made);
      return made;
    },
    newMusic: () => ({ closed: false, close() { this.closed = true; } }),
    newSession: async (eng) => {
      const session = new FakeSession(
        { inputRate: eng.sampleRate, sessionId: state.resumeId },
        (opening) => h.opening?.(opening),
      );
      h.sessions.push(session);
      return session;
    },
    on: {
      audio: hook("audio"),
      chunk: hook("chunk"),
      opened: (info, session) => {
        state.sessionOpened(info, {});
        h.calls.push(["opened", info, session]);
      },
      ready: hook("ready"),
      connected: hook("connected"),
      dropped: hook("dropped"),
      released: hook("released"),
    },
  });
  /** The next session the connection opens, once it waits for its data-session. */
  h.nextSession = () =>
    new Promise((resolve) => {
      h.opening = (session) => {
        h.opening = null;
        resolve(session);
      };
    });
  h.named = (name) => h.calls.filter(([n]) => n === name);
  return h;
}

/** Connect through to "connected" on a first socket that accepts. */
async function connected(h) {
  const made = h.nextSession();
  const connecting = h.connection.connect();
  (await made).accept(INFO);
  await connecting;
  return h.sessions.at(-1);
}

test("connect opens the audio, then the socket, and says connected", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const h = harness();
  const made = h.nextSession();
  const connecting = h.connection.connect();
  assert.equal(h.state.connection, "connecting");
  assert.equal(h.state.sampleRate, 48000);
  const session = await made;
  assert.equal(session.options.inputRate, 48000, "the session is made for the engine's rate");
  assert.equal(h.named("ready").length, 0, "nothing is ready before data-session");
  session.accept(INFO);
  await connecting;
  assert.equal(h.state.connection, "connected");
  assert.equal(h.state.micOpen, true);
  assert.deepEqual(
    h.calls.map(([name]) => name),
    ["opened", "ready", "connected"],
  );
  assert.equal(h.connection.live.session, session);
  const before = h.renders;
  t.mock.timers.tick(STATUS_EVERY_MS * 2);
  assert.equal(h.renders, before + 2, "the status line repaints on its timer");
});

test("disconnect closes the socket and releases the mic and the context", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const h = harness();
  const session = await connected(h);
  const music = h.connection.live.music;
  await h.connection.disconnect();
  assert.deepEqual(session.closes[0], { code: 1000, reason: "user disconnect" }, "the first close says why");
  assert.equal(h.connection.live, null);
  assert.equal(music.closed, true);
  assert.deepEqual(h.state.released, { tracks: ["ended"], context: "closed" });
  assert.equal(h.state.connection, "idle");
  assert.equal(h.named("released").length, 1);
  const renders = h.renders;
  t.mock.timers.tick(STATUS_EVERY_MS * 4);
  assert.equal(h.renders, renders, "the status timer stopped with the connection");
});

test("a page that is not a secure context says so and makes no audio", async () => {
  const h = harness({ secure: false });
  await h.connection.connect();
  assert.equal(h.engines.length, 0);
  assert.equal(h.state.connection, "error");
  assert.match(h.state.message.text, /secure address/);
});

test("no Web Audio: the reason in words, and nothing is kept", async () => {
  const h = harness({
    engine: () => {
      throw new Error("AudioWorklet is missing");
    },
  });
  await h.connection.connect();
  assert.equal(h.connection.live, null);
  assert.equal(h.state.message.text, "Web Audio is not available in this browser: AudioWorklet is missing");
});

test("playback that cannot start releases the audio, says why, and opens no socket", async () => {
  const h = harness({
    engine: () =>
      Object.assign(new FakeEngine(), {
        startPlayback: async () => {
          throw new Error("the audio device is busy");
        },
      }),
  });
  await h.connection.connect();
  assert.equal(h.connection.live, null);
  assert.equal(h.sessions.length, 0);
  assert.equal(h.state.connection, "error");
  assert.equal(h.state.message.text, "Audio playback could not start: the audio device is busy");
  assert.deepEqual(h.state.released, { tracks: ["ended"], context: "closed" });
  assert.equal(h.named("released").length, 1);
});

test("a socket refused at connect releases the audio and says why", async () => {
  const h = harness();
  const made = h.nextSession();
  const connecting = h.connection.connect();
  (await made).refuse({ code: 1008, opened: true });
  await connecting;
  assert.equal(h.connection.live, null);
  assert.equal(h.state.connection, "error");
  assert.equal(h.state.connectionLabel, "Not connected");
  assert.equal(h.state.message.text, "closed 1008");
  assert.deepEqual(h.state.released, { tracks: ["ended"], context: "closed" });
  assert.equal(h.named("ready").length, 0);
});

test("a denied microphone still connects, for a typed conversation", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const denied = Object.assign(new Error("denied"), { name: "NotAllowedError" });
  const h = harness({ engine: () => new FakeEngine({ micError: denied }) });
  await connected(h);
  assert.equal(h.state.connection, "connected");
  assert.equal(h.state.micOpen, false);
  assert.match(h.state.message.text, /Microphone access was denied/);
});

test("a Disconnect while the socket opens closes the late socket", async () => {
  const h = harness();
  const made = h.nextSession();
  const connecting = h.connection.connect();
  const session = await made;
  await h.connection.disconnect();
  assert.deepEqual(session.closes[0], { code: 1000, reason: "user disconnect" });
  const closes = session.closes.length;
  session.accept(INFO);
  await connecting;
  assert.equal(h.state.connection, "idle");
  assert.equal(h.named("opened").length, 0, "the late socket's session is nobody's news");
  assert.equal(h.named("ready").length, 0);
  assert.equal(session.closes.length, closes + 1, "the socket that opened late is closed");
});

test("a dropped socket is opened again on the same engine after the backoff", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const h = harness();
  const first = await connected(h);
  h.connection.live.recorder.add(new Uint8Array(4));
  first.drop({ code: 1006, opened: true });
  assert.equal(h.state.connection, "reconnecting");
  assert.equal(h.state.connectionLabel, "Reconnecting… (1/3)");
  assert.equal(h.state.reconnects, 1);
  assert.equal(h.state.message.kind, "info");
  assert.match(h.state.message.text, /Reconnecting in 1 s…$/);
  assert.equal(h.named("dropped").length, 1, "the turn in flight is cut");
  assert.equal(h.connection.live.recorder.take(), null, "the cut turn has no replay");

  const made = h.nextSession();
  t.mock.timers.tick(POLICY.firstDelayMs * 0.75 - 1);
  assert.equal(h.sessions.length, 1, "not before the backoff's wait");
  t.mock.timers.tick(1);
  const second = await made;
  second.accept({ ...INFO, resumed: true });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(h.state.connection, "connected");
  assert.equal(h.state.message, null);
  assert.equal(h.engines.length, 1, "the audio context and the mic stay");
  assert.equal(h.connection.live.session, second);
  assert.equal(h.named("opened").length, 2);
  assert.equal(h.named("ready").length, 1, "ready and connected belong to Connect alone");
  assert.equal(h.named("released").length, 0);
});

test("a reconnect refused counts as the next attempt, and the last one gives up", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const h = harness({ resumeId: "s1" });
  const first = await connected(h);
  first.drop({ code: 1006, opened: true });
  for (let attempt = 1; attempt <= POLICY.maxAttempts; attempt++) {
    assert.equal(h.state.connectionLabel, `Reconnecting… (${attempt}/${POLICY.maxAttempts})`);
    const made = h.nextSession();
    t.mock.timers.tick(POLICY.maxDelayMs);
    (await made).refuse({ code: 1006, opened: false });
    await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(h.state.connection, "error");
  assert.equal(h.state.connectionLabel, "Disconnected");
  assert.match(h.state.message.text, /Press Connect to resume the conversation\.$/);
  assert.equal(h.named("dropped").length, 1, "one cut for the whole outage");
  assert.equal(h.connection.live, null);
  assert.deepEqual(h.state.released, { tracks: ["ended"], context: "closed" });
});

test("a close that means do not come back releases everything at once", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const h = harness();
  const first = await connected(h);
  first.drop({ code: 1008, reason: "session taken", opened: true });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(h.state.connection, "error");
  assert.equal(h.state.connectionLabel, "Disconnected");
  assert.equal(h.named("dropped").length, 0);
  assert.equal(h.named("released").length, 1);
  t.mock.timers.tick(POLICY.maxDelayMs);
  assert.equal(h.sessions.length, 1, "no reconnect");
});

test("after a Disconnect, a close the page asked for is not news", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const h = harness();
  const session = await connected(h);
  await h.connection.disconnect();
  session.drop({ code: 1000, opened: true });
  assert.equal(h.state.connection, "idle");
  assert.equal(h.state.message, null);
});
