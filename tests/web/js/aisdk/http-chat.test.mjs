// AI SDK v6's own HTTP transport (`DefaultChatTransport`, the `ai` package
// pinned in tests/web/js/package.json) against the server's `POST /api/chat`
// and the seed project's `POST /stream`: no code of ours on the client, as
// an app on useChat's default transport has it.
//
// Run from pytest (tests/web/test_ai_sdk.py), which starts `python -m server`
// (offline model) and passes its base URL in AUDIOCORE_HTTP_URL.
//
// Every chunk handed to a chat is checked against the SDK's own
// uiMessageChunkSchema (the transport parses with it too, and fails on a
// bad one); the SSE framing is checked byte for byte on a raw fetch.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  POSITION,
  SCHEMAS,
  answerCutAtTheLimit,
  approvedLocation,
  approvedPayment,
  chatOn,
  describe,
  imagesBothWays,
  text,
  toolPart,
  twoApprovalsInOneStep,
} from "./chat-helpers.mjs";
import { ai } from "./under-test.mjs";

const { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls: toolCallsDone } = ai;

const BASE = process.env.AUDIOCORE_HTTP_URL;
if (!BASE) throw new Error("AUDIOCORE_HTTP_URL is not set: run this file from pytest (tests/web/test_ai_sdk.py)");
const API = new URL("api/chat", BASE).href;
// What createUIMessageStreamResponse sends (ai: UI_MESSAGE_STREAM_HEADERS).
const STREAM_HEADERS = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no",
};

const everyChunk = []; // what all the chats were handed
const invalidChunks = [];
let chats = 0;

/** A fetch that records each request: {method, url, headers, body (parsed), status}. */
function recordingFetch(requests) {
  return async (url, init = {}) => {
    const request = {
      method: init.method ?? "GET",
      url: String(url),
      headers: new Headers(init.headers),
      body: init.body === undefined ? undefined : JSON.parse(init.body),
    };
    requests.push(request);
    const response = await fetch(url, init);
    request.status = response.status;
    return response;
  };
}

/** A chat on DefaultChatTransport; `transportOptions` go to the transport. */
function newChat({ transportOptions = {}, ...options } = {}) {
  const requests = [];
  const transport = new DefaultChatTransport({ api: API, fetch: recordingFetch(requests), ...transportOptions });
  const made = chatOn(transport, {
    id: `http-chat-${process.pid}-${++chats}`,
    seen: everyChunk,
    invalid: invalidChunks,
    ...options,
  });
  return { ...made, requests };
}

/** The tool parts of the last request's last message, as the server reads them. */
function sentToolPart(request, name) {
  return request.body.messages.at(-1).parts.find((p) => p.type === `tool-${name}`);
}

test("a text turn: the user's message posted, the assistant's echo streamed back", async () => {
  const { chat, requests, finishes } = newChat();
  await chat.sendMessage({ text: "hello over http" });
  assert.equal(chat.status, "ready", chat.error?.message);
  const [user, assistant] = chat.messages;
  assert.equal(chat.messages.length, 2);
  assert.equal(assistant.role, "assistant");
  assert.equal(text(assistant), "You said: hello over http");
  // The seed's metadata: the offline model counts a word a token
  // ("hello over http"; "You said: hello over http"); no audio over HTTP.
  assert.deepEqual(assistant.metadata, {
    model: "offline",
    usage: { promptTokens: 3, completionTokens: 5, totalTokens: 8 },
    modelVersion: "offline-1",
  });
  // A turn without tools has no steps (docs/protocol.md).
  assert.deepEqual(
    assistant.parts.map((p) => p.type),
    ["text"],
  );
  assert.equal(finishes.at(-1).finishReason, "stop");
  const [request] = requests;
  assert.equal(requests.length, 1);
  assert.equal(request.method, "POST");
  assert.equal(request.url, API);
  assert.equal(request.headers.get("content-type"), "application/json");
  assert.equal(request.status, 200);
  assert.deepEqual(request.body, {
    id: chat.id,
    messages: [{ id: user.id, role: "user", parts: [{ type: "text", text: "hello over http" }] }],
    trigger: "submit-message",
  });

  // The chat id is the session: the next turn knows the first.
  await chat.sendMessage({ text: "and again" });
  assert.equal(text(chat.messages[3]), "You said: and again (1 earlier turns in this session)");
  assert.equal(requests[1].body.messages.length, 3, "the SDK posts the whole history; the server reads the last");
});

test("process_payment: the approval arrives, addToolApprovalResponse answers it in the next request", async () => {
  const { made, asked } = await approvedPayment(newChat, (ask, { chat, finishes }) => {
    assert.equal(ask.part.approval.id, `apr_${ask.part.toolCallId}`);
    assert.equal(finishes.at(-1).finishReason, "tool-calls");
    assert.equal(chat.status, "ready");
  });
  // The second request carries the answer in the tool part, and continues
  // the assistant message; nothing more was sent.
  const { requests } = made;
  assert.equal(requests.length, 2);
  const second = requests[1];
  assert.equal(second.body.trigger, "submit-message");
  assert.equal(second.body.messageId, asked.message.id);
  const answered = sentToolPart(second, "process_payment");
  assert.equal(answered.state, "approval-responded");
  assert.deepEqual(answered.approval, { id: asked.part.approval.id, approved: true, reason: "fine" });
});

test("get_location: approved, run in onToolCall, answered with addToolOutput", async () => {
  const { made, message } = await approvedLocation(newChat);
  const { chat, requests, finishes } = made;
  assert.deepEqual(
    finishes.map((f) => f.finishReason),
    ["tool-calls", "tool-calls", "stop"],
  );
  // Three requests: the question, the approval, the output; nothing more.
  assert.deepEqual(
    requests.map((r) => sentToolPart(r, "get_location")?.state),
    [undefined, "approval-responded", "output-available"],
  );
  assert.deepEqual(sentToolPart(requests[2], "get_location").output, POSITION);
  // The answer is a step of its own, so the chat does not take the answered
  // call for a new one and send again (as it did, for ever, before).
  assert.deepEqual(
    message.parts.map((p) => p.type),
    ["step-start", "tool-get_location", "step-start", "text"],
  );
  assert.equal(toolCallsDone({ messages: chat.messages }), false);
});

test("two approvals in one step, answered in either order: each tool runs once, one answer", async () => {
  await twoApprovalsInOneStep(newChat, ({ requests, finishes }) => {
    // The question; both approvals at once (the SDK waits for the last);
    // the location's output. Only the last request brought an answer.
    assert.equal(requests.length, 3);
    assert.deepEqual(
      finishes.map((f) => f.finishReason),
      ["tool-calls", "tool-calls", "stop"],
    );
  });
});

test("resumeStream asks GET /api/chat/{id}/stream; with no run in progress, 204 leaves the chat as it is", async () => {
  const { chat, requests } = newChat();
  await chat.sendMessage({ text: "before the reload" });
  const before = structuredClone(chat.messages);
  await chat.resumeStream();
  assert.equal(chat.status, "ready", chat.error?.message);
  assert.equal(chat.error, undefined);
  assert.deepEqual(chat.messages, before);
  const resume = requests.at(-1);
  assert.equal(resume.method, "GET");
  assert.equal(resume.url, `${API}/${chat.id}/stream`);
  assert.equal(resume.status, 204);
  // A chat the server has never seen: the same.
  const fresh = await fetch(`${API}/never-seen/stream`);
  assert.equal(fresh.status, 204);
  assert.equal(await fresh.text(), "");
});

test("the SSE framing, byte for byte: data: {chunk} blocks, data: [DONE] last, AI SDK's headers", async () => {
  const response = await fetch(API, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      id: `http-raw-${process.pid}`,
      messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "framing" }] }],
      trigger: "submit-message",
    }),
  });
  assert.equal(response.status, 200);
  for (const [name, value] of Object.entries(STREAM_HEADERS)) {
    assert.ok(response.headers.get(name)?.startsWith(value), `${name}: ${response.headers.get(name)}`);
  }
  const body = new TextDecoder().decode(await response.arrayBuffer());
  assert.ok(body.endsWith("\n\ndata: [DONE]\n\n"), JSON.stringify(body.slice(-80)));
  const events = body.split("\n\n");
  assert.equal(events.pop(), "", "every event ends with a blank line");
  assert.equal(events.pop(), "data: [DONE]");
  const chunks = events.map((event) => {
    assert.match(event, /^data: \{[^\n]*\}$/, "one `data: ` line per event");
    return JSON.parse(event.slice("data: ".length));
  });
  // Compact JSON, exactly as JSON.stringify writes it: the same bytes back.
  const rebuilt = chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
  assert.equal(body, rebuilt);
  for (const chunk of chunks) {
    for (const schema of SCHEMAS) {
      const result = await schema.validate(chunk);
      assert.ok(result.success, `${JSON.stringify(chunk)}: ${result.error}`);
    }
  }
  assert.deepEqual(
    chunks.map((c) => c.type),
    ["start", "text-start", "text-delta", "text-end", "finish"],
  );
  assert.equal(chunks[2].delta, "You said: framing");
});

test("the seed project's /stream, with its X-API-Key header", async () => {
  const { chat, requests } = newChat({
    transportOptions: { api: new URL("stream", BASE).href, headers: { "X-API-Key": "seed-key" } },
  });
  await chat.sendMessage({ text: "seed path" });
  assert.equal(chat.status, "ready", chat.error?.message);
  assert.equal(text(chat.messages[1]), "You said: seed path");
  assert.equal(requests[0].headers.get("x-api-key"), "seed-key");
  assert.equal(requests[0].status, 200);
});

test("an answer cut at the model's output limit finishes with length", () => answerCutAtTheLimit(newChat));

test("an image both ways: a file part the model describes, a drawing back as a file part", () =>
  // The SDK posts the whole history: the user's message is the last one.
  imagesBothWays(newChat, ({ requests }) => requests.at(-1).body.messages.at(-1).parts));

test("the transport's body option names the chat's owner: remembered in one chat, recalled in another, not without it", async () => {
  const userKey = `http-memory-${process.pid}-0123456789abcdef`; // docs/memory.md: 20-100 of A-Z a-z 0-9 _ -
  const first = newChat({ transportOptions: { body: { userKey } } });
  await first.chat.sendMessage({ text: "remember that my bike is green" });
  assert.equal(first.chat.status, "ready", first.chat.error?.message);
  assert.equal(first.requests[0].body.userKey, userKey); // merged into the posted body
  const remembered = toolPart(first.chat, "user_memory").part;
  assert.equal(remembered?.state, "output-available", JSON.stringify(describe(first.chat)));
  const { id } = remembered.output.remembered;

  const second = newChat({ transportOptions: { body: { userKey } } });
  await second.chat.sendMessage({ text: "what do you remember about my bike" });
  assert.equal(second.chat.status, "ready", second.chat.error?.message);
  assert.equal(text(second.chat.messages.at(-1)), `I remember about my bike: my bike is green (${id}).`);

  const stranger = newChat(); // no userKey: no long-term memory, and it says so
  await stranger.chat.sendMessage({ text: "what do you remember about my bike" });
  const refused = toolPart(stranger.chat, "user_memory").part;
  assert.equal(refused?.output?.memory, false, JSON.stringify(describe(stranger.chat)));
});

test("every chunk handed to a chat is a valid UIMessageChunk", () => {
  assert.ok(everyChunk.length > 30, `only ${everyChunk.length} chunks`);
  assert.deepEqual(invalidChunks, []);
  const types = new Set(everyChunk.map((c) => c.type));
  for (const kind of [
    "start",
    "text-delta",
    "tool-input-available",
    "tool-approval-request",
    "tool-output-available",
    "finish-step",
    "file",
    "finish",
  ]) {
    assert.ok(types.has(kind), `no ${kind} chunk was checked`);
  }
});
