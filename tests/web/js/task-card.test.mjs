import assert from "node:assert/strict";
import test from "node:test";

import {
  MAX_PERMISSION_TITLE_CHARS,
  TASK_STAGES,
  TASK_STATUSES,
  permissionQuestion,
  taskCardText,
} from "../../../web/task-card.js";

/** A data-task chunk's data as server/tasks/records.py TaskRecord.chunk builds it. */
function card(state, extra = {}) {
  const processing = state === "queued" || state === "running";
  return {
    id: "task_0123abcd",
    state,
    status: processing ? "processing" : state,
    stage: state === "queued" ? "queued" : null,
    permission: null,
    objective: "ask permission",
    progress: null,
    result: null,
    error: null,
    delivery: "none",
    ...extra,
  };
}

const ASKS = (title) => `The agent asks permission to: ${title} — say “yes, always” or “no”`;

test("queued and running are one status, processing, with the stage beside it", () => {
  assert.deepEqual(taskCardText(card("queued")), {
    status: "processing",
    stage: "queued",
    question: null,
    detail: null,
  });
  const delegated = card("running", { stage: "delegated", progress: { phrase: "running commands" } });
  assert.deepEqual(taskCardText(delegated), {
    status: "processing",
    stage: "delegated to the agent",
    question: null,
    detail: "running commands",
  });
  // The ADK backend's progress: its tool and arguments.
  const adk = card("running", { progress: { tool: "wait", detail: "seconds=2" } });
  assert.equal(taskCardText(adk).detail, "wait seconds=2");
  const finalizing = taskCardText(card("running", { stage: "finalizing" }));
  assert.equal(finalizing.stage, "finalizing");
  // The ADK backend's running task has no stage: nothing beside the status.
  assert.equal(taskCardText(card("running")).stage, null);
  // A stage the page does not know yet is shown as the server words it.
  assert.equal(taskCardText(card("running", { stage: "reviewing" })).stage, "reviewing");
});

test("every other status in the page's words, with no stage", () => {
  for (const state of ["cancelling", "completed", "failed", "cancelled"]) {
    const text = taskCardText(card(state, { stage: "finalizing" }));
    assert.equal(text.status, TASK_STATUSES[state], state);
    assert.equal(text.stage, null, state);
  }
  assert.equal(TASK_STATUSES.cancelling, "cancelling…");
  assert.equal(taskCardText(card("completed", { result: "Permission: allow_always." })).detail, "Permission: allow_always.");
  assert.equal(taskCardText(card("failed", { error: "the ACP agent exited" })).detail, "the ACP agent exited");
  assert.deepEqual(Object.keys(TASK_STAGES), ["queued", "delegated", "finalizing"]);
});

test("a card without status (a server before it) reads its state", () => {
  const { status, ...older } = card("running");
  assert.equal(status, "processing");
  assert.equal(taskCardText(older).status, "running");
});

test("the permission question is asked while it is set and gone once it is null", () => {
  const asking = card("running", { stage: "delegated", permission: { id: "perm_0a1b2c3d", title: "run the tests" } });
  assert.equal(taskCardText(asking).question, ASKS("run the tests"));
  assert.equal(taskCardText({ ...asking, permission: null }).question, null);
  // The title is the agent's: kept as it came (render.js shows it as text).
  const markup = '<img src=x onerror="alert(1)">';
  assert.equal(permissionQuestion({ id: "perm_1", title: markup }), ASKS(markup));
});

test("the question's title is bounded, and a missing one still asks", () => {
  const long = "x".repeat(MAX_PERMISSION_TITLE_CHARS + 40);
  const asked = permissionQuestion({ id: "perm_1", title: long });
  assert.equal(asked, ASKS(`${"x".repeat(MAX_PERMISSION_TITLE_CHARS - 1)}…`));
  const exact = "y".repeat(MAX_PERMISSION_TITLE_CHARS);
  assert.equal(permissionQuestion({ id: "perm_1", title: exact }), ASKS(exact));
  // Characters as the server counts them (code points): an emoji is one,
  // and a cut never leaves half of one.
  const emoji = "🙂".repeat(MAX_PERMISSION_TITLE_CHARS);
  assert.equal(permissionQuestion({ id: "perm_1", title: emoji }), ASKS(emoji));
  const cut = permissionQuestion({ id: "perm_1", title: `${emoji}🙂` });
  assert.equal(cut, ASKS(`${"🙂".repeat(MAX_PERMISSION_TITLE_CHARS - 1)}…`));
  assert.ok(cut.isWellFormed(), "a lone surrogate");
  for (const title of [undefined, null, 42, "   "]) {
    assert.equal(permissionQuestion({ id: "perm_1", title }), ASKS("an unnamed action"), String(title));
  }
});
