"""Background tasks: long work that does not block the conversation.

The live agent starts, checks and cancels tasks with three tools
(``live_tools.py``) that answer at once; a backend agent does the work, one
task at a time per owner (``adk_backend.py`` or ``acp_backend.py``, ``manager.py``); the records
live in the session database (``records.py``, ``ledger.py``); a live
connection delivers each outcome once, through a renewable claim
(``outcome_claims.py``).
"""

from .live_tools import owner_from_context, write_owner
from .manager import TaskManager, TooManyTasks
from .records import TaskRecord

__all__ = [
    "TaskManager",
    "TaskRecord",
    "TooManyTasks",
    "owner_from_context",
    "write_owner",
]
