// The demo page's state: what the page shows and the bookkeeping of the
// conversation in one object. Pure (no DOM, no Web Audio, no timers), so it
// runs under `node --test`.
//
// Ownership: app.js changes the state only through the methods below, then
// calls its render(), which paints the page from the fields (read them
// freely, never assign them). window.__demo is view(): copies for tests and
// benchmarks, never the state itself.

import { clientExecutes } from "./sdk/session.js";

/** Speech starts at this level: the server's (server/audio/voice.py VOICE_DBFS), the offline model's VAD. */
export const VOICE_DBFS = -40;
export const VOICE_RMS = 10 ** (VOICE_DBFS / 20);
export const BARGE_IN_FRAMES = 3; // 60 ms of speech over the agent before we cut it off

/** Push-to-talk turns are exactly the held spans; hands-free, the model's voice detection. */
export function turnDetectionFor(mode) {
  return mode === "push-to-talk" ? "manual" : "server";
}

/** A background task's states (server/tasks/records.py), in the page's words. */
export const TASK_STATES = {
  queued: "queued",
  running: "running",
  cancelling: "cancelling…",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled",
};

/** While a task is queued or running, its card has a Cancel button ... */
export function taskOffersCancel(card) {
  return card.state === "queued" || card.state === "running";
}

/** ... which works until it has been pressed. */
export function taskCancellable(card) {
  return taskOffersCancel(card) && !card.cancelRequested;
}

export class PageState {
  /**
   * @param {object} initial
   * @param {"hands-free"|"push-to-talk"} initial.mode
   * @param {{prebufferMs: number, binary: boolean, localBargeIn: boolean,
   *   serverEchoCancellation?: boolean}} initial.settings
   * @param {string|null} [initial.resumeId] the stored session the next Connect resumes
   */
  constructor({ mode, settings, resumeId = null }) {
    // What the page shows.
    this.connection = "idle"; // "idle" | "connecting" | "connected" | "reconnecting" | "error"
    this.connectionLabel = null; // words for the state pill other than the default
    this.message = null; // {text, kind: "error"|"info"} above the conversation
    this.mode = mode;
    this.settings = settings;
    this.resumeId = resumeId;
    this.micOpen = false; // the microphone feeds the capture worklet
    this.talking = false; // push-to-talk held
    this.listening = false; // the server hears the user speak (data-speech)
    this.sampleRate = null; // the AudioContext's, while there is one

    // This socket's bookkeeping.
    this.session = null; // data-session's data (kept after a disconnect)
    this.socketStats = null; // the socket's own counters (LiveSession.stats)
    this.usedPushToTalk = false; // this socket has sent activity_start
    this.muted = false; // after a local interrupt: drop audio until data-interrupted
    this.pendingFlushes = new Map(); // flush id -> {reason, at, contextTime}
    this.flushSeq = 0;
    this.voicedRun = 0; // consecutive voiced frames sent
    this.userEndedAt = -1; // context time the user's last turn ended (speech, release, send)
    this.lastReplyAt = -1; // context time the last reply started playing

    // Tools. The server asks again about pending calls when a session is
    // resumed, so none of this outlives the socket.
    this.approvals = []; // [{approvalId, toolCallId, toolName, input, hint}]: the dialog shows the first
    this.confirmations = new Map(); // approvalId -> an ADK tool's data-confirmation data
    this.toolCalls = new Map(); // toolCallId -> {toolCallId, toolName, input, running}
    this.music = { track: "off", ducked: false };

    // Background tasks: the user's (userKey), not the socket's, so the cards
    // outlive it; the server sends the latest ones again on connect.
    this.tasks = new Map(); // task id -> the data-task data, plus cancelRequested

    // Measurements, for window.__demo.
    this.decisions = []; // the user's approval answers: {toolName, approved}
    this.toolRuns = []; // browser tools run: {toolName, input, output} or {…, errorText}
    this.taskStates = []; // every state a task card showed, in order: {id, state}
    this.speech = []; // every data-speech, in order: {state, source}
    this.errors = []; // messages shown to the user
    this.serverErrors = []; // `error` chunks
    this.capture = { frames: 0, sent: 0, voiced: 0, dbfs: -Infinity, speaking: false };
    this.playback = { samplesPlayed: 0, underruns: 0, bufferedSamples: 0, state: "idle" };
    this.events = { started: 0, underrun: 0, ended: 0, silent: 0 };
    this.received = { samples: 0, audioMessages: 0, chunks: {} };
    this.flushes = []; // {reason, roundTripMs, contextMs, fadeMs}
    this.latencies = []; // end of user turn -> first reply sample rendered, ms
    this.released = null; // after a disconnect: what was released
    this.reconnects = 0; // sockets lost that the page opened again
  }

  // ---------------------------------------------------------------- connection

  /** A Connect starts over: no message, nothing released yet. */
  connectRequested() {
    this.message = null;
    this.released = null;
  }

  connecting(sampleRate) {
    this.#setConnection("connecting");
    this.sampleRate = sampleRate;
  }

  sessionOpened(info, socketStats) {
    this.session = info;
    this.socketStats = socketStats;
    this.resumeId = info.sessionId;
  }

  connected({ micOpen }) {
    this.#setConnection("connected");
    this.micOpen = micOpen;
  }

  /** The socket and the audio are going away: forget what belonged to them. */
  closed() {
    this.sampleRate = null;
    this.socketStats = null;
    this.micOpen = this.muted = this.talking = this.usedPushToTalk = false;
    this.listening = false; // no socket, nobody hears
    this.pendingFlushes.clear();
    this.approvals = [];
    this.confirmations.clear();
    this.toolCalls.clear();
    this.music = { track: "off", ducked: false }; // it played in the closed context
    this.capture.dbfs = -Infinity;
    this.capture.speaking = false;
  }

  /**
   * The socket went away and the page will open it again (sdk/reconnect.js);
   * the audio and the microphone stay. What the server asks again on the
   * next socket (pending approvals) is forgotten; the calls the browser
   * runs are kept, so a call asked again does not run twice.
   */
  connectionLost() {
    // The player stays: its flushes in flight are still reported.
    this.muted = this.talking = this.usedPushToTalk = false;
    this.approvals = [];
    this.confirmations.clear();
    this.reconnects++;
  }

  /** Waiting `delayMs` before attempt `attempt` of `maxAttempts`. */
  reconnecting({ attempt, maxAttempts }) {
    this.#setConnection("reconnecting", `Reconnecting… (${attempt}/${maxAttempts})`);
  }

  /** After the close: what the browser reports released (tracks, context). */
  resourcesReleased(what) {
    this.released = what;
  }

  disconnected() {
    this.#setConnection("idle");
  }

  failed(label) {
    this.#setConnection("error", label);
  }

  #setConnection(connection, label = null) {
    this.connection = connection;
    this.connectionLabel = label;
  }

  showMessage(text, kind = "error") {
    if (kind === "error") this.errors.push(text);
    this.message = { text, kind };
  }

  clearMessage() {
    this.message = null;
  }

  // ---------------------------------------------------------------- choices

  modeChanged(mode) {
    this.mode = mode;
  }

  settingsChanged(settings) {
    this.settings = settings;
  }

  sessionForgotten() {
    this.resumeId = null;
  }

  /** Turn detection is negotiated per socket: does `mode` need a fresh one? */
  needsReconnect(negotiated) {
    // A server that predates turnDetection: only explicit turn edges stick.
    if (negotiated === undefined) return this.mode === "hands-free" && this.usedPushToTalk;
    return negotiated !== turnDetectionFor(this.mode);
  }

  // ---------------------------------------------------------------- capture

  /** Every 20 ms frame from the microphone, sent or not. */
  frameCaptured(rms) {
    this.capture.frames++;
    this.capture.dbfs = rms > 0 ? 20 * Math.log10(rms) : -Infinity;
    this.capture.speaking = rms >= VOICE_RMS;
  }

  /** Hands-free sends every frame; push-to-talk only while held. */
  get sendsAudio() {
    return this.mode === "hands-free" || this.talking;
  }

  /**
   * The frame just captured went to the socket (`sent` false: dropped).
   * Returns true when it completes BARGE_IN_FRAMES of speech over the agent
   * and the user asked for that to interrupt it.
   */
  frameSent({ sent, time }) {
    const c = this.capture;
    if (sent) c.sent++;
    if (!c.speaking) {
      this.voicedRun = 0;
      return false;
    }
    c.voiced++;
    const handsFree = this.mode === "hands-free";
    if (handsFree) this.userEndedAt = time; // the turn ends after the last voiced frame
    this.voicedRun++;
    return (
      handsFree &&
      this.settings.localBargeIn &&
      // The page's own detector hears the raw microphone: with the browser's
      // echo cancellation off it would take the agent's voice for the user.
      !this.settings.serverEchoCancellation &&
      this.voicedRun === BARGE_IN_FRAMES &&
      this.agentAudible
    );
  }

  // ---------------------------------------------------------------- turns

  pttPressed() {
    this.talking = true;
    this.usedPushToTalk = true;
  }

  /** @param {number} [time] context time of the release, if audio is running */
  pttReleased(time) {
    this.talking = false;
    if (time !== undefined) this.userEndedAt = time;
  }

  /** A typed turn was sent at context time `time`. */
  userTurnEnded(time) {
    this.userEndedAt = time;
  }

  // ---------------------------------------------------------------- playback

  get agentAudible() {
    return this.playback.state === "playing" || this.playback.bufferedSamples > 0;
  }

  audioReceived(samples) {
    this.received.audioMessages++;
    this.received.samples += samples;
  }

  /** A flush goes to the playback worklet; returns its id. */
  flushRequested({ reason, at, contextTime }) {
    const id = ++this.flushSeq;
    this.pendingFlushes.set(id, { at, contextTime, reason });
    return id;
  }

  /** Until the server confirms our interrupt, its audio is the old turn's. */
  muteUntilAnswered() {
    this.muted = true;
  }

  unmute() {
    this.muted = false;
  }

  /** A message from the playback worklet; `now` is performance.now(). */
  playbackEvent(msg, now) {
    switch (msg.type) {
      case "stats":
        this.playback = msg;
        return;
      case "started":
        this.events.started++;
        // End of the user's turn -> first reply sample rendered, both on the
        // AudioContext clock (no main-thread timing in the figure).
        if (this.userEndedAt > this.lastReplyAt) {
          this.latencies.push((msg.time - this.userEndedAt) * 1000);
        }
        this.lastReplyAt = msg.time;
        return;
      case "silent": {
        this.events.silent++;
        const request = this.pendingFlushes.get(msg.id);
        this.pendingFlushes.delete(msg.id);
        if (!request) return;
        this.flushes.push({
          reason: request.reason,
          // Wall clock, request -> the worklet's "silent" message back: an
          // upper bound (includes the message's trip back to this thread).
          roundTripMs: now - request.at,
          // Context clock, request -> first silent sample rendered.
          contextMs: (msg.silentAt - request.contextTime) * 1000,
          fadeMs: (msg.fadeSamples / this.sampleRate) * 1000,
        });
        return;
      }
      default:
        if (msg.type in this.events) this.events[msg.type]++;
    }
  }

  // ---------------------------------------------------------------- chunks

  chunkReceived(chunk) {
    const counts = this.received.chunks;
    counts[chunk.type] = (counts[chunk.type] ?? 0) + 1;
  }

  /**
   * A `data-speech` chunk's data: the user's speech started or stopped, as
   * the model's voice detection or our push-to-talk edges told the server.
   */
  speechChanged({ state, source }) {
    this.listening = state === "started";
    this.speech.push({ state, source });
  }

  serverError(text) {
    this.serverErrors.push(text);
    this.showMessage(`Server: ${text}`, "info");
  }

  // ---------------------------------------------------------------- tools

  /**
   * A `data-confirmation` chunk's data: what an ADK tool's confirmation asks
   * (its hint), for the approval request that follows it. At most a few
   * are kept: one per request still to come.
   */
  confirmationAsked(data) {
    if (typeof data.approvalId !== "string") return;
    this.confirmations.set(data.approvalId, data);
    while (this.confirmations.size > 16) this.confirmations.delete(this.confirmations.keys().next().value);
  }

  /**
   * A tool chunk from the server. Returns the call when the browser is to
   * run it now (`clientExecutes`), once per call however often it is asked.
   */
  toolChunk(chunk) {
    const id = chunk.toolCallId;
    switch (chunk.type) {
      case "tool-input-available": {
        let call = this.toolCalls.get(id);
        if (!call) {
          call = { toolCallId: id, toolName: chunk.toolName, input: chunk.input ?? {}, running: false };
          this.toolCalls.set(id, call);
        }
        if (!clientExecutes(chunk) || call.running) return null;
        call.running = true;
        return call;
      }
      case "tool-approval-request": {
        if (this.approvals.some((a) => a.approvalId === chunk.approvalId)) return null;
        const call = this.toolCalls.get(id);
        const confirmation = this.confirmations.get(chunk.approvalId);
        this.confirmations.delete(chunk.approvalId);
        this.approvals.push({
          approvalId: chunk.approvalId,
          toolCallId: id,
          toolName: call?.toolName ?? "a tool",
          input: call?.input ?? {},
          hint: typeof confirmation?.hint === "string" ? confirmation.hint : "",
        });
        return null;
      }
      case "tool-output-available":
      case "tool-output-error":
      case "tool-output-denied":
        // Resolved, also without the user (a timeout, a barge-in): no more asking.
        this.toolCalls.delete(id);
        this.approvals = this.approvals.filter((a) => a.toolCallId !== id);
        return null;
    }
    return null;
  }

  /** The approval the dialog asks about, or null. */
  get approval() {
    return this.approvals[0] ?? null;
  }

  /** The user answered; returns the answered request (null if it was gone). */
  approvalAnswered(approvalId, approved) {
    const request = this.approvals.find((a) => a.approvalId === approvalId) ?? null;
    this.approvals = this.approvals.filter((a) => a.approvalId !== approvalId);
    if (request) this.decisions.push({ toolName: request.toolName, approved });
    return request;
  }

  /** A browser tool finished: `result` is {output} or {errorText}. */
  toolRan(call, result) {
    this.toolRuns.push({ toolName: call.toolName, input: call.input, ...result });
  }

  musicChanged(track) {
    this.music = { ...this.music, track };
  }

  /** The music ducks while the agent is audible; returns true when that changed. */
  duckMusic() {
    const ducked = this.music.track !== "off" && this.agentAudible;
    if (ducked === this.music.ducked) return false;
    this.music = { ...this.music, ducked };
    return true;
  }

  // ---------------------------------------------------------------- tasks

  /**
   * A `data-task` chunk's data: the card with that id, the latest wins.
   * Returns the card.
   */
  taskChanged(data) {
    const known = this.tasks.get(data.id);
    // A cancel in flight keeps its button off until the task leaves the
    // states it could be cancelled in.
    const cancelRequested = !!known?.cancelRequested && taskOffersCancel(data);
    const card = { ...data, cancelRequested };
    this.tasks.set(data.id, card);
    if (known?.state !== card.state) this.taskStates.push({ id: card.id, state: card.state });
    return card;
  }

  /** The user pressed Cancel; returns false when the card offers no cancel. */
  taskCancelRequested(id) {
    const card = this.tasks.get(id);
    if (!card || !taskCancellable(card)) return false;
    this.tasks.set(id, { ...card, cancelRequested: true });
    return true;
  }

  /** The cancel did not reach the server (no socket): the button comes back. */
  taskCancelFailed(id) {
    const card = this.tasks.get(id);
    if (card) this.tasks.set(id, { ...card, cancelRequested: false });
  }

  // ---------------------------------------------------------------- view

  /**
   * The test hook: a frozen object whose fields are copies of the state,
   * taken when read, so a reader can never change the page. `probes` adds
   * readings of live resources (functions), e.g. the mic's settings.
   */
  view(probes = {}) {
    const fields = {
      state: () => this.connection,
      reconnects: () => this.reconnects,
      mode: () => this.mode,
      session: () => this.session,
      muted: () => this.muted, // a local interrupt waits for the server's data-interrupted
      sampleRate: () => this.sampleRate,
      errors: () => this.errors,
      serverErrors: () => this.serverErrors,
      capture: () => this.capture,
      playback: () => this.playback,
      events: () => this.events,
      received: () => this.received,
      flushes: () => this.flushes,
      latencies: () => this.latencies,
      released: () => this.released,
      approval: () => this.approval, // what the approval dialog shows (null: closed)
      decisions: () => this.decisions,
      toolRuns: () => this.toolRuns,
      music: () => this.music,
      tasks: () => [...this.tasks.values()], // the cards, oldest first
      taskStates: () => this.taskStates,
      listening: () => this.listening,
      speech: () => this.speech,
    };
    const view = { ...probes };
    for (const [name, read] of Object.entries(fields)) {
      Object.defineProperty(view, name, { get: () => structuredClone(read()), enumerable: true });
    }
    return Object.freeze(view);
  }
}
