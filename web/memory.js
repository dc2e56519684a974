// What the agent remembers about the user (docs/memory.md), with Forget per
// item: the memory REST (GET /memory, DELETE /memory/{id}) under the user's
// key (X-User-Key), or under the token that speaks for its owner.
//
// The list is read when a conversation opens and again after each answer of
// the agent's user_memory tool, so a fact the user just told appears, and a
// forgotten one goes; it is painted from the server's answer only.

/**
 * The memory REST's base URL for a socket URL: its sibling, so a server
 * mounted under a prefix keeps it (ws://host/voice/ws -> http://host/voice/memory).
 */
export function memoryUrl(socketUrl) {
  const url = new URL("memory", socketUrl);
  url.protocol = url.protocol === "wss:" ? "https:" : "http:";
  url.search = "";
  url.hash = "";
  return url.href;
}

export class MemoryPanel {
  /**
   * @param {HTMLElement} root the section that holds the list (hidden while empty)
   * @param {string} baseUrl memoryUrl(...)
   * @param {() => Promise<Record<string, string>>} credentials the request's headers
   * @param {(message: string) => void} report a failure, in words
   */
  constructor(root, baseUrl, credentials, report) {
    this.root = root;
    this.baseUrl = baseUrl;
    this.credentials = credentials;
    this.report = report;
    this.items = []; // the last list the server gave: [{id, text, created}]
    this.reads = 0; // lists painted, for tests (__demo)
  }

  async refresh() {
    const answer = await this._call(this.baseUrl + "?limit=50", "GET");
    if (!answer) return;
    this.items = answer.memories.map(({ id, text, created }) => ({ id, text, created }));
    this.reads += 1;
    this._paint();
  }

  async forget(id) {
    if (await this._call(`${this.baseUrl}/${encodeURIComponent(id)}`, "DELETE")) {
      await this.refresh();
    }
  }

  async _call(url, method) {
    try {
      const response = await fetch(url, { method, headers: await this.credentials() });
      const body = await response.json();
      if (!response.ok) throw new Error(body.detail ?? `HTTP ${response.status}`);
      return body;
    } catch (error) {
      this.report(`Memory: ${error.message}`);
      return null;
    }
  }

  _paint() {
    const list = document.createElement("ul");
    list.className = "memory-list";
    for (const item of this.items) {
      const row = document.createElement("li");
      row.className = "memory-item";
      row.id = `memory-${item.id}`;
      const text = document.createElement("span");
      text.className = "memory-text";
      text.textContent = item.text; // the user's words: text, never markup
      const forget = document.createElement("button");
      forget.type = "button";
      forget.className = "memory-forget";
      forget.textContent = "Forget";
      forget.setAttribute("aria-label", `Forget: ${item.text}`);
      forget.addEventListener("click", () => {
        forget.disabled = true;
        this.forget(item.id);
      });
      row.append(text, forget);
      list.append(row);
    }
    const heading = document.createElement("h2");
    heading.textContent = "What I remember about you";
    this.root.replaceChildren(heading, list);
    this.root.hidden = this.items.length === 0;
  }
}
