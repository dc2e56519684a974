// The conversation as turns, built from the server's chunks. Pure: the page
// renders the entries; tests feed chunks and read them back.
//
// An entry: {id, role: "user"|"agent"|"tool"|"notice"|"inline", text, final,
// interrupted, images: [{url, mediaType}]};
// an inline entry is a background task's result shown rather than said: a text
// part marked `providerMetadata.audiocore.format` "markdown" (its `text` is
// Markdown, rendered sanitised by markdown.js), with the task's id in `taskId`;
// a tool entry also has `state` (TOOL_STATES) and `result` (text or null).
// The server opens a turn (`start`) on its first event, and the user's
// transcript may come after the agent's first words; so a turn keeps its user
// entry ahead of its agent entry and `onChange` says where a new one goes.

import { clientExecutes } from "./sdk/session.js";

let nextId = 1;

/** A tool call's states, and the words the page shows for them. */
export const TOOL_STATES = {
  approval: "waiting for approval",
  running: "running",
  done: "done",
  denied: "denied",
  error: "error",
  unanswered: "not answered: the connection was lost",
};

export class Conversation {
  /** @param {(entry: object, placement: {isNew: boolean, before?: object}) => void} onChange */
  constructor(onChange = () => {}) {
    this.entries = [];
    this.onChange = onChange;
    this.turn = null; // {user, agent}
    // toolCallId -> tool entry. Not per turn: a resumed session asks again
    // about a call the page already shows.
    this.tools = new Map();
    // text part id -> inline entry, while its part streams.
    this.inline = new Map();
  }

  #add(role, text, { final = true, before, tool = false } = {}) {
    const entry = { id: `e${nextId++}`, role, text, final, interrupted: false, images: [] };
    if (tool) Object.assign(entry, { state: "running", result: null });
    if (before) this.entries.splice(this.entries.indexOf(before), 0, entry);
    else this.entries.push(entry);
    this.onChange(entry, { isNew: true, before });
    return entry;
  }

  #changed(entry) {
    this.onChange(entry, { isNew: false });
  }

  #openTurn() {
    this.turn ??= { user: null, agent: null };
    return this.turn;
  }

  #toolState(entry, state, result = entry.result) {
    entry.state = state;
    entry.result = result;
    entry.final = state !== "approval" && state !== "running";
    this.#changed(entry);
  }

  /** The user answered the call's approval: it runs now, or it will not. */
  toolAnswered(toolCallId, approved) {
    const entry = this.tools.get(toolCallId);
    if (entry) this.#toolState(entry, approved ? "running" : "denied");
  }

  /**
   * The socket went away mid-conversation. The answer in flight is cut (the
   * server does not replay it, and the page does not send the turn again);
   * an approval the user had not given is marked unanswered until the
   * resumed session asks again (the server's pending calls are the truth).
   */
  connectionLost() {
    const agent = this.turn?.agent;
    if (agent && !agent.final) {
      agent.interrupted = true;
      agent.final = true;
      this.#changed(agent);
    }
    this.turn = null;
    for (const entry of this.tools.values()) {
      if (entry.state === "approval") this.#toolState(entry, "unanswered");
    }
  }

  /** A typed turn, shown as soon as it is sent, with the images sent with it. */
  userTyped(text, images = []) {
    const entry = this.#add("user", text);
    if (images.length) {
      entry.images.push(...images.map(({ url, mediaType }) => ({ url, mediaType })));
      this.#changed(entry);
    }
    return entry;
  }

  notice(text) {
    return this.#add("notice", text);
  }

  /** A resumed session's history: [{role: "user"|"assistant", text}]. */
  loadHistory(history) {
    for (const item of history ?? []) {
      this.#add(item.role === "user" ? "user" : "agent", item.text);
    }
  }

  /** Apply one server chunk. */
  apply(chunk) {
    switch (chunk.type) {
      case "start":
        this.turn = null;
        this.#openTurn();
        break;
      case "data-transcript": {
        const turn = this.#openTurn();
        const { text, final } = chunk.data ?? {};
        if (!text) break;
        if (turn.user && !turn.user.final) {
          turn.user.text = text;
          turn.user.final = !!final;
          this.#changed(turn.user);
        } else if (!turn.user) {
          turn.user = this.#add("user", text, { final: !!final, before: turn.agent ?? undefined });
        }
        break;
      }
      case "text-start":
      case "text-delta": {
        const markdown = chunk.providerMetadata?.audiocore?.format === "markdown";
        if (chunk.type === "text-start" && markdown) {
          const entry = this.#add("inline", "", { final: false });
          entry.taskId = chunk.providerMetadata.audiocore.taskId ?? null;
          this.inline.set(chunk.id, entry);
          break;
        }
        const inline = this.inline.get(chunk.id);
        if (inline) {
          inline.text += chunk.delta ?? "";
          this.#changed(inline);
          break;
        }
        const turn = this.#openTurn();
        const delta = chunk.delta ?? "";
        if (!turn.agent) {
          turn.agent = this.#add("agent", delta, { final: false });
        } else {
          const agent = turn.agent;
          // A new text part in the same turn starts a new sentence.
          const newPart = chunk.type === "text-start" && agent.text && !/\s$/.test(agent.text);
          const sep = newPart ? " " : "";
          agent.text += sep + delta;
          if (sep || delta) this.#changed(agent);
        }
        break;
      }
      case "text-end": {
        const inline = this.inline.get(chunk.id);
        if (inline) {
          this.inline.delete(chunk.id);
          inline.final = true;
          this.#changed(inline);
        }
        break;
      }
      case "tool-input-available": {
        this.#openTurn();
        const known = this.tools.get(chunk.toolCallId);
        if (known) {
          // Asked again: the browser is to run it now (or a resumed session repeats it).
          if (clientExecutes(chunk)) this.#toolState(known, "running");
          break;
        }
        const args = JSON.stringify(chunk.input ?? {});
        const entry = this.#add("tool", `${chunk.toolName}(${args})`, { final: false, tool: true });
        this.tools.set(chunk.toolCallId, entry);
        break;
      }
      case "tool-approval-request": {
        const entry = this.tools.get(chunk.toolCallId);
        if (entry) this.#toolState(entry, "approval");
        break;
      }
      case "tool-output-available":
      case "tool-output-denied":
      case "tool-output-error": {
        const state = { "tool-output-available": "done", "tool-output-denied": "denied" }[chunk.type] ?? "error";
        const result = chunk.type === "tool-output-error" ? chunk.errorText : JSON.stringify(chunk.output);
        const entry = this.tools.get(chunk.toolCallId) ?? this.#add("tool", "tool", { tool: true });
        this.tools.delete(chunk.toolCallId);
        this.#toolState(entry, state, state === "denied" ? null : result);
        break;
      }
      case "file": {
        // An image the model returned: in the agent's entry of the turn.
        if (!chunk.mediaType?.startsWith("image/")) break;
        const turn = this.#openTurn();
        turn.agent ??= this.#add("agent", "", { final: false });
        turn.agent.images.push({ url: chunk.url, mediaType: chunk.mediaType });
        this.#changed(turn.agent);
        break;
      }
      case "data-interrupted": {
        const agent = this.turn?.agent;
        if (agent) {
          agent.interrupted = true;
          this.#changed(agent);
        }
        break;
      }
      case "finish": {
        const agent = this.turn?.agent;
        if (agent) {
          agent.final = true;
          this.#changed(agent);
        }
        this.turn = null;
        break;
      }
    }
  }
}
