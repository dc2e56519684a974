// Tokens for a server that requires credentials (docs/credentials.md).
//
// The page never holds the API key. The operator's backend, which knows who
// is signed in, mints a token with the key (POST /tokens) and hands it to
// the page at a URL the operator configures: <meta name="audiocore-token-url"
// content="/auth/audiocore-token"> in index.html, or ?tokenUrl= on the page's
// address. It must answer JSON {"token", "expiresAt"} (Unix seconds), as
// POST /tokens itself does, and be on the page's own origin (the Content
// Security Policy allows no other). Each socket is opened with a token that
// is good for a while yet (as ?token=); a fresh one is fetched ahead of
// expiry, so a reconnect never waits on an expired one. Without a token URL
// the page connects as before.

/** The operator's token URL, if one is configured: ?tokenUrl= or the meta. */
export function tokenUrlFrom(params, doc) {
  const meta = doc.querySelector('meta[name="audiocore-token-url"]');
  return params.get("tokenUrl") || meta?.content || null;
}

/** ``url`` with ``?token=`` set (replacing one already there). */
export function withToken(url, token) {
  const parsed = new URL(url);
  parsed.searchParams.set("token", token);
  return parsed.href;
}

export class TokenSource {
  /**
   * @param {string} url the operator's token URL
   * @param {object} [options]
   * @param {typeof fetch} [options.fetchImpl]
   * @param {() => number} [options.now] milliseconds, as Date.now
   * @param {number} [options.aheadS] renew this long before expiry, at most
   *   half a token's life (a short-lived token is renewed halfway)
   */
  constructor(url, { fetchImpl = (...a) => globalThis.fetch(...a), now = Date.now, aheadS = 60 } = {}) {
    this.url = url;
    this.fetchImpl = fetchImpl;
    this.now = now;
    this.aheadS = aheadS;
    this.current = null; // {token, expiresAt, renewAt} (seconds)
    this.fetched = 0; // tokens fetched so far (the page's status and tests)
    this.timer = 0;
    this.pending = null;
  }

  /** A token good until its renewal time: the current one, or a fresh one. */
  async token() {
    if (this.current && this.now() / 1000 < this.current.renewAt) return this.current.token;
    return (await this.renew()).token;
  }

  /** Fetch a fresh token now (one request at a time) and schedule the next. */
  renew() {
    this.pending ??= this.fetchToken().finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  /** Keep a fresh token ready while the page is connected; ``stop()`` ends it. */
  keepFresh() {
    this.stop();
    if (!this.current) return;
    const inMs = Math.max(0, this.current.renewAt * 1000 - this.now());
    this.timer = setTimeout(() => {
      this.renew().then(
        () => this.keepFresh(),
        () => {}, // the next connect asks again and reports the failure
      );
    }, inMs);
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = 0;
  }

  async fetchToken() {
    const response = await this.fetchImpl(this.url, {
      method: "POST",
      credentials: "same-origin", // the operator's session cookie says who is signed in
      headers: { accept: "application/json" },
    });
    if (!response.ok) throw new Error(`The token service answered ${response.status}.`);
    const { token, expiresAt } = await response.json();
    if (typeof token !== "string" || typeof expiresAt !== "number") {
      throw new Error("The token service answered without a token.");
    }
    const issuedAt = this.now() / 1000;
    const ahead = Math.min(this.aheadS, Math.max(0, expiresAt - issuedAt) / 2);
    this.current = { token, expiresAt, renewAt: expiresAt - ahead };
    this.fetched += 1;
    return this.current;
  }
}
