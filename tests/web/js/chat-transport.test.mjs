// The chat transport's pure parts, without a server or the `ai` package
// (tests/web/js/aisdk/ drives the whole transport with the real SDK).

import assert from "node:assert/strict";
import test from "node:test";

import { AudiocoreChatTransport, TurnTracker, withUserMessage } from "../../../web/sdk/chat-transport.js";

// The server's mark on a tool the browser is to run now.
const RUN_NOW = { audiocore: { clientExecutes: true } };

/** Feed chunks; returns [{types, ends}] per chunk. */
function feed(tracker, chunks) {
  return chunks.map((chunk) => {
    const { chunks: out, ends } = tracker.feed(chunk);
    return { types: out.map((c) => c.type), ends };
  });
}

const call = (id, name, extra = {}) => [
  { type: "start-step" },
  { type: "tool-input-start", toolCallId: id, toolName: name },
  { type: "tool-input-available", toolCallId: id, toolName: name, input: {}, ...extra },
];

test("a typed turn's text gets its own step, closed before finish", () => {
  const t = new TurnTracker();
  const got = feed(t, [
    { type: "start", messageId: "m1" },
    { type: "text-start", id: "a" },
    { type: "text-delta", id: "a", delta: "hi" },
    { type: "text-end", id: "a" },
    { type: "finish", finishReason: "stop" },
  ]);
  assert.deepEqual(got.map((g) => g.types), [
    ["start"],
    ["start-step", "text-start"],
    ["text-delta"],
    ["text-end"],
    ["finish-step", "finish"],
  ]);
  assert.deepEqual(got.map((g) => g.ends), [false, false, false, false, true]);
  assert.equal(t.open, false);
});

test("a server tool's step is the server's; the answer after it is a new step", () => {
  const t = new TurnTracker();
  const got = feed(t, [
    { type: "start", messageId: "m1" },
    ...call("c1", "get_weather"),
    { type: "tool-output-available", toolCallId: "c1", output: {} },
    { type: "finish-step" },
    { type: "text-start", id: "a" },
    { type: "text-end", id: "a" },
    { type: "finish" },
  ]);
  assert.deepEqual(got.map((g) => g.types).flat(), [
    "start", "start-step", "tool-input-start", "tool-input-available", "tool-output-available",
    "finish-step", "start-step", "text-start", "text-end", "finish-step", "finish",
  ]);
  // Only the turn's end ends a stream: this step asked the client nothing.
  assert.deepEqual(got.map((g) => g.ends).lastIndexOf(true), got.length - 1);
  assert.equal(got.filter((g) => g.ends).length, 1);
});

test("a step that asks for approval ends the stream at its finish-step", () => {
  const t = new TurnTracker();
  const got = feed(t, [
    { type: "start", messageId: "m1" },
    ...call("c1", "process_payment"),
    { type: "tool-approval-request", approvalId: "a1", toolCallId: "c1" },
    { type: "finish-step" },
  ]);
  assert.equal(got.at(-1).ends, true);
  assert.ok(t.open && t.awaitsApproval("a1") && !t.awaitsResult("c1"));
  // The continuation: the output belongs to the tool's step, the answer is a new one.
  const rest = feed(t, [
    { type: "tool-output-denied", toolCallId: "c1" },
    { type: "text-start", id: "b" },
    { type: "finish" },
  ]);
  assert.deepEqual(rest.map((g) => g.types).flat(), [
    "tool-output-denied", "start-step", "text-start", "finish-step", "finish",
  ]);
  assert.equal(t.awaitsApproval("a1"), false);
});

test("a browser tool is run once, however often the server asks", () => {
  const t = new TurnTracker();
  feed(t, [{ type: "start", messageId: "m1" }, ...call("c1", "change_bgm", { providerMetadata: RUN_NOW })]);
  const again = t.feed({
    type: "tool-input-available", toolCallId: "c1", toolName: "change_bgm", input: {}, providerMetadata: RUN_NOW,
  });
  assert.deepEqual(again, { chunks: [], ends: false });
  assert.equal(t.feed({ type: "finish-step" }).ends, true);
  assert.ok(t.awaitsResult("c1"));
  t.feed({ type: "tool-output-available", toolCallId: "c1", output: null });
  assert.equal(t.awaitsResult("c1"), false);
});

test("after an approval, the browser tool's second input stays in its step", () => {
  const t = new TurnTracker();
  feed(t, [
    { type: "start", messageId: "m1" },
    ...call("c1", "get_location"),
    { type: "tool-approval-request", approvalId: "a1", toolCallId: "c1" },
    { type: "finish-step" },
  ]);
  const run = feed(t, [
    { type: "tool-input-available", toolCallId: "c1", toolName: "get_location", input: {}, providerMetadata: RUN_NOW },
    { type: "finish-step" },
  ]);
  assert.deepEqual(run.map((g) => g.types), [["tool-input-available"], ["finish-step"]]);
  assert.equal(run.at(-1).ends, true);
});

test("the replay repeats the turn from its start, without transient parts or asks to run", () => {
  const t = new TurnTracker();
  feed(t, [
    { type: "start", messageId: "m1" },
    { type: "data-transcript", data: { text: "hi", final: true }, transient: true },
    ...call("c1", "get_location"),
    { type: "tool-approval-request", approvalId: "a1", toolCallId: "c1" },
    { type: "finish-step" },
    { type: "tool-input-available", toolCallId: "c1", toolName: "get_location", input: {}, providerMetadata: RUN_NOW },
    { type: "finish-step" },
  ]);
  const replay = t.replay();
  assert.deepEqual(replay.map((c) => c.type), [
    "start", "start-step", "tool-input-start", "tool-input-available", "tool-approval-request",
    "finish-step", "tool-input-available", "finish-step",
  ]);
  assert.ok(replay.every((c) => !("providerMetadata" in c)));
});

test("a non-transient data part (an image) opens a step; a transient one does not", () => {
  const t = new TurnTracker();
  t.feed({ type: "start", messageId: "m1" });
  assert.deepEqual(
    t.feed({ type: "data-interrupted", data: {}, transient: true }).chunks.map((c) => c.type),
    ["data-interrupted"],
  );
  assert.deepEqual(
    t.feed({ type: "data-image", data: { mediaType: "image/png", content: "" } }).chunks.map((c) => c.type),
    ["start-step", "data-image"],
  );
});

test("withUserMessage replaces by id, else inserts before the turn's answer, else appends", () => {
  const a = { id: "a", role: "assistant", parts: [] };
  const u1 = { id: "u", role: "user", parts: [{ type: "text", text: "he" }] };
  const u2 = { id: "u", role: "user", parts: [{ type: "text", text: "hello" }] };
  assert.deepEqual(withUserMessage([a], u1, "a"), [u1, a]);
  assert.deepEqual(withUserMessage([u1, a], u2, "a"), [u2, a]);
  assert.deepEqual(withUserMessage([a], u1, "missing"), [a, u1]);
});

test("handlers set after construction are the ones called", async () => {
  class Socket {
    static last;
    constructor() {
      Socket.last = this;
      this.readyState = 0;
      queueMicrotask(() => {
        this.readyState = 1;
        this.onopen();
      });
    }
    send() {}
    close() {}
  }
  const got = [];
  const transport = new AudiocoreChatTransport({ url: "ws://x/ws", WebSocketImpl: Socket, onServerTurn: () => got.push("old") });
  transport.setHandlers({ onServerTurn: () => got.push("new") });
  const connected = transport.connect();
  await new Promise((r) => queueMicrotask(r));
  const say = (chunk) => Socket.last.onmessage({ data: JSON.stringify(chunk) });
  say({ type: "data-session", data: { sessionId: "s1" }, transient: true });
  assert.equal((await connected).sessionId, "s1");
  say({ type: "start", messageId: "m1" }); // a turn the server began: a spoken one
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(got, ["new"]);
  const stream = await transport.reconnectToStream();
  say({ type: "finish" });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk.type);
  assert.deepEqual(chunks, ["start", "finish"]);
  assert.equal(await transport.reconnectToStream(), null);
});

test("the transport needs a URL and refuses to regenerate", async () => {
  assert.throws(() => new AudiocoreChatTransport({}), /expected options.url/);
  const transport = new AudiocoreChatTransport({ url: "ws://127.0.0.1:9/ws" });
  assert.equal(transport.resumeStreamIsReplay, true);
  await assert.rejects(
    transport.sendMessages({ trigger: "regenerate-message", messages: [] }),
    /cannot regenerate/,
  );
});
