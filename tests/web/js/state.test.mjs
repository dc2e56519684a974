import assert from "node:assert/strict";
import test from "node:test";

import {
  BARGE_IN_FRAMES,
  PageState,
  TASK_STATES,
  VOICE_RMS,
  taskCancellable,
  taskOffersCancel,
  turnDetectionFor,
} from "../../../web/state.js";

// The server's mark on a tool the browser is to run now.
const RUN_NOW = { audiocore: { clientExecutes: true } };

const LOUD = VOICE_RMS * 2;
const QUIET = VOICE_RMS / 2;

function make({ mode = "hands-free", localBargeIn = false, serverEchoCancellation = false } = {}) {
  return new PageState({
    mode,
    settings: { prebufferMs: 60, binary: true, localBargeIn, serverEchoCancellation },
  });
}

/** Connected, as app.js leaves it: 1 kHz so 1 sample == 1 ms. */
function connected(options) {
  const s = make(options);
  s.connectRequested();
  s.connecting(1000);
  s.sessionOpened({ sessionId: "abc", turnDetection: "server" }, { framesDropped: 0 });
  s.connected({ micOpen: true });
  return s;
}

function agentPlaying(s) {
  s.playbackEvent({ type: "stats", state: "playing", bufferedSamples: 500 }, 0);
}

/** Capture then send one frame, as onCaptureFrame does; returns the barge-in verdict. */
function frame(s, rms, time = 0, sent = true) {
  s.frameCaptured(rms);
  return s.frameSent({ sent, time });
}

// ------------------------------------------------------------------ connection

test("a connection goes idle -> connecting -> connected -> idle", () => {
  const s = make();
  assert.equal(s.connection, "idle");
  s.connecting(48000);
  assert.equal(s.connection, "connecting");
  assert.equal(s.sampleRate, 48000);
  s.sessionOpened({ sessionId: "s1" }, { framesDropped: 0 });
  assert.equal(s.resumeId, "s1", "the next Connect resumes this session");
  s.connected({ micOpen: false });
  assert.equal(s.connection, "connected");
  assert.equal(s.micOpen, false);
  s.closed();
  s.resourcesReleased({ tracks: ["ended"], context: "closed" });
  s.disconnected();
  assert.equal(s.connection, "idle");
  assert.equal(s.connectionLabel, null);
  assert.equal(s.sampleRate, null);
  assert.deepEqual(s.session, { sessionId: "s1" }, "the session's data outlives the socket");
  assert.deepEqual(s.released, { tracks: ["ended"], context: "closed" });
  s.connectRequested();
  assert.equal(s.released, null);
});

test("a failure carries its own label; the next state drops it", () => {
  const s = make();
  s.failed("Not connected");
  assert.equal(s.connection, "error");
  assert.equal(s.connectionLabel, "Not connected");
  s.connecting(48000);
  assert.equal(s.connectionLabel, null);
});

test("closing forgets what belonged to the socket", () => {
  const s = connected();
  s.pttPressed();
  s.muteUntilAnswered();
  s.flushRequested({ reason: "button", at: 0, contextTime: 0 });
  s.frameCaptured(LOUD);
  s.closed();
  assert.equal(s.talking, false);
  assert.equal(s.usedPushToTalk, false);
  assert.equal(s.muted, false);
  assert.equal(s.micOpen, false);
  assert.equal(s.socketStats, null);
  assert.equal(s.pendingFlushes.size, 0);
  assert.equal(s.capture.dbfs, -Infinity);
  assert.equal(s.capture.speaking, false);
  assert.equal(s.capture.frames, 1, "counters are the page's, not the socket's");
});

test("only error messages count as errors; a server error is shown as info", () => {
  const s = make();
  s.showMessage("The browser paused audio.", "info");
  s.showMessage("Cannot reach the server.");
  assert.deepEqual(s.message, { text: "Cannot reach the server.", kind: "error" });
  assert.deepEqual(s.errors, ["Cannot reach the server."]);
  s.serverError("quota");
  assert.deepEqual(s.message, { text: "Server: quota", kind: "info" });
  assert.deepEqual(s.serverErrors, ["quota"]);
  assert.equal(s.errors.length, 1);
  s.clearMessage();
  assert.equal(s.message, null);
  s.sessionForgotten();
  assert.equal(s.resumeId, null);
});

// ------------------------------------------------------------------ capture

test("capture counts frames, sent frames and voiced frames; dBFS of the last", () => {
  const s = connected();
  frame(s, LOUD);
  frame(s, QUIET, 0, false);
  s.frameCaptured(0); // not sent at all
  assert.deepEqual(s.capture, {
    frames: 3,
    sent: 1,
    voiced: 1,
    dbfs: -Infinity,
    speaking: false,
  });
  s.frameCaptured(0.1);
  assert.ok(Math.abs(s.capture.dbfs - -20) < 1e-9, s.capture);
  assert.equal(s.capture.speaking, true);
});

test("push-to-talk sends only while held", () => {
  const s = connected({ mode: "push-to-talk" });
  assert.equal(s.sendsAudio, false);
  s.pttPressed();
  assert.equal(s.sendsAudio, true);
  assert.equal(s.usedPushToTalk, true);
  s.pttReleased(1.5);
  assert.equal(s.sendsAudio, false);
  assert.equal(s.userEndedAt, 1.5);
  s.pttReleased(); // no audio clock: the mark stays
  assert.equal(s.userEndedAt, 1.5);
  s.modeChanged("hands-free");
  assert.equal(s.sendsAudio, true);
});

test(`local barge-in fires once, on the ${BARGE_IN_FRAMES}th voiced frame over the agent`, () => {
  const s = connected({ localBargeIn: true });
  agentPlaying(s);
  const verdicts = [];
  for (let i = 0; i < BARGE_IN_FRAMES + 2; i++) verdicts.push(frame(s, LOUD, i));
  const expected = Array.from({ length: BARGE_IN_FRAMES + 2 }, (_, i) => i === BARGE_IN_FRAMES - 1);
  assert.deepEqual(verdicts, expected);
  // A quiet frame resets the run.
  frame(s, QUIET);
  for (let i = 0; i < BARGE_IN_FRAMES - 1; i++) assert.equal(frame(s, LOUD), false);
  assert.equal(frame(s, LOUD), true);
});

test("no local barge-in when it is off, the agent is silent, or in push-to-talk", () => {
  const run = (s) => Array.from({ length: BARGE_IN_FRAMES }, () => frame(s, LOUD)).some(Boolean);
  const off = connected({ localBargeIn: false });
  agentPlaying(off);
  assert.equal(run(off), false);
  assert.equal(run(connected({ localBargeIn: true })), false, "nothing to interrupt");
  const ptt = connected({ mode: "push-to-talk", localBargeIn: true });
  agentPlaying(ptt);
  ptt.pttPressed();
  assert.equal(run(ptt), false);
  // The browser's echo cancellation off (the server's on): the raw
  // microphone hears the agent, so the page does not judge barge-in.
  const raw = connected({ localBargeIn: true, serverEchoCancellation: true });
  agentPlaying(raw);
  assert.equal(run(raw), false);
});

test("hands-free, the user's turn ends at the last voiced frame", () => {
  const s = connected();
  frame(s, LOUD, 1.0);
  frame(s, LOUD, 1.02);
  frame(s, QUIET, 1.04);
  assert.equal(s.userEndedAt, 1.02);
  const ptt = connected({ mode: "push-to-talk" });
  ptt.pttPressed();
  frame(ptt, LOUD, 3);
  assert.equal(ptt.userEndedAt, -1, "push-to-talk: the release ends the turn");
});

// ------------------------------------------------------------------ playback

test("reply latency: end of the user's turn -> reply started, once per turn", () => {
  const s = connected();
  s.playbackEvent({ type: "started", time: 1 }, 0); // before any user turn
  assert.deepEqual(s.latencies, []);
  s.userTurnEnded(2);
  s.playbackEvent({ type: "started", time: 2.65 }, 0);
  s.playbackEvent({ type: "started", time: 4 }, 0); // the same turn resumed
  assert.equal(s.latencies.length, 1);
  assert.ok(Math.abs(s.latencies[0] - 650) < 1e-9, s.latencies);
  assert.equal(s.events.started, 3);
});

test("a flush is measured from its request to the worklet's silent", () => {
  const s = connected(); // 1000 Hz
  const first = s.flushRequested({ reason: "button", at: 100, contextTime: 5 });
  const second = s.flushRequested({ reason: "typed", at: 200, contextTime: 6 });
  assert.notEqual(first, second);
  s.playbackEvent({ type: "silent", id: first, silentAt: 5.008, fadeSamples: 5 }, 112);
  s.playbackEvent({ type: "silent", id: 99, silentAt: 7, fadeSamples: 0 }, 300); // unknown
  assert.equal(s.events.silent, 2);
  assert.equal(s.flushes.length, 1);
  const [flush] = s.flushes;
  assert.equal(flush.reason, "button");
  assert.equal(flush.roundTripMs, 12);
  assert.ok(Math.abs(flush.contextMs - 8) < 1e-9, flush);
  assert.equal(flush.fadeMs, 5);
  assert.deepEqual([...s.pendingFlushes.keys()], [second]);
});

test("worklet stats replace the playback figures; other events are counted", () => {
  const s = connected();
  assert.equal(s.agentAudible, false);
  const stats = { type: "stats", state: "prebuffering", bufferedSamples: 10, underruns: 0 };
  s.playbackEvent(stats, 0);
  assert.equal(s.playback, stats);
  assert.equal(s.agentAudible, true, "queued audio counts as audible");
  s.playbackEvent({ type: "underrun" }, 0);
  s.playbackEvent({ type: "ended" }, 0);
  s.playbackEvent({ type: "unknown" }, 0);
  assert.deepEqual(s.events, { started: 0, underrun: 1, ended: 1, silent: 0 });
});

test("received audio and chunks are counted", () => {
  const s = connected();
  s.audioReceived(960);
  s.audioReceived(40);
  s.chunkReceived({ type: "text-delta" });
  s.chunkReceived({ type: "text-delta" });
  s.chunkReceived({ type: "finish" });
  assert.deepEqual(s.received, {
    samples: 1000,
    audioMessages: 2,
    chunks: { "text-delta": 2, finish: 1 },
  });
});

// ------------------------------------------------------------------ mode

test("turn detection follows the mode; a mismatch needs a fresh socket", () => {
  assert.equal(turnDetectionFor("push-to-talk"), "manual");
  assert.equal(turnDetectionFor("hands-free"), "server");
  const s = make({ mode: "hands-free" });
  assert.equal(s.needsReconnect("server"), false);
  assert.equal(s.needsReconnect("manual"), true);
  s.modeChanged("push-to-talk");
  assert.equal(s.needsReconnect("manual"), false);
  // A server without turnDetection: only a socket that sent turn edges must go.
  assert.equal(s.needsReconnect(undefined), false);
  s.pttPressed();
  s.modeChanged("hands-free");
  assert.equal(s.needsReconnect(undefined), true);
});

// ------------------------------------------------------------------ view

test("the view reads the state and cannot change it", () => {
  const s = connected();
  const view = s.view({ probe: () => 42 });
  assert.equal(view.state, "connected");
  assert.equal(view.sampleRate, 1000);
  assert.equal(view.probe(), 42);
  for (const name of [
    "state", "mode", "session", "muted", "sampleRate", "errors", "serverErrors", "capture",
    "playback", "events", "received", "flushes", "latencies", "released",
  ]) {
    assert.ok(name in view, name);
  }
  // Writes fail (ES modules are strict) and reads are copies.
  assert.throws(() => {
    view.state = "idle";
  }, TypeError);
  assert.throws(() => {
    view.extra = 1;
  }, TypeError);
  view.capture.sent = 1000;
  view.latencies.push(1);
  assert.equal(s.capture.sent, 0);
  assert.deepEqual(s.latencies, []);
  // ... and always current.
  s.muteUntilAnswered();
  s.failed("Disconnected");
  assert.equal(view.muted, true);
  assert.equal(view.state, "error");
  assert.deepEqual(JSON.parse(JSON.stringify(view)).state, "error");
});

// ---------------------------------------------------------------- tools

const input = (id, name, extra = {}) => ({
  type: "tool-input-available",
  toolCallId: id,
  toolName: name,
  input: { track: "jazz" },
  ...extra,
});

test("an approval request waits in the dialog's queue until answered or resolved", () => {
  const s = connected();
  s.toolChunk(input("c1", "change_bgm"));
  assert.equal(s.toolChunk({ type: "tool-approval-request", approvalId: "a1", toolCallId: "c1" }), null);
  s.toolChunk(input("c2", "process_payment"));
  s.toolChunk({ type: "tool-approval-request", approvalId: "a2", toolCallId: "c2" });
  s.toolChunk({ type: "tool-approval-request", approvalId: "a2", toolCallId: "c2" }); // asked again
  assert.deepEqual(s.approval, { approvalId: "a1", toolCallId: "c1", toolName: "change_bgm", input: { track: "jazz" }, hint: "" });
  assert.equal(s.approvalAnswered("a1", true).toolName, "change_bgm");
  assert.equal(s.approval.approvalId, "a2");
  // A timeout or a barge-in resolves it without the user: the dialog goes.
  s.toolChunk({ type: "tool-output-error", toolCallId: "c2", errorText: "interrupted by the user" });
  assert.equal(s.approval, null);
  assert.equal(s.approvalAnswered("a2", false), null);
  assert.deepEqual(s.decisions, [{ toolName: "change_bgm", approved: true }]);
});

test("an ADK tool's confirmation hint (data-confirmation) goes with its approval request", () => {
  const s = connected();
  s.toolChunk(input("c1", "book_room"));
  s.confirmationAsked({ approvalId: "a1", toolCallId: "c1", toolName: "book_room", hint: "Book Blue?", payload: { nights: 1 } });
  s.confirmationAsked({ hint: "no approval id: ignored" });
  s.toolChunk({ type: "tool-approval-request", approvalId: "a1", toolCallId: "c1" });
  assert.equal(s.approval.hint, "Book Blue?");
  assert.equal(s.confirmations.size, 0); // taken by its request
  // Only the last 16 wait for a request that never comes.
  for (let i = 0; i < 40; i++) s.confirmationAsked({ approvalId: `x${i}`, hint: "" });
  assert.equal(s.confirmations.size, 16);
  assert.ok(s.confirmations.has("x39") && !s.confirmations.has("x23"));
});

test("the browser runs a tool once, when the server says so", () => {
  const s = connected();
  assert.equal(s.toolChunk(input("c1", "change_bgm")), null); // asked to approve first
  const run = s.toolChunk(input("c1", "change_bgm", { providerMetadata: RUN_NOW }));
  assert.equal(run.toolName, "change_bgm");
  assert.equal(s.toolChunk(input("c1", "change_bgm", { providerMetadata: RUN_NOW })), null);
  s.toolRan(run, { output: { track: "jazz", playing: true } });
  assert.deepEqual(s.toolRuns, [{ toolName: "change_bgm", input: { track: "jazz" }, output: { track: "jazz", playing: true } }]);
});

test("the music ducks while the agent is audible, and only when it plays", () => {
  const s = connected();
  agentPlaying(s);
  assert.equal(s.duckMusic(), false); // no music: nothing to duck
  s.musicChanged("lofi");
  assert.equal(s.duckMusic(), true);
  assert.equal(s.music.ducked, true);
  assert.equal(s.duckMusic(), false); // no change
  s.playbackEvent({ type: "stats", state: "idle", bufferedSamples: 0 }, 0);
  assert.equal(s.duckMusic(), true);
  assert.equal(s.music.ducked, false);
});

test("closing forgets pending approvals and the music (the server asks again on resume)", () => {
  const s = connected();
  s.toolChunk(input("c1", "change_bgm"));
  s.toolChunk({ type: "tool-approval-request", approvalId: "a1", toolCallId: "c1" });
  s.musicChanged("jazz");
  s.closed();
  assert.equal(s.approval, null);
  assert.deepEqual(s.music, { track: "off", ducked: false });
  assert.equal(s.view().approval, null);
});

// ------------------------------------------------------------------ background tasks

/** A data-task chunk's data (server/tasks/records.py TaskRecord.chunk). */
function task(id, state, extra = {}) {
  return { id, state, objective: `objective ${id}`, progress: null, result: null, error: null, delivery: "none", ...extra };
}

test("a task card is updated in place, and every state it showed is recorded", () => {
  const s = connected();
  s.taskChanged(task("t1", "queued"));
  s.taskChanged(task("t2", "queued"));
  s.taskChanged(task("t1", "running", { progress: { tool: "sum_column", detail: "sales.csv" } }));
  s.taskChanged(task("t1", "running", { progress: { tool: "wait", detail: "2" } })); // progress only
  s.taskChanged(task("t1", "completed", { result: "12.5", delivery: "pending" }));
  s.taskChanged(task("t1", "completed", { result: "12.5", delivery: "delivered" }));
  assert.deepEqual([...s.tasks.keys()], ["t1", "t2"], "one card per task, in arrival order");
  assert.equal(s.tasks.get("t1").result, "12.5");
  assert.equal(s.tasks.get("t1").delivery, "delivered");
  assert.deepEqual(s.taskStates, [
    { id: "t1", state: "queued" },
    { id: "t2", state: "queued" },
    { id: "t1", state: "running" },
    { id: "t1", state: "completed" },
  ]);
  const view = s.view();
  assert.deepEqual(view.tasks.map((c) => [c.id, c.state]), [["t1", "completed"], ["t2", "queued"]]);
  view.tasks[0].state = "failed"; // a copy
  assert.equal(s.tasks.get("t1").state, "completed");
});

test("Cancel is offered while queued or running, once, until the server answers", () => {
  const s = connected();
  for (const state of Object.keys(TASK_STATES)) {
    const active = state === "queued" || state === "running";
    assert.equal(taskOffersCancel(task("t", state)), active, state);
    assert.equal(taskCancellable(task("t", state)), active, state);
  }
  assert.equal(s.taskCancelRequested("nope"), false, "no such card");
  s.taskChanged(task("t1", "running"));
  assert.equal(s.taskCancelRequested("t1"), true);
  assert.equal(taskCancellable(s.tasks.get("t1")), false, "pressed: no second cancel");
  assert.equal(taskOffersCancel(s.tasks.get("t1")), true, "the button stays, disabled");
  assert.equal(s.taskCancelRequested("t1"), false);
  // A progress update while the cancel travels keeps the button off ...
  s.taskChanged(task("t1", "running", { progress: { tool: "wait", detail: "120" } }));
  assert.equal(taskCancellable(s.tasks.get("t1")), false);
  s.taskChanged(task("t1", "cancelling"));
  s.taskChanged(task("t1", "cancelled"));
  assert.deepEqual(s.taskStates.map((e) => e.state), ["running", "cancelling", "cancelled"]);
  assert.equal(s.taskCancelRequested("t1"), false, "a cancelled task has no Cancel");
  // ... and a cancel that never left (no socket) gives it back.
  s.taskChanged(task("t2", "queued"));
  s.taskCancelRequested("t2");
  s.taskCancelFailed("t2");
  assert.equal(taskCancellable(s.tasks.get("t2")), true);
});

test("task cards belong to the user: they outlive the socket", () => {
  const s = connected();
  s.taskChanged(task("t1", "running"));
  s.closed();
  s.disconnected();
  assert.equal(s.tasks.get("t1").state, "running");
});

test("data-speech: listening while the server hears speech; a close ends it", () => {
  const s = connected();
  assert.equal(s.listening, false);
  s.speechChanged({ state: "started", source: "model" });
  assert.equal(s.listening, true);
  s.speechChanged({ state: "stopped", source: "model" });
  assert.equal(s.listening, false);
  s.speechChanged({ state: "started", source: "client" });
  s.closed();
  assert.equal(s.listening, false, "no socket, nobody hears");
  assert.deepEqual(s.view().speech, [
    { state: "started", source: "model" },
    { state: "stopped", source: "model" },
    { state: "started", source: "client" },
  ]);
});
