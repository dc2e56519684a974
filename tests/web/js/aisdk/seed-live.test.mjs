// /live, read as the seed project's client reads it: Server-Sent Events in
// text frames up to `data: [DONE]`, turned into a UIMessage by the real `ai`
// package (readUIMessageStream), every chunk checked against its
// uiMessageChunkSchema (the pinned release's and 6.0.25's, the seed's pin).
// Run by tests/web/test_ai_sdk.py with AUDIOCORE_LIVE_URL set.

import assert from "node:assert/strict";
import { test } from "node:test";

import { GIVE_UP_MS, SCHEMAS } from "./chat-helpers.mjs";
import { ai } from "./under-test.mjs";

const { readUIMessageStream } = ai;

const URL = process.env.AUDIOCORE_LIVE_URL;
const VERSION = { version: "1.0", timestamp: 1764547200000 };

/**
 * A seed client's socket: `next()` opens the stream of the next request,
 * fed until `data: [DONE]`; `check()` validates every chunk seen.
 */
function openLive() {
  const ws = new WebSocket(URL);
  const seen = [];
  let controller = null;
  let timer;
  ws.addEventListener("message", ({ data }) => {
    if (typeof data !== "string" || !data.startsWith("data: ")) return; // the pong path
    const body = data.slice("data: ".length).trim();
    if (body === "[DONE]") {
      clearTimeout(timer);
      controller?.close();
      controller = null;
      return;
    }
    const chunk = JSON.parse(body);
    seen.push(chunk);
    controller?.enqueue(chunk);
  });
  const opened = new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve);
    ws.addEventListener("error", () => reject(new Error(`cannot connect to ${URL}`)));
  });
  const next = () =>
    new ReadableStream({
      start: (c) => {
        controller = c;
        timer = setTimeout(() => c.error(new Error("gave up waiting for [DONE]")), GIVE_UP_MS);
      },
    });
  const send = (message) => ws.send(JSON.stringify({ ...message, ...VERSION }));
  const check = async () => {
    const invalid = [];
    for (const chunk of seen) {
      for (const schema of SCHEMAS) {
        const result = await schema.validate(chunk);
        if (!result.success) invalid.push({ chunk, error: String(result.error) });
      }
    }
    assert.ok(seen.length > 0);
    assert.deepEqual(invalid, []);
  };
  return { ws, opened, next, send, check };
}

async function lastMessage(stream) {
  let message;
  for await (const snapshot of readUIMessageStream({ stream })) message = snapshot;
  return message;
}

test("a spoken turn: the words heard are a text part of the message the seed's client builds", async () => {
  const live = openLive();
  await live.opened;
  const stream = live.next();
  // Half a second of a 300 Hz tone at 16 kHz, as the seed's microphone sends it.
  const rate = 16000;
  const pcm = new Int16Array(rate / 2);
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(0.3 * 32767 * Math.sin((2 * Math.PI * 300 * i) / rate));
  const bytes = Buffer.from(pcm.buffer);
  for (let i = 0; i < bytes.length; i += 640) {
    live.send({ type: "audio_chunk", chunk: bytes.subarray(i, i + 640).toString("base64"), sampleRate: rate, channels: 1, bitDepth: 16 });
  }
  live.send({ type: "audio_control", action: "stop" });
  const message = await lastMessage(stream);
  live.ws.close();
  await live.check();
  assert.equal(message.role, "assistant");
  const texts = message.parts.filter((p) => p.type === "text").map((p) => p.text);
  assert.equal(texts.length, 2, JSON.stringify(message.parts.map((p) => p.type)));
  const [heard, answer] = texts;
  // The offline model has no speech recognition: what it heard is described.
  assert.match(heard, /^\[offline model: no speech recognition\] .*\(8000 samples at 16000 Hz\)/);
  assert.match(answer, /I heard 0\.50 seconds of audio/);
});

test("change_bgm runs at once, in the open stream: the seed's flat tool_result and the answer reach the same message", async () => {
  const live = openLive();
  await live.opened;
  const stream = live.next();
  live.send({
    type: "message",
    id: "chat-seed",
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "play jazz" }] }],
    trigger: "submit-message",
  });
  // As the seed's client: the call is run as soon as it is seen, and its
  // result sent on the socket while the stream goes on.
  let message;
  const ran = [];
  for await (const snapshot of readUIMessageStream({ stream })) {
    message = snapshot;
    const call = snapshot.parts.find((p) => p.type === "tool-change_bgm" && p.state === "input-available");
    if (call && !ran.includes(call.toolCallId)) {
      ran.push(call.toolCallId);
      assert.equal(call.approval, undefined);
      assert.deepEqual(call.input, { track: "jazz" });
      live.send({ type: "tool_result", toolCallId: call.toolCallId, result: { track: "jazz", playing: true } });
    }
  }
  live.ws.close();
  await live.check();
  assert.equal(ran.length, 1);
  const part = message.parts.find((p) => p.type === "tool-change_bgm");
  assert.equal(part.state, "output-available");
  assert.deepEqual(part.output, { track: "jazz", playing: true });
  const texts = message.parts.filter((p) => p.type === "text").map((p) => p.text);
  assert.deepEqual(texts, ['change_bgm returned {"playing": true, "track": "jazz"}.']);
});
