// Declarations for chat-transport.js, written by hand (no build step): the
// public API an AI SDK app uses. Checked by tsc against ai 6 and 7
// (tests/web/js/types/, .ci/transport-package).

import type { ChatTransport, UIMessage, UIMessageChunk } from "ai";

/** What the server's data-session carries (sessionId and the negotiated audio). */
export interface SessionInfo {
  sessionId: string;
  resumed?: boolean;
  turnDetection?: string;
  [key: string]: unknown;
}

/** How the socket closed. */
export interface CloseDetail {
  code: number;
  reason: string;
  opened: boolean;
  clean?: boolean;
}

/** LiveSession options for audio (docs/chat-transport.md). */
export interface LiveOptions {
  inputRate?: number;
  inputFormat?: "s16" | "f32" | string;
  outputRate?: number;
  binary?: boolean;
  /** Omitted: a typed chat. */
  turnDetection?: "server" | "manual" | string;
  /** "server": the client has no echo cancellation of its own (docs/protocol.md). */
  echoCancellation?: "client" | "server" | string;
  timeZone?: string;
}

/**
 * A `data-confirmation` part's data: what an ADK tool's confirmation asks,
 * just before its approval request (the part's id is the approval id).
 */
export interface ConfirmationData {
  approvalId: string;
  toolCallId: string;
  toolName: string;
  hint: string;
  /** What the tool offers the user to change; answer it in `approvalPayloads`. */
  payload?: unknown;
}

/**
 * The request body field that answers confirmations' payloads, by approval id:
 * `addToolApprovalResponse({ id, approved, options: { body: { approvalPayloads: { [id]: payload } } } })`.
 */
export type ApprovalPayloads = Record<string, unknown>;

/** The open socket's controls (session.js LiveSession). */
export interface LiveSession extends EventTarget {
  readonly connected: boolean;
  readonly info: SessionInfo | null;
  sendAudio(samples: Float32Array | Int16Array): boolean;
  activityStart(): void;
  activityEnd(): void;
  interrupt(): void;
  close(code?: number, reason?: string): void;
}

export interface AudiocoreChatTransportOptions {
  /** The server's /ws, e.g. "wss://host/ws". */
  url: string;
  /** Resume this session on the first connect. */
  sessionId?: string;
  /** The server's app to talk to (GET /list-apps); may be omitted when it serves one. */
  app?: string;
  live?: LiveOptions;
  /**
   * Add the answer's audio as an `audio/wav` file part ("Recorded Audio", as
   * the seed's client does) at the end of an answer that carried audio.
   * Default true.
   */
  recordedAudio?: boolean;
  onSession?: (info: SessionInfo) => void;
  /** The server started output no stream is taking: call `chat.resumeStream()`. */
  onServerTurn?: () => void;
  onUserTranscript?: (transcript: {
    message: UIMessage;
    final: boolean;
    beforeMessageId: string;
  }) => void;
  /** The agent's audio, PCM16 little-endian mono. */
  onAudio?: (audio: { bytes: Uint8Array; sampleRate: number }) => void;
  onChunk?: (chunk: UIMessageChunk) => void;
  onServerError?: (text: string) => void;
  onClose?: (detail: CloseDetail) => void;
  /** true (default), false (never), or ReconnectPolicy options. */
  reconnect?: boolean | { policy?: object; random?: () => number; now?: () => number };
  onReconnecting?: (r: { attempt: number; delayMs: number; close: CloseDetail }) => void;
  onReconnected?: (info: SessionInfo) => void;
  onReconnectFailed?: (r: { reason: string; close: CloseDetail }) => void;
  WebSocketImpl?: typeof WebSocket;
}

type Handlers = Omit<AudiocoreChatTransportOptions, "url" | "sessionId" | "app" | "live" | "WebSocketImpl">;

export declare class AudiocoreChatTransport<UI_MESSAGE extends UIMessage = UIMessage>
  implements ChatTransport<UI_MESSAGE>
{
  constructor(options: AudiocoreChatTransportOptions);
  /** A resumed stream repeats its turn from the `start`. */
  readonly resumeStreamIsReplay: true;
  setHandlers(handlers: Partial<Handlers>): void;
  readonly sessionId: string | null;
  /** The open socket (null when closed): sendAudio, activityStart/End, interrupt. */
  readonly live: LiveSession | null;
  readonly reconnecting: boolean;
  connect(): Promise<SessionInfo>;
  /** Close the socket and stop reconnecting (ai 7's `chat.dispose()` calls it). */
  close(): void;
  sendMessages(
    options: Parameters<ChatTransport<UI_MESSAGE>["sendMessages"]>[0],
  ): Promise<ReadableStream<UIMessageChunk>>;
  reconnectToStream(
    options: Parameters<ChatTransport<UI_MESSAGE>["reconnectToStream"]>[0],
  ): Promise<ReadableStream<UIMessageChunk> | null>;
}

/** `messages` with a user message in place (for onUserTranscript). */
export declare function withUserMessage<M extends { id: string }>(
  messages: M[],
  message: M,
  beforeMessageId: string,
): M[];

/** Whether a tool-input chunk asks the browser to run the tool now (for onToolCall). */
export declare function clientExecutes(chunk: unknown): boolean;
