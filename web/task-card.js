// What a background task's card says, from its `data-task` data
// (docs/protocol.md): the status in a word, the stage beside it, the line
// under them, and the question of an ACP agent waiting for the user's
// permission. Pure (no DOM), so it runs under `node --test`; render.js paints
// it, always as text: the question's title comes from an external agent.

import { TASK_STATES } from "./state.js";

/** The card's `status` in the page's words: one "processing" for queued and running. */
export const TASK_STATUSES = { ...TASK_STATES, processing: "processing" };

/** The finer `stage` beside "processing". */
export const TASK_STAGES = {
  queued: "queued",
  delegated: "delegated to the agent",
  finalizing: "finalizing",
};

// The server bounds the title already (server/tasks/acp_permissions.py,
// 160 characters); the page bounds what it shows whichever server it talks to.
// Characters as the server counts them: code points, not UTF-16 units (an
// emoji is one, and a cut never splits it).
export const MAX_PERMISSION_TITLE_CHARS = 160;

/** The question the card asks while the task's agent waits for a decision. */
export function permissionQuestion(permission) {
  let title = typeof permission.title === "string" ? permission.title.trim() : "";
  if (title.length > MAX_PERMISSION_TITLE_CHARS) {
    const chars = Array.from(title);
    if (chars.length > MAX_PERMISSION_TITLE_CHARS) {
      title = `${chars.slice(0, MAX_PERMISSION_TITLE_CHARS - 1).join("")}…`;
    }
  }
  return `The agent asks permission to: ${title || "an unnamed action"} — say “yes, always” or “no”`;
}

/**
 * The progress line: an ACP agent's `{phrase}` (a fixed vocabulary: "reading
 * files", "running commands"… never the agent's own words), or the ADK
 * backend's `{tool, detail}`.
 */
function progressText(progress) {
  if (!progress) return null;
  if (typeof progress.phrase === "string") return progress.phrase;
  return `${progress.tool ?? ""} ${progress.detail ?? ""}`.trim();
}

/**
 * A card's words: {status, stage, question, detail}, each a string or null
 * (null: not shown). `stage` only while processing; `question` only while
 * `permission` is set; `detail` the result, the error or the progress.
 */
export function taskCardText(card) {
  const status = card.status ?? card.state;
  const stage = status === "processing" && card.stage ? (TASK_STAGES[card.stage] ?? card.stage) : null;
  const detail =
    card.state === "completed"
      ? card.result
      : card.state === "failed"
        ? card.error
        : progressText(card.progress);
  return {
    status: TASK_STATUSES[status] ?? status,
    stage,
    question: card.permission ? permissionQuestion(card.permission) : null,
    detail: detail || null,
  };
}
