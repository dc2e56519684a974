// When a lost /ws socket is opened again, and after how long
// (docs/protocol.md, "Reconnecting"). Pure: the caller owns the timers and
// the socket, and passes the clock and the random source in, so tests decide
// both. The demo page (../app.js) and the AI SDK transport (chat-transport.js)
// share it.
//
// Which closes come back: those that say the server or the network went
// away and the session is kept; not those that say "do not come back".

/** Closes after which the same session is opened again. */
export const RECONNECT_CODES = new Set([
  1001, // going away (a proxy, or a server shutting down)
  1005, // no status: the socket ended without a close frame's code
  1006, // abnormal: the network or the process went away
  1011, // the server failed (the session is kept)
  1012, // service restart
  1013, // try again later (the session still held by a hung process)
  1014, // bad gateway
]);
// Not: 1000 (a close someone meant), 1002, 1003, 1007, 1009, 1010 (the
// client sent something wrong: it would again), 1008 (policy: a foreign
// origin, credentials refused or expired, the session taken over by another
// tab, a client that does not read), and any application code (4000–4999).

export const DEFAULT_POLICY = Object.freeze({
  firstDelayMs: 500, // the first retry's ceiling
  maxDelayMs: 15_000, // no wait is longer
  maxAttempts: 10, // then the user decides (about 1 to 2 minutes in all)
  stableMs: 10_000, // a socket up this long has recovered: the next loss starts over
});

/**
 * Does this close ask for the session to be opened again? A socket that
 * never opened counts as lost (the server is down, or restarting): a
 * handshake the server refused looks the same to a browser, which is why
 * the attempts are bounded.
 */
export function reconnectable({ code, opened }) {
  if (!opened) return true;
  return RECONNECT_CODES.has(code);
}

/**
 * The wait before attempt `attempt` (1, 2, …): exponential, capped, with
 * "equal jitter": half the ceiling fixed, half random, so clients that lost
 * the same server spread out and none retries at once.
 */
export function backoffDelay(attempt, random, policy = DEFAULT_POLICY) {
  const ceiling = Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/**
 * The reconnect decisions of one conversation. `lost(close)` after every
 * close the user did not ask for: `{retry: true, attempt, delayMs}`, or
 * `{retry: false, reason}`. `connected()` when a socket is up again (its
 * `data-session` arrived). `reset()` when the user connects or disconnects.
 */
export class ReconnectPolicy {
  /**
   * @param {object} [options]
   * @param {() => number} [options.now]  milliseconds (performance.now, Date.now)
   * @param {() => number} [options.random]  uniform in [0, 1)
   * @param {Partial<typeof DEFAULT_POLICY>} [options.policy]
   */
  constructor({ now = () => Date.now(), random = Math.random, policy = {} } = {}) {
    this.now = now;
    this.random = random;
    this.policy = { ...DEFAULT_POLICY, ...policy };
    this.attempt = 0; // attempts since the last socket that stayed up
    this.upSince = null; // when the current socket came up
  }

  connected() {
    this.upSince = this.now();
  }

  lost(close) {
    if (!reconnectable(close)) {
      this.reset();
      return { retry: false, reason: `close ${close.code} means: do not come back` };
    }
    // A socket that stayed up a while recovered; one that dropped at once
    // (a server that accepts and fails) keeps counting.
    if (this.upSince !== null && this.now() - this.upSince >= this.policy.stableMs) this.attempt = 0;
    this.upSince = null;
    if (this.attempt >= this.policy.maxAttempts) {
      const tries = this.attempt;
      this.reset();
      return { retry: false, reason: `no connection after ${tries} attempts` };
    }
    this.attempt++;
    return {
      retry: true,
      attempt: this.attempt,
      delayMs: backoffDelay(this.attempt, this.random, this.policy),
    };
  }

  reset() {
    this.attempt = 0;
    this.upSince = null;
  }
}
