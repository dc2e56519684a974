// The page's connection: Connect, Disconnect, and a socket lost and opened
// again. `live` holds the resources of the current connection; the page
// reads them, only this module makes and releases them.
//
// Flow: Connect (a click, so audio may start) -> AudioContext at the native
// rate -> worklets -> microphone -> socket with a `start` that declares that
// rate both ways -> conversation. Disconnect stops the mic tracks and closes
// the context; the session id is kept so the next Connect resumes it.
//
// Reconnect: a socket the server or the network dropped (sdk/reconnect.js says
// which closes) is opened again on the same session after a bounded backoff
// with jitter, while the pill says "Reconnecting…". The audio context and the
// microphone stay; the dropped turn's playback is cut; nothing the user sent
// is sent again; the server asks again about the approvals still pending.
//
// What the browser gives (the AudioContext, the music bus, the socket) comes
// from the page's factories, so the lifecycle runs under node with fakes too.

import { describeMicError } from "./audio.js";
import { Pcm16Decoder } from "./sdk/pcm.js";
import { TurnRecorder } from "./replay.js";
import { describeClose } from "./sdk/session.js";

export const STATUS_EVERY_MS = 250; // the status line's figures

export class PageConnection {
  /**
   * @param {object} page
   * @param {import("./state.js").PageState} page.state
   * @param {() => void} page.render
   * @param {(text: string, kind?: string) => void} page.showMessage
   * @param {import("./sdk/reconnect.js").ReconnectPolicy} page.reconnects
   * @param {boolean} page.secure the page's isSecureContext (AudioWorklet and the mic need it)
   * @param {() => object} page.newEngine an AudioEngine, synchronously: inside the click
   * @param {(context: AudioContext) => object} page.newMusic the music bus
   * @param {(engine: object) => Promise<object>} page.newSession a LiveSession, not yet
   *   open, on the kept session
   * @param {object} page.on what the page does meanwhile: `audio(event)` and
   *   `chunk(event)` (the session's), `opened(info, session)` (each socket's
   *   data-session), `ready()` (the first socket is up, the mic perhaps not
   *   yet), `connected()` (the conversation is up), `dropped()` (the socket
   *   is lost: the turn in flight is cut), `released()` (Disconnect or give up)
   */
  constructor(page) {
    this.page = page;
    /** {engine, music, session, decoder, recorder, statusTimer, muteTimer, retryTimer, toolResults} */
    this.live = null;
  }

  async connect() {
    const { state, render, showMessage, reconnects } = this.page;
    if (this.live) return;
    state.connectRequested();
    if (!this.page.secure) {
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
      engine = this.page.newEngine();
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
    this.live = conn;
    reconnects.reset();
    state.connecting(engine.sampleRate);
    render();
    try {
      await engine.startPlayback();
    } catch (error) {
      if (this.live === conn) await this.#fail(`Audio playback could not start: ${error.message}`);
      return;
    }
    conn.music = this.page.newMusic(engine.context);
    // The microphone and the socket in parallel; a denied mic still leaves a
    // typed conversation (with spoken answers).
    const mic = engine.startCapture().then(
      () => true,
      (error) => {
        if (this.live === conn) showMessage(describeMicError(error));
        return false;
      },
    );
    try {
      await this.#openSocket(conn);
    } catch (error) {
      if (this.live === conn) await this.#fail(error.message);
      return;
    }
    if (this.live !== conn) return; // disconnected meanwhile
    this.page.on.ready();
    const micOpen = await mic;
    if (this.live !== conn) return;
    state.connected({ micOpen });
    this.page.on.connected();
    this.#watchDevices(engine);
    conn.statusTimer = setInterval(render, STATUS_EVERY_MS);
    render();
  }

  async disconnect() {
    if (!this.live) return;
    this.live.session?.close(1000, "user disconnect");
    await this.#teardown();
    this.page.state.disconnected();
    this.page.render();
  }

  /**
   * A socket for `conn` on the kept session (a first connect or a reconnect):
   * resolves once data-session arrived; rejects with the close's `detail`.
   */
  async #openSocket(conn) {
    const session = await this.page.newSession(conn.engine);
    if (this.live !== conn) return;
    conn.session = session;
    session.addEventListener("audio", this.page.on.audio);
    session.addEventListener("chunk", this.page.on.chunk);
    const info = await session.open();
    if (this.live !== conn || conn.session !== session) {
      session.close();
      return;
    }
    session.addEventListener("closed", this.#onClosed); // from now on a close is news to report
    this.page.reconnects.connected();
    this.page.on.opened(info, session);
  }

  /** Connecting failed: say why and release what was started. */
  async #fail(text) {
    this.page.showMessage(text);
    await this.#teardown();
    this.page.state.failed("Not connected");
    this.page.render();
  }

  /** Tell the user when the browser pauses audio or the mic goes away. */
  #watchDevices(engine) {
    const { state, render, showMessage } = this.page;
    const current = () => this.live?.engine === engine;
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

  /** Release everything: socket, mic, context. The caller renders. */
  async #teardown() {
    const conn = this.live;
    if (!conn) return;
    this.live = null;
    this.page.on.released();
    clearInterval(conn.statusTimer);
    clearTimeout(conn.muteTimer);
    clearTimeout(conn.retryTimer);
    this.page.reconnects.reset();
    this.page.state.closed();
    if (conn.session) {
      conn.session.removeEventListener("closed", this.#onClosed);
      conn.session.close();
    }
    conn.music?.close();
    const { engine } = conn;
    const tracks = engine.stream?.getTracks() ?? [];
    await engine.close();
    const released = { tracks: tracks.map((t) => t.readyState), context: engine.context.state };
    this.page.state.resourcesReleased(released);
  }

  #onClosed = (event) => {
    // The server or the network ended the conversation (our own close is
    // handled by disconnect()).
    const conn = this.live;
    if (!conn || event.target !== conn.session) return;
    conn.session = null;
    event.target.removeEventListener("closed", this.#onClosed);
    this.#connectionLost(conn, event.detail);
  };

  /** The socket is gone: come back after the policy's wait, or give up and say why. */
  #connectionLost(conn, detail) {
    const { state, render, showMessage, reconnects } = this.page;
    const decision = reconnects.lost(detail);
    if (!decision.retry) {
      const advice = state.resumeId ? " Press Connect to resume the conversation." : "";
      showMessage(`${describeClose(detail)}${advice}`);
      this.#teardown().then(() => {
        state.failed("Disconnected");
        render();
      });
      return;
    }
    if (state.connection !== "reconnecting") {
      // The answer in flight is cut cleanly, and its late audio never plays.
      conn.recorder.take();
      clearTimeout(conn.muteTimer);
      state.connectionLost();
      this.page.on.dropped();
    }
    state.reconnecting({ attempt: decision.attempt, maxAttempts: reconnects.policy.maxAttempts });
    const seconds = Math.max(1, Math.round(decision.delayMs / 1000));
    showMessage(`${describeClose(detail)} Reconnecting in ${seconds} s…`, "info");
    conn.retryTimer = setTimeout(() => this.#reconnect(conn), decision.delayMs);
  }

  async #reconnect(conn) {
    if (this.live !== conn) return;
    try {
      await this.#openSocket(conn);
    } catch (error) {
      if (this.live === conn) this.#connectionLost(conn, error.detail ?? { code: 1006, opened: false });
      return;
    }
    if (this.live !== conn) return;
    this.page.state.clearMessage();
    this.page.state.connected({ micOpen: this.page.state.micOpen });
    this.page.render();
  }
}
