import assert from "node:assert/strict";
import test from "node:test";

import { Conversation } from "../../../web/conversation.js";
import { PageState } from "../../../web/state.js";
import {
  DEFAULT_POLICY,
  RECONNECT_CODES,
  ReconnectPolicy,
  backoffDelay,
  reconnectable,
} from "../../../web/sdk/reconnect.js";

/** A clock the test moves by hand. */
function manualClock(start = 1000) {
  const clock = { t: start, now: () => clock.t };
  return clock;
}

test("closes that mean the server or the network went away reconnect", () => {
  for (const code of [1001, 1005, 1006, 1011, 1012, 1013, 1014]) {
    assert.equal(reconnectable({ code, opened: true }), true, `code ${code}`);
  }
  assert.deepEqual([...RECONNECT_CODES].sort(), [1001, 1005, 1006, 1011, 1012, 1013, 1014]);
});

test("closes that mean do not come back do not reconnect", () => {
  // 1008: policy (origin, credentials, session taken by another tab); the
  // client's own mistakes; a close someone meant; application codes.
  for (const code of [1000, 1002, 1003, 1007, 1008, 1009, 1010, 4000, 4403]) {
    assert.equal(reconnectable({ code, opened: true }), false, `code ${code}`);
  }
});

test("a socket that never opened is a server still down: reconnect", () => {
  assert.equal(reconnectable({ code: 1006, opened: false }), true);
});

test("backoff doubles from the first delay up to the cap, half of it jitter", () => {
  const { firstDelayMs, maxDelayMs } = DEFAULT_POLICY;
  for (let attempt = 1; attempt <= 12; attempt++) {
    const ceiling = Math.min(maxDelayMs, firstDelayMs * 2 ** (attempt - 1));
    assert.equal(backoffDelay(attempt, () => 0), ceiling / 2, `attempt ${attempt}, random 0`);
    assert.equal(backoffDelay(attempt, () => 0.5), (ceiling * 3) / 4, `attempt ${attempt}, random 0.5`);
    // random() is below 1: the delay stays below the ceiling.
    assert.ok(backoffDelay(attempt, () => 0.999999) <= ceiling);
  }
  assert.equal(backoffDelay(1, () => 0), 250);
  assert.equal(backoffDelay(2, () => 0), 500);
  assert.equal(backoffDelay(30, () => 0.999999), maxDelayMs); // capped, also far out
});

test("the policy retries with growing delays, then gives up after maxAttempts", () => {
  const draws = [0.1, 0.9, 0.3, 0.7];
  let i = 0;
  const policy = new ReconnectPolicy({
    now: manualClock().now,
    random: () => draws[i++ % draws.length],
    policy: { maxAttempts: 4 },
  });
  const decisions = [];
  for (let n = 0; n < 4; n++) decisions.push(policy.lost({ code: 1006, opened: n === 0 }));
  assert.deepEqual(
    decisions.map((d) => [d.retry, d.attempt, d.delayMs]),
    [
      [true, 1, backoffDelay(1, () => 0.1)],
      [true, 2, backoffDelay(2, () => 0.9)],
      [true, 3, backoffDelay(3, () => 0.3)],
      [true, 4, backoffDelay(4, () => 0.7)],
    ],
  );
  const last = policy.lost({ code: 1006, opened: false });
  assert.equal(last.retry, false);
  assert.match(last.reason, /after 4 attempts/);
  // Given up: the count starts over for the next conversation.
  assert.equal(policy.lost({ code: 1006, opened: false }).attempt, 1);
});

test("a close that means do not come back stops at once and resets", () => {
  const policy = new ReconnectPolicy({ random: () => 0 });
  policy.lost({ code: 1012, opened: true });
  const decision = policy.lost({ code: 1008, opened: true });
  assert.equal(decision.retry, false);
  assert.match(decision.reason, /1008/);
  assert.equal(policy.attempt, 0);
});

test("a socket that stayed up for stableMs starts the count over", () => {
  const clock = manualClock();
  const policy = new ReconnectPolicy({ now: clock.now, random: () => 0 });
  policy.lost({ code: 1006, opened: true });
  policy.lost({ code: 1006, opened: false });
  policy.connected();
  clock.t += DEFAULT_POLICY.stableMs;
  assert.equal(policy.lost({ code: 1012, opened: true }).attempt, 1);
});

test("a socket that drops at once keeps counting (no fast loop against a failing server)", () => {
  const clock = manualClock();
  const policy = new ReconnectPolicy({ now: clock.now, random: () => 0 });
  policy.lost({ code: 1011, opened: true });
  policy.connected();
  clock.t += DEFAULT_POLICY.stableMs - 1;
  const decision = policy.lost({ code: 1011, opened: true });
  assert.equal(decision.attempt, 2);
  assert.equal(decision.delayMs, backoffDelay(2, () => 0));
});

// ---------------------------------------------------------------- the page's state across a lost socket

const RUN_NOW = { audiocore: { clientExecutes: true } };
const PAY = { toolCallId: "call_1", toolName: "process_payment", input: { amount: 5 } };
const BGM = { toolCallId: "call_2", toolName: "change_bgm", input: { track: "jazz" } };

/** What a resumed session's server sends again about a pending approval. */
function askAgain(call) {
  return [
    { type: "start", messageId: "msg_1" },
    { type: "start-step" },
    { type: "tool-input-start", toolCallId: call.toolCallId, toolName: call.toolName },
    { type: "tool-input-available", ...call },
    { type: "tool-approval-request", approvalId: `apr_${call.toolCallId}`, toolCallId: call.toolCallId },
    { type: "finish-step" },
  ];
}

test("a lost socket cuts the answer in flight and marks an unanswered approval; the server's ask restores it", () => {
  const conversation = new Conversation();
  conversation.apply({ type: "start", messageId: "msg_0" });
  conversation.apply({ type: "text-delta", delta: "Half an ans" });
  conversation.connectionLost();
  const [cut] = conversation.entries;
  assert.equal(cut.interrupted, true);
  assert.equal(cut.final, true);
  assert.equal(conversation.turn, null);

  for (const chunk of askAgain(PAY).slice(0, 5)) conversation.apply(chunk);
  const tool = conversation.entries.at(-1);
  assert.equal(tool.state, "approval");
  conversation.connectionLost();
  assert.equal(tool.state, "unanswered");
  assert.equal(tool.final, true);
  // The next socket asks again: the same entry, waiting again.
  for (const chunk of askAgain(PAY)) conversation.apply(chunk);
  assert.equal(conversation.entries.filter((e) => e.role === "tool").length, 1);
  assert.equal(tool.state, "approval");
  // A finished answer is left as it was.
  conversation.apply({ type: "tool-output-available", toolCallId: "call_1", output: {} });
  conversation.apply({ type: "finish" });
  conversation.connectionLost();
  assert.equal(tool.state, "done");
  assert.equal(cut.text, "Half an ans");
});

test("the page's state forgets the approvals the server will ask again, but not the tools it ran", () => {
  const state = new PageState({ mode: "hands-free", settings: { prebufferMs: 60, binary: true, localBargeIn: false } });
  for (const chunk of askAgain(PAY)) state.toolChunk(chunk);
  // A browser tool that already runs, asked again after the reconnect, does not run twice.
  assert.ok(state.toolChunk({ type: "tool-input-available", ...BGM, providerMetadata: RUN_NOW }));
  state.muteUntilAnswered();
  assert.equal(state.approval.approvalId, "apr_call_1");

  state.connectionLost();
  state.reconnecting({ attempt: 2, maxAttempts: 10 });
  assert.equal(state.approval, null); // the dialog closes until the server asks
  assert.equal(state.muted, false);
  assert.equal(state.connection, "reconnecting");
  assert.equal(state.connectionLabel, "Reconnecting… (2/10)");
  assert.equal(state.view().reconnects, 1);

  for (const chunk of askAgain(PAY)) state.toolChunk(chunk);
  assert.equal(state.approval.approvalId, "apr_call_1");
  assert.equal(state.toolChunk({ type: "tool-input-available", ...BGM, providerMetadata: RUN_NOW }), null);
});
