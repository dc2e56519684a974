"""An ACP agent that breaks the protocol, written without the package (whose
agent side validates what it sends).

Run as ``python acp_raw_agent.py METHOD``: it answers ``initialize``,
``session/new`` and ``session/prompt`` as the protocol says, except METHOD,
which it answers with a field of the wrong type. Before answering a prompt
it sends an update of the wrong type and then a good message chunk.

Or as ``python acp_raw_agent.py FLOOD [N]``, a hostile agent that, on a
prompt, first floods as fast as its pipes take it:

* ``stderr-flood``: N short lines on its stderr (200,000);
* ``progress-flood``: N ``tool_call`` updates, every tenth a plan (20,000);
* ``long-line``: one stdout line of N MiB (9), then answers;
* ``endless-line``: N MiB on its stdout without a newline (512), then waits
  (a server that reads it whole holds it all).

then answers "Done." (``endless-line``: never).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

GOOD: dict[str, dict[str, Any]] = {
    "initialize": {"protocolVersion": 1, "agentCapabilities": {}},
    "session/new": {"sessionId": "sess_raw"},
    "session/prompt": {"stopReason": "end_turn"},
}
BAD: dict[str, dict[str, Any]] = {
    "initialize": {"protocolVersion": "one"},
    "session/new": {"sessionId": 5},
    "session/prompt": {"stopReason": 7},
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def update(content: Any) -> None:
    params = {
        "sessionId": "sess_raw",
        "update": {"sessionUpdate": "agent_message_chunk", "content": content},
    }
    send({"method": "session/update", "params": params})


FLOODS = {"stderr-flood": 200_000, "progress-flood": 20_000, "long-line": 9, "endless-line": 512}


def flood(kind: str, count: int) -> None:
    if kind == "stderr-flood":
        batch = "".join(f"stderr line {n}\n" for n in range(1000))
        for _ in range(count // 1000):
            sys.stderr.write(batch)
        sys.stderr.flush()
    elif kind == "progress-flood":
        lines = []
        for n in range(count):
            if n % 10 == 9:
                change: dict[str, Any] = {
                    "sessionUpdate": "plan",
                    "entries": [
                        {"content": f"step {n}", "priority": "medium", "status": "pending"}
                    ],
                }
            else:
                change = {
                    "sessionUpdate": "tool_call",
                    "toolCallId": f"call_{n}",
                    "title": f"tool call {n}",
                    "kind": "execute",
                    "status": "in_progress",
                }
            message = {
                "method": "session/update",
                "params": {"sessionId": "sess_raw", "update": change},
            }
            lines.append(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            if len(lines) == 1000:
                sys.stdout.write("".join(lines))
                lines.clear()
        sys.stdout.write("".join(lines))
        sys.stdout.flush()
    elif kind == "long-line":
        update({"type": "text", "text": "L" * (count * 1024 * 1024)})
    elif kind == "endless-line":
        chunk = "x" * (1024 * 1024)
        try:
            for _ in range(count):
                sys.stdout.write(chunk)
            sys.stdout.flush()
        except BrokenPipeError:  # the server ended us
            sys.exit(0)
        while True:
            time.sleep(60)


def main() -> None:
    broken = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else FLOODS.get(broken, 0)
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method not in GOOD or "id" not in message:
            continue  # notifications (session/cancel)
        if method == "session/prompt" and broken in FLOODS:
            flood(broken, count)
            update({"type": "text", "text": "Done."})
        elif method == "session/prompt":
            update(5)
            update({"type": "text", "text": "Done."})
        result = BAD[method] if method == broken else GOOD[method]
        send({"id": message["id"], "result": result})


if __name__ == "__main__":
    main()
