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
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses as approvalsDone,
  lastAssistantMessageIsCompleteWithToolCalls as toolCallsDone,
} from "ai";

import { clientExecutes } from "../../../../web/session.js";
import { dataUrl, described, halves, png } from "./png.mjs";
import { Chat, MemoryState, SCHEMAS, describe, finished, text, toolPart, until, validated } from "./chat-helpers.mjs";

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
  const state = new MemoryState();
  const finishes = [];
  const transport = new DefaultChatTransport({ api: API, fetch: recordingFetch(requests), ...transportOptions });
  const chat = new Chat({
    id: `http-chat-${process.pid}-${++chats}`,
    state,
    transport: validated(transport, everyChunk, invalidChunks),
    onFinish: (event) => {
      finishes.push(event);
      state.changed();
    },
    ...options,
  });
  const waitFor = (predicate, what) => until(chat, state, predicate, what);
  return { chat, requests, finishes, until: waitFor };
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
  const { chat, requests, finishes, until } = newChat({ sendAutomaticallyWhen: approvalsDone });
  await chat.sendMessage({ text: "pay 5 EUR to Alice" });
  const asked = toolPart(chat, "process_payment");
  assert.equal(asked.part?.state, "approval-requested", JSON.stringify(describe(chat)));
  assert.deepEqual(asked.part.input, { amount: 5, currency: "EUR", recipient: "Alice" });
  assert.equal(asked.part.approval.id, `apr_${asked.part.toolCallId}`);
  assert.equal(finishes.at(-1).finishReason, "tool-calls");
  assert.equal(chat.status, "ready");

  await chat.addToolApprovalResponse({ id: asked.part.approval.id, approved: true, reason: "fine" });
  await until(finished(chat, finishes, 1), "the answer after the approval");
  // The second request carries the answer in the tool part, and continues
  // the assistant message.
  assert.equal(requests.length, 2);
  const second = requests[1];
  assert.equal(second.body.trigger, "submit-message");
  assert.equal(second.body.messageId, asked.message.id);
  const answered = sentToolPart(second, "process_payment");
  assert.equal(answered.state, "approval-responded");
  assert.deepEqual(answered.approval, { id: asked.part.approval.id, approved: true, reason: "fine" });

  const { message, part } = toolPart(chat, "process_payment");
  assert.equal(message.id, asked.message.id, "the continuation keeps the assistant message");
  assert.equal(chat.messages.length, 2);
  assert.equal(part.state, "output-available");
  assert.equal(part.output.success, true);
  assert.match(part.output.transactionId, /^txn_[0-9a-f]{12}$/);
  assert.deepEqual([part.output.amount, part.output.currency, part.output.recipient], [5, "EUR", "Alice"]);
  assert.match(text(message), new RegExp(`process_payment returned .*${part.output.transactionId}`));
  assert.deepEqual(
    message.parts.map((p) => p.type),
    ["step-start", "tool-process_payment", "step-start", "text"],
  );
  assert.equal(requests.length, 2, "nothing more was sent");
});

// A browser tool that needs approval is answered twice: the approval, then,
// once the server asks the browser to run it (clientExecutes), the result.
const approvalsOrResults = (options) => approvalsDone(options) || toolCallsDone(options);

test("get_location: approved, run in onToolCall, answered with addToolOutput", async () => {
  const position = { latitude: 48.8584, longitude: 2.2945, accuracy: 12 };
  const runs = [];
  let chat;
  const made = newChat({
    sendAutomaticallyWhen: approvalsOrResults,
    onToolCall: ({ toolCall }) => {
      if (!clientExecutes(toolCall)) return; // the server runs it, or asks first
      runs.push(toolCall.toolName);
      // No await: onToolCall runs inside the chat's job queue.
      chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: position });
    },
  });
  chat = made.chat;
  const { requests, finishes, until } = made;
  await chat.sendMessage({ text: "where am I" });
  const asked = toolPart(chat, "get_location").part;
  assert.equal(asked.state, "approval-requested");
  assert.deepEqual(runs, [], "nothing runs before the approval");
  await chat.addToolApprovalResponse({ id: asked.approval.id, approved: true });
  await until(finished(chat, finishes, 1), "the answer after the location");
  assert.deepEqual(runs, ["get_location"]);
  assert.deepEqual(
    finishes.map((f) => f.finishReason),
    ["tool-calls", "tool-calls", "stop"],
  );
  // Three requests: the question, the approval, the output.
  assert.deepEqual(
    requests.map((r) => sentToolPart(r, "get_location")?.state),
    [undefined, "approval-responded", "output-available"],
  );
  assert.deepEqual(sentToolPart(requests[2], "get_location").output, position);
  const { message, part } = toolPart(chat, "get_location");
  assert.equal(part.state, "output-available");
  assert.deepEqual(part.output, position);
  assert.match(text(message), /get_location returned .*48\.8584/);
  assert.equal(chat.messages.length, 2);
  // The answer is a step of its own, so the chat does not take the answered
  // call for a new one and send again (as it did, for ever, before).
  assert.deepEqual(
    message.parts.map((p) => p.type),
    ["step-start", "tool-get_location", "step-start", "text"],
  );
  assert.equal(toolCallsDone({ messages: chat.messages }), false);
  assert.equal(requests.length, 3, "nothing more was sent");
});

test("two approvals in one step, answered in either order: each tool runs once, one answer", async () => {
  const position = { latitude: 48.8584, longitude: 2.2945, accuracy: 12 };
  for (const order of [["get_location", "process_payment"], ["process_payment", "get_location"]]) {
    const runs = [];
    let chat;
    const made = newChat({
      sendAutomaticallyWhen: approvalsOrResults,
      onToolCall: ({ toolCall }) => {
        if (!clientExecutes(toolCall)) return;
        runs.push(toolCall.toolName);
        chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: position });
      },
    });
    chat = made.chat;
    const { requests, finishes, until } = made;
    await chat.sendMessage({ text: "pay 5 EUR to Alice and where am I" });
    for (const name of order) {
      const asked = toolPart(chat, name).part;
      assert.equal(asked.state, "approval-requested", JSON.stringify(describe(chat)));
      await chat.addToolApprovalResponse({ id: asked.approval.id, approved: true });
    }
    await until(finished(chat, finishes, 1), "the one answer after both tools");
    assert.deepEqual(runs, ["get_location"], "the browser ran its tool once");
    // The question; both approvals at once (the SDK waits for the last);
    // the location's output. Only the last request brought an answer.
    assert.equal(requests.length, 3, JSON.stringify(describe(chat)));
    assert.deepEqual(
      finishes.map((f) => f.finishReason),
      ["tool-calls", "tool-calls", "stop"],
    );
    const { message } = toolPart(chat, "process_payment");
    assert.equal(toolPart(chat, "process_payment").part.state, "output-available");
    assert.equal(toolPart(chat, "process_payment").part.output.success, true);
    assert.equal(toolPart(chat, "get_location").part.state, "output-available");
    assert.equal(message.parts.filter((p) => p.type === "text").length, 1, "one answer");
    assert.match(text(message), /process_payment returned .*"success": true/);
    assert.match(text(message), /get_location returned .*48\.8584/);
    assert.equal(chat.messages.length, 2);
  }
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

test("an answer cut at the model's output limit finishes with length", async () => {
  const { chat, finishes } = newChat();
  const words = Array.from({ length: 300 }, (_, i) => `w${i}`).join(" ");
  await chat.sendMessage({ text: words });
  assert.equal(chat.status, "ready", chat.error?.message);
  assert.equal(finishes.at(-1).finishReason, "length");
  const assistant = chat.messages.at(-1);
  assert.equal(text(assistant).split(" ").length, 256);
  assert.deepEqual(assistant.metadata.usage, { promptTokens: 300, completionTokens: 256, totalTokens: 556 });
});

test("an image both ways: a file part the model describes, a drawing back as a file part", async () => {
  const { chat, requests } = newChat();
  const image = { type: "file", mediaType: "image/png", url: dataUrl(png(4, 2, halves)) };
  await chat.sendMessage({ text: "what is this", files: [image] });
  assert.equal(chat.status, "ready", chat.error?.message);
  assert.deepEqual(chat.messages[0].parts, [image, { type: "text", text: "what is this" }]);
  assert.equal(text(chat.messages[1]), `I see an image: ${described(4, 2, halves)}. You said: what is this`);
  assert.deepEqual(requests[0].body.messages[0].parts, [image, { type: "text", text: "what is this" }]);

  await chat.sendMessage({ text: "draw me a red square" });
  const drawn = chat.messages.at(-1);
  assert.equal(text(drawn), "Here is a red square.");
  const files = drawn.parts.filter((p) => p.type === "file");
  assert.equal(files.length, 1);
  assert.equal(files[0].mediaType, "image/png");
  const bytes = Buffer.from(files[0].url.slice("data:image/png;base64,".length), "base64");
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
});

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
