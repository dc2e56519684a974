import assert from "node:assert/strict";
import test from "node:test";

import { TokenSource, tokenUrlFrom, withToken } from "../../../web/credentials.js";

/** A token service that answers tokens living ``lifeS`` from ``clock.now``. */
function service(clock, lifeS) {
  const calls = [];
  const fetchImpl = async (url, init) => {
    calls.push({ url, init });
    const token = `t${calls.length}`;
    return { ok: true, json: async () => ({ token, expiresAt: clock.now / 1000 + lifeS }) };
  };
  return { calls, fetchImpl };
}

test("the token URL: ?tokenUrl= first, then the meta, else none", () => {
  const doc = (content) => ({ querySelector: () => (content === null ? null : { content }) });
  assert.equal(tokenUrlFrom(new URLSearchParams("tokenUrl=/a"), doc("/b")), "/a");
  assert.equal(tokenUrlFrom(new URLSearchParams(""), doc("/b")), "/b");
  assert.equal(tokenUrlFrom(new URLSearchParams(""), doc("")), null);
  assert.equal(tokenUrlFrom(new URLSearchParams(""), doc(null)), null);
});

test("withToken sets ?token= and keeps the rest", () => {
  assert.equal(withToken("wss://h/ws?x=1", "a.b"), "wss://h/ws?x=1&token=a.b");
  assert.equal(withToken("ws://h/ws?token=old", "new"), "ws://h/ws?token=new");
});

test("a token is reused until its renewal time, then fetched anew", async () => {
  const clock = { now: 1_000_000 };
  const { calls, fetchImpl } = service(clock, 600);
  const tokens = new TokenSource("/token", { fetchImpl, now: () => clock.now });
  assert.equal(await tokens.token(), "t1");
  assert.equal(calls[0].init.method, "POST");
  assert.equal(calls[0].init.credentials, "same-origin");
  clock.now += 539_000; // 61 s before expiry
  assert.equal(await tokens.token(), "t1");
  clock.now += 1_000; // 60 s before: renewed
  assert.equal(await tokens.token(), "t2");
  assert.equal(tokens.fetched, 2);
});

test("a short-lived token is renewed halfway through its life", async () => {
  const clock = { now: 0 };
  const { fetchImpl } = service(clock, 10);
  const tokens = new TokenSource("/token", { fetchImpl, now: () => clock.now });
  await tokens.token();
  assert.equal(tokens.current.renewAt, 5);
  clock.now = 4_999;
  assert.equal(await tokens.token(), "t1");
  clock.now = 5_000;
  assert.equal(await tokens.token(), "t2");
});

test("concurrent asks share one request", async () => {
  const clock = { now: 0 };
  const { calls, fetchImpl } = service(clock, 600);
  const tokens = new TokenSource("/token", { fetchImpl, now: () => clock.now });
  const both = await Promise.all([tokens.token(), tokens.token()]);
  assert.deepEqual(both, ["t1", "t1"]);
  assert.equal(calls.length, 1);
});

test("a refusal or a body without a token is an error that says so", async () => {
  const refused = new TokenSource("/token", { fetchImpl: async () => ({ ok: false, status: 401 }) });
  await assert.rejects(refused.token(), /answered 401/);
  const empty = new TokenSource("/token", {
    fetchImpl: async () => ({ ok: true, json: async () => ({}) }),
  });
  await assert.rejects(empty.token(), /without a token/);
});
