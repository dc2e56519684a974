"""The output pacer (audiocore_server/audio/pacer.py) on a fake clock: what leaves when, in
what order, and what a stall, a turn's end and a flush do to it."""

from __future__ import annotations

import asyncio

import pytest

from audiocore_server.audio.pacer import AudioFrame, OutputPacer


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _next_item(pacer: OutputPacer) -> AudioFrame | dict:
    """What the sender does: wait until an item is due, then take it."""
    await pacer.wait_due()
    item = pacer.get_nowait()
    assert item is not None, "wait_due() returned with nothing due"
    return item


async def _drain_due(pacer: OutputPacer) -> list:
    """Every item due now (on a FakeClock nothing else becomes due): the
    wait ends at once while one is due, and never after that."""
    got = []
    while True:
        try:
            got.append(await asyncio.wait_for(_next_item(pacer), 0.01))
        except TimeoutError:
            return got


def _pacer(clock=None, **kw) -> OutputPacer:
    args = {
        "sample_rate": 24000,
        "frame_ms": 20,
        "lead_s": 0.1,
        "max_audio_s": 5,
        "max_messages": 10,
    }
    args.update(kw)
    return OutputPacer(**args, **({"clock": clock} if clock else {}))


def test_pacer_releases_lead_then_real_time_and_keeps_order() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        pacer = _pacer(clock)
        await pacer.put_message({"type": "start"})
        await pacer.put_audio(b"\1\0" * 24000, turn=0)  # 1 s = 50 frames
        pacer.end_turn()
        await pacer.put_message({"type": "finish"})
        first = await _drain_due(pacer)
        # start + frames until 100 ms are buffered at the client (+1: sent when lead is reached)
        assert first[0] == {"type": "start"}
        assert len([f for f in first if isinstance(f, AudioFrame)]) == 6
        more = []
        for _ in range(25):  # 20 ms of playback at a time: one frame each
            clock.now += 0.02
            more += await _drain_due(pacer)
        assert len(more) == 25
        clock.now += 1.0  # the client ran dry: a lead's worth again, then the rest
        rest = await _drain_due(pacer)
        assert len(rest) == 6 and pacer.stats.late_frames == 1
        for _ in range(20):
            clock.now += 0.02
            rest += await _drain_due(pacer)
        assert rest[-1] == {"type": "finish"} and len(rest) == 50 - 31 + 1
        frames = [f for f in first + more + rest if isinstance(f, AudioFrame)]
        assert b"".join(f.pcm for f in frames) == b"\1\0" * 24000
        assert pacer.stats.frames == 50 and pacer.stats.concealed_frames == 0

    asyncio.run(scenario())


def test_pacer_get_nowait_gives_exactly_what_is_due_in_order() -> None:
    """What the pump sends itself: the items due now, the same ones get() gives."""

    async def scenario() -> None:
        clock = FakeClock()
        pacer = _pacer(clock)
        assert pacer.get_nowait() is None
        await pacer.put_message({"type": "start"})
        await pacer.put_audio(b"\1\0" * 4800, turn=0)  # 200 ms = 10 frames
        due = []
        while (item := pacer.get_nowait()) is not None:
            due.append(item)
        # The chunk, the frame playing now and the lead (100 ms = 5 frames).
        assert due[0] == {"type": "start"} and len(due) == 7
        assert all(isinstance(f, AudioFrame) and not f.concealed for f in due[1:])
        with pytest.raises(TimeoutError):  # the next frame is 20 ms away
            await asyncio.wait_for(pacer.wait_due(), 0.05)
        clock.now += 0.020
        await asyncio.wait_for(pacer.wait_due(), 0.05)
        await asyncio.wait_for(pacer.wait_due(), 0.05)  # waiting takes nothing
        assert isinstance(pacer.get_nowait(), AudioFrame)
        assert pacer.get_nowait() is None
        assert pacer.stats.frames == 7

    asyncio.run(scenario())


def test_pacer_pads_the_tail_of_a_turn_to_a_frame() -> None:
    async def scenario() -> None:
        pacer = _pacer(lead_s=1.0)
        await pacer.put_audio(b"\1\0" * 500, turn=0)
        await pacer.put_message({"type": "text-delta"})
        pacer.end_turn()
        await pacer.put_message({"type": "finish"})
        got = await _drain_due(pacer)
        assert [type(g).__name__ if isinstance(g, AudioFrame) else g["type"] for g in got] == [
            "AudioFrame",
            "AudioFrame",
            "text-delta",
            "finish",
        ]
        assert got[0].pcm + got[1].pcm == b"\1\0" * 500 + b"\0\0" * 460
        assert pacer.stats.made_up_samples == 460

    asyncio.run(scenario())


def test_pacer_plays_a_turns_tail_while_the_next_turn_fills() -> None:
    # The next turn's first chunk (less than a frame) must not hold back the
    # previous turn's tail: the jitter buffer says the tail is ready.
    async def scenario() -> None:
        pacer = _pacer(lead_s=1.0)
        await pacer.put_audio(b"\1\0" * 500, turn=0)
        pacer.end_turn()
        await pacer.put_message({"type": "finish"})
        await pacer.put_audio(b"\2\0" * 100, turn=1)
        got = await _drain_due(pacer)
        assert [g["type"] if isinstance(g, dict) else g.concealed for g in got] == [
            False,
            False,
            "finish",
        ]
        assert got[1].pcm == b"\1\0" * 20 + b"\0\0" * 460
        assert pacer.buffered_seconds == 100 / 24000

    asyncio.run(scenario())


def test_pacer_conceals_a_stall_only_when_the_client_runs_dry() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        pacer = _pacer(clock)
        await pacer.put_audio(b"\1\0" * 960, turn=0)  # two frames, turn still open
        assert len(await _drain_due(pacer)) == 2
        clock.now += 0.02  # 20 ms left at the client: still no concealment
        assert await _drain_due(pacer) == []
        clock.now += 0.019
        (filler,) = await _drain_due(pacer)
        assert filler.concealed and pacer.stats.concealed_frames == 1
        await pacer.put_audio(b"\1\0" * 480, turn=0)  # the model resumes
        (frame,) = await _drain_due(pacer)
        assert not frame.concealed

    asyncio.run(scenario())


def test_pacer_conceals_a_stall_it_woke_to_late() -> None:
    # A busy event loop wakes the pacer after the client ran dry: the frame
    # it owes (the turn's last samples and their concealment) still goes,
    # at once, and concealment goes on from there as if it had been on time.
    async def scenario() -> None:
        clock = FakeClock()
        pacer = _pacer(clock)
        await pacer.put_audio(b"\1\0" * 600, turn=0)  # one frame and 120 samples
        assert len(await _drain_due(pacer)) == 1
        clock.now += 0.5  # the client ran dry 480 ms ago
        (filler,) = await _drain_due(pacer)
        assert filler.concealed and filler.pcm[:240] == b"\1\0" * 120
        clock.now += 0.019
        (again,) = await _drain_due(pacer)
        assert again.concealed and pacer.stats.concealed_frames == 2

    asyncio.run(scenario())


def test_pacer_plays_the_next_turn_after_one_that_ended_in_a_stall() -> None:
    # The model's turn_complete comes after the client ran dry (a loaded
    # server): the jitter buffer still fades the concealment out, a frame
    # that is never ready; held back, it held the next turn for good.
    async def scenario() -> None:
        clock = FakeClock()
        pacer = _pacer(clock)
        await pacer.put_audio(b"\1\0" * 960, turn=0)  # two frames, turn still open
        assert len(await _drain_due(pacer)) == 2
        clock.now += 0.039
        (filler,) = await _drain_due(pacer)
        assert filler.concealed
        pacer.end_turn()
        await pacer.put_message({"type": "finish"})
        await pacer.put_audio(b"\2\0" * 960, turn=1)
        pacer.end_turn()
        await pacer.put_message({"type": "finish"})
        clock.now += 1.0
        got = await _drain_due(pacer)
        assert [g["type"] if isinstance(g, dict) else g.concealed for g in got] == [
            True,  # the fade-out of the stalled turn, its last frame
            "finish",
            False,
            False,
            "finish",
        ]
        assert got[2].pcm + got[3].pcm == b"\2\0" * 960
        assert pacer.stats.concealed_frames == 2
        assert pacer.stats.made_up_samples == 2 * 480  # not a sample of the model's

    asyncio.run(scenario())


def test_pacer_flush_drops_audio_keeps_messages_and_rejects_the_turn() -> None:
    async def scenario() -> None:
        pacer = _pacer(lead_s=0.0)
        await pacer.put_audio(b"\0" * 9600, turn=0)
        await pacer.put_message({"type": "text-delta"})
        await pacer.put_audio(b"\0" * 9600, turn=0)
        assert isinstance(await _next_item(pacer), AudioFrame)
        assert pacer.flush({"type": "data-interrupted"}) == 9600 - 480
        assert pacer.buffered_seconds == 0
        assert await _next_item(pacer) == {"type": "data-interrupted"}
        assert await _next_item(pacer) == {"type": "text-delta"}
        await pacer.put_audio(b"\0" * 960, turn=0)  # late audio of the flushed turn
        assert pacer.buffered_seconds == 0 and pacer.stats.rejected_chunks == 1
        await pacer.put_audio(b"\0" * 960, turn=1)
        assert pacer.buffered_seconds == 0.02
        assert pacer.stats.flushes == 1

    asyncio.run(scenario())


def test_pacer_bounds_audio_and_messages() -> None:
    async def scenario() -> None:
        pacer = _pacer(sample_rate=1000, frame_ms=100, lead_s=0.0, max_audio_s=1.0, max_messages=2)
        assert pacer.put_message_nowait({"n": 1}) and pacer.put_message_nowait({"n": 2})
        assert not pacer.put_message_nowait({"n": 3})

        async def producer() -> None:
            for turn in range(3):
                await pacer.put_audio(b"\0" * 2000, turn=turn)  # 1 s each

        blocked = asyncio.create_task(producer())
        # One turn of the loop runs the producer until it blocks: the first
        # two chunks go in without waiting, the third waits for room.
        await asyncio.sleep(0)
        # Held at the high-water mark plus the chunk that crossed it.
        assert not blocked.done() and pacer.buffered_seconds == 2.0
        pacer.flush()
        await asyncio.wait_for(blocked, 1)
        assert pacer.buffered_seconds == 1.0

    asyncio.run(scenario())
