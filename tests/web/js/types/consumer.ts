// An app's use of @audiocore/chat-transport, type-checked (tsc --noEmit)
// against ai 6 and 7: in our tree (tsconfig.ai6.json, tsconfig.ai7.json) and
// in the scratch app that installed the tarball (.ci/transport-package).

import {
  AbstractChat,
  type ChatState,
  type ChatStatus,
  type ChatTransport,
  type UIMessage,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";
import { AudiocoreChatTransport, clientExecutes, withUserMessage } from "@audiocore/chat-transport";

class MemoryState implements ChatState<UIMessage> {
  status: ChatStatus = "ready";
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  pushMessage = (m: UIMessage) => {
    this.messages = [...this.messages, m];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i: number, m: UIMessage) => {
    this.messages = this.messages.with(i, structuredClone(m));
  };
  snapshot = <T>(x: T): T => structuredClone(x);
}

class Chat extends AbstractChat<UIMessage> {}

let chat: Chat;
const transport = new AudiocoreChatTransport({
  url: "ws://localhost:8000/ws",
  live: { inputRate: 16000, turnDetection: "server" },
  recordedAudio: false,
  onServerTurn: () => void chat.resumeStream(),
  onUserTranscript: ({ message, beforeMessageId }) => {
    chat.messages = withUserMessage(chat.messages, message, beforeMessageId);
  },
  onAudio: ({ bytes, sampleRate }: { bytes: Uint8Array; sampleRate: number }) => void [bytes, sampleRate],
  onReconnecting: ({ attempt, delayMs }) => void [attempt, delayMs],
});
const asTransport: ChatTransport<UIMessage> = transport;
chat = new Chat({
  state: new MemoryState(),
  transport: asTransport,
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onToolCall: ({ toolCall }) => {
    if (!clientExecutes(toolCall)) return;
    void chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: { ok: true } });
  },
});

export async function talk(): Promise<string | null> {
  const info = await transport.connect();
  transport.live?.sendAudio(new Float32Array(320));
  await chat.sendMessage({ text: "hello" });
  transport.close();
  return info.sessionId ?? transport.sessionId;
}
