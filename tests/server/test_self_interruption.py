"""No self-interruption, end to end (issue #38): a client whose microphone
hears its own loudspeaker through a simulated room (``room_helpers.Room``:
a clipping loudspeaker, a bulk delay, a room's impulse response, noise)
asks for the server's echo cancellation (``start.echoCancellation:
"server"``) and talks to the offline model, which answers every utterance
with its echo and takes any speech over its answer for a barge-in.

Over many answers the agent must not hear itself: exactly one onset of
speech per user utterance, no interruption; a user who speaks over an
answer still interrupts it. The same room without the canceller makes the
agent interrupt itself (the control: the room is loud enough for the tests
to fail). The microphone's frames are cleaned as they come and the user's
voice over an answer is sent at once (``live/mic.py``): the tests hold that
path too. The six-answer test passed 80 runs of 80 with the canceller
whose fine alignment reached 1.5 blocks and tried each move first, and
54 of 54 with the one that reaches 20 ms (the file run two at a time);
the canceller before them (shifts within ¾ of a block) failed it now and
then (docs/audio.md, "Tried end to end"). A louder echo (4-5 dB below
what was played) is not tested here: it still interrupts itself now and
then.
Real uvicorn on 127.0.0.1, the real runner; the client streams its
microphone at real time (it sleeps only to keep that device clock) and
waits on what the server says, never on a sleep.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import websockets
from room_helpers import Room
from server_helpers import serve_ws

import audiocore
from audiocore_server import Settings

MIC_RATE = 16_000
PLAY_RATE = 24_000
TICK_S = 0.020
MIC_FRAME = MIC_RATE * 20 // 1000
PLAY_FRAME_BYTES = PLAY_RATE * 20 // 1000 * 2
QUANTUM = 128  # the device's output block, as Web Audio's render quantum
ROOM_TAIL_TICKS = 25  # 0.5 s after an answer has played: its echo dies out
START = {
    "type": "start",
    "input": {"sampleRate": MIC_RATE, "format": "s16"},
    "output": {"sampleRate": PLAY_RATE, "binary": True},
}


class RoomClient:
    """Plays the agent's audio as it arrives, back to back (as the pacer
    assumes a client does), drops it on ``data-interrupted`` (as the page
    does), and sends its microphone every 20 ms: the user's speech plus the
    room's echo of what played."""

    def __init__(self, ws: Any, room: Room) -> None:
        self.ws = ws
        self.room = room
        self.messages: list[dict[str, Any]] = []
        self.at: list[int] = []  # the tick each message came in
        self.late_s = 0.0  # how far behind its clock the microphone fell at worst
        self.ran_dry: list[int] = []  # ticks where playback ran out mid-answer
        self.tick = 0
        self.played_samples = 0  # of the agent's audio, not the silence between
        self.utterances = 0  # the user's, said or being said
        self._playback = bytearray()
        self._started = time.monotonic()  # the device's clock: tick k is due then + k * TICK_S
        self._window_ends = self._started  # the end of the 20 ms the next tick plays
        self._user = np.zeros(0, np.float32)
        self.task = asyncio.create_task(self._receive())

    async def _receive(self) -> None:
        try:
            async for frame in self.ws:
                if isinstance(frame, bytes):
                    if not self._playback:
                        # An idle device starts a frame as it arrives (to
                        # its next output block), not at the next tick.
                        into = time.monotonic() - (self._window_ends - TICK_S)
                        blocks = min(max(0, round(into * PLAY_RATE)), PLAY_FRAME_BYTES // 2)
                        self._playback += bytes(-(-blocks // QUANTUM) * QUANTUM * 2)
                    self._playback += frame
                    continue
                message = json.loads(frame)
                self.messages.append(message)
                self.at.append(self.tick)
                if message["type"] == "data-interrupted":
                    self._playback.clear()
        except websockets.ConnectionClosed:
            pass

    def say(self, speech: np.ndarray) -> None:
        self._user = np.concatenate((self._user, speech))
        self.utterances += 1

    def heard_itself(self, barge_ins: int = 0) -> bool:
        """The agent took its own voice for the user's: an interruption
        beyond the user's ``barge_ins``, or an onset beyond their utterances."""
        return (
            self.count("data-interrupted") > barge_ins
            or self.count("data-speech", state="started") > self.utterances
        )

    @property
    def quiet(self) -> bool:
        """The user has said everything and nothing is left to play."""
        return not len(self._user) and not self._playback

    def count(self, kind: str, **data: str) -> int:
        return sum(
            1
            for m in self.messages
            if m["type"] == kind and all(m.get("data", {}).get(k) == v for k, v in data.items())
        )

    async def run_until(self, done: Callable[[], bool], limit_s: float = 30.0) -> None:
        """Stream the microphone at real time until ``done()``."""
        first = self.tick
        while not done():
            assert (self.tick - first) * TICK_S < limit_s, (
                f"not done within {limit_s} s: {self.kinds()[-20:]}"
            )
            due = self._started + self.tick * TICK_S
            ahead = due - time.monotonic()
            self.late_s = max(self.late_s, -ahead)
            if ahead > 0:
                await asyncio.sleep(ahead)  # the microphone's clock, not a wait for the server
            self._window_ends = due + TICK_S
            played = bytes(self._playback[:PLAY_FRAME_BYTES])
            del self._playback[:PLAY_FRAME_BYTES]
            if played and not self._playback and self.count("finish") < self.utterances:
                self.ran_dry.append(self.tick)  # the answer's next audio is not here yet
            self.played_samples += len(played) // 2
            mic = self.room.echo(played.ljust(PLAY_FRAME_BYTES, b"\0"))
            user, self._user = self._user[:MIC_FRAME], self._user[MIC_FRAME:]
            mic[: len(user)] += user
            await self.ws.send(audiocore.float32_to_pcm16(mic))
            self.tick += 1

    async def answer_played(self, barge_ins: int = 0) -> None:
        """Until the agent's answers to everything said have played and the
        room has gone quiet after them, or the agent heard itself."""
        await self.run_until(
            lambda: (
                self.heard_itself(barge_ins)
                or (self.count("finish") >= self.utterances and self.quiet)
            )
        )
        end = self.tick + ROOM_TAIL_TICKS
        await self.run_until(lambda: self.tick >= end or self.heard_itself(barge_ins))

    def kinds(self) -> list[str]:
        return [m["type"] for m in self.messages]

    def story(self) -> str:
        """What a failure shows: the turn edges heard, at which tick, and how
        late the microphone ran."""
        edges = [
            f"{tick}:{m['type']}{m.get('data', {}).get('state', '')}"
            for tick, m in zip(self.at, self.messages, strict=True)
            if m["type"] in ("data-speech", "data-interrupted", "finish")
        ]
        return (
            f"mic at worst {self.late_s * 1000:.0f} ms late; playback ran dry mid-answer at "
            f"ticks {self.ran_dry}; {' '.join(edges)}"
        )


def speech_16k(speech_48k: np.ndarray) -> np.ndarray:
    return np.asarray(audiocore.resample(speech_48k, 48_000, MIC_RATE, output="f32"), np.float32)


async def conversation(
    url: str, speech: np.ndarray, rounds: int, *, start: dict[str, Any], seed: int
) -> RoomClient:
    """``rounds`` utterances, each answered and played out in turn; stops
    early at the agent's first interruption of itself."""
    ws = await websockets.connect(url, max_size=None)
    await ws.send(json.dumps(start))
    room = Room(np.random.default_rng(seed), rate=MIC_RATE, played_rate=PLAY_RATE)
    client = RoomClient(ws, room)
    try:
        await client.run_until(lambda: "data-session" in client.kinds())
        for _ in range(rounds):
            client.say(speech)
            await client.answer_played()
            if client.heard_itself():
                break
    finally:
        await ws.close()
        await client.task
    return client


def test_without_the_canceller_the_same_room_makes_the_agent_interrupt_itself(
    settings: Settings, speech_48k: np.ndarray
) -> None:
    speech = speech_16k(speech_48k)
    with serve_ws(settings) as url:
        client = asyncio.run(conversation(url, speech, 3, start=START, seed=38))
    assert client.messages[0]["data"]["echoCancellation"] == "client"
    assert client.heard_itself(), client.kinds()


def test_the_agent_does_not_interrupt_itself_over_many_answers(
    settings: Settings, speech_48k: np.ndarray
) -> None:
    rounds, seed = 6, 38
    speech = speech_16k(speech_48k)
    with serve_ws(settings) as url:
        client = asyncio.run(
            conversation(
                url, speech, rounds, start={**START, "echoCancellation": "server"}, seed=seed
            )
        )
    print(f"seed {seed}")
    assert client.messages[0]["data"]["echoCancellation"] == "server"
    assert client.count("data-interrupted") == 0, client.story()
    # Every onset the agent heard was the user's: its own answers never
    # started a turn, even after they had ended.
    assert client.count("data-speech", state="started") == rounds, client.story()
    assert client.count("finish") == rounds, client.story()


def test_a_user_speaking_over_the_answer_still_interrupts_it(
    settings: Settings, speech_48k: np.ndarray
) -> None:
    speech = speech_16k(speech_48k)

    async def scenario(url: str) -> RoomClient:
        ws = await websockets.connect(url, max_size=None)
        await ws.send(json.dumps({**START, "echoCancellation": "server"}))
        client = RoomClient(
            ws, Room(np.random.default_rng(7), rate=MIC_RATE, played_rate=PLAY_RATE)
        )
        try:
            # Two answers first: the canceller has learnt the room.
            for _ in range(2):
                client.say(speech)
                await client.answer_played()
            assert client.count("data-interrupted") == 0, client.story()
            client.say(speech)
            heard = client.played_samples
            await client.run_until(lambda: client.played_samples >= heard + PLAY_RATE)
            client.say(speech)  # one second into the answer, the user speaks
            await client.run_until(lambda: client.count("data-interrupted") == 1, limit_s=3)
            await client.answer_played(barge_ins=1)
            assert not client.heard_itself(barge_ins=1), client.story()
        finally:
            await ws.close()
            await client.task
        return client

    with serve_ws(settings) as url:
        client = asyncio.run(scenario(url))
    interrupted = [m for m in client.messages if m["type"] == "data-interrupted"]
    assert [m["data"]["source"] for m in interrupted] == ["model"]
    assert interrupted[0]["data"]["droppedMs"] > 0  # the answer was still playing
