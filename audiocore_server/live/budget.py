"""How much a client may send: every message kind has a rate.

A live socket's frames pass two token buckets before they are decoded —
the connection's, and its address's (shared by every socket from one
address: as many connections' worth as an address may open,
``max_connections_per_client``) — and, once decoded, the
bucket of their kind. A message past its bucket is dropped: the client gets
one ``error`` per overload episode (not one per message; an episode ends
once the client has slowed down, its bucket half full again), and a client
that goes on flooding — ``close_after`` messages dropped in one episode — is
closed with 1008 (a policy violation, never "internal error", never "not
reading"). The ``error`` chunks the server sends about bad input have a
rate too, so a flood of bad messages cannot fill the client's queue with
answers.

Rates are per second with a burst; a normal client stays far below every
one of them (the page sends 50 audio frames a second, a few control
messages a turn).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from ..wire import chat_messages, fields, protocol
from .shutdown import Shutdown


@dataclasses.dataclass(frozen=True)
class Rate:
    per_s: float
    burst: float


RATES: dict[str, Rate] = {
    "frame": Rate(400, 1200),  # any frame, before it is decoded
    # 10 ms frames are 100 a second; the burst is 20 s of 20 ms frames, for
    # a client that sends a recording faster than real time.
    "audio": Rate(300, 1000),
    "edge": Rate(10, 20),  # activity_start / activity_end / audio_control
    "ping": Rate(5, 10),
    "interrupt": Rate(10, 20),
    # Text, image, message, content, close: the burst is the model queue's
    # room for content (max_pending_requests), so a burst the queue takes
    # is never cut short here.
    "content": Rate(10, 100),
    # Images and messages carrying them: a camera at 1 frame a second (as
    # Gemini Live takes video) and an attachment now and then; each is up to
    # max_image_bytes for the model to take in.
    "image": Rate(2, 10),
    "answer": Rate(20, 50),  # tool approvals, results, function responses
    "task": Rate(2, 5),  # task_cancel
    "error": Rate(5, 10),  # error chunks about bad input, sent by us
}
_KINDS: dict[type, str] = {
    protocol.Audio: "audio",
    protocol.ActivityStart: "edge",
    protocol.ActivityEnd: "edge",
    protocol.AudioControl: "edge",
    protocol.Ping: "ping",
    protocol.Interrupt: "interrupt",
    protocol.Text: "content",
    fields.Image: "image",
    chat_messages.ChatSubmit: "content",
    protocol.UserContent: "content",
    protocol.Close: "content",
    protocol.Start: "content",
    fields.ToolApproval: "answer",
    fields.ToolResult: "answer",
    protocol.ToolResponse: "answer",
    protocol.TaskCancel: "task",
}
_NAMES = {
    "frame": "messages",
    "audio": "audio frames",
    "edge": "turn edges",
    "ping": "pings",
    "interrupt": "interrupts",
    "content": "messages",
    "image": "images",
    "answer": "tool answers",
    "task": "task_cancel messages",
}


def kind_of(message: protocol.ClientMessage) -> str:
    if isinstance(message, chat_messages.ChatSubmit) and message.images:
        return "image"
    return _KINDS[type(message)]


class TokenBucket:
    """Tokens refilled at ``rate.per_s`` up to ``rate.burst``; callers pass
    the time (one clock read serves every bucket a frame passes)."""

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate = rate
        self._per_s, self._burst = rate.per_s, rate.burst
        self.tokens = rate.burst
        self._at = now

    def ready(self, now: float) -> bool:
        """Whether a token is there (refilled to ``now``), without taking it."""
        tokens = self.tokens + (now - self._at) * self._per_s
        self.tokens = tokens if tokens < self._burst else self._burst
        self._at = now
        return self.tokens >= 1

    def take(self, now: float) -> bool:
        if self.ready(now):
            self.tokens -= 1
            return True
        return False


def take_both(first: TokenBucket, second: TokenBucket, now: float) -> bool:
    """A token from each, or from neither."""
    if first.ready(now) and second.ready(now):
        first.tokens -= 1
        second.tokens -= 1
        return True
    return False


class AddressBudgets:
    """The frame buckets of client addresses, shared by their sockets.
    ``rate_scale`` multiplies every rate (not the bursts)."""

    def __init__(
        self,
        *,
        share: int,
        rate_scale: float = 1.0,
        on_drop: Callable[[str], None] = lambda kind: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``share``: how many connections' worth of frames an address's
        sockets have together."""
        self.rate_scale = rate_scale
        self.on_drop = on_drop  # every connection's drops, by kind (for /metrics)
        self._clock = clock
        self._buckets: dict[str, tuple[TokenBucket, int]] = {}
        frame = RATES["frame"]
        self._rate = Rate(frame.per_s * share * rate_scale, frame.burst * share)

    def take(self, address: str) -> TokenBucket:
        bucket, users = self._buckets.get(address) or (TokenBucket(self._rate, self._clock()), 0)
        self._buckets[address] = (bucket, users + 1)
        return bucket

    def for_connection(self, address: str, *, close_after: int) -> MessageBudget:
        """A new connection's budget, sharing its address's frames; ``release``
        the address when the connection ends."""
        return MessageBudget(
            self.take(address),
            close_after=close_after,
            rate_scale=self.rate_scale,
            on_drop=self.on_drop,
            clock=self._clock,
        )

    def release(self, address: str) -> None:
        bucket, users = self._buckets[address]
        if users > 1:
            self._buckets[address] = (bucket, users - 1)
        else:
            del self._buckets[address]


class MessageBudget:
    """One connection's buckets, and its overload episodes."""

    def __init__(
        self,
        address: TokenBucket,
        *,
        close_after: int,
        rate_scale: float = 1.0,
        on_drop: Callable[[str], None] = lambda kind: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._address = address
        self._clock = clock
        self._now = now = clock()  # when the frame being read arrived
        self._buckets = {
            kind: TokenBucket(Rate(rate.per_s * rate_scale, rate.burst), now)
            for kind, rate in RATES.items()
        }
        self._close_after = close_after
        self._on_drop = on_drop  # counted by kind (for /metrics)
        self._dropping: dict[str, int] = {}  # kind → drops in its episode

    def admit_frame(self) -> str | None:
        """Take a frame; None if admitted, else the error to tell (once an
        episode; "" after that). Every frame passes here first: its time
        serves the ``admit`` of what it holds."""
        self._now = now = self._clock()
        return self._admit("frame", take_both(self._buckets["frame"], self._address, now))

    def admit(self, message: protocol.ClientMessage) -> str | None:
        kind = kind_of(message)
        return self._admit(kind, self._buckets[kind].take(self._now))

    def may_report(self) -> bool:
        """Whether an error about bad input may be sent now."""
        return self._buckets["error"].take(self._clock())

    def _admit(self, kind: str, taken: bool) -> str | None:
        if taken and not self._dropping:
            return None  # the common case: nothing is being dropped
        if taken:
            # An episode ends once the client has slowed down: its bucket
            # half refilled. A flood just above the rate stays one episode.
            bucket = self._buckets[kind]
            if kind in self._dropping and bucket.tokens >= bucket.rate.burst / 2:
                del self._dropping[kind]
            return None
        self._on_drop(kind)
        drops = self._dropping.get(kind, 0) + 1
        self._dropping[kind] = drops
        if drops > self._close_after:
            raise Shutdown(
                protocol.CLOSE_POLICY_VIOLATION,
                f"too many {_NAMES[kind]}",
                error=f"too many {_NAMES[kind]}: closing",
            )
        if drops == 1:
            return f"too many {_NAMES[kind]}: dropped until the rate falls"
        return ""  # dropped, already told
