import assert from "node:assert/strict";
import test from "node:test";

import { Conversation } from "../../../web/conversation.js";
import {
  LiveSession,
  SUPPORTED_RATES,
  clientExecutes,
  describeClose,
  newUserKey,
  socketUrl,
  localTimeZone,
  startMessage,
} from "../../../web/sdk/session.js";

// The server's mark on a tool the browser is to run now.
const RUN_NOW = { audiocore: { clientExecutes: true } };

class FakeSocket {
  static last = null;
  constructor(url) {
    this.url = url;
    this.sent = [];
    this.readyState = 0;
    this.bufferedAmount = 0;
    FakeSocket.last = this;
  }
  send(data) {
    this.sent.push(data);
  }
  close(code, reason) {
    this.readyState = 3;
    this.onclose?.({ code, reason, wasClean: true });
  }
  // test side
  serverOpen() {
    this.readyState = 1;
    this.onopen?.();
  }
  serverSend(data) {
    this.onmessage?.({ data: typeof data === "string" ? data : data });
  }
  serverClose(code, reason = "") {
    this.readyState = 3;
    this.onclose?.({ code, reason, wasClean: code !== 1006 });
  }
}

const SESSION = {
  type: "data-session",
  data: {
    sessionId: "abc",
    resumed: false,
    model: "offline",
    input: { sampleRate: 44100, format: "f32", channels: 1 },
    output: { sampleRate: 44100, channels: 1, bitDepth: 16, binary: true },
    history: [],
  },
  transient: true,
};

function newSession(options = {}) {
  return new LiveSession("ws://x/ws", {
    inputRate: 44100,
    outputRate: 44100,
    WebSocketImpl: FakeSocket,
    ...options,
  });
}

test("startMessage declares both rates, the format and the session", () => {
  assert.deepEqual(startMessage({ inputRate: 48000, outputRate: 48000, binary: false }), {
    type: "start",
    input: { sampleRate: 48000, format: "f32", channels: 1 },
    output: { sampleRate: 48000, binary: false },
  });
  assert.equal(startMessage({ inputRate: 1, outputRate: 1, sessionId: "s" }).sessionId, "s");
  const manual = startMessage({ inputRate: 1, outputRate: 1, turnDetection: "manual" });
  assert.equal(manual.turnDetection, "manual");
  assert.ok(SUPPORTED_RATES.includes(44100));
});

test("a user key is random, and what the server takes (server/wire/protocol.py USER_KEY)", () => {
  const keys = new Set(Array.from({ length: 100 }, () => newUserKey()));
  assert.equal(keys.size, 100);
  for (const key of keys) assert.match(key, /^[A-Za-z0-9_-]{20,100}$/);
  // Known answer: 24 bytes of 0xfb are base64 "+/"-heavy, which must not survive.
  const fixed = { getRandomValues: (bytes) => bytes.fill(0xfb) };
  assert.equal(newUserKey(fixed), "-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7");
  assert.equal(startMessage({ userKey: "k".repeat(20) }).userKey, "k".repeat(20));
  assert.equal("userKey" in startMessage({}), false);
});

test("echoCancellation goes in start when the server is to cancel (docs/protocol.md)", () => {
  assert.equal(startMessage({ echoCancellation: "server" }).echoCancellation, "server");
  assert.equal("echoCancellation" in startMessage({}), false);
});

test("the app goes in start when one is named (docs/agents.md, selecting the app)", () => {
  assert.equal(startMessage({ app: "support_desk" }).app, "support_desk");
  assert.equal("app" in startMessage({}), false);
});

test("the time zone goes in start when there is one (server/wire/fields.py time_zone)", () => {
  assert.equal(startMessage({ timeZone: "Asia/Kathmandu" }).timeZone, "Asia/Kathmandu");
  assert.equal("timeZone" in startMessage({}), false);
  const intl = (timeZone) => ({ DateTimeFormat: () => ({ resolvedOptions: () => ({ timeZone }) }) });
  assert.equal(localTimeZone(intl("Europe/Paris")), "Europe/Paris");
  assert.equal(localTimeZone(intl("")), undefined);
  const broken = { DateTimeFormat: () => { throw new RangeError("no ICU"); } };
  assert.equal(localTimeZone(broken), undefined);
  assert.match(localTimeZone(), /^[A-Za-z][A-Za-z0-9_+\/-]*$/);
});

test("socketUrl follows the page's scheme, host and directory", () => {
  assert.equal(socketUrl({ href: "http://127.0.0.1:8000/" }), "ws://127.0.0.1:8000/ws");
  assert.equal(socketUrl({ href: "https://a.example/?mode=x#y" }), "wss://a.example/ws");
  // Mounted under a prefix, the socket is the page's sibling.
  assert.equal(socketUrl({ href: "https://a.example/voice/" }), "wss://a.example/voice/ws");
  assert.equal(socketUrl({ href: "http://h/voice/index.html" }), "ws://h/voice/ws");
  assert.equal(socketUrl({ href: "http://h/voice/" }, "live"), "ws://h/voice/live");
  assert.equal(socketUrl({ href: "http://h/voice/" }, "/ws"), "ws://h/ws");
});

test("open sends start first and resolves on data-session", async () => {
  const s = newSession({ sessionId: "prev" });
  const opened = s.open();
  const ws = FakeSocket.last;
  ws.serverOpen();
  assert.deepEqual(JSON.parse(ws.sent[0]), {
    type: "start",
    input: { sampleRate: 44100, format: "f32", channels: 1 },
    output: { sampleRate: 44100, binary: true },
    sessionId: "prev",
  });
  ws.serverSend(JSON.stringify(SESSION));
  assert.equal((await opened).sessionId, "abc");
  assert.equal(s.connected, true);
});

test("audio arrives from binary frames and from data-pcm alike", async () => {
  const s = newSession();
  const got = [];
  s.addEventListener("audio", (e) => got.push(e.detail));
  const opened = s.open();
  FakeSocket.last.serverOpen();
  FakeSocket.last.serverSend(JSON.stringify(SESSION));
  await opened;
  FakeSocket.last.serverSend(new Uint8Array([1, 2, 3]).buffer);
  FakeSocket.last.serverSend(
    JSON.stringify({
      type: "data-pcm",
      data: { content: Buffer.from([4, 5]).toString("base64"), sampleRate: 44100 },
    }),
  );
  assert.deepEqual(got.map((d) => Array.from(d.bytes)), [[1, 2, 3], [4, 5]]);
  assert.deepEqual(got.map((d) => d.sampleRate), [44100, 44100]);
});

test("sendAudio sends exactly the frame's bytes, as f32 or s16", async () => {
  for (const inputFormat of ["f32", "s16"]) {
    const s = newSession({ inputFormat });
    const opened = s.open();
    FakeSocket.last.serverOpen();
    FakeSocket.last.serverSend(JSON.stringify(SESSION));
    await opened;
    const big = new Float32Array([9, 0.5, -2, 9]);
    assert.equal(s.sendAudio(big.subarray(1, 3)), true);
    const sent = FakeSocket.last.sent.at(-1);
    if (inputFormat === "f32") {
      assert.deepEqual(Array.from(new Float32Array(sent.slice().buffer)), [0.5, -2]);
    } else {
      assert.deepEqual(Array.from(sent), [0x00, 0x40, 0x01, 0x80]); // 16384, -32767 (clipped)
    }
  }
});

test("sendAudio drops frames when the socket is backed up", async () => {
  const s = newSession();
  const opened = s.open();
  FakeSocket.last.serverOpen();
  FakeSocket.last.serverSend(JSON.stringify(SESSION));
  await opened;
  FakeSocket.last.bufferedAmount = 1 << 20;
  assert.equal(s.sendAudio(new Float32Array(960)), false);
  assert.equal(s.stats.framesDropped, 1);
});

test("typed messages have the protocol's shapes", async () => {
  const s = newSession();
  const opened = s.open();
  FakeSocket.last.serverOpen();
  FakeSocket.last.serverSend(JSON.stringify(SESSION));
  await opened;
  s.sendText("hi");
  s.activityStart();
  s.activityEnd();
  s.interrupt();
  s.toolApproval("a1", true);
  s.cancelTask("task_0123abcd");
  assert.deepEqual(FakeSocket.last.sent.slice(1).map((m) => JSON.parse(m)), [
    { type: "text", text: "hi" },
    { type: "activity_start" },
    { type: "activity_end" },
    { type: "interrupt" },
    { type: "tool_approval", approvalId: "a1", approved: true },
    { type: "task_cancel", taskId: "task_0123abcd" },
  ]);
});

test("an unreachable server rejects open with a clear message", async () => {
  const s = newSession();
  const opened = s.open();
  FakeSocket.last.serverClose(1006);
  await assert.rejects(opened, /Cannot reach the server/);
});

test("a close after the session started is reported with its code", async () => {
  const s = newSession();
  const closed = [];
  s.addEventListener("closed", (e) => closed.push(e.detail));
  const opened = s.open();
  FakeSocket.last.serverOpen();
  FakeSocket.last.serverSend(JSON.stringify(SESSION));
  await opened;
  FakeSocket.last.serverClose(1008, "origin not allowed");
  assert.equal(closed.length, 1);
  assert.match(describeClose(closed[0]), /refused.*1008: origin not allowed/);
  assert.equal(s.connected, false);
});

test("Conversation orders a turn's user words before the agent's", () => {
  const changes = [];
  const c = new Conversation((entry, placement) => changes.push([entry.role, placement]));
  c.apply({ type: "start", messageId: "m1" });
  c.apply({ type: "text-start", id: "t" });
  c.apply({ type: "text-delta", id: "t", delta: "I heard " });
  c.apply({ type: "text-delta", id: "t", delta: "you." });
  c.apply({ type: "data-transcript", data: { text: "hello", final: true } });
  c.apply({ type: "text-end", id: "t" });
  c.apply({ type: "finish" });
  assert.deepEqual(
    c.entries.map((e) => [e.role, e.text, e.final]),
    [
      ["user", "hello", true],
      ["agent", "I heard you.", true],
    ],
  );
  const userAdd = changes.find(([role, p]) => role === "user" && p.isNew);
  assert.equal(userAdd[1].before.role, "agent");
});

test("Conversation: partial transcripts update in place; tools and interruptions show", () => {
  const c = new Conversation();
  c.userTyped("what time is it");
  c.apply({ type: "start" });
  c.apply({ type: "data-transcript", data: { text: "hel", final: false } });
  c.apply({ type: "data-transcript", data: { text: "hello", final: true } });
  c.apply({ type: "tool-input-available", toolCallId: "c1", toolName: "get_current_time", input: {} });
  c.apply({ type: "tool-output-available", toolCallId: "c1", output: { time: "12:00" } });
  c.apply({ type: "text-start", id: "a" });
  c.apply({ type: "text-delta", id: "a", delta: "It is noon." });
  c.apply({ type: "data-interrupted", data: { source: "client" } });
  c.apply({ type: "finish" });
  assert.deepEqual(
    c.entries.map((e) => [e.role, e.text]),
    [
      ["user", "what time is it"],
      ["user", "hello"],
      ["tool", "get_current_time({})"],
      ["agent", "It is noon."],
    ],
  );
  assert.deepEqual([c.entries[2].state, c.entries[2].result], ["done", '{"time":"12:00"}']);
  assert.equal(c.entries[3].interrupted, true);
});

test("Conversation: a tool call goes approval -> running -> done, denied or error", () => {
  const c = new Conversation();
  const states = () => c.entries.map((e) => [e.state, e.result, e.final]);
  const ask = (id, name) => {
    c.apply({ type: "tool-input-available", toolCallId: id, toolName: name, input: { a: 1 } });
    c.apply({ type: "tool-approval-request", approvalId: `apr-${id}`, toolCallId: id });
  };
  c.apply({ type: "start" });
  ask("c1", "change_bgm");
  assert.equal(c.entries[0].text, 'change_bgm({"a":1})');
  assert.deepEqual(states(), [["approval", null, false]]);
  c.toolAnswered("c1", true);
  assert.deepEqual(states(), [["running", null, false]]);
  // The server asks the browser to run it: the same entry, still running.
  c.apply({ type: "tool-input-available", toolCallId: "c1", toolName: "change_bgm", input: { a: 1 }, providerMetadata: RUN_NOW });
  assert.equal(c.entries.length, 1);
  c.apply({ type: "tool-output-available", toolCallId: "c1", output: { track: "jazz" } });
  assert.deepEqual(states(), [["done", '{"track":"jazz"}', true]]);
  ask("c2", "process_payment");
  c.toolAnswered("c2", false);
  c.apply({ type: "tool-output-denied", toolCallId: "c2" });
  ask("c3", "get_location");
  c.apply({ type: "tool-output-error", toolCallId: "c3", errorText: "interrupted by the user" });
  assert.deepEqual(states().slice(1), [
    ["denied", null, true],
    ["error", "interrupted by the user", true],
  ]);
});

test("Conversation loads a resumed session's history", () => {
  const c = new Conversation();
  c.loadHistory([
    { role: "user", text: "hi" },
    { role: "assistant", text: "You said: hi" },
  ]);
  assert.deepEqual(c.entries.map((e) => e.role), ["user", "agent"]);
});

test("the run-now mark is read from providerMetadata only", () => {
  const chunk = { type: "tool-input-available", toolCallId: "c1", toolName: "t", input: {} };
  assert.equal(clientExecutes(chunk), false);
  assert.equal(clientExecutes({ ...chunk, providerMetadata: RUN_NOW }), true);
  assert.equal(clientExecutes({ ...chunk, clientExecutes: true }), false);
  assert.equal(clientExecutes({ ...chunk, providerMetadata: { audiocore: { clientExecutes: "yes" } } }), false);
});
