// An AI SDK v6 ChatTransport for the /ws live socket (docs/chat-transport.md):
// `useChat({ transport })` and `new Chat({ transport })` use it as is. Plain
// JS, no dependency; the socket and its parsing are LiveSession's
// (session.js), the same code the demo page runs.
//
// One socket carries the whole live conversation; AbstractChat wants one
// ReadableStream per assistant turn. So the transport cuts the server's
// chunks into per-turn streams:
//
// * sendMessages sends what is new in the history — the user's message, and
//   the answers (approval, browser tool result) the chat wrote into tool
//   parts — and returns a stream of what the server says next;
// * a stream ends at the turn's `finish`, or at the `finish-step` of a step
//   that waits for the client (a `tool-approval-request`, or a tool input
//   marked `clientExecutes`), so the chat becomes `ready` and can answer;
// * what the server starts on its own (a spoken turn, the pending requests
//   of a resumed session, a pending call resolved by a timeout or a
//   barge-in) waits in a backlog; `onServerTurn` says so, and the app calls
//   `chat.resumeStream()`, whose `reconnectToStream` returns it.
//
// A socket the server or the network dropped is opened again on the same
// session by itself (reconnect.js: which closes, what backoff); the server
// then asks again about its pending calls, through `onServerTurn`.

import { ReconnectPolicy } from "./reconnect.js";
import { LiveSession, clientExecutes, describeClose, localTimeZone } from "./session.js";
import { TurnRecorder, wavFile } from "./wav.js";

// What an app's onToolCall asks of a tool call: run it in the browser now?
export { clientExecutes } from "./session.js";

const FINISH_STEP = Object.freeze({ type: "finish-step" });
const START_STEP = Object.freeze({ type: "start-step" });
// Chunks that begin new content. AI SDK puts each model response in its own
// step; our server wraps only tool calls in steps, so the transport opens one
// for content outside a step (then the SDK's "is the last step complete"
// predicates see the answer after a tool as its own step, as with streamText).
const STEP_CONTENT = new Set([
  "text-start",
  "reasoning-start",
  "tool-input-start",
  "file",
  "source-url",
  "source-document",
]);

// The transport's own "Recorded Audio" file chunks: they end the answer's
// last step rather than open one of their own.
const RECORDINGS = new WeakSet();

function isToolPart(part) {
  return typeof part?.type === "string" && (part.type.startsWith("tool-") || part.type === "dynamic-tool");
}

/**
 * The open turn as the server told it, and where its per-turn streams end.
 * Pure: chunks in, chunks out (with the steps AI SDK expects), no I/O.
 */
export class TurnTracker {
  constructor() {
    this.messageId = null; // the open turn's assistant message id; null: no turn open
    this.step = false; // a step is open
    this.waits = false; // the open step asks the client (approval, or a tool to run)
    this.record = []; // the open turn's chunks so far, for a replay
    this.calls = new Map(); // toolCallId -> {toolName, clientExecutes}, until its output
    this.approvals = new Map(); // approvalId -> toolCallId, until the call's output
  }

  get open() {
    return this.messageId !== null;
  }

  /**
   * One server chunk. Returns the chunks to deliver (none, one, or with a
   * step opened or closed around it) and whether a per-turn stream ends
   * after them.
   */
  feed(chunk) {
    const out = [];
    let ends = false;
    switch (chunk.type) {
      case "start":
        this.#endTurn();
        this.messageId = chunk.messageId ?? "";
        out.push(chunk);
        break;
      case "start-step":
        if (this.step) out.push(FINISH_STEP);
        this.step = true;
        this.waits = false;
        out.push(chunk);
        break;
      case "finish-step":
        out.push(chunk);
        ends = this.waits;
        this.step = this.waits = false;
        break;
      case "finish":
        if (this.step) out.push(FINISH_STEP);
        out.push(chunk);
        this.#endTurn();
        return { chunks: out, ends: true };
      case "tool-input-available": {
        const known = this.calls.get(chunk.toolCallId);
        const runNow = clientExecutes(chunk);
        if (runNow) {
          // Asked once is enough: a second ask must not run the tool twice.
          if (known?.clientExecutes) return { chunks: [], ends: false };
          this.waits = true;
        }
        if (!known) this.#openStep(out);
        this.calls.set(chunk.toolCallId, {
          toolName: chunk.toolName,
          clientExecutes: runNow,
        });
        out.push(chunk);
        break;
      }
      case "tool-approval-request":
        this.approvals.set(chunk.approvalId, chunk.toolCallId);
        this.waits = true;
        out.push(chunk);
        break;
      case "tool-output-available":
      case "tool-output-error":
      case "tool-output-denied":
        this.calls.delete(chunk.toolCallId);
        for (const [approvalId, callId] of this.approvals) {
          if (callId === chunk.toolCallId) this.approvals.delete(approvalId);
        }
        out.push(chunk);
        break;
      default:
        const content = STEP_CONTENT.has(chunk.type) || (chunk.type.startsWith("data-") && !chunk.transient);
        if (content && !RECORDINGS.has(chunk)) {
          this.#openStep(out);
        }
        out.push(chunk);
    }
    if (this.open) this.record.push(...out);
    return { chunks: out, ends };
  }

  /**
   * The open turn from its `start`, as the chat needs it to rebuild the
   * message: transient parts left out (they were shown), and no tool is
   * asked to run again (`clientExecutes` dropped).
   */
  replay() {
    return this.record
      .filter((chunk) => !chunk.transient)
      .map((chunk) => {
        if (!clientExecutes(chunk)) return chunk;
        const { providerMetadata, ...rest } = chunk;
        return rest;
      });
  }

  /** Is the call waiting for this approval id's answer? */
  awaitsApproval(approvalId) {
    return this.approvals.has(approvalId);
  }

  /** Is the call waiting for the result of the client running it? */
  awaitsResult(toolCallId) {
    return this.calls.get(toolCallId)?.clientExecutes === true;
  }

  #openStep(out) {
    if (this.step) return;
    this.step = true;
    this.waits = false;
    out.push(START_STEP);
  }

  #endTurn() {
    this.messageId = null;
    this.step = this.waits = false;
    this.record = [];
  }
}

/**
 * `messages` with a user message in place: replaced if its id is there,
 * otherwise inserted before `beforeMessageId` (the assistant message of the
 * turn it started), or appended. For `onUserTranscript`.
 */
export function withUserMessage(messages, message, beforeMessageId) {
  const at = messages.findIndex((m) => m.id === message.id);
  if (at !== -1) return messages.with(at, message);
  const before = messages.findIndex((m) => m.id === beforeMessageId);
  return before === -1 ? [...messages, message] : messages.toSpliced(before, 0, message);
}

/** The user message as the server needs it: its text and image parts. */
function userTurn(message) {
  const parts = message.parts.filter((p) => p.type === "text" || p.type === "file");
  return { id: message.id, role: "user", parts };
}

export class AudiocoreChatTransport {
  /**
   * A resumed stream repeats its turn from the `start`: the chat rebuilds
   * the message rather than appending to it (reconnectToStream).
   */
  resumeStreamIsReplay = true;

  #options;
  #live = null; // the LiveSession while the socket is open
  #opening = null; // its open(), while connecting
  #sessionId;
  #tracker = new TurnTracker();
  #sink = null; // {controller, delivered} — the stream the chat reads now
  #backlog = []; // [{chunks, ended, messageId}] — what no stream has taken yet
  #sent = new Set(); // "user:id", "approval:id", "result:id": each goes out once
  #spoken = { messageId: null, count: 0, final: true }; // the turn's voice transcripts
  #reconnects; // the ReconnectPolicy, or null (options.reconnect false)
  #wanted = false; // a socket was up and the app has not closed it: keep one open
  #retryTimer = null;
  #recorder; // the open turn's audio (TurnRecorder), or null (options.recordedAudio false)
  #recordedRate = 0; // its sample rate

  /**
   * @param {object} options
   * @param {string} options.url  the server's /ws, e.g. "wss://host/ws"
   * @param {string} [options.sessionId]  resume this session on the first connect
   * @param {object} [options.live]  LiveSession options for audio: inputRate,
   *   inputFormat, outputRate, binary, turnDetection (none: a typed chat),
   *   timeZone (default: this runtime's)
   * @param {string} [options.app]  the server's app to talk to (GET /list-apps);
   *   none: the server's only app
   * @param {(info: object) => void} [options.onSession]  data-session's data (keep its sessionId)
   * @param {() => void} [options.onServerTurn]  the server started output no
   *   stream is taking: call `chat.resumeStream()`
   * @param {(t: {message: object, final: boolean, beforeMessageId: string}) => void}
   *   [options.onUserTranscript]  the user's spoken words as a user UIMessage
   *   (the same id while the transcript grows): put it into the chat's messages
   * @param {(audio: {bytes: Uint8Array, sampleRate: number}) => void} [options.onAudio]
   *   the agent's audio (PCM16 LE), from data-pcm chunks or binary frames
   * @param {(chunk: object) => void} [options.onChunk]  every server chunk as it arrives
   * @param {(text: string) => void} [options.onServerError]  an `error` chunk that
   *   is not the answer to a request (the chat's stream fails with the others)
   * @param {(detail: object) => void} [options.onClose]  the socket closed: {code, reason, opened, clean}
   * @param {boolean|object} [options.reconnect=true]  open a dropped socket again
   *   (reconnect.js); an object gives ReconnectPolicy's options ({policy, random, now});
   *   false: never (the next request opens one)
   * @param {(r: {attempt: number, delayMs: number, close: object}) => void}
   *   [options.onReconnecting]  the socket dropped: attempt `attempt` in `delayMs`
   * @param {(info: object) => void} [options.onReconnected]  the session is back (data-session's data)
   * @param {(r: {reason: string, close: object}) => void} [options.onReconnectFailed]
   *   no more attempts (a close that means "do not come back", or too many)
   * @param {boolean} [options.recordedAudio=true]  at the end of an answer that
   *   carried audio (its finish's messageMetadata.audio), a `file` part
   *   `audio/wav` of that audio: the seed's "Recorded Audio"
   * @param {typeof WebSocket} [options.WebSocketImpl]
   */
  constructor(options) {
    if (!options?.url) throw new TypeError("AudiocoreChatTransport: expected options.url");
    this.#options = options;
    this.#sessionId = options.sessionId ?? null;
    const reconnect = options.reconnect ?? true;
    this.#reconnects = reconnect ? new ReconnectPolicy(reconnect === true ? {} : reconnect) : null;
    this.#recorder = options.recordedAudio === false ? null : new TurnRecorder();
  }

  /**
   * Set or replace callbacks after construction (the on… options), e.g. from
   * a React effect once useChat's helpers exist.
   */
  setHandlers(handlers) {
    this.#options = { ...this.#options, ...handlers };
  }

  /** The session id the next connect resumes (data-session's, once connected). */
  get sessionId() {
    return this.#sessionId;
  }

  /** The open LiveSession (null when closed): sendAudio, activityStart/End, interrupt. */
  get live() {
    return this.#live?.connected ? this.#live : null;
  }

  /** Open the socket now (a voice app does, before any chat request); resolves with data-session's data. */
  async connect() {
    if (this.#live?.connected) return this.#live.info;
    this.#opening ??= this.#open().finally(() => {
      this.#opening = null;
    });
    return this.#opening;
  }

  /** Close the socket (and stop reconnecting). A later request opens a new one on the same session. */
  close() {
    this.#wanted = false;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    this.#reconnects?.reset();
    this.#live?.close(1000, "client closed the chat");
  }

  /** Waiting to open a dropped socket again. */
  get reconnecting() {
    return this.#retryTimer !== null;
  }

  async sendMessages({ trigger, messageId, messages, abortSignal, body }) {
    if (trigger === "regenerate-message") {
      throw new Error(
        "AudiocoreChatTransport: a live conversation cannot regenerate an answer; send a new message",
      );
    }
    await this.connect();
    const last = messages.at(-1);
    const turn = last?.role === "user" && !this.#sent.has(`user:${last.id}`) ? last : null;
    const answers = this.#newAnswers(messages, body?.approvalPayloads);
    const carried = this.#takeBacklog(messageId);
    if (!turn && !answers.length && !carried) {
      // Returning a stream here would wait forever, or loop: a chat whose
      // sendAutomaticallyWhen stays true resubmits at every stream's end.
      throw new Error(
        "AudiocoreChatTransport: nothing to send — the last message is neither a new user " +
          "message nor an answer to a pending tool call",
      );
    }
    const stream = this.#stream(carried ?? { chunks: [], ended: false }, abortSignal);
    const live = this.#live;
    for (const answer of answers) {
      this.#sent.add(answer.key);
      if (answer.approvalId) {
        live.toolApproval(answer.approvalId, answer.approved, answer.reason, answer.payload);
      } else live.toolResult(answer.toolCallId, answer);
    }
    if (turn) {
      this.#sent.add(`user:${turn.id}`);
      // `message`, not `text`: one frame carries the text and its images in
      // order, and the server decodes the data URLs (no second copy here).
      // Only the new message: the server never replays history into the model.
      live.sendChatMessages([userTurn(turn)], { trigger, messageId });
    }
    return stream;
  }

  async reconnectToStream({ abortSignal } = {}) {
    await this.connect();
    if (this.#sink) return null; // a stream is already reading the server
    const segment = this.#backlog.shift();
    if (!segment) return null;
    // A turn the chat has half seen is repeated from its start (resumeStreamIsReplay).
    const chunks = segment.replay ? [...segment.replay, ...segment.chunks] : segment.chunks;
    return this.#stream({ ...segment, chunks }, abortSignal);
  }

  // ------------------------------------------------------------------ socket

  async #open() {
    const options = this.#options;
    const live = new LiveSession(options.url, {
      binary: true, // audio as binary frames: no base64 for what a chat may not play
      timeZone: localTimeZone(),
      ...options.live,
      app: options.app,
      sessionId: this.#sessionId ?? undefined,
      WebSocketImpl: options.WebSocketImpl,
    });
    live.addEventListener("session", ({ detail }) => {
      this.#sessionId = detail.sessionId;
      options.onSession?.(detail);
    });
    live.addEventListener("chunk", ({ detail }) => this.#route(detail));
    live.addEventListener("audio", ({ detail }) => {
      if (this.#recorder && this.#tracker.open) {
        this.#recorder.add(detail.bytes);
        this.#recordedRate = detail.sampleRate;
      }
      this.#options.onAudio?.(detail);
    });
    live.addEventListener("closed", ({ detail }) => this.#closed(live, detail));
    this.#live = live;
    const info = await live.open();
    clearTimeout(this.#retryTimer); // a request reconnected before the timer did
    this.#retryTimer = null;
    const again = this.#wanted;
    this.#wanted = true;
    this.#reconnects?.connected();
    if (again) options.onReconnected?.(info);
    return info;
  }

  #closed(live, detail) {
    if (this.#live !== live) return;
    this.#live = null;
    // A network error (TypeError) is what AbstractChat counts as a disconnect
    // it may resume from; reconnectToStream then opens the same session.
    this.#sink?.controller.error(new TypeError(`network connection lost: ${describeClose(detail)}`));
    this.#sink = null;
    // The server asks again for what is still pending on the next socket.
    for (const segment of this.#backlog) segment.ended = true;
    this.#tracker = new TurnTracker();
    this.#options.onClose?.(detail);
    if (this.#wanted && this.#reconnects) this.#lost(detail);
  }

  /** The socket the app wanted dropped: come back after the policy's wait, or say why not. */
  #lost(close) {
    clearTimeout(this.#retryTimer); // a request's own connect failed meanwhile: one timer
    this.#retryTimer = null;
    const decision = this.#reconnects.lost(close);
    if (!decision.retry) {
      this.#wanted = false;
      this.#options.onReconnectFailed?.({ reason: decision.reason, close });
      return;
    }
    const { attempt, delayMs } = decision;
    this.#options.onReconnecting?.({ attempt, delayMs, close });
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      // A failed attempt closes too: #closed counts it and waits again.
      if (this.#wanted) this.connect().catch(() => {});
    }, delayMs);
  }

  // ------------------------------------------------------------------ chunks

  #route(chunk) {
    this.#options.onChunk?.(chunk);
    if (chunk.type === "error") {
      this.#error(chunk.errorText);
      return;
    }
    if (chunk.type === "data-transcript") this.#transcript(chunk.data);
    if (chunk.type === "start") this.#recorder?.reset();
    if (chunk.type === "finish") {
      const recording = this.#recording(chunk);
      if (recording) this.#deliver(recording);
    }
    this.#deliver(chunk);
  }

  /**
   * The turn's audio as the seed's "Recorded Audio" file part, if the answer
   * carried audio (its finish says so, as the seed's client reads it).
   */
  #recording(finish) {
    const taken = this.#recorder?.take();
    if (!taken || !finish.messageMetadata?.audio || !this.#recordedRate) return null;
    const wav = wavFile(taken.pcm, this.#recordedRate);
    let binary = "";
    // fromCharCode takes its arguments on the stack: a bounded slice at a time.
    for (let at = 0; at < wav.length; at += 0x8000) {
      binary += String.fromCharCode(...wav.subarray(at, at + 0x8000));
    }
    const chunk = { type: "file", mediaType: "audio/wav", url: `data:audio/wav;base64,${btoa(binary)}` };
    RECORDINGS.add(chunk);
    return chunk;
  }

  /** One chunk (the server's, or the recording) to the tracker and on to a stream or the backlog. */
  #deliver(chunk) {
    const tracker = this.#tracker;
    const turnId = chunk.type === "start" ? (chunk.messageId ?? "") : tracker.messageId;
    // A continuation nobody reads yet is delivered with the turn so far.
    const replay = !this.#sink && tracker.open && !this.#openSegment() ? tracker.replay() : null;
    const { chunks, ends } = tracker.feed(chunk);
    if (!chunks.length) return;
    const unread = this.#openSegment();
    if (unread) {
      // The rest of a turn nobody reads yet, even if a stream now waits for the next one.
      unread.chunks.push(...chunks);
      unread.ended = ends;
      return;
    }
    if (this.#sink) {
      const sink = this.#sink;
      for (const c of chunks) sink.controller.enqueue(c);
      sink.delivered += chunks.length;
      if (ends) {
        this.#sink = null;
        sink.controller.close();
      }
      return;
    }
    if (turnId === null) return; // e.g. a transient part between turns: onChunk had it
    this.#backlog.push({ chunks, ended: ends, messageId: turnId, replay });
    queueMicrotask(() => this.#options.onServerTurn?.());
  }

  #openSegment() {
    const last = this.#backlog.at(-1);
    return last && !last.ended ? last : null;
  }

  /** A continuation of `messageId` that arrived before the chat asked for it. */
  #takeBacklog(messageId) {
    const first = this.#backlog[0];
    if (!first || !first.replay || first.messageId !== messageId) return null;
    return this.#backlog.shift(); // the chat continues the message: no replay needed
  }

  #error(text) {
    const sink = this.#sink;
    if (sink && sink.delivered === 0) {
      // Nothing came back yet: this is the server's answer to our request.
      this.#sink = null;
      sink.controller.error(new Error(text));
      return;
    }
    this.#options.onServerError?.(text);
  }

  #transcript(data) {
    const text = data?.text;
    const messageId = this.#tracker.messageId;
    if (!text || messageId === null) return;
    const spoken = this.#spoken;
    if (spoken.messageId !== messageId) Object.assign(spoken, { messageId, count: 0, final: true });
    if (spoken.final) spoken.count++; // a new utterance, else the same one grows
    spoken.final = !!data.final;
    const id = `${messageId}-user-${spoken.count}`;
    this.#sent.add(`user:${id}`); // the server has it already: never send it back
    this.#options.onUserTranscript?.({
      message: { id, role: "user", parts: [{ type: "text", text }], metadata: { source: "voice" } },
      final: spoken.final,
      beforeMessageId: messageId,
    });
  }

  /** A per-turn stream: `segment.chunks` now, the server's next chunks unless it ended. */
  #stream(segment, abortSignal) {
    let sink = null;
    const detach = () => {
      // The chat stopped reading: what follows waits in the backlog.
      if (this.#sink === sink) this.#sink = null;
    };
    const stream = new ReadableStream({
      start: (controller) => {
        for (const chunk of segment.chunks) controller.enqueue(chunk);
        if (segment.ended) {
          controller.close();
          return;
        }
        sink = { controller, delivered: segment.chunks.length };
        this.#sink = sink;
      },
      cancel: detach,
    });
    abortSignal?.addEventListener("abort", detach, { once: true });
    return stream;
  }

  // ------------------------------------------------------------------ answers

  /**
   * Answers in the chat's tool parts to calls the server waits for, not sent
   * yet; an approval's payload from `approvalPayloads` (`{approvalId:
   * payload}`, the request's `body`), since AI SDK's approval has none.
   */
  #newAnswers(messages, approvalPayloads) {
    const tracker = this.#tracker;
    const answers = [];
    for (const message of messages) {
      if (message.role !== "assistant") continue;
      for (const part of message.parts) {
        if (!isToolPart(part)) continue;
        const approval = part.approval;
        if (
          typeof approval?.approved === "boolean" &&
          tracker.awaitsApproval(approval.id) &&
          !this.#sent.has(`approval:${approval.id}`)
        ) {
          answers.push({
            key: `approval:${approval.id}`,
            approvalId: approval.id,
            approved: approval.approved,
            reason: approval.reason,
            payload: approval.payload ?? approvalPayloads?.[approval.id],
          });
        }
        const done = part.state === "output-available" || part.state === "output-error";
        if (done && tracker.awaitsResult(part.toolCallId) && !this.#sent.has(`result:${part.toolCallId}`)) {
          answers.push(
            part.state === "output-error"
              ? { key: `result:${part.toolCallId}`, toolCallId: part.toolCallId, errorText: part.errorText ?? "the tool failed" }
              : { key: `result:${part.toolCallId}`, toolCallId: part.toolCallId, output: part.output },
          );
        }
      }
    }
    return answers;
  }
}
