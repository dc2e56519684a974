"""An ACP agent that breaks the protocol, written without the package (whose
agent side validates what it sends).

Run as ``python acp_raw_agent.py METHOD``: it answers ``initialize``,
``session/new`` and ``session/prompt`` as the protocol says, except METHOD,
which it answers with a field of the wrong type. Before answering a prompt
it sends an update of the wrong type and then a good message chunk.
"""

from __future__ import annotations

import json
import sys
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


def main() -> None:
    broken = sys.argv[1]
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method not in GOOD or "id" not in message:
            continue  # notifications (session/cancel)
        if method == "session/prompt":
            update(5)
            update({"type": "text", "text": "Done."})
        result = BAD[method] if method == broken else GOOD[method]
        send({"id": message["id"], "result": result})


if __name__ == "__main__":
    main()
