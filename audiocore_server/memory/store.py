"""Long-term memory per owner: ADK's memory service on our own database.

An owner (``memory_owner``) holds:

* **records** with stable ids (``mem_`` + 12 hex digits): ``fact``s the agent
  was asked to remember (``user_memory``), and ``turn``s stored from
  finished conversations (``store_to_memory``);
* **one profile document**: a section the user maintains, which the agent
  reads and never changes, and a managed section the agent edits, rendered
  between ``MANAGED_START`` and ``MANAGED_END``.

Every call names its owner and touches that owner's rows only: an id of
another owner is "unknown", never found. Search text never reaches SQL as
text: it is cut into words (``search_words``), which a store looks for as
its owner's tokens (``scoped_tokens``, bound as parameters): both stores
index a record's words that way, so a search reads one owner's posting
lists, however large the store. Every change is logged with the
owner's digest, the action, the ids and lengths — never the text or the
owner's key (a capability).

``MemoryStore`` holds what every store shares — the checks, the limits, the
log, and ADK's ``BaseMemoryService``: ADK names its scope by ``user_id``,
which maps to the owner ``user:<id>`` (``gate.owners.api_user_owner``); the server's own
users (``web``, ``chat``) share one id among many people and have no memory
there. The statements are a store's: SQLite with FTS5 in the data directory
(``sqlite.py``, the default), PostgreSQL's full-text search with
``--database-url`` (``postgres.py``, several hosts on one database).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import logging
import re
import secrets
import time
import unicodedata
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from ..gate.owners import api_user_owner, key_owner

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

log = logging.getLogger(__name__)

Kind = Literal["fact", "turn"]

MAX_ENTRY_CHARS = 2_000  # one record
MAX_PROFILE_CHARS = 8_000  # each section of the profile
MAX_QUERY_CHARS = 1_000
MAX_QUERY_WORDS = 16
MAX_IDS = 50  # ids in one replace or forget
MAX_RESULTS = 100
MAX_TURNS_PER_OWNER = 2_000  # stored turns; the oldest go first
MANAGED_START = "<!-- audiocore:memory:managed -->"
MANAGED_END = "<!-- audiocore:memory:end -->"
_ID = re.compile(r"mem_[0-9a-f]{12}")
_WORD = re.compile(r"\w+")
_AS_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")
# Words that say nothing about what is searched for ("what do you remember
# about my dog": dog).
_STOP_TEXT = (
    "a an the and or of to in on at for about is are was were be do does did you your "
    "i me my we our it its that this what which who how remember know tell"
)
_STOP_WORDS = frozenset(_STOP_TEXT.split())


class MemoryInputError(ValueError):
    """Bad input or a limit reached: the text says which."""


@dataclasses.dataclass(frozen=True)
class Record:
    id: str
    kind: Kind
    text: str
    created: float
    author: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "author": self.author,
            "created": _iso(self.created),
        }


@dataclasses.dataclass(frozen=True)
class Profile:
    user_section: str = ""
    managed: str = ""

    def document(self) -> str:
        """The profile as one text: the user's section, then the managed one."""
        return f"{self.user_section}\n{MANAGED_START}\n{self.managed}\n{MANAGED_END}".lstrip("\n")

    def as_json(self) -> dict[str, Any]:
        return {"user": self.user_section, "managed": self.managed, "document": self.document()}


def memory_owner(user_key: str | None, user_id: str) -> str | None:
    """Whose memory a conversation uses: the client's key (``/ws``, ``/live``;
    a token's owner), else its ADK user; None for the server's own users
    without a key — they are shared ids, not people."""
    if user_key is not None:
        return key_owner(user_key)
    return api_user_owner(user_id)


def owner_digest(owner: str) -> str:
    """What a log line shows of an owner (its key is a capability)."""
    return hashlib.sha256(owner.encode()).hexdigest()[:12]


def checked_text(text: object, what: str, limit: int = MAX_ENTRY_CHARS) -> str:
    if not isinstance(text, str):
        raise MemoryInputError(f"{what}: expected a string, got {type(text).__name__}")
    text = text.strip()
    if "\x00" in text:
        raise MemoryInputError(f"{what}: NUL characters are not allowed")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryInputError(f"{what}: not valid Unicode (a lone surrogate)") from None
    if len(text) > limit:
        raise MemoryInputError(f"{what}: at most {limit} characters, got {len(text)}")
    if MANAGED_START in text or MANAGED_END in text:
        raise MemoryInputError(f"{what}: the profile's section markers are not allowed")
    return text


def checked_ids(ids: object) -> list[str]:
    if not isinstance(ids, (list, tuple)) or not ids:
        raise MemoryInputError("ids: expected a non-empty list of memory ids")
    if len(ids) > MAX_IDS:
        raise MemoryInputError(f"ids: at most {MAX_IDS}, got {len(ids)}")
    bad = [i for i in ids if not isinstance(i, str) or not _ID.fullmatch(i)]
    if bad:
        raise MemoryInputError(f"ids: expected ids like mem_0123456789ab, got {bad[:3]!r}")
    return list(dict.fromkeys(ids))


def search_words(query: object) -> list[str]:
    """The words of ``query`` worth searching for, as a store indexes them
    (``index_words``), at most ``MAX_QUERY_WORDS``: a store matches any of
    them, each as a plain word (never as its query language)."""
    if not isinstance(query, str):
        raise MemoryInputError(f"query: expected a string, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise MemoryInputError(f"query: at most {MAX_QUERY_CHARS} characters, got {len(query)}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryInputError("query: not valid Unicode (a lone surrogate)") from None
    words = index_words(query)
    return list(dict.fromkeys(w for w in words if w not in _STOP_WORDS))[:MAX_QUERY_WORDS]


def index_words(text: str) -> list[str]:
    r"""The words of ``text`` as a store indexes them: ``\w+``,
    lowercased, accents folded ("café" finds "cafe")."""
    folded = unicodedata.normalize("NFKD", text.lower())
    return _WORD.findall("".join(c for c in folded if not unicodedata.combining(c)))


def scoped_tokens(owner: str, kind: Kind, words: Iterable[str]) -> list[str]:
    """Each word as a token of ``owner``'s records of ``kind``, which a
    store indexes instead of the word, so that a word's list of records is
    one owner's (a search reads nothing of another's): a keyed 64-bit
    BLAKE2b, written as 16 letters a-p (one word to any full-text parser)."""
    scope = hashlib.blake2b(f"{owner}\x00{kind}".encode(), digest_size=32).digest()
    return [
        hashlib.blake2b(w.encode(), digest_size=8, key=scope).hexdigest().translate(_AS_LETTERS)
        for w in words
    ]


def search_tokens(owner: str, words: list[str], kind: Kind | None) -> list[str]:
    """The tokens a search of ``words`` (``search_words``) looks for: of
    ``kind``, or of either."""
    kinds: tuple[Kind, ...] = (kind,) if kind is not None else ("fact", "turn")
    return [t for k in kinds for t in scoped_tokens(owner, k, words)]


def _iso(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat(timespec="seconds")


def _new_id() -> str:
    return f"mem_{secrets.token_hex(6)}"


class MemoryStore(BaseMemoryService):
    """Owner-scoped records and profiles (see the module docstring); a store
    implements the underscored statements, each one transaction."""

    def __init__(self, *, max_facts: int = 1_000) -> None:
        self.max_facts = max_facts

    # ------------------------------------------------------------ records
    async def remember(
        self,
        owner: str,
        text: str,
        *,
        kind: Kind = "fact",
        author: str | None = None,
        source: str | None = None,
    ) -> Record | None:
        """Store ``text``; None when ``source`` (an event id) was stored
        already. A fact past ``max_facts`` is refused; a turn past
        ``MAX_TURNS_PER_OWNER`` pushes the oldest out."""
        text = checked_text(text, "text")
        if not text:
            raise MemoryInputError("text: expected something to remember, got nothing")
        record = Record(_new_id(), kind, text, time.time(), author)
        if not await self._insert(owner, record, source):
            return None
        if kind == "fact":
            _log_change(owner, "remember", [record.id], len(text))
        return record

    async def replace(self, owner: str, ids: object, text: str) -> Record:
        """Replace the owner's records ``ids`` by one fact, all or nothing."""
        wanted = checked_ids(ids)
        text = checked_text(text, "text")
        if not text:
            raise MemoryInputError("text: expected the corrected fact, got nothing")
        record = Record(_new_id(), "fact", text, time.time())
        await self._swap(owner, wanted, record)
        _log_change(owner, "replace", [*wanted, record.id], len(text))
        return record

    async def forget(self, owner: str, ids: object) -> list[str]:
        """Remove the owner's records ``ids``, all or nothing; the ids removed."""
        wanted = checked_ids(ids)
        await self._remove(owner, wanted)
        _log_change(owner, "forget", wanted, 0)
        return wanted

    async def latest(
        self, owner: str, limit: int = MAX_RESULTS, kind: Kind | None = "fact"
    ) -> list[Record]:
        """The owner's newest records (of ``kind``; None: any), newest first."""
        return await self._latest(owner, max(0, min(limit, MAX_RESULTS)), kind)

    async def search(
        self, owner: str, query: object, limit: int = 10, kind: Kind | None = None
    ) -> list[Record]:
        """The owner's records (of ``kind``; None: any) that match any word
        of ``query``, best first."""
        words = search_words(query)
        if not words:
            return []
        return await self._search(owner, words, max(0, min(limit, MAX_RESULTS)), kind)

    async def count(self, owner: str) -> int:
        return await self._count(owner)

    # ------------------------------------------------------------ profile
    async def profile(self, owner: str) -> Profile:
        return await self._profile(owner)

    async def edit_profile(
        self, owner: str, *, managed: str | None = None, user_section: str | None = None
    ) -> Profile:
        """Set the managed section (the agent's) or the user's section (the
        user's own, through the REST)."""
        if managed is not None:
            managed = checked_text(managed, "managed", MAX_PROFILE_CHARS)
        if user_section is not None:
            user_section = checked_text(user_section, "user", MAX_PROFILE_CHARS)
        profile = await self._edit_profile(owner, managed, user_section)
        section = "managed" if managed is not None else "user"
        _log_change(owner, f"profile:{section}", [], len(managed or user_section or ""))
        return profile

    async def forget_owner(self, owner: str) -> int:
        """Remove all of the owner's records and its profile; how many records."""
        removed = await self._forget_owner(owner)
        _log_change(owner, "forget-all", [], removed)
        return removed

    # ------------------------------------------------ a store's statements
    @abstractmethod
    async def _insert(self, owner: str, record: Record, source: str | None) -> bool:
        """Add ``record`` (False: ``source`` is there); ``MemoryInputError``
        past ``max_facts``; turns past ``MAX_TURNS_PER_OWNER`` dropped."""

    @abstractmethod
    async def _swap(self, owner: str, ids: list[str], record: Record) -> None:
        """Delete ``ids`` and add ``record`` at once (``unknown_ids`` if any is
        not the owner's)."""

    @abstractmethod
    async def _remove(self, owner: str, ids: list[str]) -> None:
        """Delete ``ids`` at once (``unknown_ids`` if any is not the owner's)."""

    @abstractmethod
    async def _latest(self, owner: str, limit: int, kind: Kind | None) -> list[Record]: ...

    @abstractmethod
    async def _search(
        self, owner: str, words: list[str], limit: int, kind: Kind | None
    ) -> list[Record]: ...

    @abstractmethod
    async def _count(self, owner: str) -> int: ...

    @abstractmethod
    async def _profile(self, owner: str) -> Profile: ...

    @abstractmethod
    async def _edit_profile(
        self, owner: str, managed: str | None, user_section: str | None
    ) -> Profile: ...

    @abstractmethod
    async def _forget_owner(self, owner: str) -> int: ...

    @abstractmethod
    async def close(self) -> None: ...

    # ------------------------------------------------ ADK's memory service
    async def add_session_to_memory(self, session: Session) -> None:
        owner = api_user_owner(session.user_id)
        if owner is not None:
            await self.add_turns(owner, session.events, transcripts=True)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        owner = api_user_owner(user_id)
        if owner is not None:
            await self.add_turns(owner, events, transcripts=True)

    async def add_turns(self, owner: str, events: Sequence[Event], *, transcripts: bool) -> int:
        """Store the turns of ``events`` (typed text, and with ``transcripts``
        the final transcriptions of speech); an event stored before is
        skipped. How many were stored."""
        stored = 0
        for event in events:
            text = _turn_text(event, transcripts)
            if not text:
                continue
            author = "user" if event.author == "user" else "model"
            try:
                record = await self.remember(
                    owner, text[:MAX_ENTRY_CHARS], kind="turn", author=author, source=event.id
                )
            except MemoryInputError:
                continue  # e.g. markers in a turn: the rest are still stored
            stored += record is not None
        return stored

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        owner = _adk_owner_or_refuse(user_id)
        for entry in memories:
            text = " ".join(p.text for p in (entry.content.parts or []) if p.text)
            await self.remember(owner, text, author=entry.author)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        owner = api_user_owner(user_id)
        if owner is None:
            return SearchMemoryResponse()
        found = await self.search(owner, query[:MAX_QUERY_CHARS], limit=10)
        return SearchMemoryResponse(memories=[_entry(r) for r in found])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        await self.forget(_adk_owner_or_refuse(user_id), [memory_id])


def _adk_owner_or_refuse(user_id: str) -> str:
    owner = api_user_owner(user_id)
    if owner is None:
        raise MemoryInputError(f"user {user_id!r} has no long-term memory")
    return owner


def _entry(record: Record) -> MemoryEntry:
    return MemoryEntry(
        id=record.id,
        content=types.Content(role="user", parts=[types.Part(text=record.text)]),
        author=record.author or "user",
        timestamp=_iso(record.created),
        custom_metadata={"kind": record.kind},
    )


def _turn_text(event: Event, transcripts: bool) -> str:
    if event.partial:
        return ""
    texts = []
    if event.content is not None:
        texts += [p.text for p in event.content.parts or [] if p.text and not p.thought]
    if transcripts:
        for transcription in (event.input_transcription, event.output_transcription):
            if transcription is not None and transcription.text and transcription.finished:
                texts.append(transcription.text)
    return " ".join(t.strip() for t in texts if t.strip())


def unknown_ids(ids: list[str], found: set[str]) -> None:
    """``MemoryInputError`` naming the ids that are not among ``found``."""
    unknown = [i for i in ids if i not in found]
    if unknown:
        raise MemoryInputError(f"unknown memory ids {unknown}; recall to see the current ones")


def _log_change(owner: str, action: str, ids: list[str], size: int) -> None:
    log.info(
        "memory %s: owner %s ids %s (%d chars)",
        action,
        owner_digest(owner),
        ",".join(ids) or "-",
        size,
    )
