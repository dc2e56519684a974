// A background task's inline result (Markdown from an external agent) as
// page elements, sanitised by construction: the text is parsed into a small
// tree (paragraphs, headings, lists, code blocks; code, bold, italic, links)
// and built with createElement and textContent only — never innerHTML — so
// raw HTML in it is shown as the text it is, and a link is a link only to
// http(s) or mailto (any other scheme, javascript: included, stays text).

const SAFE_LINK = /^(https?:\/\/|mailto:)/i;
// Inline marks, the earliest match first: code, a link, bold, italic.
const INLINE = /`([^`\n]+)`|\[([^\]\n]+)\]\(([^()\s]+)\)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\n]+)\*|_([^_\n]+)_/;

/** Whether `href` may be a link's target. */
export function safeHref(href) {
  return SAFE_LINK.test(href);
}

/** Inline text → [{type: "text"|"code"|"strong"|"em", text} | {type: "link", text, href}]. */
export function parseInline(text) {
  const out = [];
  let rest = text;
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) {
      out.push({ type: "text", text: rest });
      break;
    }
    if (m.index) out.push({ type: "text", text: rest.slice(0, m.index) });
    if (m[1] !== undefined) out.push({ type: "code", text: m[1] });
    else if (m[2] !== undefined) {
      out.push(safeHref(m[3]) ? { type: "link", text: m[2], href: m[3] } : { type: "text", text: m[0] });
    } else if (m[4] !== undefined || m[5] !== undefined) out.push({ type: "strong", text: m[4] ?? m[5] });
    else out.push({ type: "em", text: m[6] ?? m[7] });
    rest = rest.slice(m.index + m[0].length);
  }
  return out;
}

/**
 * Markdown → blocks: {type: "p", inline}, {type: "h", level, inline},
 * {type: "list", ordered, items: [inline]}, {type: "code", text}.
 */
export function parseMarkdown(source) {
  const blocks = [];
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  let list = null;
  const flush = () => {
    if (paragraph.length) blocks.push({ type: "p", inline: parseInline(paragraph.join(" ")) });
    paragraph = [];
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (/^\s*```/.test(line)) {
      flush();
      const code = [];
      for (i++; i < lines.length && !/^\s*```/.test(lines[i]); i++) code.push(lines[i]);
      blocks.push({ type: "code", text: code.join("\n") });
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      blocks.push({ type: "h", level: heading[1].length, inline: parseInline(heading[2].trim()) });
    } else if (item) {
      if (paragraph.length) flush();
      const ordered = item[2] !== undefined;
      if (!list || list.ordered !== ordered) {
        list = { type: "list", ordered, items: [] };
        blocks.push(list);
      }
      list.items.push(parseInline(item[3].trim()));
    } else if (!line.trim()) {
      flush();
    } else {
      list = null;
      paragraph.push(line.trim());
    }
  }
  flush();
  return blocks;
}

function inlineNodes(doc, inline) {
  return inline.map((span) => {
    if (span.type === "text") return doc.createTextNode(span.text);
    const tag = { code: "code", strong: "strong", em: "em", link: "a" }[span.type];
    const el = doc.createElement(tag);
    el.textContent = span.text;
    if (span.type === "link") {
      el.setAttribute("href", span.href);
      el.setAttribute("rel", "noopener noreferrer nofollow");
      el.setAttribute("target", "_blank");
    }
    return el;
  });
}

/** The Markdown `source` as elements of `doc`, to append to the entry. */
export function markdownElements(doc, source) {
  return parseMarkdown(source).map((block) => {
    if (block.type === "code") {
      const pre = doc.createElement("pre");
      const code = doc.createElement("code");
      code.textContent = block.text;
      pre.append(code);
      return pre;
    }
    if (block.type === "list") {
      const list = doc.createElement(block.ordered ? "ol" : "ul");
      for (const item of block.items) {
        const li = doc.createElement("li");
        li.append(...inlineNodes(doc, item));
        list.append(li);
      }
      return list;
    }
    // Headings sit under the page's own (h1, h2): h3 at most.
    const el = doc.createElement(block.type === "h" ? `h${Math.min(6, block.level + 2)}` : "p");
    el.append(...inlineNodes(doc, block.inline));
    return el;
  });
}
