// The demo page: wires the UI to the audio engine and the /ws session.
//
// The connection (connection.js) opens the audio and the socket on Connect,
// reconnects a dropped socket on the same session, and releases everything
// on Disconnect; `connection.live` holds the current connection's resources.
//
// State lives in one PageState (state.js): handlers change it through its
// methods and call render() (render.js), which paints the page from it.
// window.__demo is a read-only view of the state for tests and benchmarks;
// nothing here reads it back.
//
// Tools: the page speaks the tool protocol on its own socket (LiveSession,
// the same parsing the AI SDK transport in sdk/chat-transport.js builds on): an
// approval dialog answers `tool-approval-request`, and the browser runs the
// calls the server marks to run now (`clientExecutes`; browser-tools.js: the music,
// geolocation).
//
// Background tasks: `start` carries the user's key (kept in localStorage),
// so the user's tasks follow them into every session; each `data-task`
// chunk updates that task's card in place, and a card's Cancel sends
// `task_cancel` (the next card confirms it).
//
// Memory: what the agent remembers about the user (memory.js), listed from
// the memory REST under the same key, with Forget per item.

import { AudioEngine } from "./audio.js";
import { runBrowserTool } from "./browser-tools.js";
import { Conversation } from "./conversation.js";
import { BackgroundMusic } from "./music.js";
import { TokenSource, tokenUrlFrom, withToken } from "./credentials.js";
import { PageConnection } from "./connection.js";
import { MemoryPanel, memoryUrl } from "./memory.js";
import { LiveSession, clientExecutes, localTimeZone, newUserKey, socketUrl } from "./sdk/session.js";
import { ImageInput } from "./image-input.js";
import { createView } from "./render.js";
import { replayElement, showReplay } from "./replay.js";
import { ReconnectPolicy } from "./sdk/reconnect.js";
import { PageState, turnDetectionFor } from "./state.js";

const $ = (id) => document.getElementById(id);
const ui = {
  state: $("state"),
  connect: $("connect"),
  disconnect: $("disconnect"),
  interrupt: $("interrupt"),
  ptt: $("ptt"),
  level: $("level"),
  levelFill: $("level").querySelector(".fill"),
  message: $("message"),
  tasks: $("tasks"),
  log: $("log"),
  compose: $("compose"),
  text: $("text"),
  send: $("send"),
  attach: $("attach"),
  attachButton: $("attach-button"),
  attached: $("attached"),
  camera: $("camera"),
  cameraPreview: $("camera-preview"),
  status: $("status"),
  prebuffer: $("prebuffer"),
  binary: $("binary"),
  localBargeIn: $("local-barge-in"),
  serverAec: $("server-aec"),
  forget: $("forget"),
  approval: $("approval"),
  approvalTool: $("approval-tool"),
  approvalArgs: $("approval-args"),
  approvalWhat: $("approval-what"),
  approve: $("approval-approve"),
  deny: $("approval-deny"),
};

const SESSION_KEY = "audiocore.sessionId";
const USER_KEY = "audiocore.userKey";
const UNMUTE_AFTER_MS = 2000; // give up waiting for the server's data-interrupted

// URL overrides (?prebuffer=80&binary=0&input=s16&mode=push-to-talk, and
// ?server=wss://host/ws for a server other than the page's own).
const params = new URLSearchParams(location.search);
if (params.has("prebuffer")) ui.prebuffer.value = params.get("prebuffer");
if (params.has("binary")) ui.binary.checked = params.get("binary") !== "0";
if (params.has("aec")) ui.serverAec.checked = params.get("aec") === "server";
if (params.get("mode") === "push-to-talk") {
  document.querySelector('input[name="mode"][value="push-to-talk"]').checked = true;
}
const inputFormat = params.get("input") === "s16" ? "s16" : "f32";
const serverUrl = params.get("server") ?? socketUrl(location);
// A server that requires credentials: tokens from the operator's URL (credentials.js).
const tokenUrl = tokenUrlFrom(params, document);
const tokens = tokenUrl ? new TokenSource(tokenUrl) : null;

// ------------------------------------------------------------------ state

/** This browser's user key: made once, then kept (Forget keeps it too). */
function userKey() {
  let key = localStorage.getItem(USER_KEY);
  if (!key) {
    key = newUserKey();
    localStorage.setItem(USER_KEY, key);
  }
  return key;
}

const state = new PageState({
  mode: checkedMode(),
  settings: readSettings(),
  resumeId: localStorage.getItem(SESSION_KEY),
});


// What the agent remembers about this user (memory.js): the key's, or the token owner's.
const memory = new MemoryPanel(
  document.getElementById("memory"),
  memoryUrl(serverUrl),
  async () =>
    tokens ? { authorization: `Bearer ${await tokens.token()}` } : { "x-user-key": userKey() },
  (message) => console.warn(message),
);

const { render, renderEntry, renderLevelSoon, clearEntries } = createView(ui, state);
const conversation = new Conversation(renderEntry);

window.__demo = state.view({
  memory: () => ({ items: memory.items, reads: memory.reads }),
  micSettings: () => connection.live?.engine.micTrack?.getSettings() ?? null,
  /** What the figures do not include: the device's own output delay, ms. */
  outputLatencyMs() {
    const ctx = connection.live?.engine.context;
    return ctx ? ((ctx.baseLatency ?? 0) + (ctx.outputLatency ?? 0)) * 1000 : null;
  },
  resources: () => ({
    context: connection.live?.engine.context.state ?? null,
    tracks: connection.live?.engine.stream?.getTracks().map((t) => t.readyState) ?? [],
    socket: connection.live?.session?.ws?.readyState ?? null,
  }),
  /** The music bus's analyser now: {track, ducked, duckGain, dominantHz, levelDb}. */
  musicAnalysis: () => connection.live?.music?.reading() ?? null,
});

function checkedMode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

function readSettings() {
  return {
    prebufferMs: Number(ui.prebuffer.value) || 0,
    binary: ui.binary.checked,
    localBargeIn: ui.localBargeIn.checked,
    serverEchoCancellation: ui.serverAec.checked,
  };
}

// ------------------------------------------------------------------ actions
// (render.js paints the page; these change the state, then repaint.)

function cancelTask(id) {
  if (!state.taskCancelRequested(id)) return;
  if (!connection.live?.session?.cancelTask(id)) state.taskCancelFailed(id);
  render();
}

function showMessage(text, kind) {
  state.showMessage(text, kind);
  render();
}

// ------------------------------------------------------------------ connect

/** A LiveSession, not yet open, at the engine's rate on the kept session (with a fresh token if needed). */
async function newSession(engine) {
  const url = tokens ? withToken(serverUrl, await tokens.token()) : serverUrl;
  return new LiveSession(url, {
    inputRate: engine.sampleRate,
    inputFormat,
    outputRate: engine.sampleRate, // the server resamples to our rate; we never do
    binary: state.settings.binary,
    sessionId: state.resumeId ?? undefined,
    turnDetection: turnDetectionFor(state.mode),
    echoCancellation: state.settings.serverEchoCancellation ? "server" : undefined,
    userKey: tokens ? undefined : userKey(), // a token's owner is the user
    timeZone: localTimeZone(),
    // The app to talk to, when the server has several: the page's ?app=.
    app: new URLSearchParams(location.search).get("app") ?? undefined,
  });
}

function onSession(info, session) {
  state.sessionOpened(info, session.stats);
  localStorage.setItem(SESSION_KEY, info.sessionId);
  if (state.connection === "reconnecting") {
    // The page shows the conversation already: its history is not added again.
    conversation.notice(
      info.resumed
        ? "Reconnected: the session resumed."
        : "Reconnected, but the server did not know the session: a new conversation starts.",
    );
  } else if (info.resumed) {
    if (!conversation.entries.length) conversation.loadHistory(info.history);
    conversation.notice(`Resumed the session (${info.history?.length ?? 0} earlier messages).`);
  }
  const rate = state.sampleRate;
  if (info.output.sampleRate !== rate) {
    showMessage(`The server sends ${info.output.sampleRate} Hz audio to a ${rate} Hz player.`);
  }
}

const connection = new PageConnection({
  state,
  render,
  showMessage,
  reconnects: new ReconnectPolicy({ now: () => performance.now() }),
  secure: window.isSecureContext,
  newEngine: () =>
    new AudioEngine({
      onCaptureFrame,
      onPlaybackEvent,
      prebufferMs: state.settings.prebufferMs,
      serverEchoCancellation: state.settings.serverEchoCancellation,
    }),
  newMusic: (context) => new BackgroundMusic(context),
  newSession,
  on: {
    audio: onAudio,
    chunk: onChunk,
    opened: onSession,
    ready: () => memory.refresh(),
    connected: () => tokens?.keepFresh(), // a reconnect finds a fresh token ready
    dropped: () => {
      flushPlayback("connection-lost");
      conversation.connectionLost();
    },
    released: () => {
      tokens?.stop();
      images.stopCamera();
    },
  },
});

// ------------------------------------------------------------------ capture

function onCaptureFrame({ frame, rms, time }) {
  state.frameCaptured(rms);
  renderLevelSoon();
  const session = connection.live?.session;
  if (!session?.connected || !state.sendsAudio) return;
  if (state.frameSent({ sent: session.sendAudio(frame), time })) interruptLocal("speech");
}

// ------------------------------------------------------------------ playback

function onAudio({ detail }) {
  if (state.muted || !connection.live) return; // audio of a turn we interrupted, still in flight
  const samples = connection.live.decoder.decode(detail.bytes);
  if (!samples.length) return;
  state.audioReceived(samples.length);
  connection.live.engine.play(samples);
  connection.live.recorder.add(detail.bytes);
}

/** After an answer that streamed audio: its replay, as the seed's client makes it. */
let replays = 0;
function replayAnswer(finish) {
  const taken = connection.live?.recorder.take();
  const reported = finish.messageMetadata?.audio;
  const rate = connection.live?.session?.info?.output?.sampleRate;
  if (!taken || !reported || !rate) return;
  showReplay(ui.log, replayElement(document, taken, rate, reported, `answer-${++replays}`));
}

function onPlaybackEvent(msg) {
  state.playbackEvent(msg, performance.now());
  if (state.duckMusic()) connection.live?.music?.duck(state.music.ducked);
  if (msg.type === "started") render(); // a new reply latency for the status line
}

function flushPlayback(reason) {
  if (!connection.live) return;
  const { engine, decoder } = connection.live;
  const contextTime = engine.context.currentTime;
  engine.flush(state.flushRequested({ reason, at: performance.now(), contextTime }));
  decoder.reset();
}

/** Barge-in from this side: silence now, tell the server, drop late audio. */
function interruptLocal(reason) {
  const conn = connection.live;
  if (!conn?.session?.connected) return;
  flushPlayback(reason);
  state.muteUntilAnswered();
  clearTimeout(conn.muteTimer);
  conn.muteTimer = setTimeout(() => state.unmute(), UNMUTE_AFTER_MS);
  conn.session.interrupt();
}

// ------------------------------------------------------------------ chunks

function onChunk({ detail: chunk }) {
  state.chunkReceived(chunk);
  conversation.apply(chunk);
  // Read before onToolChunk resolves the call: whose answer this is.
  const remembering =
    chunk.type === "tool-output-available" &&
    state.toolCalls.get(chunk.toolCallId)?.toolName === "user_memory";
  if (chunk.type.startsWith("tool-")) onToolChunk(chunk);
  if (remembering) memory.refresh(); // the agent remembered or forgot something
  switch (chunk.type) {
    case "finish":
      replayAnswer(chunk);
      connection.live?.engine.endTurn();
      connection.live?.decoder.reset();
      break;
    case "data-interrupted":
      if (state.muted) {
        // The answer to our own interrupt: everything after it is new audio.
        state.unmute();
        clearTimeout(connection.live?.muteTimer);
      } else {
        flushPlayback(`server:${chunk.data?.source ?? "model"}`);
      }
      break;
    case "data-task":
      state.taskChanged(chunk.data);
      render();
      break;
    case "data-speech":
      state.speechChanged(chunk.data ?? {});
      render();
      break;
    case "data-confirmation":
      state.confirmationAsked(chunk.data ?? {}); // its approval request follows
      break;
    case "error":
      state.serverError(chunk.errorText);
      render();
      break;
  }
}

// ------------------------------------------------------------------ tools

function onToolChunk(chunk) {
  const run = state.toolChunk(chunk);
  if (run) runTool(run, connection.live);
  else if (chunk.type === "tool-input-available" && clientExecutes(chunk)) {
    // Asked again after a reconnect to run a call that already ran here.
    const result = connection.live?.toolResults.get(chunk.toolCallId);
    if (result) connection.live.session?.toolResult(chunk.toolCallId, result);
  }
  if (chunk.type.startsWith("tool-output-")) connection.live?.toolResults.delete(chunk.toolCallId);
  render(); // the dialog opens or closes
}

/** The browser runs a tool the server asked for, and answers with its result. */
async function runTool(call, conn) {
  const result = await runBrowserTool(call, {
    music: conn?.music ?? null,
    geolocation: navigator.geolocation,
  });
  if (call.toolName === "change_bgm" && !result.errorText) state.musicChanged(result.output.track);
  state.toolRan(call, result);
  // Disconnected meanwhile: the server resolves the call itself. Reconnecting:
  // kept until the server asks again on the next socket.
  if (connection.live !== conn) return;
  conn.toolResults.set(call.toolCallId, result);
  conn.session?.toolResult(call.toolCallId, result);
  render();
}

function answerApproval(approved) {
  const request = state.approval;
  if (!request) return;
  state.approvalAnswered(request.approvalId, approved);
  conversation.toolAnswered(request.toolCallId, approved);
  connection.live?.session?.toolApproval(request.approvalId, approved);
  render();
}

// ------------------------------------------------------------------ turns

function sendText(text) {
  text = text.trim();
  const session = connection.live?.session;
  if ((!text && !images.attachment) || !session?.connected) return false;
  const image = images.take();
  text ||= "What is in this image?"; // an image alone still asks something
  if (state.agentAudible) interruptLocal("typed");
  if (image) session.sendImage(image);
  session.sendText(text);
  conversation.userTyped(text, image ? [image] : []);
  state.userTurnEnded(connection.live.engine.context.currentTime);
  return true;
}

// ------------------------------------------------------------------ images

const images = new ImageInput(ui, {
  sendFrame: (frame) => connection.live?.session?.sendImage(frame) ?? false,
  showError: (text) => showMessage(text),
});

function pttDown() {
  const session = connection.live?.session;
  if (state.talking || !session?.connected || !state.micOpen) return;
  state.pttPressed();
  render();
  if (state.agentAudible) interruptLocal("push-to-talk");
  session.activityStart();
}

function pttUp() {
  if (!state.talking) return;
  state.pttReleased(connection.live?.engine.context.currentTime);
  render();
  connection.live?.session?.activityEnd();
}

async function onModeChange() {
  const mode = checkedMode();
  state.modeChanged(mode);
  render();
  pttUp();
  // Turn detection is negotiated per socket, in `start`: another mode is a
  // fresh socket on the same session. Still connecting: what this socket asked for.
  const session = connection.live?.session;
  if (session && state.needsReconnect((session.info ?? session.options).turnDetection)) {
    conversation.notice(`Switching to ${mode}: reconnecting…`);
    await connection.disconnect();
    await connection.connect();
  }
}

// ------------------------------------------------------------------ wiring

ui.connect.addEventListener("click", () => connection.connect());
ui.approve.addEventListener("click", () => answerApproval(true));
ui.deny.addEventListener("click", () => answerApproval(false));
ui.approval.addEventListener("cancel", (event) => {
  event.preventDefault(); // the dialog closes when the state says so
  answerApproval(false);
});
ui.disconnect.addEventListener("click", () => connection.disconnect());
ui.tasks.addEventListener("click", (event) => {
  const button = event.target.closest?.("button.task-cancel");
  if (button) cancelTask(button.dataset.taskId);
});
ui.interrupt.addEventListener("click", () => interruptLocal("button"));
ui.compose.addEventListener("submit", (event) => {
  event.preventDefault();
  if (sendText(ui.text.value)) ui.text.value = "";
});
for (const radio of document.querySelectorAll('input[name="mode"]')) {
  radio.addEventListener("change", onModeChange);
}
ui.ptt.addEventListener("pointerdown", (event) => {
  ui.ptt.setPointerCapture(event.pointerId);
  pttDown();
});
for (const type of ["pointerup", "pointercancel", "lostpointercapture"]) {
  ui.ptt.addEventListener(type, pttUp);
}

/** Space belongs to text fields, not to push-to-talk. */
function typingInto(target) {
  return target.matches?.('input[type="text"], input[type="number"], textarea, select') ?? false;
}

/** The space bar is push-to-talk's, except in a text field or the approval dialog. */
function isTalkKey(event) {
  return (
    event.code === "Space" &&
    state.mode === "push-to-talk" &&
    !typingInto(event.target) &&
    !ui.approval.open
  );
}

document.addEventListener("keydown", (event) => {
  // In the dialog, Escape denies (its cancel event); an interrupt would
  // cancel the very call the user is deciding about.
  if (event.key === "Escape" && !ui.approval.open) interruptLocal("escape");
  if (!isTalkKey(event)) return;
  event.preventDefault(); // no page scroll, no button "click"
  if (!event.repeat) pttDown();
});
document.addEventListener("keyup", (event) => {
  if (!isTalkKey(event)) return;
  event.preventDefault();
  pttUp();
});
window.addEventListener("blur", pttUp); // a key released elsewhere never reaches us

for (const control of [ui.prebuffer, ui.binary, ui.localBargeIn, ui.serverAec]) {
  control.addEventListener("change", () => state.settingsChanged(readSettings()));
}
ui.prebuffer.addEventListener("change", () => {
  connection.live?.engine.setPrebuffer(state.settings.prebufferMs);
});
ui.forget.addEventListener("click", () => {
  localStorage.removeItem(SESSION_KEY);
  state.sessionForgotten();
  conversation.entries.length = 0;
  clearEntries();
  conversation.notice("Session forgotten: the next Connect starts a new conversation.");
  render();
});
window.addEventListener("pagehide", () => {
  connection.live?.session?.close(1001, "page closed");
});

render();
