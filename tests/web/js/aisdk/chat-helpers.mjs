// What the AI SDK tests share: a chat on AbstractChat with its state in
// memory (AISDK_NOTES §2), as useChat keeps it in React's; every chunk a
// transport hands to a chat checked against the SDK's own
// uiMessageChunkSchema; waiting on the chat's state, never on time. And the
// scenarios every transport must pass alike (the socket's and HTTP's), each
// given the file's `newChat` and returning what that transport's own checks
// need.

import assert from "node:assert/strict";

import { dataUrl, described, halves, png } from "./png.mjs";
import { SCHEMAS, SCHEMA_PACKAGES, ai, sdk } from "./under-test.mjs";

export { SCHEMAS };
const { clientExecutes } = sdk;
const {
  AbstractChat,
  lastAssistantMessageIsCompleteWithApprovalResponses: approvalsDone,
  lastAssistantMessageIsCompleteWithToolCalls: toolCallsDone,
} = ai;

// What any one wait may take before the test gives up and shows the state:
// a guard against a hang, not a speed requirement.
export const GIVE_UP_MS = 30_000;
// Every chunk is checked against the schemas of under-test.mjs: from pytest,
// the pinned 6's, 7's, and the first v6 release's (6.0.25, the seed project's
// pin), whose chunk objects are strict: a key it does not name fails the
// whole stream there.

/** ChatState in memory (AISDK_NOTES §2), telling waiters about every change. */
export class MemoryState {
  #status = "ready";
  error = undefined;
  #messages = [];
  #listeners = new Set();
  get status() {
    return this.#status;
  }
  set status(value) {
    this.#status = value;
    this.changed();
  }
  get messages() {
    return this.#messages;
  }
  set messages(value) {
    this.#messages = value;
    this.changed();
  }
  pushMessage = (m) => {
    this.messages = [...this.#messages, structuredClone(m)];
  };
  popMessage = () => {
    this.messages = this.#messages.slice(0, -1);
  };
  replaceMessage = (i, m) => {
    this.messages = this.#messages.with(i, structuredClone(m));
  };
  snapshot = (x) => structuredClone(x);
  changed() {
    for (const listener of this.#listeners) listener();
  }
  listen(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

export class Chat extends AbstractChat {}

/**
 * A chat on `transport`, every chunk it is handed checked (into `seen`, and
 * `invalid` for the failures); `options` go to the chat. Returns {chat,
 * finishes (onFinish's events), until(predicate, what)}.
 */
export function chatOn(transport, { seen, invalid, ...options }) {
  const state = new MemoryState();
  const finishes = [];
  const chat = new Chat({
    state,
    transport: validated(transport, seen, invalid),
    onFinish: (event) => {
      finishes.push(event);
      state.changed();
    },
    ...options,
  });
  return { chat, finishes, until: (predicate, what) => until(chat, state, predicate, what) };
}

/** The transport as a chat sees it, with every chunk checked against the SDK's schema. */
export function validated(transport, seen, invalid) {
  const check = (stream) =>
    stream?.pipeThrough(
      new TransformStream({
        async transform(chunk, controller) {
          for (const [i, schema] of SCHEMAS.entries()) {
            const result = await schema.validate(chunk);
            if (!result.success) invalid.push({ schema: SCHEMA_PACKAGES[i], chunk, error: String(result.error) });
          }
          seen.push(chunk);
          controller.enqueue(chunk);
        },
      }),
    );
  return {
    resumeStreamIsReplay: transport.resumeStreamIsReplay,
    sendMessages: async (options) => check(await transport.sendMessages(options)),
    reconnectToStream: async (options) => check(await transport.reconnectToStream(options)),
    // ai 7's AbstractChat.dispose() calls the transport's close().
    close: () => transport.close?.(),
  };
}

/** Resolves when `predicate()` holds after a change of `state` (checked at once too). */
export function until(chat, state, predicate, what) {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!predicate()) return;
      stop();
      resolve();
    };
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`gave up waiting for ${what}: ${JSON.stringify(describe(chat), null, 1)}`));
    }, GIVE_UP_MS);
    const unlisten = state.listen(check);
    const stop = () => {
      clearTimeout(timer);
      unlisten();
    };
    check();
  });
}

export function describe(chat) {
  return {
    status: chat.status,
    error: chat.error?.message,
    messages: chat.messages.map((m) => ({
      id: m.id,
      role: m.role,
      parts: m.parts.map((p) => (p.state ? `${p.type}/${p.state}` : p.type)),
    })),
  };
}

export function toolPart(chat, name) {
  for (const message of chat.messages.toReversed()) {
    const part = message.parts.find((p) => p.type === `tool-${name}`);
    if (part) return { message, part };
  }
  return {};
}

/**
 * The message's parts without the socket transport's "Recorded Audio" (an
 * audio/wav file part after an answer that carried audio): what the
 * scenarios check is the same on every transport.
 */
export function contentParts(message) {
  return message.parts.filter((p) => !(p.type === "file" && p.mediaType === "audio/wav"));
}

export function text(message) {
  return message.parts
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join(" ");
}

/** The turn has finished (the model's answer is in) and the chat is idle again. */
export const finished = (chat, finishes, count) => () =>
  finishes.filter((f) => f.finishReason === "stop").length >= count && chat.status === "ready";

// ------------------------------------------------------------------ scenarios
// Each takes the file's `newChat(options)`, which returns at least {chat,
// finishes, until}.

/** The browser's position, as get_location answers it here. */
export const POSITION = { latitude: 48.8584, longitude: 2.2945, accuracy: 12 };

// A browser tool that needs approval is answered twice: the approval (the part
// becomes approval-responded: approvalsDone), then, once the server asks the
// browser to run it (clientExecutes), the result (the part becomes
// output-available: only toolCallsDone sees that). So the chat continues when
// either holds.
export const approvalsOrResults = (options) => approvalsDone(options) || toolCallsDone(options);

/** A chat whose browser runs get_location in onToolCall (answering POSITION); `runs` lists the tools it ran. */
export function locatingChat(newChat) {
  const runs = [];
  let chat;
  const made = newChat({
    sendAutomaticallyWhen: approvalsOrResults,
    onToolCall: ({ toolCall }) => {
      if (!clientExecutes(toolCall)) return; // the server runs it, or asks first
      runs.push(toolCall.toolName);
      // No await: onToolCall runs inside the chat's job queue (AISDK_NOTES §8.6).
      chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: POSITION });
    },
  });
  chat = made.chat;
  return { ...made, runs };
}

/**
 * process_payment asked, approved with a reason, run by the server, answered
 * in the same assistant message. `whenAsked(asked, made)` checks the ask as
 * this transport delivers it. Returns {made, asked, message, part}.
 */
export async function approvedPayment(newChat, whenAsked = () => {}) {
  const made = newChat({ sendAutomaticallyWhen: approvalsDone });
  const { chat, finishes } = made;
  await chat.sendMessage({ text: "pay 5 EUR to Alice" });
  const asked = toolPart(chat, "process_payment");
  assert.equal(asked.part?.state, "approval-requested", JSON.stringify(describe(chat)));
  assert.deepEqual(asked.part.input, { amount: 5, currency: "EUR", recipient: "Alice" });
  whenAsked(asked, made);
  await chat.addToolApprovalResponse({ id: asked.part.approval.id, approved: true, reason: "fine" });
  await made.until(finished(chat, finishes, 1), "the answer after the approval");
  const { message, part } = toolPart(chat, "process_payment");
  assert.equal(message.id, asked.message.id, "the continuation keeps the assistant message");
  assert.equal(chat.messages.length, 2);
  assert.equal(part.state, "output-available");
  assert.equal(part.output.success, true);
  assert.match(part.output.transactionId, /^txn_[0-9a-f]{12}$/);
  assert.deepEqual([part.output.amount, part.output.currency, part.output.recipient], [5, "EUR", "Alice"]);
  assert.match(text(message), new RegExp(`process_payment returned .*${part.output.transactionId}`));
  assert.deepEqual(
    contentParts(message).map((p) => p.type),
    ["step-start", "tool-process_payment", "step-start", "text"],
  );
  return { made, asked, message, part };
}

/**
 * get_location asked, approved, run in onToolCall, answered through
 * addToolOutput, and the model told. Returns {made (with runs), message, part}.
 */
export async function approvedLocation(newChat) {
  const made = locatingChat(newChat);
  const { chat, runs } = made;
  await chat.sendMessage({ text: "where am I" });
  const asked = toolPart(chat, "get_location").part;
  assert.equal(asked.state, "approval-requested");
  assert.deepEqual(runs, [], "nothing runs before the approval");
  await chat.addToolApprovalResponse({ id: asked.approval.id, approved: true });
  await made.until(finished(chat, made.finishes, 1), "the answer after the location");
  const { message, part } = toolPart(chat, "get_location");
  assert.deepEqual(runs, ["get_location"]);
  assert.equal(part.state, "output-available");
  assert.deepEqual(part.output, POSITION);
  assert.match(text(message), /get_location returned .*48\.8584/);
  assert.equal(chat.messages.length, 2);
  return { made, message, part };
}

/**
 * process_payment and get_location asked in one step, approved in either
 * order: the browser runs its tool once and one answer covers both.
 * `andThen(made)` checks, for each order, what this transport sent.
 */
export async function twoApprovalsInOneStep(newChat, andThen) {
  for (const order of [["get_location", "process_payment"], ["process_payment", "get_location"]]) {
    const made = locatingChat(newChat);
    const { chat, runs } = made;
    await chat.sendMessage({ text: "pay 5 EUR to Alice and where am I" });
    for (const name of order) {
      const asked = toolPart(chat, name).part;
      assert.equal(asked.state, "approval-requested", JSON.stringify(describe(chat)));
      await chat.addToolApprovalResponse({ id: asked.approval.id, approved: true });
    }
    await made.until(finished(chat, made.finishes, 1), "the one answer after both tools");
    assert.deepEqual(runs, ["get_location"], "the browser ran its tool once");
    const { message, part } = toolPart(chat, "process_payment");
    assert.equal(part.state, "output-available");
    assert.equal(part.output.success, true);
    assert.equal(toolPart(chat, "get_location").part.state, "output-available");
    assert.equal(message.parts.filter((p) => p.type === "text").length, 1, "one answer");
    assert.match(text(message), /process_payment returned .*"success": true/);
    assert.match(text(message), /get_location returned .*48\.8584/);
    assert.equal(chat.messages.length, 2);
    andThen(made);
  }
}

/** 300 words to a model that writes at most 256: the answer finishes with `length`. */
export async function answerCutAtTheLimit(newChat) {
  const { chat, finishes } = newChat();
  const words = Array.from({ length: 300 }, (_, i) => `w${i}`).join(" ");
  await chat.sendMessage({ text: words });
  assert.equal(chat.status, "ready", chat.error?.message);
  assert.equal(finishes.at(-1).finishReason, "length");
  const assistant = chat.messages.at(-1);
  assert.equal(text(assistant).split(" ").length, 256);
  assert.deepEqual(assistant.metadata.usage, { promptTokens: 300, completionTokens: 256, totalTokens: 556 });
}

/**
 * An image as a file part the model describes, and a drawing back as a file
 * part. `sentUserParts(made)`: the parts of the user message this transport
 * sent last, as the server read them.
 */
export async function imagesBothWays(newChat, sentUserParts) {
  const made = newChat();
  const { chat } = made;
  const image = { type: "file", mediaType: "image/png", url: dataUrl(png(4, 2, halves)) };
  await chat.sendMessage({ text: "what is this", files: [image] });
  assert.equal(chat.status, "ready", chat.error?.message);
  assert.deepEqual(chat.messages[0].parts, [image, { type: "text", text: "what is this" }]);
  assert.equal(text(chat.messages[1]), `I see an image: ${described(4, 2, halves)}. You said: what is this`);
  assert.deepEqual(sentUserParts(made), [image, { type: "text", text: "what is this" }]);

  await chat.sendMessage({ text: "draw me a red square" });
  const drawn = chat.messages.at(-1);
  assert.equal(text(drawn), "Here is a red square.");
  const files = contentParts(drawn).filter((p) => p.type === "file");
  assert.equal(files.length, 1);
  assert.equal(files[0].mediaType, "image/png");
  const bytes = Buffer.from(files[0].url.slice("data:image/png;base64,".length), "base64");
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
}
