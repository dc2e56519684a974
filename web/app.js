// The demo page: wires the UI to the audio engine and the /ws session.
//
// Flow: Connect (a click, so audio may start) -> AudioContext at the native
// rate -> worklets -> microphone -> socket with a `start` that declares that
// rate both ways -> conversation. Disconnect stops the mic tracks and closes
// the context; the session id is kept so the next Connect resumes it.
//
// State lives in one PageState (state.js): handlers change it through its
// methods and call render() (render.js), which paints the page from it. `live` holds the
// resources of the current connection. window.__demo is a read-only view of
// the state for tests and benchmarks; nothing here reads it back.
//
// Tools: the page speaks the tool protocol on its own socket (LiveSession,
// the same parsing the AI SDK transport in chat-transport.js builds on): an
// approval dialog answers `tool-approval-request`, and the browser runs the
// calls the server marks to run now (`clientExecutes`; browser-tools.js: the music,
// geolocation).
//
// Reconnect: a socket the server or the network dropped (reconnect.js says
// which closes) is opened again on the same session after a bounded backoff
// with jitter, while the pill says "Reconnecting…". The audio context and the
// microphone stay; the dropped turn's playback is cut; nothing the user sent
// is sent again; the server asks again about the approvals still pending.
//
// Background tasks: `start` carries the user's key (kept in localStorage),
// so the user's tasks follow them into every session; each `data-task`
// chunk updates that task's card in place, and a card's Cancel sends
// `task_cancel` (the next card confirms it).
//
// Memory: what the agent remembers about the user (memory.js), listed from
// the memory REST under the same key, with Forget per item.

import { AudioEngine, describeMicError } from "./audio.js";
import { runBrowserTool } from "./browser-tools.js";
import { Conversation } from "./conversation.js";
import { BackgroundMusic } from "./music.js";
import { TokenSource, tokenUrlFrom, withToken } from "./credentials.js";
import { MemoryPanel, memoryUrl } from "./memory.js";
import { Pcm16Decoder } from "./pcm.js";
import { LiveSession, clientExecutes, describeClose, localTimeZone, newUserKey, socketUrl } from "./session.js";
import { ImageInput } from "./image-input.js";
import { createView } from "./render.js";
import { TurnRecorder, replayElement, showReplay } from "./replay.js";
import { ReconnectPolicy } from "./reconnect.js";
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
  forget: $("forget"),
  approval: $("approval"),
  approvalTool: $("approval-tool"),
  approvalArgs: $("approval-args"),
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

/** The current connection's resources: {engine, music, session, decoder, statusTimer, muteTimer, retryTimer}. */
let live = null;
const reconnects = new ReconnectPolicy({ now: () => performance.now() });

// What the agent remembers about this user (memory.js): the key's, or the token owner's.
const memory = new MemoryPanel(
  document.getElementById("memory"),
  memoryUrl(serverUrl),
  async () =>
    tokens ? { authorization: `Bearer ${await tokens.token()}` } : { "x-user-key": userKey() },
  (message) => console.warn(message),
);

const { render, renderEntry, renderLevelSoon } = createView(ui, state);
const conversation = new Conversation(renderEntry);

window.__demo = state.view({
  memory: () => ({ items: memory.items, reads: memory.reads }),
  micSettings: () => live?.engine.micTrack?.getSettings() ?? null,
  /** What the figures do not include: the device's own output delay, ms. */
  outputLatencyMs() {
    const ctx = live?.engine.context;
    return ctx ? ((ctx.baseLatency ?? 0) + (ctx.outputLatency ?? 0)) * 1000 : null;
  },
  resources: () => ({
    context: live?.engine.context.state ?? null,
    tracks: live?.engine.stream?.getTracks().map((t) => t.readyState) ?? [],
    socket: live?.session?.ws?.readyState ?? null,
  }),
  /** The music bus's analyser now: {track, ducked, duckGain, dominantHz, levelDb}. */
  musicAnalysis: () => live?.music?.reading() ?? null,
});

function checkedMode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

function readSettings() {
  return {
    prebufferMs: Number(ui.prebuffer.value) || 0,
    binary: ui.binary.checked,
    localBargeIn: ui.localBargeIn.checked,
  };
}

// ------------------------------------------------------------------ actions
// (render.js paints the page; these change the state, then repaint.)

function cancelTask(id) {
  if (!state.taskCancelRequested(id)) return;
  if (!live?.session?.cancelTask(id)) state.taskCancelFailed(id);
  render();
}

function showMessage(text, kind) {
  state.showMessage(text, kind);
  render();
}

// ------------------------------------------------------------------ connect

async function connect() {
  if (live) return;
  state.connectRequested();
  if (!window.isSecureContext) {
    // Browsers give AudioWorklet and the microphone to secure pages only.
    state.showMessage(
      "This page needs a secure address for audio: open it over https://, or as " +
        "http://localhost on this machine.",
    );
    state.failed("Not connected");
    render();
    return;
  }
  let engine;
  try {
    // Synchronous, inside the click: creates and resumes the AudioContext.
    engine = new AudioEngine({
      onCaptureFrame,
      onPlaybackEvent,
      prebufferMs: state.settings.prebufferMs,
    });
  } catch (error) {
    showMessage(`Web Audio is not available in this browser: ${error.message}`);
    return;
  }
  const conn = {
    engine,
    music: null,
    session: null,
    decoder: new Pcm16Decoder(),
    recorder: new TurnRecorder(), // the turn's played audio, for its replay
    statusTimer: 0,
    muteTimer: 0,
    retryTimer: 0,
    // toolCallId -> the browser tool's result, until the server has it: a
    // result the lost socket did not carry goes on the next one, asked again.
    toolResults: new Map(),
  };
  live = conn;
  reconnects.reset();
  state.connecting(engine.sampleRate);
  render();
  try {
    await engine.startPlayback();
  } catch (error) {
    if (live === conn) await fail(`Audio playback could not start: ${error.message}`);
    return;
  }
  conn.music = new BackgroundMusic(engine.context);
  // The microphone and the socket in parallel; a denied mic still leaves a
  // typed conversation (with spoken answers).
  const mic = engine.startCapture().then(
    () => true,
    (error) => {
      if (live === conn) showMessage(describeMicError(error));
      return false;
    },
  );
  try {
    await openSocket(conn);
  } catch (error) {
    if (live === conn) await fail(error.message);
    return;
  }
  if (live !== conn) return; // disconnected meanwhile
  memory.refresh();
  const micOpen = await mic;
  if (live !== conn) return;
  state.connected({ micOpen });
  tokens?.keepFresh(); // a reconnect finds a fresh token ready
  watchDevices(engine);
  conn.statusTimer = setInterval(render, 250); // the status line's figures
  render();
}

/**
 * A socket for `conn` on the kept session (a first connect or a reconnect):
 * resolves once data-session arrived; rejects with the close's `detail`.
 */
async function openSocket(conn) {
  const url = tokens ? withToken(serverUrl, await tokens.token()) : serverUrl;
  if (live !== conn) return;
  const { engine } = conn;
  const session = new LiveSession(url, {
    inputRate: engine.sampleRate,
    inputFormat,
    outputRate: engine.sampleRate, // the server resamples to our rate; we never do
    binary: state.settings.binary,
    sessionId: state.resumeId ?? undefined,
    turnDetection: turnDetectionFor(state.mode),
    userKey: tokens ? undefined : userKey(), // a token's owner is the user
    timeZone: localTimeZone(),
  });
  conn.session = session;
  session.addEventListener("audio", onAudio);
  session.addEventListener("chunk", onChunk);
  const info = await session.open();
  if (live !== conn || conn.session !== session) {
    session.close();
    return;
  }
  session.addEventListener("closed", onClosed); // from now on a close is news to report
  reconnects.connected();
  onSession(info, session);
}

/** Connecting failed: say why and release what was started. */
async function fail(text) {
  showMessage(text);
  await teardown();
  state.failed("Not connected");
  render();
}

/** Tell the user when the browser pauses audio or the mic goes away. */
function watchDevices(engine) {
  const current = () => live?.engine === engine;
  engine.context.onstatechange = () => {
    if (!current() || engine.context.state === "running") return;
    if (engine.context.state === "closed") return;
    showMessage("The browser paused audio. Click or tap anywhere to resume.", "info");
    document.addEventListener(
      "pointerdown",
      () =>
        engine.context.resume().then(() => {
          if (!current()) return;
          state.clearMessage();
          render();
        }),
      { once: true },
    );
  };
  const track = engine.micTrack;
  if (track) {
    track.onended = () => {
      if (!current()) return;
      showMessage("The microphone stopped (unplugged or revoked). You can still type.");
    };
  }
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

async function disconnect() {
  if (!live) return;
  live.session?.close(1000, "user disconnect");
  await teardown();
  state.disconnected();
  render();
}

/** Release everything: socket, mic, context. The caller renders. */
async function teardown() {
  const conn = live;
  if (!conn) return;
  live = null;
  tokens?.stop();
  images.stopCamera();
  clearInterval(conn.statusTimer);
  clearTimeout(conn.muteTimer);
  clearTimeout(conn.retryTimer);
  reconnects.reset();
  state.closed();
  if (conn.session) {
    conn.session.removeEventListener("closed", onClosed);
    conn.session.close();
  }
  conn.music?.close();
  const { engine } = conn;
  const tracks = engine.stream?.getTracks() ?? [];
  await engine.close();
  const released = { tracks: tracks.map((t) => t.readyState), context: engine.context.state };
  state.resourcesReleased(released);
}

function onClosed(event) {
  // The server or the network ended the conversation (our own close is
  // handled by disconnect()).
  const conn = live;
  if (!conn || event.target !== conn.session) return;
  conn.session = null;
  event.target.removeEventListener("closed", onClosed);
  connectionLost(conn, event.detail);
}

/** The socket is gone: come back after the policy's wait, or give up and say why. */
function connectionLost(conn, detail) {
  const decision = reconnects.lost(detail);
  if (!decision.retry) {
    const advice = state.resumeId ? " Press Connect to resume the conversation." : "";
    showMessage(`${describeClose(detail)}${advice}`);
    teardown().then(() => {
      state.failed("Disconnected");
      render();
    });
    return;
  }
  if (state.connection !== "reconnecting") {
    // The answer in flight is cut cleanly, and its late audio never plays.
    flushPlayback("connection-lost");
    conn.recorder.take();
    clearTimeout(conn.muteTimer);
    state.connectionLost();
    conversation.connectionLost();
  }
  state.reconnecting({ attempt: decision.attempt, maxAttempts: reconnects.policy.maxAttempts });
  const seconds = Math.max(1, Math.round(decision.delayMs / 1000));
  showMessage(`${describeClose(detail)} Reconnecting in ${seconds} s…`, "info");
  conn.retryTimer = setTimeout(() => reconnect(conn), decision.delayMs);
}

async function reconnect(conn) {
  if (live !== conn) return;
  try {
    await openSocket(conn);
  } catch (error) {
    if (live === conn) connectionLost(conn, error.detail ?? { code: 1006, opened: false });
    return;
  }
  if (live !== conn) return;
  state.clearMessage();
  state.connected({ micOpen: state.micOpen });
  render();
}

// ------------------------------------------------------------------ capture

function onCaptureFrame({ frame, rms, time }) {
  state.frameCaptured(rms);
  renderLevelSoon();
  const session = live?.session;
  if (!session?.connected || !state.sendsAudio) return;
  if (state.frameSent({ sent: session.sendAudio(frame), time })) interruptLocal("speech");
}

// ------------------------------------------------------------------ playback

function onAudio({ detail }) {
  if (state.muted || !live) return; // audio of a turn we interrupted, still in flight
  const samples = live.decoder.decode(detail.bytes);
  if (!samples.length) return;
  state.audioReceived(samples.length);
  live.engine.play(samples);
  live.recorder.add(detail.bytes);
}

/** After an answer that streamed audio: its replay, as the seed's client makes it. */
let replays = 0;
function replayAnswer(finish) {
  const taken = live?.recorder.take();
  const reported = finish.messageMetadata?.audio;
  const rate = live?.session?.info?.output?.sampleRate;
  if (!taken || !reported || !rate) return;
  showReplay(ui.log, replayElement(document, taken, rate, reported, `answer-${++replays}`));
}

function onPlaybackEvent(msg) {
  state.playbackEvent(msg, performance.now());
  if (state.duckMusic()) live?.music?.duck(state.music.ducked);
  if (msg.type === "started") render(); // a new reply latency for the status line
}

function flushPlayback(reason) {
  if (!live) return;
  const { engine, decoder } = live;
  const contextTime = engine.context.currentTime;
  engine.flush(state.flushRequested({ reason, at: performance.now(), contextTime }));
  decoder.reset();
}

/** Barge-in from this side: silence now, tell the server, drop late audio. */
function interruptLocal(reason) {
  const conn = live;
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
      live?.engine.endTurn();
      live?.decoder.reset();
      break;
    case "data-interrupted":
      if (state.muted) {
        // The answer to our own interrupt: everything after it is new audio.
        state.unmute();
        clearTimeout(live?.muteTimer);
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
    case "error":
      state.serverError(chunk.errorText);
      render();
      break;
  }
}

// ------------------------------------------------------------------ tools

function onToolChunk(chunk) {
  const run = state.toolChunk(chunk);
  if (run) runTool(run, live);
  else if (chunk.type === "tool-input-available" && clientExecutes(chunk)) {
    // Asked again after a reconnect to run a call that already ran here.
    const result = live?.toolResults.get(chunk.toolCallId);
    if (result) live.session?.toolResult(chunk.toolCallId, result);
  }
  if (chunk.type.startsWith("tool-output-")) live?.toolResults.delete(chunk.toolCallId);
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
  if (live !== conn) return;
  conn.toolResults.set(call.toolCallId, result);
  conn.session?.toolResult(call.toolCallId, result);
  render();
}

function answerApproval(approved) {
  const request = state.approval;
  if (!request) return;
  state.approvalAnswered(request.approvalId, approved);
  conversation.toolAnswered(request.toolCallId, approved);
  live?.session?.toolApproval(request.approvalId, approved);
  render();
}

// ------------------------------------------------------------------ turns

function sendText(text) {
  text = text.trim();
  const session = live?.session;
  if ((!text && !images.attachment) || !session?.connected) return false;
  const image = images.take();
  text ||= "What is in this image?"; // an image alone still asks something
  if (state.agentAudible) interruptLocal("typed");
  if (image) session.sendImage(image);
  session.sendText(text);
  conversation.userTyped(text, image ? [image] : []);
  state.userTurnEnded(live.engine.context.currentTime);
  return true;
}

// ------------------------------------------------------------------ images

const images = new ImageInput(ui, {
  sendFrame: (frame) => live?.session?.sendImage(frame) ?? false,
  showError: (text) => showMessage(text),
});

function pttDown() {
  const session = live?.session;
  if (state.talking || !session?.connected || !state.micOpen) return;
  state.pttPressed();
  render();
  if (state.agentAudible) interruptLocal("push-to-talk");
  session.activityStart();
}

function pttUp() {
  if (!state.talking) return;
  state.pttReleased(live?.engine.context.currentTime);
  render();
  live?.session?.activityEnd();
}

async function onModeChange() {
  const mode = checkedMode();
  state.modeChanged(mode);
  render();
  pttUp();
  // Turn detection is negotiated per socket, in `start`: another mode is a
  // fresh socket on the same session. Still connecting: what this socket asked for.
  const session = live?.session;
  if (session && state.needsReconnect((session.info ?? session.options).turnDetection)) {
    conversation.notice(`Switching to ${mode}: reconnecting…`);
    await disconnect();
    await connect();
  }
}

// ------------------------------------------------------------------ wiring

ui.connect.addEventListener("click", () => connect());
ui.approve.addEventListener("click", () => answerApproval(true));
ui.deny.addEventListener("click", () => answerApproval(false));
ui.approval.addEventListener("cancel", (event) => {
  event.preventDefault(); // the dialog closes when the state says so
  answerApproval(false);
});
ui.disconnect.addEventListener("click", () => disconnect());
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

for (const control of [ui.prebuffer, ui.binary, ui.localBargeIn]) {
  control.addEventListener("change", () => state.settingsChanged(readSettings()));
}
ui.prebuffer.addEventListener("change", () => {
  live?.engine.setPrebuffer(state.settings.prebufferMs);
});
ui.forget.addEventListener("click", () => {
  localStorage.removeItem(SESSION_KEY);
  state.sessionForgotten();
  conversation.entries.length = 0;
  entryElements.clear();
  ui.log.replaceChildren();
  conversation.notice("Session forgotten: the next Connect starts a new conversation.");
  render();
});
window.addEventListener("pagehide", () => {
  live?.session?.close(1001, "page closed");
});

render();
