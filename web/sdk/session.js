// The /ws client (docs/protocol.md): negotiation, typed client messages, and the
// server's chunks turned into events. No Web Audio and no DOM here. The demo
// page uses it directly; web/sdk/chat-transport.js builds the AI SDK ChatTransport
// on it, so both read the socket the same way.
//
// Events (CustomEvent, payload in `detail`):
//   "session"  the data-session chunk's data (sent first: id, rates, history)
//   "chunk"    every other JSON chunk, as parsed
//   "audio"    {bytes: Uint8Array, sampleRate}  PCM16 LE, from data-pcm or a binary frame
//   "closed"   {code, reason, opened, clean}

import { base64ToBytes, float32ToPcm16, pcm16Bytes } from "./pcm.js";

/** Rates the server resamples from and to (server/wire/fields.py SUPPORTED_RATES). */
/**
 * Is this `tool-input-available` the server's ask to run the tool in the
 * browser now? The mark rides in `providerMetadata.audiocore`, which every
 * AI SDK v6 chunk schema accepts.
 */
export function clientExecutes(chunk) {
  return chunk.providerMetadata?.audiocore?.clientExecutes === true;
}

export const SUPPORTED_RATES = [8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000];

// Audio waiting in the socket's send buffer beyond this is stale: we drop
// frames rather than let the conversation fall behind real time.
const MAX_BUFFERED_BYTES = 128 * 1024;

/**
 * The `start` negotiation message. Without `inputRate` the server's input
 * defaults stand (a client that only types); without `outputRate`, its
 * output rate.
 */
export function startMessage({
  inputRate,
  inputFormat = "f32",
  outputRate,
  binary = true,
  sessionId,
  turnDetection,
  userKey,
  timeZone,
  app,
  echoCancellation,
}) {
  const message = { type: "start" };
  if (inputRate) message.input = { sampleRate: inputRate, format: inputFormat, channels: 1 };
  message.output = outputRate ? { sampleRate: outputRate, binary } : { binary };
  if (sessionId) message.sessionId = sessionId;
  // "server": the model's voice detection ends turns; "manual": only
  // activity_start/activity_end do (push-to-talk). Omitted: the server's default.
  if (turnDetection) message.turnDetection = turnDetection;
  // "server": this client has no echo cancellation of its own (a loudspeaker
  // with the browser's off); the server cancels what it played. Omitted:
  // "client", the microphone is left as it comes.
  if (echoCancellation) message.echoCancellation = echoCancellation;
  // The user's background tasks are theirs in every session that sends it.
  if (userKey) message.userKey = userKey;
  // The tools tell the time in it (get_current_time); omitted: UTC.
  if (timeZone) message.timeZone = timeZone;
  // Which of the server's apps (GET /list-apps); omitted: its only one.
  if (app) message.app = app;
  return message;
}

/** This browser's IANA time zone ("Europe/Paris"), or undefined if it has none. */
export function localTimeZone(intl = globalThis.Intl) {
  try {
    return intl.DateTimeFormat().resolvedOptions().timeZone || undefined;
  } catch {
    return undefined;
  }
}

/**
 * A new random user key (192 bits, base64url: the server takes 20 to 100 of
 * A-Z a-z 0-9 _ -). Whoever knows it sees the user's tasks: keep it private.
 */
export function newUserKey(random = globalThis.crypto) {
  const bytes = random.getRandomValues(new Uint8Array(24));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_");
}

/**
 * ws:// or wss:// URL of the endpoint next to the page: ``path`` resolved
 * against the page's address, so a server mounted under a prefix
 * (https://host/voice/) is reached there (wss://host/voice/ws). An absolute
 * ``path`` ("/ws") names the host's root.
 */
export function socketUrl(location, path = "ws") {
  const url = new URL(path, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.search = "";
  url.hash = "";
  return url.href;
}

/** Why a connection ended, in words for the status line. */
export function describeClose({ code, reason, opened }) {
  if (!opened) return "Cannot reach the server. Is it running, and is the address right?";
  const known = {
    1000: "The connection was closed.",
    1001: "The server is going away (restart or shutdown).",
    1003: "The server refused data it does not support.",
    1006: "The connection to the server was lost.",
    1007: "The server rejected a malformed message.",
    1008: "The server refused the connection (policy).",
    1009: "A message was too big for the server.",
    1011: "The server hit an internal error.",
  };
  const text = known[code] ?? "The connection closed.";
  return reason ? `${text} (${code}: ${reason})` : `${text} (code ${code})`;
}

export class LiveSession extends EventTarget {
  /**
   * @param {string} url
   * @param {object} options
   * @param {number} options.inputRate   the capture context's rate
   * @param {"f32"|"s16"} [options.inputFormat="f32"]
   * @param {number} options.outputRate  the playback context's rate
   * @param {boolean} [options.binary=true] ask for audio as binary frames
   * @param {string} [options.sessionId]  resume this session
   * @param {"server"|"manual"} [options.turnDetection] who ends the user's turns
   * @param {"client"|"server"} [options.echoCancellation] who keeps the agent's voice out of the mic
   * @param {string} [options.userKey] whose background tasks this socket sees (newUserKey)
   * @param {typeof WebSocket} [options.WebSocketImpl]
   */
  constructor(url, options) {
    super();
    this.url = url;
    this.options = { inputFormat: "f32", binary: true, ...options };
    this.ws = null;
    this.opened = false;
    this.info = null; // data-session's data
    this.stats = { framesSent: 0, framesDropped: 0, bytesSent: 0, chunks: 0, audioBytes: 0 };
  }

  /** Connect and negotiate; resolves with the data-session data. */
  open() {
    const WS = this.options.WebSocketImpl ?? globalThis.WebSocket;
    return new Promise((resolve, reject) => {
      let settled = false;
      const ws = new WS(this.url);
      ws.binaryType = "arraybuffer";
      this.ws = ws;
      ws.onopen = () => {
        this.opened = true;
        ws.send(JSON.stringify(startMessage({ ...this.options })));
      };
      ws.onmessage = (event) => {
        const info = this.#receive(event.data);
        if (info && !settled) {
          settled = true;
          resolve(info);
        }
      };
      ws.onclose = (event) => {
        const detail = {
          code: event.code,
          reason: event.reason ?? "",
          opened: this.opened,
          clean: !!event.wasClean,
        };
        this.ws = null;
        if (!settled) {
          settled = true;
          const error = new Error(describeClose(detail));
          error.detail = detail;
          reject(error);
        }
        this.dispatchEvent(new CustomEvent("closed", { detail }));
      };
      ws.onerror = () => {}; // always followed by close, which says more
    });
  }

  get connected() {
    return this.ws !== null && this.ws.readyState === 1;
  }

  #receive(data) {
    this.stats.chunks++;
    if (typeof data !== "string") {
      const bytes = new Uint8Array(data);
      this.stats.audioBytes += bytes.length;
      this.#emit("audio", { bytes, sampleRate: this.info?.output?.sampleRate });
      return null;
    }
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      this.#emit("chunk", { type: "error", errorText: "the server sent a frame that is not JSON" });
      return null;
    }
    switch (chunk.type) {
      case "data-session":
        this.info = chunk.data;
        this.#emit("session", chunk.data);
        return chunk.data;
      case "data-pcm": {
        const bytes = base64ToBytes(chunk.data.content);
        this.stats.audioBytes += bytes.length;
        this.#emit("audio", { bytes, sampleRate: chunk.data.sampleRate });
        return null;
      }
      default:
        this.#emit("chunk", chunk);
        return null;
    }
  }

  #emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  #sendJson(message) {
    if (!this.connected) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }

  /** One captured frame (float32 at the input rate). False if not sent. */
  sendAudio(frame) {
    if (!this.connected) return false;
    if (this.ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.stats.framesDropped++;
      return false;
    }
    const payload =
      this.options.inputFormat === "s16" ? pcm16Bytes(float32ToPcm16(frame)) : frame;
    // Send exactly the frame's bytes, even when it is a view on a larger buffer.
    const bytes = new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength);
    this.ws.send(bytes);
    this.stats.framesSent++;
    this.stats.bytesSent += bytes.byteLength;
    return true;
  }

  sendText(text) {
    return this.#sendJson({ type: "text", text });
  }

  /** An image or a camera frame: {mediaType, data (base64)}. */
  sendImage({ mediaType, data }) {
    return this.#sendJson({ type: "image", mediaType, data });
  }

  activityStart() {
    return this.#sendJson({ type: "activity_start" });
  }

  activityEnd() {
    return this.#sendJson({ type: "activity_end" });
  }

  interrupt() {
    return this.#sendJson({ type: "interrupt" });
  }

  /**
   * The user's answer to a `tool-approval-request`; `payload`: what the user
   * filled in for an ADK tool's confirmation (its `data-confirmation` part's
   * payload, changed), the offered one when undefined.
   */
  toolApproval(approvalId, approved, reason, payload) {
    const message = { type: "tool_approval", approvalId, approved };
    if (reason) message.reason = reason;
    if (payload !== undefined) message.payload = payload;
    return this.#sendJson(message);
  }

  /**
   * The result of a tool the server asked us to run (`clientExecutes`):
   * `{output}`, or `{errorText}` when it failed.
   */
  toolResult(toolCallId, { output, errorText } = {}) {
    if (errorText !== undefined) {
      return this.#sendJson({ type: "tool_result", toolCallId, errorText: String(errorText) });
    }
    // JSON has no undefined: a tool that returns nothing answers null.
    return this.#sendJson({ type: "tool_result", toolCallId, output: output ?? null });
  }

  /** Ask the server to cancel a background task; its `data-task` card confirms. */
  cancelTask(taskId) {
    return this.#sendJson({ type: "task_cancel", taskId });
  }

  /** AI SDK UI messages: the server reads the last one (a user turn, or tool answers). */
  sendChatMessages(messages, { trigger = "submit-message", messageId } = {}) {
    const message = { type: "message", messages, trigger };
    if (messageId) message.messageId = messageId;
    return this.#sendJson(message);
  }

  close(code = 1000, reason = "client disconnect") {
    if (this.ws && this.ws.readyState <= 1) this.ws.close(code, reason);
  }
}
