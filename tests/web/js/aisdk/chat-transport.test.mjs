// web/sdk/chat-transport.js driven by the real AI SDK (the `ai` package, pinned in
// tests/web/js/package.json) against a real server process (offline model).
//
// Run from pytest (tests/web/test_ai_sdk.py), which starts `python -m server`
// and passes its socket URL in AUDIOCORE_WS_URL. Node 20 needs
// --experimental-websocket for the global WebSocket.
//
// Every chunk the transport hands to a chat is checked against the SDK's own
// uiMessageChunkSchema; the chats use AbstractChat with an in-memory state
// (AISDK_NOTES §2), as useChat does with React's.

import assert from "node:assert/strict";
import net from "node:net";
import { after, test } from "node:test";

import {
  POSITION,
  SCHEMAS,
  answerCutAtTheLimit,
  approvalsOrResults,
  approvedLocation,
  approvedPayment,
  chatOn,
  contentParts,
  describe,
  finished,
  imagesBothWays,
  text,
  toolPart,
  twoApprovalsInOneStep,
} from "./chat-helpers.mjs";
import { AI_MAJOR, ai, sdk } from "./under-test.mjs";

const { lastAssistantMessageIsCompleteWithApprovalResponses: approvalsDone } = ai;
const { AudiocoreChatTransport, clientExecutes, withUserMessage } = sdk;

const URL = process.env.AUDIOCORE_WS_URL;
if (!URL) throw new Error("AUDIOCORE_WS_URL is not set: run this file from pytest (tests/web/test_ai_sdk.py)");

/** A socket that records what the client sends. */
function recordingSocket(sent) {
  return class extends WebSocket {
    send(data) {
      if (typeof data === "string") sent.push(JSON.parse(data));
      super.send(data);
    }
  };
}

const everyChunk = []; // what all the chats were handed
const invalidChunks = [];
const transports = [];

/** A chat on its own transport; `options` go to the chat, `transportOptions` to the transport. */
function newChat({ transportOptions = {}, ...options } = {}) {
  const sent = [];
  let chat;
  const transport = new AudiocoreChatTransport({
    url: URL,
    WebSocketImpl: recordingSocket(sent),
    onServerTurn: () => chat.resumeStream(),
    onUserTranscript: ({ message, beforeMessageId }) => {
      chat.messages = withUserMessage(chat.messages, message, beforeMessageId);
    },
    ...transportOptions,
  });
  transports.push(transport);
  const made = chatOn(transport, { seen: everyChunk, invalid: invalidChunks, ...options });
  chat = made.chat;
  return { ...made, transport, sent };
}

after(() => {
  for (const transport of transports) transport.close();
});

test("a typed turn: one user message, one assistant message, with the model's metadata", async () => {
  const { chat, sent, finishes } = newChat();
  await chat.sendMessage({ text: "hello there" });
  assert.equal(chat.status, "ready", chat.error?.message);
  const [user, assistant] = chat.messages;
  assert.equal(chat.messages.length, 2);
  assert.equal(user.role, "user");
  assert.equal(assistant.role, "assistant");
  assert.match(text(assistant), /^You said: hello there/);
  assert.equal(assistant.metadata.model, "offline");
  // The seed's finish metadata: usage (a word a token: "hello there";
  // "You said: hello there"), the version, and the audio the socket carried.
  assert.deepEqual(assistant.metadata.usage, { promptTokens: 2, completionTokens: 4, totalTokens: 6 });
  assert.equal(assistant.metadata.modelVersion, "offline-1");
  const { audio } = assistant.metadata;
  assert.ok(audio.chunks > 0 && audio.bytes > 0, JSON.stringify(audio));
  assert.equal(audio.duration, audio.bytes / (2 * audio.sampleRate));
  // The seed's "Recorded Audio": the answer's audio as a WAV file part, last.
  assert.deepEqual(
    assistant.parts.map((p) => p.type),
    ["step-start", "text", "file"],
  );
  const recorded = assistant.parts.at(-1);
  assert.equal(recorded.mediaType, "audio/wav");
  const wav = Buffer.from(recorded.url.slice("data:audio/wav;base64,".length), "base64");
  assert.equal(wav.toString("latin1", 0, 4) + wav.toString("latin1", 8, 12), "RIFFWAVE");
  assert.equal(wav.readUInt32LE(24), audio.sampleRate);
  assert.equal(wav.readUInt32LE(40), audio.bytes, "every byte the server reported, none more");
  assert.equal(wav.length, 44 + audio.bytes);
  assert.equal(finishes.at(-1).finishReason, "stop");
  // The new message only, as an AI SDK `message`: never the history.
  const turns = sent.filter((m) => m.type === "message");
  assert.equal(turns.length, 1);
  assert.deepEqual(turns[0].messages, [
    { id: user.id, role: "user", parts: [{ type: "text", text: "hello there" }] },
  ]);
});

test("recordedAudio: false: the answer carries no audio file part", async () => {
  const { chat } = newChat({ transportOptions: { recordedAudio: false } });
  await chat.sendMessage({ text: "no recording" });
  const assistant = chat.messages.at(-1);
  assert.ok(assistant.metadata.audio.bytes > 0, "the answer carried audio");
  assert.deepEqual(
    assistant.parts.map((p) => p.type),
    ["step-start", "text"],
  );
});

test("approve process_payment through addToolApprovalResponse", async () => {
  const { made, asked } = await approvedPayment(newChat);
  // Exactly one answer went out, with its reason.
  assert.deepEqual(
    made.sent.filter((m) => m.type === "tool_approval"),
    [{ type: "tool_approval", approvalId: asked.part.approval.id, approved: true, reason: "fine" }],
  );
  assert.equal(made.chat.status, "ready");
});

test("deny process_payment: the part ends output-denied and the model is told", async () => {
  const { chat, finishes, until } = newChat({ sendAutomaticallyWhen: approvalsDone });
  await chat.sendMessage({ text: "pay 7 USD to Bob" });
  const asked = toolPart(chat, "process_payment").part;
  assert.equal(asked.state, "approval-requested");
  await chat.addToolApprovalResponse({ id: asked.approval.id, approved: false, reason: "not today" });
  await until(finished(chat, finishes, 1), "the answer after the denial");
  const { message, part } = toolPart(chat, "process_payment");
  assert.equal(part.state, "output-denied");
  assert.equal(part.approval.approved, false);
  assert.match(text(message), /"status": "denied"/);
  assert.match(text(message), /not today/);
});

test("a browser tool: approved, run in onToolCall, answered through addToolOutput", async () => {
  const { made, part } = await approvedLocation(newChat);
  assert.deepEqual(
    made.sent.filter((m) => m.type.startsWith("tool_")).map((m) => m.type),
    ["tool_approval", "tool_result"],
  );
  assert.deepEqual(made.sent.find((m) => m.type === "tool_result"), {
    type: "tool_result",
    toolCallId: part.toolCallId,
    output: POSITION,
  });
});

test("two approvals in one step, answered in either order: each tool runs once, one answer", async () => {
  await twoApprovalsInOneStep(newChat, (made) => {
    const sent = made.sent.filter((m) => m.type.startsWith("tool_"));
    assert.deepEqual(sent.map((m) => m.type).sort(), ["tool_approval", "tool_approval", "tool_result"]);
    assert.equal(made.finishes.filter((f) => f.finishReason === "stop").length, 1);
  });
});

test("a browser tool without approval that fails: output-error reaches the model", async () => {
  const runs = [];
  let chat;
  const made = newChat({
    sendAutomaticallyWhen: approvalsOrResults,
    onToolCall: ({ toolCall }) => {
      if (!clientExecutes(toolCall)) return;
      runs.push(toolCall.toolName);
      chat.addToolOutput({
        state: "output-error",
        tool: toolCall.toolName,
        toolCallId: toolCall.toolCallId,
        errorText: "no audio output",
      });
    },
  });
  chat = made.chat;
  // change_bgm needs no approval (as in the seed): it runs as soon as it is called.
  await chat.sendMessage({ text: "play lofi" });
  await made.until(finished(chat, made.finishes, 1), "the answer after the tool error");
  const { message, part } = toolPart(chat, "change_bgm");
  assert.deepEqual(runs, ["change_bgm"]);
  assert.deepEqual(part.input, { track: "lofi" });
  assert.equal(part.approval, undefined);
  assert.ok(!made.sent.some((m) => m.type === "tool_approval"));
  assert.equal(part.state, "output-error");
  assert.equal(part.errorText, "no audio output");
  assert.match(text(message), /"error": "no audio output"/);
});

test("a spoken turn reaches the chat through resumeStream, with the user's transcript", async () => {
  const audio = [];
  const speech = [];
  const made = newChat({
    transportOptions: {
      live: { inputRate: 16000, inputFormat: "s16", turnDetection: "manual" },
      onAudio: (a) => audio.push(a),
      onChunk: (c) => {
        if (c.type === "data-speech") speech.push(c);
      },
    },
  });
  const { chat, transport, finishes, until } = made;
  const info = await transport.connect();
  assert.equal(info.turnDetection, "manual");
  // One second of a 440 Hz tone, pushed to talk.
  const live = transport.live;
  live.activityStart();
  for (let frame = 0; frame < 50; frame++) {
    const samples = new Float32Array(320);
    for (let i = 0; i < samples.length; i++) {
      samples[i] = 0.3 * Math.sin((2 * Math.PI * 440 * (frame * 320 + i)) / 16000);
    }
    assert.ok(live.sendAudio(samples));
  }
  live.activityEnd();
  await until(finished(chat, finishes, 1), "the spoken turn's answer");
  const [user, assistant] = chat.messages;
  assert.equal(chat.messages.length, 2, JSON.stringify(describe(chat)));
  assert.equal(user.role, "user");
  assert.equal(user.metadata.source, "voice");
  assert.match(text(user), /1\.00 s of audio \(16000 samples at 16000 Hz\)/);
  assert.equal(assistant.role, "assistant");
  assert.match(text(assistant), /I heard 1\.00 seconds of audio/);
  // The echo went to the audio callback, never into the chat.
  const bytes = audio.reduce((n, a) => n + a.bytes.length, 0);
  assert.ok(bytes >= 24000 * 2, `echo bytes ${bytes}`);
  // The push-to-talk edges came back as speech started / stopped: transient
  // data parts the SDK's schemas accept.
  assert.deepEqual(
    speech.map((c) => c.data),
    [
      { state: "started", source: "client" },
      { state: "stopped", source: "client" },
    ],
  );
  for (const chunk of speech) {
    assert.equal(chunk.transient, true);
    for (const schema of SCHEMAS) assert.ok((await schema.validate(chunk)).success, JSON.stringify(chunk));
  }
  assert.equal(audio[0].sampleRate, 24000);
  // A typed turn after it is a new exchange, not a resend of the transcript.
  await chat.sendMessage({ text: "and typed" });
  assert.equal(chat.messages.length, 4);
  assert.match(text(chat.messages[3]), /^You said: and typed/);
  assert.equal(
    made.sent.filter((m) => m.type === "message").length,
    1,
    "the spoken words are never sent back",
  );
});

test("a resumed session (new transport, same sessionId) is asked again for a pending approval", async () => {
  const first = newChat({ sendAutomaticallyWhen: approvalsDone });
  await first.chat.sendMessage({ text: "pay 3 EUR to Carol" });
  const asked = toolPart(first.chat, "process_payment").part;
  assert.equal(asked.state, "approval-requested");
  const closed = new Promise((resolve) => {
    first.transport.live.addEventListener("closed", resolve, { once: true });
  });
  first.transport.close(); // the page went away before the user answered
  await closed;

  const second = newChat({
    sendAutomaticallyWhen: approvalsDone,
    transportOptions: { sessionId: first.transport.sessionId },
  });
  const info = await second.transport.connect();
  assert.equal(info.resumed, true);
  assert.equal(info.sessionId, first.transport.sessionId);
  await second.until(
    () => toolPart(second.chat, "process_payment").part?.state === "approval-requested" &&
      second.chat.status === "ready",
    "the pending approval, asked again",
  );
  const again = toolPart(second.chat, "process_payment").part;
  assert.equal(again.approval.id, asked.approval.id);
  assert.equal(again.toolCallId, asked.toolCallId);
  assert.deepEqual(again.input, asked.input);
  await second.chat.addToolApprovalResponse({ id: again.approval.id, approved: true });
  await second.until(finished(second.chat, second.finishes, 1), "the payment after the resumed approval");
  const done = toolPart(second.chat, "process_payment").part;
  assert.equal(done.state, "output-available");
  assert.equal(done.output.recipient, "Carol");
  assert.match(done.output.transactionId, /^txn_/);
});

/**
 * A TCP relay to the server that a test cuts, as a network would: the
 * client's socket ends without a close frame (1006). Resolves with
 * {url, cut(), accepted(), close()}.
 */
async function relay(target) {
  const { hostname, port } = new globalThis.URL(target);
  const open = new Set();
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(Number(port), hostname);
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      open.add(a);
      a.on("error", () => b.destroy());
      a.on("close", () => {
        open.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const cut = () => {
    for (const socket of open) socket.destroy();
  };
  return {
    url: `ws://127.0.0.1:${server.address().port}/ws`,
    cut,
    accepted: () => accepted,
    close: () => {
      cut();
      server.close();
    },
  };
}

test("the socket drops while an approval is pending: the transport reconnects by itself, the server asks again, the tool runs once", async () => {
  const network = await relay(URL);
  after(network.close);
  const reconnecting = [];
  const reconnected = [];
  const { chat, transport, sent, finishes, until } = newChat({
    sendAutomaticallyWhen: approvalsDone,
    transportOptions: {
      url: network.url,
      reconnect: { random: () => 0 }, // the shortest wait the policy allows
      onReconnecting: (r) => reconnecting.push(r),
      onReconnected: (info) => reconnected.push(info),
    },
  });
  await chat.sendMessage({ text: "pay 4 EUR to Erin" });
  const asked = toolPart(chat, "process_payment");
  assert.equal(asked.part.state, "approval-requested");
  const sessionId = transport.sessionId;

  network.cut(); // the turn is in flight: its approval pending, no finish yet
  await until(
    () => reconnected.length === 1 &&
      toolPart(chat, "process_payment").part?.state === "approval-requested" &&
      chat.status === "ready",
    "the reconnect and the approval asked again",
  );
  assert.deepEqual(
    reconnecting.map((r) => [r.attempt, r.delayMs, r.close.code, r.close.opened]),
    [[1, 250, 1006, true]],
  );
  assert.equal(network.accepted(), 2);
  assert.equal(reconnected[0].sessionId, sessionId);
  assert.equal(reconnected[0].resumed, true);
  assert.equal(transport.reconnecting, false);
  const again = toolPart(chat, "process_payment");
  assert.equal(again.part.approval.id, asked.part.approval.id);
  assert.equal(again.message.id, asked.message.id, "the same assistant message, rebuilt");
  assert.equal(chat.messages.length, 2, JSON.stringify(describe(chat)));

  await chat.addToolApprovalResponse({ id: again.part.approval.id, approved: true });
  await until(finished(chat, finishes, 1), "the payment after the reconnect");
  const done = toolPart(chat, "process_payment").part;
  assert.equal(done.state, "output-available");
  assert.equal(done.output.recipient, "Erin");
  // Nothing went out twice: one user message, one approval; one outcome came back.
  assert.equal(sent.filter((m) => m.type === "message").length, 1);
  assert.equal(sent.filter((m) => m.type === "tool_approval").length, 1);
  const outcomes = everyChunk.filter(
    (c) => c.type === "tool-output-available" && c.toolCallId === done.toolCallId,
  );
  assert.equal(outcomes.length, 1);
});

test("a close that means do not come back (1008: the session taken by another tab) is not reconnected", async () => {
  const reconnecting = [];
  let gaveUp;
  const failed = new Promise((resolve) => {
    gaveUp = resolve;
  });
  const first = newChat({
    transportOptions: { onReconnectFailed: (r) => gaveUp(r), onReconnecting: (r) => reconnecting.push(r) },
  });
  await first.chat.sendMessage({ text: "mine for now" });
  const second = newChat({ transportOptions: { sessionId: first.transport.sessionId } });
  const info = await second.transport.connect(); // takes the session over
  assert.equal(info.resumed, true);
  const { reason, close } = await failed;
  assert.equal(close.code, 1008);
  assert.match(reason, /1008/);
  assert.deepEqual(reconnecting, []);
  assert.equal(first.transport.reconnecting, false);
  assert.equal(first.transport.live, null);
  assert.ok(second.transport.live, "the tab that took the session keeps it");
});

test("a barge-in while an approval is pending: the rest of the turn arrives through resumeStream", async () => {
  const { chat, transport, finishes, until } = newChat({ sendAutomaticallyWhen: approvalsDone });
  await chat.sendMessage({ text: "pay 9 EUR to Dave" });
  const asked = toolPart(chat, "process_payment");
  assert.equal(asked.part.state, "approval-requested");
  // No chat request is open: the server's continuation (the cancelled call,
  // the model's answer, finish) is the server's own, replayed from the start.
  transport.live.interrupt();
  await until(
    () => finishes.length >= 2 && chat.status === "ready",
    "the cancelled call's continuation",
  );
  const { message, part } = toolPart(chat, "process_payment");
  assert.equal(message.id, asked.message.id, "the same assistant message, rebuilt");
  assert.equal(chat.messages.length, 2, JSON.stringify(describe(chat)));
  assert.equal(part.state, "output-error");
  assert.equal(part.errorText, "interrupted by the user");
  assert.match(text(message), /"status": "cancelled"/);
  assert.deepEqual(
    contentParts(message).map((p) => p.type),
    ["step-start", "tool-process_payment", "step-start", "text"],
  );
});

test(
  "ai 7: chat.dispose() closes the socket through the transport's close(), with no reconnect",
  { skip: AI_MAJOR < 7 && "ai 6's chats have no dispose (the app calls transport.close())" },
  async () => {
    const { chat, transport } = newChat();
    await chat.sendMessage({ text: "and goodbye" });
    const live = transport.live;
    assert.ok(live, "the socket is open after a turn");
    const closed = new Promise((resolve) => live.addEventListener("closed", resolve, { once: true }));
    await chat.dispose();
    const { detail } = await closed;
    assert.equal(detail.code, 1000);
    assert.equal(transport.live, null);
    assert.equal(transport.reconnecting, false);
  },
);

test("an answer cut at the model's output limit finishes with length", () => answerCutAtTheLimit(newChat));

test("an image both ways: a file part the model describes, a drawing back as a file part", () =>
  // The new message alone goes out, as an AI SDK `message`.
  imagesBothWays(newChat, ({ sent }) => sent.filter((m) => m.type === "message").at(-1).messages[0].parts));

test("every chunk handed to a chat is a valid UIMessageChunk, and no audio is among them", () => {
  assert.ok(everyChunk.length > 50, `only ${everyChunk.length} chunks`);
  assert.deepEqual(invalidChunks, []);
  const types = new Set(everyChunk.map((c) => c.type));
  assert.ok(!types.has("data-pcm") && !types.has("data-session"), [...types].join(" "));
  for (const kind of ["start", "tool-approval-request", "tool-output-denied", "tool-output-error", "file", "finish"]) {
    assert.ok(types.has(kind), `no ${kind} chunk was checked`);
  }
});
