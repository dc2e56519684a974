"""The session state keys the server writes, named once for every wing that
reads or writes them (and for ``client_state``, which refuses them from
clients)."""

from __future__ import annotations

# Whose background tasks and memory a session's tools use: written by the
# server for clients with a user key (tasks.live_tools.write_owner).
OWNER_STATE_KEY = "task_owner"
# process_payment's record of what the user approved; no client writes it.
LEDGER_STATE_KEY = "ledger"
# The client's time zone (start.timeZone) for the tools of one invocation:
# ``temp:`` state is never stored.
TIME_ZONE_STATE_KEY = "temp:time_zone"
