import assert from "node:assert/strict";
import test from "node:test";

import { Conversation } from "../../../web/conversation.js";
import { markdownElements, parseInline, parseMarkdown, safeHref } from "../../../web/markdown.js";

/** Just enough of a DOM to see what markdown.js builds, and that it never parses HTML. */
class FakeNode {
  constructor(tag, text = null) {
    this.tag = tag;
    this.children = [];
    this.attributes = {};
    this._text = text;
  }
  append(...nodes) {
    this.children.push(...nodes);
  }
  setAttribute(name, value) {
    this.attributes[name] = value;
  }
  set textContent(text) {
    this._text = text;
    this.children = [];
  }
  set innerHTML(_) {
    throw new Error("innerHTML is never used");
  }
  /** The tree as [tag, attributes?, ...children] (a text node: its text). */
  shape() {
    if (this.tag === "#text") return this._text;
    const kids = this._text !== null ? [this._text] : this.children.map((c) => c.shape());
    return Object.keys(this.attributes).length ? [this.tag, this.attributes, ...kids] : [this.tag, ...kids];
  }
}
const doc = {
  createElement: (tag) => new FakeNode(tag),
  createTextNode: (text) => new FakeNode("#text", text),
};
const shapes = (source) => markdownElements(doc, source).map((el) => el.shape());
const LINK = { rel: "noopener noreferrer nofollow", target: "_blank" };

test("paragraphs, headings, lists and code blocks", () => {
  const source = [
    "## Sums",
    "The **total** is `42`, see",
    "[the sheet](https://example.com/s?a=1).",
    "",
    "- one *item*",
    "- two",
    "1. first",
    "```",
    "x = 1 < 2",
    "```",
  ].join("\n");
  assert.deepEqual(shapes(source), [
    ["h4", "Sums"],
    [
      "p",
      "The ",
      ["strong", "total"],
      " is ",
      ["code", "42"],
      ", see ",
      ["a", { href: "https://example.com/s?a=1", ...LINK }, "the sheet"],
      ".",
    ],
    ["ul", ["li", "one ", ["em", "item"]], ["li", "two"]],
    ["ol", ["li", "first"]],
    ["pre", ["code", "x = 1 < 2"]],
  ]);
});

test("raw HTML is text, and a link is a link to http(s) or mailto only", () => {
  const hostile = '<script>alert(1)</script> <img src=x onerror="alert(1)">';
  assert.deepEqual(shapes(hostile), [["p", hostile]]);
  for (const href of ["javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "vbscript:x", "/relative"]) {
    assert.equal(safeHref(href), false, href);
    assert.deepEqual(parseInline(`[click](${href})`), [{ type: "text", text: `[click](${href})` }], href);
  }
  assert.deepEqual(shapes("[mail](mailto:a@example.com)"), [["p", ["a", { href: "mailto:a@example.com", ...LINK }, "mail"]]]);
  // A code block's content is text whatever it holds.
  assert.deepEqual(shapes("```\n<b>not bold</b>\n```"), [["pre", ["code", "<b>not bold</b>"]]]);
});

test("odd input: nothing, an unclosed fence, marks left open", () => {
  assert.deepEqual(parseMarkdown(""), []);
  assert.deepEqual(parseMarkdown(undefined), []);
  assert.deepEqual(shapes("```\nno end"), [["pre", ["code", "no end"]]]);
  assert.deepEqual(shapes("**open and `tick"), [["p", "**open and `tick"]]);
});

test("the conversation keeps a task's Markdown part as an entry of its own", () => {
  const seen = [];
  const conversation = new Conversation((entry, { isNew }) => seen.push([entry.role, isNew, entry.final]));
  const meta = { audiocore: { format: "markdown", taskId: "task_0123abcd" } };
  for (const chunk of [
    { type: "start", messageId: "m1" },
    { type: "text-start", id: "t1" },
    { type: "text-delta", id: "t1", delta: "Your task is done." },
    { type: "text-end", id: "t1" },
    { type: "text-start", id: "inline_task_0123abcd", providerMetadata: meta },
    { type: "text-delta", id: "inline_task_0123abcd", delta: "**done**: " },
    { type: "text-delta", id: "inline_task_0123abcd", delta: "[the notes](https://example.com)" },
    { type: "text-end", id: "inline_task_0123abcd" },
    { type: "finish" },
  ]) {
    conversation.apply(chunk);
  }
  const [agent, inline] = conversation.entries;
  assert.equal(agent.role, "agent");
  assert.equal(agent.text, "Your task is done.");
  assert.equal(inline.role, "inline");
  assert.equal(inline.taskId, "task_0123abcd");
  assert.equal(inline.text, "**done**: [the notes](https://example.com)");
  assert.equal(inline.final, true);
  assert.deepEqual(seen.at(-2), ["inline", false, true]);
});
