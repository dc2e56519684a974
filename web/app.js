// The demo page: wires the UI to the audio engine and the /ws session.
//
// Flow: Connect (a click, so audio may start) -> AudioContext at the native
// rate -> worklets -> microphone -> socket with a `start` that declares that
// rate both ways -> conversation. Disconnect stops the mic tracks and closes
// the context; the session id is kept so the next Connect resumes it.
//
// window.__demo exposes counters for tests and benchmarks (see `demo` below).

import { AudioEngine, describeMicError } from "./audio.js";
import { Conversation } from "./conversation.js";
import { Pcm16Decoder } from "./pcm.js";
import { LiveSession, describeClose, socketUrl } from "./session.js";

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
  log: $("log"),
  compose: $("compose"),
  text: $("text"),
  send: $("send"),
  status: $("status"),
  prebuffer: $("prebuffer"),
  binary: $("binary"),
  localBargeIn: $("local-barge-in"),
  forget: $("forget"),
};

const SESSION_KEY = "audiocore.sessionId";
const VOICE_RMS = 10 ** (-40 / 20); // -40 dBFS, the offline model's VAD threshold
const BARGE_IN_FRAMES = 3; // 60 ms of speech over the agent before we cut it off
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

// ------------------------------------------------------------------ state

let engine = null; // AudioEngine while connected
let session = null; // LiveSession while connected
let decoder = new Pcm16Decoder();
let muted = false; // after a local interrupt: drop audio until data-interrupted
let muteTimer = 0;
let talking = false; // push-to-talk held
let usedPushToTalk = false; // this socket has sent activity_start
let voicedRun = 0;
let userEndedAt = -1; // context time the user's last turn ended (speech, release, send)
let lastReplyAt = -1; // context time the last reply started playing
let flushSeq = 0;
const pendingFlushes = new Map();
let statusTimer = 0;

const demo = {
  state: "idle",
  mode: currentMode(),
  session: null, // data-session's data
  errors: [], // messages shown to the user
  serverErrors: [], // `error` chunks
  capture: { frames: 0, sent: 0, voiced: 0, dbfs: -Infinity },
  playback: { samplesPlayed: 0, underruns: 0, bufferedSamples: 0, state: "idle" },
  events: { started: 0, underrun: 0, ended: 0, silent: 0 },
  received: { samples: 0, audioMessages: 0, chunks: {} },
  flushes: [], // {reason, roundTripMs, contextMs, fadeMs}
  latencies: [], // end of user turn -> first reply sample rendered, ms
  released: null, // after a disconnect: what was released
  get muted() {
    return muted; // a local interrupt waits for the server's data-interrupted
  },
  get sampleRate() {
    return engine?.sampleRate ?? null;
  },
  connect: () => connect(),
  disconnect: () => disconnect(),
  interrupt: () => interruptLocal("api"),
  sendText: (text) => sendText(text),
  micSettings: () => engine?.micTrack?.getSettings() ?? null,
  /** What the figures above do not include: the device's own output delay, ms. */
  outputLatencyMs() {
    const ctx = engine?.context;
    return ctx ? ((ctx.baseLatency ?? 0) + (ctx.outputLatency ?? 0)) * 1000 : null;
  },
  resources() {
    return {
      context: engine?.context.state ?? null,
      tracks: engine?.stream?.getTracks().map((t) => t.readyState) ?? [],
      socket: session?.ws?.readyState ?? null,
    };
  },
};
window.__demo = demo;

const conversation = new Conversation(renderEntry);

// ------------------------------------------------------------------ UI helpers

function currentMode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

/** Push-to-talk turns are exactly the held spans; hands-free, the model's voice detection. */
function turnDetectionFor(mode) {
  return mode === "push-to-talk" ? "manual" : "server";
}

function setState(state, label) {
  demo.state = state;
  ui.state.dataset.state = state;
  ui.state.textContent =
    label ?? { idle: "Disconnected", connecting: "Connecting…", connected: "Connected" }[state];
  const live = state === "connected";
  const busy = state === "connecting" || live;
  // One of the two at a time, in the same place; keyboard focus follows.
  const focused = document.activeElement;
  ui.connect.hidden = ui.connect.disabled = busy;
  ui.disconnect.hidden = ui.disconnect.disabled = !busy;
  if (focused === ui.connect && busy) ui.disconnect.focus();
  if (focused === ui.disconnect && !busy) ui.connect.focus();
  ui.disconnect.textContent = live ? "Disconnect" : "Cancel";
  ui.interrupt.disabled = !live;
  ui.text.disabled = ui.send.disabled = !live;
  ui.ptt.disabled = !live || !engine?.stream;
  ui.connect.textContent = localStorage.getItem(SESSION_KEY) ? "Connect (resume)" : "Connect";
  showHint();
}

/** The empty conversation's hint says what to do next. */
function showHint() {
  const hint = ui.log.querySelector(".empty");
  if (!hint) return;
  if (demo.state !== "connected") hint.textContent = "Press Connect and speak, or type a message.";
  else if (!engine?.stream) hint.textContent = "Type a message below.";
  else if (currentMode() === "push-to-talk") {
    hint.textContent = "Hold the button (or Space) while you talk, or type a message.";
  } else hint.textContent = "Listening. Just speak, or type a message.";
}

function showMessage(text, kind = "error") {
  if (kind === "error") demo.errors.push(text);
  ui.message.textContent = text;
  ui.message.dataset.kind = kind;
  ui.message.hidden = false;
}

function clearMessage() {
  ui.message.hidden = true;
  ui.message.textContent = "";
}

const entryElements = new Map();

function renderEntry(entry, { isNew, before }) {
  let el = entryElements.get(entry.id);
  if (isNew) {
    ui.log.querySelector(".empty")?.remove();
    el = document.createElement("p");
    el.className = `entry ${entry.role}`;
    el.id = entry.id;
    entryElements.set(entry.id, el);
    const anchor = before && entryElements.get(before.id);
    ui.log.insertBefore(el, anchor ?? null);
  }
  el.textContent = entry.text;
  el.dataset.final = String(entry.final);
  el.dataset.interrupted = String(entry.interrupted);
  ui.log.scrollTop = ui.log.scrollHeight;
}

let levelFrame = 0;
function showLevel(dbfs, voiced) {
  demo.capture.dbfs = dbfs;
  if (levelFrame) return; // at most one paint per display frame
  levelFrame = requestAnimationFrame(() => {
    levelFrame = 0;
    const db = Math.max(-60, Math.min(0, demo.capture.dbfs));
    ui.levelFill.style.width = `${((db + 60) / 60) * 100}%`;
    ui.level.setAttribute("aria-valuenow", db.toFixed(0));
    ui.level.setAttribute("aria-valuetext", db <= -60 ? "silent" : `${db.toFixed(0)} dB`);
    ui.level.dataset.voiced = String(voiced);
  });
}

function ms(samples) {
  return engine ? Math.round((samples / engine.sampleRate) * 1000) : 0;
}

function updateStatus() {
  const info = demo.session;
  if (!info) return;
  const p = demo.playback;
  const last = demo.latencies.at(-1);
  const dropped = session?.stats.framesDropped ?? 0;
  const items = [
    [`in ${info.input.sampleRate} Hz ${info.input.format}`],
    [`out ${info.output.sampleRate} Hz s16 ${info.output.binary ? "binary" : "base64"}`],
    [`buffer ${ms(p.bufferedSamples)} ms`],
    [`underruns ${p.underruns}`, p.underruns > 0],
    [`reply latency ${last === undefined ? "–" : `${Math.round(last)} ms`}`],
    [`model ${info.model}`],
  ];
  if (dropped) items.push([`mic frames dropped ${dropped}`, true]);
  ui.status.replaceChildren(
    ...items.map(([text, warn]) => {
      const span = document.createElement("span");
      span.textContent = text;
      if (warn) span.dataset.warn = "true";
      return span;
    }),
  );
}

// ------------------------------------------------------------------ connect

async function connect() {
  if (engine) return;
  clearMessage();
  demo.released = null;
  if (!window.isSecureContext) {
    // Browsers give AudioWorklet and the microphone to secure pages only.
    showMessage(
      "This page needs a secure address for audio: open it over https://, or as " +
        "http://localhost on this machine.",
    );
    setState("error", "Not connected");
    return;
  }
  let eng;
  try {
    // Synchronous, inside the click: creates and resumes the AudioContext.
    eng = new AudioEngine({
      onCaptureFrame,
      onPlaybackEvent,
      prebufferMs: Number(ui.prebuffer.value) || 0,
    });
  } catch (error) {
    showMessage(`Web Audio is not available in this browser: ${error.message}`);
    return;
  }
  engine = eng;
  setState("connecting");
  try {
    await eng.startPlayback();
  } catch (error) {
    if (engine === eng) {
      showMessage(`Audio playback could not start: ${error.message}`);
      await teardown();
      setState("error", "Not connected");
    }
    return;
  }
  // The microphone and the socket in parallel; a denied mic still leaves a
  // typed conversation (with spoken answers).
  const mic = eng.startCapture().then(
    () => true,
    (error) => {
      if (engine === eng) showMessage(describeMicError(error));
      return false;
    },
  );
  const s = new LiveSession(params.get("server") ?? socketUrl(location), {
    inputRate: eng.sampleRate,
    inputFormat,
    outputRate: eng.sampleRate, // the server resamples to our rate; we never do
    binary: ui.binary.checked,
    sessionId: localStorage.getItem(SESSION_KEY) ?? undefined,
    turnDetection: turnDetectionFor(currentMode()),
  });
  session = s;
  s.addEventListener("audio", onAudio);
  s.addEventListener("chunk", onChunk);
  let info;
  try {
    info = await s.open();
  } catch (error) {
    if (session === s) {
      showMessage(error.message);
      await teardown();
      setState("error", "Not connected");
    }
    return;
  }
  if (session !== s) return; // disconnected meanwhile
  s.addEventListener("closed", onClosed); // from now on a close is news to report
  onSession(info);
  const micOk = await mic;
  if (session !== s) return;
  setState("connected");
  if (!micOk) ui.ptt.disabled = true;
  watchDevices(eng);
  statusTimer = setInterval(updateStatus, 250);
  updateStatus();
}

/** Tell the user when the browser pauses audio or the mic goes away. */
function watchDevices(eng) {
  eng.context.onstatechange = () => {
    if (engine !== eng || eng.context.state === "running") return;
    if (eng.context.state === "closed") return;
    showMessage("The browser paused audio. Click or tap anywhere to resume.", "info");
    document.addEventListener(
      "pointerdown",
      () => eng.context.resume().then(() => engine === eng && clearMessage()),
      { once: true },
    );
  };
  const track = eng.micTrack;
  if (track) {
    track.onended = () => {
      if (engine !== eng) return;
      showMessage("The microphone stopped (unplugged or revoked). You can still type.");
    };
  }
}

function onSession(info) {
  demo.session = info;
  localStorage.setItem(SESSION_KEY, info.sessionId);
  if (info.resumed) {
    if (!conversation.entries.length) conversation.loadHistory(info.history);
    conversation.notice(`Resumed the session (${info.history?.length ?? 0} earlier messages).`);
  }
  const rate = engine.sampleRate;
  if (info.output.sampleRate !== rate) {
    showMessage(`The server sends ${info.output.sampleRate} Hz audio to a ${rate} Hz player.`);
  }
}

async function disconnect() {
  if (!engine && !session) return;
  session?.close(1000, "user disconnect");
  await teardown();
  setState("idle");
}

/** Release everything: socket, mic, context. */
async function teardown() {
  const eng = engine;
  const s = session;
  engine = null;
  session = null;
  clearInterval(statusTimer);
  clearTimeout(muteTimer);
  muted = talking = usedPushToTalk = false;
  ui.ptt.setAttribute("aria-pressed", "false");
  decoder = new Pcm16Decoder();
  pendingFlushes.clear();
  if (s) {
    s.removeEventListener("closed", onClosed);
    s.close();
  }
  if (eng) {
    const tracks = eng.stream?.getTracks() ?? [];
    await eng.close();
    demo.released = { tracks: tracks.map((t) => t.readyState), context: eng.context.state };
  }
  showLevel(-Infinity, false);
}

function onClosed(event) {
  // The server or the network ended the conversation (our own close is
  // handled by disconnect()).
  showMessage(`${describeClose(event.detail)} Press Connect to resume the conversation.`);
  teardown().then(() => setState("error", "Disconnected"));
}

// ------------------------------------------------------------------ capture

function onCaptureFrame({ frame, rms, time }) {
  const c = demo.capture;
  c.frames++;
  const voiced = rms >= VOICE_RMS;
  showLevel(rms > 0 ? 20 * Math.log10(rms) : -Infinity, voiced);
  if (!session?.connected) return;
  const handsFree = currentMode() === "hands-free";
  if (!handsFree && !talking) return; // push-to-talk: only while held
  if (session.sendAudio(frame)) c.sent++;
  if (voiced) {
    c.voiced++;
    if (handsFree) userEndedAt = time; // the turn ends after the last voiced frame
    voicedRun++;
    if (handsFree && ui.localBargeIn.checked && voicedRun === BARGE_IN_FRAMES && agentAudible()) {
      interruptLocal("speech");
    }
  } else {
    voicedRun = 0;
  }
}

// ------------------------------------------------------------------ playback

function onAudio({ detail }) {
  if (muted || !engine) return; // audio of a turn we interrupted, still in flight
  const samples = decoder.decode(detail.bytes);
  if (!samples.length) return;
  demo.received.audioMessages++;
  demo.received.samples += samples.length;
  engine.play(samples);
}

function agentAudible() {
  const p = demo.playback;
  return p.state === "playing" || p.bufferedSamples > 0;
}

function onPlaybackEvent(msg) {
  switch (msg.type) {
    case "stats":
      demo.playback = msg;
      return;
    case "started": {
      demo.events.started++;
      // End of the user's turn -> first reply sample rendered, both on the
      // AudioContext clock (no main-thread timing in the figure).
      if (userEndedAt > lastReplyAt) demo.latencies.push((msg.time - userEndedAt) * 1000);
      lastReplyAt = msg.time;
      updateStatus();
      return;
    }
    case "silent": {
      demo.events.silent++;
      const request = pendingFlushes.get(msg.id);
      pendingFlushes.delete(msg.id);
      if (request) {
        demo.flushes.push({
          reason: request.reason,
          // Wall clock, request -> the worklet's "silent" message back: an
          // upper bound (includes the message's trip back to this thread).
          roundTripMs: performance.now() - request.at,
          // Context clock, request -> first silent sample rendered.
          contextMs: (msg.silentAt - request.contextTime) * 1000,
          fadeMs: (msg.fadeSamples / engine.sampleRate) * 1000,
        });
      }
      return;
    }
    default:
      if (msg.type in demo.events) demo.events[msg.type]++;
  }
}

function flushPlayback(reason) {
  if (!engine) return;
  const id = ++flushSeq;
  const contextTime = engine.context.currentTime;
  pendingFlushes.set(id, { at: performance.now(), contextTime, reason });
  engine.flush(id);
  decoder.reset();
}

/** Barge-in from this side: silence now, tell the server, drop late audio. */
function interruptLocal(reason) {
  if (!session?.connected) return;
  flushPlayback(reason);
  muted = true;
  clearTimeout(muteTimer);
  muteTimer = setTimeout(() => (muted = false), UNMUTE_AFTER_MS);
  session.interrupt();
}

// ------------------------------------------------------------------ chunks

function onChunk({ detail: chunk }) {
  const counts = demo.received.chunks;
  counts[chunk.type] = (counts[chunk.type] ?? 0) + 1;
  conversation.apply(chunk);
  switch (chunk.type) {
    case "finish":
      engine?.endTurn();
      decoder.reset();
      break;
    case "data-interrupted":
      if (muted) {
        // The answer to our own interrupt: everything after it is new audio.
        muted = false;
        clearTimeout(muteTimer);
      } else {
        flushPlayback(`server:${chunk.data?.source ?? "model"}`);
      }
      break;
    case "error":
      demo.serverErrors.push(chunk.errorText);
      showMessage(`Server: ${chunk.errorText}`, "info");
      break;
  }
}

// ------------------------------------------------------------------ turns

function sendText(text) {
  text = text.trim();
  if (!text || !session?.connected) return false;
  if (agentAudible()) interruptLocal("typed");
  session.sendText(text);
  conversation.userTyped(text);
  if (engine) userEndedAt = engine.context.currentTime;
  return true;
}

function pttDown() {
  if (talking || !session?.connected || !engine?.stream) return;
  talking = true;
  usedPushToTalk = true;
  ui.ptt.setAttribute("aria-pressed", "true");
  if (agentAudible()) interruptLocal("push-to-talk");
  session.activityStart();
}

function pttUp() {
  if (!talking) return;
  talking = false;
  ui.ptt.setAttribute("aria-pressed", "false");
  session?.activityEnd();
  if (engine) userEndedAt = engine.context.currentTime;
}

async function onModeChange() {
  const mode = currentMode();
  demo.mode = mode;
  ui.ptt.hidden = mode !== "push-to-talk";
  showHint();
  pttUp();
  // Turn detection is negotiated per socket, in `start`: another mode is a
  // fresh socket on the same session.
  if (session && needsReconnect(mode)) {
    conversation.notice(`Switching to ${mode}: reconnecting…`);
    await disconnect();
    await connect();
  }
}

function needsReconnect(mode) {
  // Still connecting: what this socket asked for.
  const negotiated = session.info ? session.info.turnDetection : session.options.turnDetection;
  // A server that predates turnDetection: only explicit turn edges stick.
  if (negotiated === undefined) return mode === "hands-free" && usedPushToTalk;
  return negotiated !== turnDetectionFor(mode);
}

// ------------------------------------------------------------------ wiring

ui.connect.addEventListener("click", () => connect());
ui.disconnect.addEventListener("click", () => disconnect());
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

/** The space bar is push-to-talk's, except in a text field. */
function isTalkKey(event) {
  return event.code === "Space" && currentMode() === "push-to-talk" && !typingInto(event.target);
}

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") interruptLocal("escape");
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

ui.prebuffer.addEventListener("change", () => {
  engine?.setPrebuffer(Number(ui.prebuffer.value) || 0);
});
ui.forget.addEventListener("click", () => {
  localStorage.removeItem(SESSION_KEY);
  conversation.entries.length = 0;
  entryElements.clear();
  ui.log.replaceChildren();
  conversation.notice("Session forgotten: the next Connect starts a new conversation.");
  setState(demo.state);
});
window.addEventListener("pagehide", () => {
  session?.close(1001, "page closed");
});

onModeChange();
setState("idle");
