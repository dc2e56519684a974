// What the AI SDK tests share: a chat on AbstractChat with its state in
// memory (AISDK_NOTES §2), as useChat keeps it in React's; every chunk a
// transport hands to a chat checked against the SDK's own
// uiMessageChunkSchema; waiting on the chat's state, never on time.

import { AbstractChat, uiMessageChunkSchema } from "ai";
import { uiMessageChunkSchema as strictChunkSchema } from "ai-v6-first";

// What any one wait may take before the test gives up and shows the state:
// a guard against a hang, not a speed requirement.
export const GIVE_UP_MS = 30_000;
// Every chunk is checked against the pinned SDK's schema and against the
// first v6 release's (6.0.25, the seed project's pin), whose chunk objects
// are strict: a key it does not name fails the whole stream there.
export const SCHEMAS = [uiMessageChunkSchema(), strictChunkSchema()];

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

/** The transport as a chat sees it, with every chunk checked against the SDK's schema. */
export function validated(transport, seen, invalid) {
  const check = (stream) =>
    stream?.pipeThrough(
      new TransformStream({
        async transform(chunk, controller) {
          for (const schema of SCHEMAS) {
            const result = await schema.validate(chunk);
            if (!result.success) invalid.push({ chunk, error: String(result.error) });
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

export function text(message) {
  return message.parts
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join(" ");
}

/** The turn has finished (the model's answer is in) and the chat is idle again. */
export const finished = (chat, finishes, count) => () =>
  finishes.filter((f) => f.finishReason === "stop").length >= count && chat.status === "ready";
