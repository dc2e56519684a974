// Painting the demo page from its state: the connection controls, the
// approval dialog, the message line, the task cards, the status line, the
// level meter and the conversation's entries. app.js owns the state and
// calls these after every change; nothing here changes the state.

import { TOOL_STATES } from "./conversation.js";
import { imageElement } from "./images.js";
import { markdownElements } from "./markdown.js";
import { taskCancellable, taskOffersCancel } from "./state.js";
import { taskCardText } from "./task-card.js";

/** The page's painters over `ui` (its elements) and `state` (a PageState). */
export function createView(ui, state) {
  const CONNECTION_LABELS = {
    idle: "Disconnected",
    connecting: "Connecting…",
    connected: "Connected",
    reconnecting: "Reconnecting…",
  };

  /** Paint the page from `state`; called after every change the page shows. */
  function render() {
    const connected = state.connection === "connected";
    const busy = ["connecting", "reconnecting"].includes(state.connection) || connected;
    ui.state.dataset.state = state.connection;
    setText(ui.state, state.connectionLabel ?? CONNECTION_LABELS[state.connection]);
    // One of the two at a time, in the same place; keyboard focus follows.
    const focused = document.activeElement;
    ui.connect.hidden = ui.connect.disabled = busy;
    ui.disconnect.hidden = ui.disconnect.disabled = !busy;
    if (focused === ui.connect && busy) ui.disconnect.focus();
    if (focused === ui.disconnect && !busy) ui.connect.focus();
    setText(ui.connect, state.resumeId ? "Connect (resume)" : "Connect");
    setText(ui.disconnect, connected ? "Disconnect" : "Cancel");
    ui.interrupt.disabled = !connected;
    ui.text.disabled = ui.send.disabled = !connected;
    ui.attach.disabled = ui.attachButton.disabled = ui.camera.disabled = !connected;
    ui.ptt.hidden = state.mode !== "push-to-talk";
    ui.ptt.disabled = !connected || !state.micOpen;
    ui.ptt.setAttribute("aria-pressed", String(state.talking));
    renderHint();
    renderApproval();
    renderMessage();
    renderTasks();
    renderStatus();
    renderLevel();
  }

  /** Only on change: the pill and the message are live regions. */
  function setText(el, text) {
    if (el.textContent !== text) el.textContent = text;
  }

  /** The empty conversation's hint says what to do next. */
  function renderHint() {
    const hint = ui.log.querySelector(".empty");
    if (!hint) return;
    let text = "Listening. Just speak, or type a message.";
    if (state.connection !== "connected") text = "Press Connect and speak, or type a message.";
    else if (!state.micOpen) text = "Type a message below.";
    else if (state.mode === "push-to-talk") {
      text = "Hold the button (or Space) while you talk, or type a message.";
    }
    setText(hint, text);
  }

  /** The approval dialog: open while a request waits, focus in and back out. */
  const ASK_TO_RUN = "The agent asks to run this tool with these arguments:";
  let focusBeforeDialog = null;
  let dialogFor = null; // the approval id the dialog shows

  function renderApproval() {
    const request = state.approval;
    const dialog = ui.approval;
    if (request && dialogFor !== request.approvalId) {
      dialogFor = request.approvalId;
      setText(ui.approvalTool, request.toolName);
      setText(ui.approvalArgs, JSON.stringify(request.input, null, 2));
      // An ADK tool's own question (its confirmation hint), else ours.
      setText(ui.approvalWhat, request.hint || ASK_TO_RUN);
      if (!dialog.open) {
        focusBeforeDialog = document.activeElement;
        dialog.showModal();
      }
      ui.approve.focus(); // Enter approves, Escape denies
    } else if (!request && dialog.open) {
      dialogFor = null;
      dialog.close();
      focusBeforeDialog?.focus?.();
      focusBeforeDialog = null;
    }
  }

  function renderMessage() {
    const { message } = state;
    ui.message.hidden = !message;
    setText(ui.message, message?.text ?? "");
    if (message) ui.message.dataset.kind = message.kind;
  }

  // The task cards, each updated in place: id -> {el, card, connected} as painted.
  const taskElements = new Map();

  function renderTasks() {
    ui.tasks.hidden = state.tasks.size === 0;
    const connected = state.connection === "connected";
    for (const card of state.tasks.values()) {
      let painted = taskElements.get(card.id);
      if (!painted) {
        const el = document.createElement("article");
        el.className = "task";
        el.id = `task-${card.id}`;
        painted = { el };
        taskElements.set(card.id, painted);
        ui.tasks.append(el);
      }
      // Cards are replaced, never changed: the same object is the same card.
      if (painted.card === card && painted.connected === connected) continue;
      paintTask(painted.el, card, connected);
      Object.assign(painted, { card, connected });
    }
  }

  /** A card: the objective, the status and stage, an agent's permission
   * question, then progress, the result or the error (task-card.js words it). */
  function paintTask(el, card, connected) {
    const text = taskCardText(card);
    const parts = [
      textElement("span", "task-objective", card.objective),
      textElement("span", "task-state", text.status),
    ];
    if (text.stage) parts.push(textElement("span", "task-stage", text.stage));
    if (text.question) parts.push(textElement("strong", "task-permission", text.question));
    if (text.detail) parts.push(textElement("span", "task-detail", text.detail));
    if (taskOffersCancel(card)) {
      const cancel = document.createElement("button");
      cancel.type = "button";
      cancel.className = "task-cancel";
      cancel.dataset.taskId = card.id;
      cancel.disabled = !taskCancellable(card) || !connected; // the cancel goes on the socket
      cancel.textContent = "Cancel";
      cancel.setAttribute("aria-label", `Cancel the task: ${card.objective}`);
      parts.push(cancel);
    }
    el.replaceChildren(...parts);
    el.dataset.state = card.state;
    el.dataset.asking = String(!!text.question);
  }

  /** An element showing `text` as text, never as markup (it may come from an agent). */
  function textElement(tag, className, text) {
    const node = document.createElement(tag);
    node.className = className;
    node.textContent = text;
    return node;
  }


  function renderStatus() {
    const info = state.session;
    if (state.connection !== "connected" || !info) return; // the last figures stay
    const p = state.playback;
    const last = state.latencies.at(-1);
    const dropped = state.socketStats?.framesDropped ?? 0;
    const bufferMs = Math.round((p.bufferedSamples / state.sampleRate) * 1000);
    const items = [
      // While the server hears the user speak (data-speech), first of all.
      ...(state.listening ? [["listening", false, "speech"]] : []),
      [`in ${info.input.sampleRate} Hz ${info.input.format}`],
      [`out ${info.output.sampleRate} Hz s16 ${info.output.binary ? "binary" : "base64"}`],
      [`buffer ${bufferMs} ms`],
      [`underruns ${p.underruns}`, p.underruns > 0],
      [`reply latency ${last === undefined ? "–" : `${Math.round(last)} ms`}`],
      [`model ${info.model}`],
    ];
    if (dropped) items.push([`mic frames dropped ${dropped}`, true]);
    ui.status.replaceChildren(
      ...items.map(([text, warn, role]) => {
        const span = document.createElement("span");
        span.textContent = text;
        if (warn) span.dataset.warn = "true";
        if (role) span.dataset.role = role;
        return span;
      }),
    );
  }

  function renderLevel() {
    const db = Math.max(-60, Math.min(0, state.capture.dbfs));
    ui.levelFill.style.width = `${((db + 60) / 60) * 100}%`;
    ui.level.setAttribute("aria-valuenow", db.toFixed(0));
    ui.level.setAttribute("aria-valuetext", db <= -60 ? "silent" : `${db.toFixed(0)} dB`);
    ui.level.dataset.voiced = String(state.capture.speaking);
  }

  /** `fn` at most once per display frame, however often it is asked for. */
  function oncePerFrame(fn) {
    let frame = 0;
    return () => {
      frame ||= requestAnimationFrame(() => {
        frame = 0;
        fn();
      });
    };
  }

  // The meter changes with every 20 ms capture frame: repaint it alone.
  const renderLevelSoon = oncePerFrame(renderLevel);

  // The conversation renders itself entry by entry (conversation.js says where).
  const entryElements = new Map();

  function renderEntry(entry, { isNew, before }) {
    let el = entryElements.get(entry.id);
    if (isNew) {
      ui.log.querySelector(".empty")?.remove();
      // An inline result holds blocks (paragraphs, lists, code): a div.
      el = document.createElement(entry.role === "inline" ? "div" : "p");
      el.className = `entry ${entry.role}`;
      el.id = entry.id;
      entryElements.set(entry.id, el);
      const anchor = before && entryElements.get(before.id);
      ui.log.insertBefore(el, anchor ?? null);
    }
    if (entry.role === "tool") renderTool(el, entry);
    else if (entry.role === "inline") el.replaceChildren(...markdownElements(document, entry.text));
    else el.textContent = entry.text;
    const alt = entry.role === "user" ? "An image you sent" : "An image from the agent";
    if (entry.images?.length) el.append(...entry.images.map((image) => imageElement(image, alt)));
    el.dataset.final = String(entry.final);
    el.dataset.interrupted = String(entry.interrupted);
    ui.log.scrollTop = ui.log.scrollHeight;
  }

  /** A tool entry: the call, its state in words, and its result. */
  function renderTool(el, entry) {
    const call = document.createElement("span");
    call.textContent = entry.text;
    const badge = document.createElement("span");
    badge.className = "tool-state";
    badge.textContent = TOOL_STATES[entry.state] ?? entry.state;
    const parts = [call, badge];
    if (entry.result !== null) {
      const result = document.createElement("span");
      result.className = "tool-result";
      result.textContent = `→ ${entry.result}`;
      parts.push(result);
    }
    el.replaceChildren(...parts);
    el.dataset.state = entry.state;
  }

  /** The log emptied (the session forgotten): its entries and their elements. */
  function clearEntries() {
    entryElements.clear();
    ui.log.replaceChildren();
  }

  return { render, renderEntry, renderLevelSoon, clearEntries };
}
