// ADK's own tool confirmation (require_confirmation, request_confirmation
// with a payload, a tool the deployment names) answered through the real
// `ai` package, on each client an AI SDK app has:
//
// * "socket": web/sdk/chat-transport.js on /ws;
// * "http": AI SDK's own DefaultChatTransport on POST /api/chat;
// * "seed": the seed project's lib/bidi as it talks to /live — its
//   `message` frames, its streams closed at `[DONE]` or at the `finish-step`
//   after a `tool-approval-request` — under the same AbstractChat.
//
// The server (tests/web/test_ai_sdk.py) serves tests/server/confirm_agents
// (the app "desk") on the offline model, which calls a tool on
// `call NAME {json}`; its base URL is in AUDIOCORE_CONFIRM_URL. Every chunk a
// chat is handed is checked against every AI SDK major's uiMessageChunkSchema
// (6.0.25's strict objects included: an extra key on tool-approval-request
// would fail the whole stream there).

import assert from "node:assert/strict";
import { after, test } from "node:test";

import { chatOn, describe, finished, text, toolPart } from "./chat-helpers.mjs";
import { ai, sdk } from "./under-test.mjs";

const { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses: approvalsDone } = ai;
const { AudiocoreChatTransport } = sdk;

const BASE = process.env.AUDIOCORE_CONFIRM_URL;
if (!BASE) throw new Error("AUDIOCORE_CONFIRM_URL is not set: run this file from pytest (tests/web/test_ai_sdk.py)");
const SEED_VERSION = "1.0";

const everyChunk = [];
const invalidChunks = [];
const closers = [];
let chats = 0;

/** What each client sends the server, recorded: the socket's frames, the HTTP bodies. */
function recordingSocket(sent) {
  return class extends WebSocket {
    send(data) {
      if (typeof data === "string") sent.push(JSON.parse(data));
      super.send(data);
    }
  };
}

/**
 * The seed's lib/bidi transport as it talks to /live: each request a
 * `message` frame (chat id, the whole history, trigger, messageId, the
 * version and timestamp), each answer a stream fed from `data:` frames that
 * ends at `[DONE]`, or at the `finish-step` that follows a
 * `tool-approval-request` (it closes that stream itself).
 */
class SeedBidiTransport {
  #ws = null;
  #controller = null;
  #armed = false;
  constructor(url, sent) {
    this.url = url;
    this.sent = sent;
  }
  async #open() {
    if (this.#ws) return;
    const ws = new (recordingSocket(this.sent))(this.url);
    ws.addEventListener("message", ({ data }) => this.#frame(data));
    await new Promise((resolve, reject) => {
      ws.addEventListener("open", resolve, { once: true });
      ws.addEventListener("error", () => reject(new Error(`cannot connect to ${this.url}`)), { once: true });
    });
    this.#ws = ws;
  }
  #frame(data) {
    if (typeof data !== "string" || !data.startsWith("data: ")) return; // a pong
    const body = data.slice("data: ".length).trim();
    const controller = this.#controller;
    if (!controller) return;
    if (body === "[DONE]") {
      this.#controller = null;
      controller.close();
      return;
    }
    const chunk = JSON.parse(body);
    controller.enqueue(chunk);
    if (chunk.type === "tool-approval-request") this.#armed = true;
    if (chunk.type === "finish-step" && this.#armed) {
      this.#armed = false;
      this.#controller = null;
      controller.close();
    }
  }
  async sendMessages({ chatId, messages, trigger, messageId }) {
    await this.#open();
    const stream = new ReadableStream({ start: (c) => (this.#controller = c) });
    this.#ws.send(
      JSON.stringify({ type: "message", version: SEED_VERSION, timestamp: Date.now(), id: chatId, messages, trigger, messageId }),
    );
    return stream;
  }
  async reconnectToStream() {
    return null;
  }
  close() {
    this.#ws?.close();
  }
}

const CLIENTS = {
  socket: (sent) => {
    const transport = new AudiocoreChatTransport({
      url: new URL("ws", BASE.replace(/^http/, "ws")).href,
      WebSocketImpl: recordingSocket(sent),
      recordedAudio: false,
    });
    closers.push(() => transport.close());
    return transport;
  },
  http: (sent) =>
    new DefaultChatTransport({
      api: new URL("api/chat", BASE).href,
      fetch: async (url, init = {}) => {
        sent.push(JSON.parse(init.body));
        return fetch(url, init);
      },
    }),
  seed: (sent) => {
    const transport = new SeedBidiTransport(new URL("live", BASE.replace(/^http/, "ws")).href, sent);
    closers.push(() => transport.close());
    return transport;
  },
};

after(() => {
  for (const close of closers) close();
});

function newChat(client) {
  const sent = [];
  const made = chatOn(CLIENTS[client](sent), {
    id: `confirm-${client}-${process.pid}-${++chats}`,
    seen: everyChunk,
    invalid: invalidChunks,
    sendAutomaticallyWhen: approvalsDone,
  });
  return { ...made, sent };
}

/** The approval id and the data-confirmation part of the tool's call in the last message. */
function askedFor(chat, tool) {
  const { message, part } = toolPart(chat, tool);
  assert.equal(part?.state, "approval-requested", JSON.stringify(describe(chat)));
  const confirmation = message.parts.find((p) => p.type === "data-confirmation" && p.id === part.approval.id);
  assert.ok(confirmation, JSON.stringify(message.parts.map((p) => p.type)));
  assert.deepEqual(
    [confirmation.data.approvalId, confirmation.data.toolCallId, confirmation.data.toolName],
    [part.approval.id, part.toolCallId, tool],
  );
  return { message, part, confirmation: confirmation.data };
}

/** Asks for `tool` with `args`, answers with `answer`; returns what the chat then holds. */
async function confirmRound(client, tool, args, answer) {
  const made = newChat(client);
  const { chat, finishes } = made;
  await chat.sendMessage({ text: `call ${tool} ${JSON.stringify(args)}` });
  const asked = askedFor(chat, tool);
  assert.deepEqual(asked.part.input, args);
  await chat.addToolApprovalResponse({ id: asked.part.approval.id, ...answer(asked) });
  await made.until(finished(chat, finishes, 1), `the answer after the ${tool} confirmation`);
  const { message, part } = toolPart(chat, tool);
  assert.equal(message.id, asked.message.id, "the continuation keeps the assistant message");
  assert.equal(chat.messages.length, 2);
  // One call, answered once: a single tool part, and the model told once.
  assert.equal(message.parts.filter((p) => p.type === `tool-${tool}`).length, 1);
  return { made, asked, message, part };
}

for (const client of Object.keys(CLIENTS)) {
  test(`${client}: require_confirmation approved — asked with ADK's hint, run, answered`, async () => {
    const { asked, message, part } = await confirmRound(client, "delete_file", { path: "notes.txt" }, () => ({
      approved: true,
    }));
    assert.match(asked.confirmation.hint, /delete_file/);
    assert.equal(asked.confirmation.payload, undefined);
    assert.equal(part.state, "output-available");
    assert.deepEqual(part.output, { deleted: "notes.txt" });
    assert.match(text(message), /delete_file returned .*notes\.txt/);
  });

  test(`${client}: a callable require_confirmation denied — never run, output-denied`, async () => {
    const { message, part } = await confirmRound(client, "transfer", { amount: 500 }, () => ({
      approved: false,
      reason: "too much",
    }));
    assert.equal(part.state, "output-denied");
    assert.equal(part.output, undefined);
    assert.match(text(message), /denied|rejected/); // ours live; ADK's own in run_async
  });

  test(`${client}: a tool the deployment names, approved`, async () => {
    const { part } = await confirmRound(client, "ring_bell", { times: 2 }, () => ({ approved: true }));
    assert.equal(part.state, "output-available");
    assert.deepEqual(part.output, { rang: 2 });
  });
}

// The payload: the socket transport and HTTP take it in the request body
// (`approvalPayloads`, by approval id); the seed's lib/bidi sends no body, so
// its user accepts the payload the tool offered.
for (const client of ["socket", "http"]) {
  test(`${client}: request_confirmation with a payload — the user's payload reaches the tool`, async () => {
    const { asked, part, made } = await confirmRound(client, "book_room", { room: "Blue" }, (asked) => ({
      approved: true,
      options: { body: { approvalPayloads: { [asked.part.approval.id]: { nights: 3 } } } },
    }));
    assert.equal(asked.confirmation.hint, "Book Blue? Say how many nights.");
    assert.deepEqual(asked.confirmation.payload, { nights: 1 });
    assert.equal(part.state, "output-available");
    assert.deepEqual(part.output, { booked: "Blue", nights: 3 });
    if (client === "socket") {
      const approvals = made.sent.filter((m) => m.type === "tool_approval");
      assert.deepEqual(approvals, [
        { type: "tool_approval", approvalId: asked.part.approval.id, approved: true, payload: { nights: 3 } },
      ]);
    } else {
      assert.deepEqual(made.sent.at(-1).approvalPayloads, { [asked.part.approval.id]: { nights: 3 } });
    }
  });
}

test("seed: request_confirmation approved without a payload — the tool gets the one it offered", async () => {
  const { asked, part } = await confirmRound("seed", "book_room", { room: "Green" }, () => ({ approved: true }));
  assert.deepEqual(asked.confirmation.payload, { nights: 1 });
  assert.deepEqual(part.output, { booked: "Green", nights: 1 });
});

test("every chunk every chat was handed is valid for every AI SDK major's schema", () => {
  assert.ok(everyChunk.some((c) => c.type === "data-confirmation"));
  assert.ok(everyChunk.some((c) => c.type === "tool-approval-request"));
  assert.deepEqual(invalidChunks, []);
});
