"""JitterBuffer: every profile's invariants, checked sample by sample.

Each output sample is traced to its source position through the core's
`positions` output (verbatim, cross-faded, or synthesized), so a test proves
that every played sample is the right one and everything else is counted.
"""

import array
import threading

import numpy as np
import pytest
from gated_buffer import gated_buffer
from hypothesis import given, settings
from hypothesis import strategies as st

from audiocore.jitter import JitterBuffer

RATE = 24000
FRAME = 480  # 20 ms at 24 kHz


# -- helpers -----------------------------------------------------------------


def noise(rng, n, channels=1):
    """Watermark: random samples, so a sample out of place is caught."""
    return rng.integers(-20000, 20000, size=(n, channels), dtype=np.int16)


def tone(n, hz=200.0, amp=10000.0, start=0, rate=RATE):
    t = np.arange(start, start + n) / rate
    return (amp * np.sin(2 * np.pi * hz * t)).astype(np.int16)[:, None]


class Trace:
    """Pops through the core with positions, keeping everything for checks."""

    def __init__(self, jb):
        self.jb = jb
        self.frames = []
        self.positions = []

    def pop(self, count=1):
        for _ in range(count):
            pos = np.empty(self.jb.frame_samples, np.int64)
            out = self.jb._core.pop(pos)
            assert len(out) == self.jb.frame_bytes
            self.frames.append(np.frombuffer(out, "<i2").reshape(-1, self.jb.channels))
            self.positions.append(pos)
        return self.frames[-1] if self.frames else None

    @property
    def out(self):
        return np.concatenate(self.frames)

    @property
    def pos(self):
        return np.concatenate(self.positions)

    def consumed(self):
        """Source positions consumed one-to-one (verbatim or cross-faded), in order."""
        pos = self.pos
        src = np.where(pos >= 0, pos, -pos - 2)
        return src[pos != -1]

    def check(self, source, origin=0):
        """Verbatim samples are exact, consumption is in order, and the output
        accounting matches the counters."""
        pos, out = self.pos, self.out
        verbatim = pos >= 0
        np.testing.assert_array_equal(out[verbatim], source[pos[verbatim] - origin])
        consumed = self.consumed()
        assert np.all(np.diff(consumed) > 0), "source played out of order or twice"
        s = self.jb.stats
        assert s["emitted_samples"] == len(pos)
        assert (
            s["played_samples"] + s["concealed_samples"] + s["blended_samples"] + s["idle_samples"]
            == s["emitted_samples"]
        )
        # Every synthesized sample is counted as concealment, idle or a
        # time-scaling cross-fade.
        merged = int(np.sum(pos <= -2))
        assert s["played_samples"] == int(verbatim.sum())
        assert s["blended_samples"] >= merged
        return s


def max_step(x):
    return int(np.max(np.abs(np.diff(x[:, 0].astype(np.int64))))) if len(x) > 1 else 0


# -- construction ----------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (
            {"sample_rate": True},
            TypeError,
            "sample_rate: expected an integer sample rate in Hz, got bool",
        ),
        ({"sample_rate": 24000.0}, TypeError, "got float"),
        ({"sample_rate": "24000"}, TypeError, "got str"),
        ({"sample_rate": 0}, ValueError, "from 1000 to"),
        ({"sample_rate": 10**9}, ValueError, "from 1000 to"),
        ({"channels": 0}, ValueError, "channels: expected an integer from 1"),
        ({"channels": 1.0}, TypeError, "channels: expected an integer, got float"),
        ({"frame_ms": float("nan")}, ValueError, "frame_ms"),
        ({"frame_ms": "20"}, TypeError, "frame_ms: expected a frame length in ms, got str"),
        ({"frame_ms": 0}, ValueError, "frame_ms"),
        ({"frame_ms": 1e9}, ValueError, "frame_ms"),
        ({"sample_rate": 11025, "frame_ms": 10}, ValueError, "110.25 samples"),
        ({"sample_rate": 8000, "frame_ms": 0.5}, ValueError, "frame_ms"),
        ({"profile": "rtp"}, ValueError, "profile: expected one of 'generator'"),
        ({"profile": None}, ValueError, "profile"),
        ({"preroll_ms": 40}, ValueError, "preroll_ms: expected a duration in ms from 0 to 20"),
        ({"target_ms": 60}, ValueError, "target_ms: not used by the 'generator' profile"),
        ({"profile": "reliable", "max_ms": 50}, ValueError, "give target_ms too"),
        (
            {"profile": "reliable", "target_ms": 80, "max_ms": 40},
            ValueError,
            "max_ms: expected at least target_ms",
        ),
        ({"profile": "packet", "min_ms": 100, "max_ms": 50}, ValueError, "max_ms"),
        ({"profile": "packet", "target_ms": 900, "max_ms": 500}, ValueError, "target_ms"),
        ({"profile": "packet", "preroll_ms": 5}, ValueError, "not used"),
        ({"capacity_ms": 10}, ValueError, "capacity_ms"),
        ({"high_water_ms": float("inf")}, ValueError, "high_water_ms"),
    ],
)
def test_construction_errors(kwargs, exc, match):
    kwargs = {"sample_rate": RATE, **kwargs}
    with pytest.raises(exc, match=match):
        JitterBuffer(**kwargs)


@pytest.mark.parametrize("profile", ["generator", "reliable", "packet"])
@pytest.mark.parametrize(
    "rate, frame_ms, samples",
    [(8000, 20, 160), (16000, 10, 160), (24000, 20, 480), (44100, 10, 441), (48000, 2.5, 120)],
)
def test_frame_sizes(profile, rate, frame_ms, samples):
    jb = JitterBuffer(rate, channels=2, frame_ms=frame_ms, profile=profile)
    assert jb.frame_samples == samples
    assert jb.frame_bytes == samples * 4
    assert jb.pop() == bytes(samples * 4)  # nothing pushed: silence
    assert (jb.sample_rate, jb.channels, jb.frame_ms, jb.profile) == (rate, 2, frame_ms, profile)


# -- input types and errors ---------------------------------------------------------


def _inputs(samples):
    le = samples.astype("<i2")
    return {
        "bytes": le.tobytes(),
        "bytearray": bytearray(le.tobytes()),
        "memoryview": memoryview(le.tobytes()),
        "numpy": le,
        "numpy-2d": le.reshape(-1, 1),
        "array": array.array("h", le.tobytes()),
        "memoryview-h": memoryview(le).cast("B").cast("h"),
    }


@pytest.mark.parametrize(
    "kind", ["bytes", "bytearray", "memoryview", "numpy", "numpy-2d", "array", "memoryview-h"]
)
def test_input_types(kind, rng):
    source = noise(rng, FRAME)
    jb = JitterBuffer(RATE)
    assert jb.push(_inputs(source[:, 0])[kind]) is True
    assert jb.pop() == source.astype("<i2").tobytes()


def test_input_is_not_copied_before_push_returns(rng):
    """A buffer pushed and then changed does not change what was stored: the
    core copies it into the ring during push, reading it in place."""
    source = noise(rng, FRAME)[:, 0]
    buf = bytearray(source.tobytes())
    jb = JitterBuffer(RATE)
    jb.push(buf)
    buf[:] = bytes(len(buf))
    assert jb.pop() == source.tobytes()


@pytest.mark.parametrize(
    "pcm, exc, match",
    [
        (np.zeros(8, np.float32), TypeError, "pcm: expected int16 samples, got float32"),
        (np.zeros(8, np.int32), TypeError, "pcm: expected int16 samples, got int32"),
        (np.zeros(8, ">i2"), TypeError, "big-endian int16"),
        (np.zeros(8, np.uint16), TypeError, "got uint16"),
        (b"\x00" * 7, ValueError, "whole number of 2-byte samples, got 7 bytes"),
        (np.zeros(16, np.int16)[::2], ValueError, "C-contiguous"),
        ("abcd", TypeError, "pcm: expected a buffer of int16 samples, got str"),
        (None, TypeError, "got NoneType"),
        (12, TypeError, "got int"),
        ([1, 2], TypeError, "got list"),
    ],
)
def test_push_bad_pcm(pcm, exc, match):
    jb = JitterBuffer(RATE)
    with pytest.raises(exc, match=match):
        jb.push(pcm)
    assert jb.stats["received_samples"] == 0


def test_push_partial_frame_of_channels():
    jb = JitterBuffer(RATE, channels=2)
    with pytest.raises(ValueError, match="whole frames of 2 interleaved samples, got 3"):
        jb.push(np.zeros(3, np.int16))


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"seq": 1.0}, TypeError, "seq: expected a 16-bit sequence number, got float"),
        ({"seq": "1"}, TypeError, "got str"),
        ({"seq": True}, TypeError, "got bool"),
        ({"seq": -1}, ValueError, "from 0 to 65535, got -1"),
        ({"seq": 65536}, ValueError, "got 65536"),
        ({"timestamp": 2**32}, ValueError, "timestamp: expected a 32-bit timestamp from 0"),
        ({"timestamp": 1.5}, TypeError, "timestamp: expected a 32-bit timestamp, got float"),
        ({"seq": 1, "arrival": float("nan")}, ValueError, "arrival: expected a finite time"),
        ({"seq": 1, "arrival": float("inf")}, ValueError, "arrival"),
        ({"seq": 1, "arrival": "now"}, TypeError, "arrival: expected seconds"),
        ({"seq": 1, "turn": []}, TypeError, "turn: expected a hashable id, got list"),
        ({"seq": 1, "final": 1}, TypeError, "final: expected bool"),
        ({}, ValueError, "packet profile: expected seq and/or timestamp"),
    ],
)
def test_push_bad_packet_arguments(kwargs, exc, match):
    jb = JitterBuffer(RATE, profile="packet")
    with pytest.raises(exc, match=match):
        jb.push(bytes(2 * FRAME), **kwargs)
    assert jb.stats["received_packets"] == 0


@pytest.mark.parametrize("profile", ["generator", "reliable"])
def test_seq_refused_for_in_order_profiles(profile):
    jb = JitterBuffer(RATE, profile=profile)
    with pytest.raises(ValueError, match=f"not used by the '{profile}' profile"):
        jb.push(bytes(960), seq=1)
    with pytest.raises(ValueError, match="not used"):
        jb.push(bytes(960), timestamp=1)


def test_pop_takes_no_clock():
    # The pop cadence is the playout clock; there is no `now` to pass.
    with pytest.raises(TypeError):
        JitterBuffer(RATE).pop(1.0)


@pytest.mark.parametrize(
    "fade, exc", [(-1, ValueError), (float("nan"), ValueError), (1e6, ValueError), ("5", TypeError)]
)
def test_flush_bad_fade(fade, exc):
    with pytest.raises(exc, match="fade_ms"):
        JitterBuffer(RATE).flush(fade)


@pytest.mark.parametrize("profile", ["generator", "reliable", "packet"])
def test_empty_push_is_harmless(profile):
    jb = JitterBuffer(RATE, profile=profile)
    kw = {"seq": 0} if profile == "packet" else {}
    jb.push(b"", **kw)
    assert jb.pop() == bytes(2 * FRAME)
    assert jb.stats["received_samples"] == 0


def test_generator_backpressure_and_full():
    jb = JitterBuffer(RATE, capacity_ms=1000, high_water_ms=500)
    chunk = bytes(2 * RATE // 10)  # 100 ms
    for _ in range(6):
        jb.push(chunk)
    assert jb.backpressure
    for _ in range(4):
        jb.push(chunk)
    with pytest.raises(BufferError, match="jitter buffer full: 1000 ms buffered"):
        jb.push(b"\x00\x00")
    assert jb.stats["received_samples"] == RATE  # nothing of the refused chunk
    jb.pop()
    jb.push(b"\x00\x00" * FRAME)
    assert jb.stats["high_water_ms"] == 1000


def test_huge_chunk_refused_atomically():
    jb = JitterBuffer(RATE, capacity_ms=1000)
    with pytest.raises(BufferError):
        jb.push(np.zeros(RATE * 2, np.int16))
    assert jb.stats["received_samples"] == 0


def test_concurrent_use_raises():
    # What a second thread finds while the first is inside a call: the
    # worker's push holds the buffer from the moment its chunk is asked for
    # until this thread has tried everything, so the calls overlap by
    # construction, not by timing.
    jb = JitterBuffer(RATE)
    inside, tried = threading.Event(), threading.Event()

    def hold() -> None:
        inside.set()
        tried.wait(60)

    chunk = np.arange(FRAME, dtype=np.int16)
    worker = threading.Thread(target=jb.push, args=(gated_buffer(chunk, hold),))
    worker.start()
    try:
        assert inside.wait(60), "the worker never asked for its chunk"
        with pytest.raises(RuntimeError, match="belongs to one stream"):
            jb.pop()
        with pytest.raises(RuntimeError, match="belongs to one stream"):
            jb.push(b"\x00\x00")
        with pytest.raises(RuntimeError, match="belongs to one stream"):
            jb.flush()
        with pytest.raises(RuntimeError, match="belongs to one stream"):
            jb.end_turn()
        with pytest.raises(RuntimeError, match="belongs to one stream"):
            jb.played  # noqa: B018 - the property takes the lock too
    finally:
        tried.set()
        worker.join()
    # The refused calls changed nothing: the chunk is stored and plays.
    assert jb.stats["received_samples"] == FRAME
    assert jb.pop() == chunk.tobytes()


def test_two_threads_never_corrupt(rng):
    """Hammering one buffer from two threads either works or raises
    RuntimeError; the counters stay consistent."""
    jb = JitterBuffer(RATE, capacity_ms=600_000)
    errors = []

    def worker(action):
        for _ in range(2000):
            try:
                action()
            except RuntimeError:
                errors.append(1)

    chunk = bytes(200)
    threads = [
        threading.Thread(target=worker, args=(lambda: jb.push(chunk),)),
        threading.Thread(target=worker, args=(jb.pop,)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = jb.stats
    assert (
        s["played_samples"] + s["concealed_samples"] + s["blended_samples"] + s["idle_samples"]
        == s["emitted_samples"]
    )


# -- generator ---------------------------------------------------------------------


def test_generator_starts_within_one_frame(rng):
    source = noise(rng, FRAME + 100)
    jb = JitterBuffer(RATE)
    jb.push(source[:300])
    assert jb.pop() == bytes(2 * FRAME)  # less than the pre-roll: not started
    jb.push(source[300:])
    assert jb.pop() == source[:FRAME].tobytes()


def test_generator_preroll_zero_starts_on_first_sample(rng):
    source = noise(rng, 100)
    jb = JitterBuffer(RATE, preroll_ms=0)
    tr = Trace(jb)
    jb.push(source)
    out = tr.pop()
    np.testing.assert_array_equal(out[:100], source)
    assert jb.stats["concealment_events"] == 1


def test_generator_end_turn_releases_tail(rng):
    source = noise(rng, 1000)
    jb = JitterBuffer(RATE)
    tr = Trace(jb)
    jb.push(source, final=True)
    tr.pop(4)
    out = tr.out
    np.testing.assert_array_equal(out[:1000], source)
    assert not out[1000:].any()
    s = tr.check(source)
    assert s["concealed_samples"] == 0
    assert s["idle_samples"] == 4 * FRAME - 1000
    assert not jb.playing


def test_generator_turn_ending_on_a_frame_boundary_frees_the_next_at_once(rng):
    """A turn whose end falls exactly on a frame boundary is over with its
    last frame: the next turn's audio is ready at once, not after a frame of
    silence (which a paced consumer would have sent as the next turn's first
    frame, shifting it and losing its last frame)."""
    first, second = noise(rng, 3 * FRAME), noise(rng, FRAME + 37)
    jb = JitterBuffer(RATE)
    jb.push(first, turn=1, final=True)
    played = [jb.pop() for _ in range(jb.frames_ready)]
    assert b"".join(played) == first.astype("<i2").tobytes()
    assert not jb.playing
    jb.push(second, turn=2, final=True)
    assert jb.frames_ready == 2
    out = np.frombuffer(b"".join(jb.pop() for _ in range(2)), "<i2")
    np.testing.assert_array_equal(out[: len(second)], second[:, 0])
    assert not out[len(second) :].any()


def test_generator_turn_ended_after_its_last_frame_left_frees_the_next(rng):
    """The turn's end comes after all of it was popped (a model's turn
    complete after its audio played out, the audio a whole number of
    frames): the next turn's audio is ready at once. It once stayed behind
    the old end for good (frames_ready 0), and a paced consumer that pops
    only ready frames never played it."""
    first, second = noise(rng, 3 * FRAME), noise(rng, 2 * FRAME + 37)
    jb = JitterBuffer(RATE)
    jb.push(first, turn=1)
    played = [jb.pop() for _ in range(jb.frames_ready)]
    assert b"".join(played) == first.astype("<i2").tobytes() and jb.playing
    jb.end_turn()
    assert not jb.playing
    jb.push(second, turn=2)
    assert jb.frames_ready == 2
    jb.end_turn()
    assert jb.frames_ready == 3
    out = np.frombuffer(b"".join(jb.pop() for _ in range(3)), "<i2")
    np.testing.assert_array_equal(out[: len(second)], second[:, 0])
    assert not out[len(second) :].any()


def test_generator_backpressure_before_the_turn_ends_run_out(rng):
    """Each ended turn keeps its end until played; a producer that waits on
    backpressure can always end the turn it pushes."""
    jb = JitterBuffer(RATE)
    turns = 0
    while not jb.backpressure:
        jb.push(noise(rng, 10), turn=turns, final=True)
        turns += 1
        assert turns < 1000
    jb.push(noise(rng, 10), turn=turns, final=True)  # the reserve holds this one
    assert jb.backpressure
    while jb.backpressure:
        jb.pop()
    jb.push(noise(rng, 10), turn=turns + 1, final=True)


def test_generator_short_final_turn_starts_at_once(rng):
    source = noise(rng, 50)
    jb = JitterBuffer(RATE)
    jb.push(source, final=True)
    out = np.frombuffer(jb.pop(), "<i2")
    np.testing.assert_array_equal(out[:50], source[:, 0])


def test_generator_underrun_conceals_and_resumes_exactly(rng):
    source = tone(4 * FRAME)
    jb = JitterBuffer(RATE)
    tr = Trace(jb)
    jb.push(source[: 2 * FRAME + 200])
    tr.pop(3)  # the third frame runs dry after 200 samples
    tr.pop(2)  # stalled: concealment, nothing consumed
    assert jb._core.read_pos == 2 * FRAME + 200
    jb.push(source[2 * FRAME + 200 :], final=True)
    tr.pop(3)
    assert np.array_equal(tr.consumed(), np.arange(4 * FRAME))  # nothing lost or repeated
    s = tr.check(source)
    assert s["concealment_events"] == 1
    assert s["concealed_samples"] == 280 + 2 * FRAME
    # No click at either edge of the concealment: steps stay near the tone's own.
    assert max_step(tr.out) < 1.5 * max_step(source)


def test_generator_concealment_fades_to_silence():
    source = tone(FRAME)
    jb = JitterBuffer(RATE)
    tr = Trace(jb)
    jb.push(source)
    tr.pop(6)
    tail = tr.out[FRAME:]
    assert np.abs(tail[: FRAME // 4]).max() > 5000  # repeats the waveform at first
    assert not tail[-FRAME:].any()  # then silence
    envelope = [np.abs(f).max() for f in tr.frames[1:]]
    assert envelope == sorted(envelope, reverse=True)
    s = jb.stats
    assert s["silent_concealed_samples"] > 0
    assert max_step(tr.out) < 1.5 * max_step(source)


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(st.integers(1, 3000), min_size=1, max_size=30),
    pops=st.lists(st.integers(0, 4), min_size=1, max_size=30),
    preroll=st.sampled_from([0, 5, 20]),
    channels=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**32 - 1),
)
def test_generator_never_drops_property(chunks, pops, preroll, channels, seed):
    """Any chunking and any stall pattern: every pushed sample is played once,
    in order, verbatim except the counted cross-fades after concealment."""
    rng = np.random.default_rng(seed)
    source = noise(rng, sum(chunks), channels)
    jb = JitterBuffer(RATE, channels=channels, preroll_ms=preroll)
    tr = Trace(jb)
    at = 0
    for i, n in enumerate(chunks):
        jb.push(source[at : at + n])
        at += n
        tr.pop(pops[i % len(pops)])
    jb.end_turn()
    while jb.playing:
        tr.pop()
    assert np.array_equal(tr.consumed(), np.arange(len(source)))
    s = tr.check(source)
    assert s["discarded_samples"] == 0 and s["removed_samples"] == 0
    assert s["blended_samples"] == int(np.sum(tr.pos <= -2))


def test_generator_turns_in_a_row(rng):
    a, b = noise(rng, 700), noise(rng, 900)
    jb = JitterBuffer(RATE)
    tr = Trace(jb)
    jb.push(a, turn="a")
    jb.push(b, turn="b")  # a new id ends turn "a"
    jb.end_turn()
    tr.pop(2)
    assert jb.played == 700  # "a" done, "b" starts on the next frame
    tr.pop()
    assert jb.played == FRAME
    tr.pop(2)
    out = tr.out
    np.testing.assert_array_equal(out[:700], a)
    assert not out[700 : 2 * FRAME].any()
    np.testing.assert_array_equal(out[2 * FRAME : 2 * FRAME + 900], b)


# -- positions, turns and readiness: what a consumer can ask ------------------


def test_positions_count_what_is_stored_and_played(rng):
    jb = JitterBuffer(RATE)
    assert (jb.write_position, jb.read_position) == (0, 0)
    jb.push(noise(rng, 700))
    jb.push(noise(rng, 300))
    assert (jb.write_position, jb.read_position) == (1000, 0)
    jb.pop()
    assert (jb.write_position, jb.read_position) == (1000, FRAME)
    jb.pop()  # runs dry after 40 samples: the rest is concealment
    jb.pop()
    assert jb.read_position == 1000
    with pytest.raises(BufferError):
        jb.push(np.zeros(RATE * 61, np.int16))  # refused: not stored, not counted
    assert jb.write_position == 1000
    jb.push(noise(rng, 500), turn="b")
    assert jb.flush() == 1000  # of the turn heard last: "b" has not started
    assert jb.read_position == jb.write_position == 1500
    assert not jb.push(noise(rng, 10), turn="b")  # rejected: not counted
    assert jb.write_position == 1500


def test_turn_state_follows_the_open_turn(rng):
    jb = JitterBuffer(RATE)
    assert (jb.turn_open, jb.turn_samples, jb.turn_played) == (False, 0, 0)
    jb.push(noise(rng, 700), turn="a")
    jb.push(noise(rng, 100), turn="a")
    assert (jb.turn_open, jb.turn_samples, jb.turn_played) == (True, 800, 0)
    jb.pop()
    assert jb.turn_played == FRAME
    jb.push(noise(rng, 900), turn="b")  # a new id ends "a"
    assert (jb.turn_open, jb.turn_samples, jb.turn_played) == (True, 900, 0)
    jb.pop()  # the rest of "a" (320 samples), padded
    assert jb.turn_played == 0  # "b" has not started; the tail of "a" played
    jb.pop()
    assert jb.turn_played == FRAME
    jb.end_turn()
    assert (jb.turn_open, jb.turn_samples, jb.turn_played) == (False, 0, 0)
    jb.push(noise(rng, 200), turn="c", final=True)
    assert not jb.turn_open
    jb.push(noise(rng, 200), turn="d")
    jb.flush()
    assert (jb.turn_open, jb.turn_samples, jb.turn_played) == (False, 0, 0)


def test_turn_samples_count_what_packets_store(rng):
    jb = JitterBuffer(RATE, profile="packet")
    jb.push(noise(rng, FRAME), seq=1, turn="x")
    jb.push(noise(rng, FRAME), seq=1, turn="x")  # duplicate: not stored
    jb.push(noise(rng, FRAME), seq=2, turn="x")
    assert jb.turn_samples == 2 * FRAME


def test_frames_ready_counts_the_tail_of_an_ended_turn(rng):
    jb = JitterBuffer(RATE)
    jb.push(noise(rng, 2 * FRAME + 100))
    assert jb.frames_ready == 2  # the open turn's last 100 samples may grow
    jb.end_turn()
    assert jb.frames_ready == 3  # now they are a tail, padded to a frame
    for left in (2, 1, 0):
        jb.pop()
        assert jb.frames_ready == left


def test_frames_ready_counts_an_ended_turns_tail_behind_an_open_one(rng):
    # The tail of "a" plays before "b", however much of "b" is stored.
    jb = JitterBuffer(RATE)
    jb.push(noise(rng, FRAME + 20), turn="a")
    jb.push(noise(rng, 100), turn="b")
    jb.pop()
    assert jb.frames_ready == 1  # the 20-sample tail of "a"
    tr = Trace(jb)
    tr.pop()
    assert (tr.pos[:20] >= 0).all() and (tr.pos[20:] == -1).all()
    assert jb.frames_ready == 0  # "b" has 100 of the 480 samples it starts with


def test_frames_ready_is_zero_while_concealing_fading_or_filling(rng):
    jb = JitterBuffer(RATE)
    jb.push(noise(rng, FRAME + 200))
    jb.pop()
    jb.pop()  # dry after 200 samples: concealing
    jb.push(noise(rng, 100))
    assert jb.frames_ready == 0  # 100 < the pre-roll needed to resume
    jb.push(noise(rng, FRAME))
    assert jb.frames_ready == 1  # enough to cross-fade back and play a frame
    jb.flush(fade_ms=5)
    jb.push(noise(rng, 2 * FRAME), turn="next")
    assert jb.frames_ready == 0  # the next pop is the flush's fade
    jb.pop()
    assert jb.frames_ready == 2

    reliable = JitterBuffer(RATE, profile="reliable", target_ms=60)
    reliable.push(noise(rng, 2 * FRAME))
    assert reliable.frames_ready == 0  # buffering up to the 60 ms target
    reliable.push(noise(rng, FRAME))
    assert reliable.frames_ready == 3


# -- flush ------------------------------------------------------------------------


def test_flush_returns_played_position_and_rejects_turn(rng):
    source = tone(10 * FRAME)
    jb = JitterBuffer(RATE)
    tr = Trace(jb)
    jb.push(source[: 5 * FRAME], turn=7)
    tr.pop(3)
    assert jb.played == 3 * FRAME
    assert jb.flush() == 3 * FRAME
    assert jb.push(source[5 * FRAME :], turn=7) is False  # late chunk of the flushed turn
    tr.pop(2)
    fade = tr.out[3 * FRAME :]
    assert (tr.pos[3 * FRAME :] == -1).all()  # nothing of the source after the flush
    assert not fade[120:].any()  # 5 ms fade, then silence
    assert np.abs(fade[:5]).max() > 0
    assert max_step(tr.out) < 1.5 * max_step(source)
    s = jb.stats
    assert s["flushes"] == 1
    assert s["rejected_packets"] == 1 and s["rejected_samples"] == 5 * FRAME
    assert s["discarded_samples"] == 2 * FRAME
    assert not jb.playing
    # A new turn plays normally from its start.
    new = noise(rng, FRAME)
    assert jb.push(new, turn=8)
    assert jb.played == 0
    np.testing.assert_array_equal(tr.pop(), new)
    assert jb.played == FRAME


def test_flush_mid_frame_position_is_exact(rng):
    source = noise(rng, 1000)
    jb = JitterBuffer(RATE, preroll_ms=0)
    jb.push(source[:700])
    jb.pop()
    jb.pop()  # 220 played, then concealment
    assert jb.flush(fade_ms=0) == 700
    assert jb.pop() == bytes(2 * FRAME)  # no fade asked: silence at once


def test_flush_without_turn_ids_accepts_next_audio(rng):
    jb = JitterBuffer(RATE)
    jb.push(noise(rng, 2000))
    jb.pop()
    assert jb.flush() == FRAME
    jb.pop()  # the fade
    fresh = noise(rng, FRAME)
    assert jb.push(fresh)
    assert jb.pop() == fresh.tobytes()


def test_flush_is_constant_time_for_any_backlog(rng):
    jb = JitterBuffer(RATE, capacity_ms=600_000)
    jb.push(np.zeros(RATE * 300, np.int16))
    jb.pop()
    assert jb.flush() == FRAME
    assert jb.stats["discarded_samples"] == RATE * 300 - FRAME


@pytest.mark.parametrize("profile", ["reliable", "packet"])
def test_flush_other_profiles(profile, rng):
    source = noise(rng, 20 * FRAME)
    kw = {"target_ms": 40} if profile == "reliable" else {}
    jb = JitterBuffer(RATE, profile=profile, **kw)
    for i in range(10):
        pk = {"seq": i, "timestamp": i * FRAME} if profile == "packet" else {}
        jb.push(source[i * FRAME : (i + 1) * FRAME], turn="t", **pk)
    for _ in range(4):
        jb.pop()
    played = jb.flush()
    assert played == 4 * FRAME
    pk = {"seq": 10, "timestamp": 10 * FRAME} if profile == "packet" else {}
    assert jb.push(source[10 * FRAME : 11 * FRAME], turn="t", **pk) is False


# -- reliable ------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[1], [7], [97, 1009], [480], [4801, 3]])
def test_reliable_reframes_without_delay(sizes, rng):
    source = noise(rng, 20000)
    jb = JitterBuffer(RATE, profile="reliable")
    out = []
    at, i = 0, 0
    while at < len(source):
        n = sizes[i % len(sizes)]
        jb.push(source[at : at + n])
        at += n
        i += 1
        while jb.frames_ready:
            out.append(jb.pop())
        # No added delay: everything but the unfinished frame is out.
        assert jb._core.level < FRAME
    got = np.frombuffer(b"".join(out), "<i2")
    np.testing.assert_array_equal(got, source[: len(got), 0])
    assert len(got) == len(source) // FRAME * FRAME
    s = jb.stats
    assert s["concealed_samples"] == 0 and s["emitted_samples"] == len(got)


def test_reliable_target_holds_delay_and_stalls_without_dropping(rng):
    source = noise(rng, 100 * FRAME)
    jb = JitterBuffer(RATE, profile="reliable", target_ms=60)
    tr = Trace(jb)
    pushed = 0
    for tick in range(100):
        # The sender stalls for 10 frames, then catches up in one burst.
        if tick < 40 or tick >= 50:
            upto = (tick + 1) * FRAME
            jb.push(source[pushed:upto])
            pushed = upto
        tr.pop()
    consumed = tr.consumed()
    s = tr.check(source)
    assert s["concealment_events"] >= 1
    assert s["discarded_samples"] == 0
    assert s["removed_samples"] == 0  # the stall adds < max_ms: no compression
    assert np.array_equal(consumed, np.arange(len(consumed)))
    # Playout started only once the target was buffered.
    assert (tr.pos[: 2 * FRAME] == -1).all()
    assert (tr.pos[3 * FRAME : 4 * FRAME] >= 0).all()


def test_reliable_caps_latency_by_time_compression():
    source = tone(400 * FRAME, hz=180)
    jb = JitterBuffer(RATE, profile="reliable", target_ms=60, max_ms=120)
    tr = Trace(jb)
    jb.push(source[: 3 * FRAME])
    tr.pop(3)
    jb.push(source[3 * FRAME : 40 * FRAME])  # a 740 ms backlog arrives at once
    levels = []
    for tick in range(40, 400):
        jb.push(source[tick * FRAME : (tick + 1) * FRAME])
        tr.pop()
        levels.append(jb.buffered_ms)
    s = tr.check(source)
    assert s["removed_samples"] > 600 * RATE // 1000  # most of the backlog
    assert s["accelerations"] > 0
    assert max(levels[-100:]) <= 120 + 20
    assert s["discarded_samples"] == 0
    assert max_step(tr.out) < 2 * max_step(source)  # compression cross-fades smoothly


def test_reliable_overflow_drops_oldest_counted(rng):
    jb = JitterBuffer(RATE, profile="reliable", capacity_ms=100)
    source = noise(rng, 3000)
    jb.push(source)
    s = jb.stats
    assert s["discarded_samples"] == 3000 - 2400
    assert jb.pop() == source[600 : 600 + FRAME].tobytes()


# -- packet ----------------------------------------------------------------------------

PRATE = 16000
P = 320  # 20 ms packets at 16 kHz


def play_packets(jb, source, arrivals, *, seq0=0, ts0=0, drop=(), dup=False, extra_pops=10):
    """Sends packet i of `source` arriving at arrivals[i] (None: lost), pops
    every 20 ms from just after the first arrival, returns the Trace and the
    position of source sample 0."""
    tr = Trace(jb)
    order = sorted((a, i) for i, a in enumerate(arrivals) if a is not None and i not in drop)
    if dup:
        order = sorted(order + [(a + 0.001, i) for a, i in order])
    origin = None
    k = 0
    t = order[0][0] + 0.003
    end = order[-1][0] + extra_pops * 0.02
    while t < end:
        while k < len(order) and order[k][0] <= t:
            a, i = order[k]
            jb.push(
                source[i * P : (i + 1) * P],
                seq=(seq0 + i) & 0xFFFF,
                timestamp=(ts0 + i * P) & 0xFFFFFFFF,
                arrival=a,
            )
            if origin is None:
                # The core unwraps timestamps from the first one + 2**32.
                origin = ((ts0 + i * P) & 0xFFFFFFFF) + 2**32 - i * P
            k += 1
            if k == len(order):
                jb.end_turn()  # end of stream: the tail is not concealed
        tr.pop()
        t += 0.02
    return tr, origin


def packet_source(rng, count, kind="noise"):
    if kind == "tone":
        return tone(count * P, rate=PRATE)
    return noise(rng, count * P)


def test_packet_in_order_plays_everything_verbatim(rng):
    src = packet_source(rng, 200)
    jb = JitterBuffer(PRATE, profile="packet")
    tr, origin = play_packets(jb, src, [0.05 + i * 0.02 for i in range(200)])
    s = tr.check(src, origin)
    assert np.array_equal(tr.consumed() - origin, np.arange(len(src)))
    assert s["concealed_samples"] == 0
    assert s["late_packets"] == s["duplicate_packets"] == 0
    assert s["target_delay_ms"] <= 40


@pytest.mark.parametrize("seq0, ts0", [(65500, 2**32 - 3 * P - 17), (65535, 2**32 - 1), (0, 0)])
def test_packet_sequence_and_timestamp_wrap(seq0, ts0, rng):
    src = packet_source(rng, 300)
    jb = JitterBuffer(PRATE, profile="packet")
    tr, origin = play_packets(jb, src, [0.05 + i * 0.02 for i in range(300)], seq0=seq0, ts0=ts0)
    tr.check(src, origin)
    assert np.array_equal(tr.consumed() - origin, np.arange(len(src)))
    assert jb.stats["concealed_samples"] == 0


def test_packet_reorder_and_duplicates(rng):
    src = packet_source(rng, 300)
    arrivals = [0.05 + i * 0.02 for i in range(300)]
    for i in range(0, 300, 2):  # every pair swapped
        arrivals[i] += 0.025
    jb = JitterBuffer(PRATE, profile="packet", target_ms=80)
    tr, origin = play_packets(jb, src, arrivals, dup=True)
    s = tr.check(src, origin)
    assert np.array_equal(tr.consumed() - origin, np.arange(len(src)))
    assert s["duplicate_packets"] == 300
    assert s["concealed_samples"] == 0 and s["late_packets"] == 0


def test_packet_timestamp_only_and_seq_only(rng):
    src = packet_source(rng, 50)
    for kw in ({"timestamp": True}, {"seq": True}):
        jb = JitterBuffer(PRATE, profile="packet")
        tr = Trace(jb)
        for i in range(50):
            args = {"timestamp": i * P} if "timestamp" in kw else {"seq": i}
            jb.push(src[i * P : (i + 1) * P], arrival=i * 0.02, **args)
            if i == 0:
                origin = jb._core.read_pos
            tr.pop()
        tr.pop(5)
        tr.check(src, origin)
        assert np.array_equal(tr.consumed() - origin, np.arange(len(src)))
    # Without seq, a repeated timestamp is still a duplicate.
    jb = JitterBuffer(PRATE, profile="packet")
    assert jb.push(src[:P], timestamp=0)
    assert jb.push(src[:P], timestamp=0) is False
    assert jb.stats["duplicate_packets"] == 1


def test_packet_loss_is_concealed_smoothly(rng):
    src = packet_source(rng, 300, "tone")
    drop = set(rng.choice(np.arange(10, 290), 30, replace=False).tolist()) | {100, 101, 102, 103}
    jb = JitterBuffer(PRATE, profile="packet", target_ms=60)
    tr, origin = play_packets(jb, src, [0.05 + i * 0.02 for i in range(300)], drop=drop)
    s = tr.check(src, origin)
    consumed = set((tr.consumed() - origin).tolist())
    lost = {j for i in drop for j in range(i * P, (i + 1) * P)}
    assert consumed == set(range(len(src))) - lost  # everything else played
    assert s["concealed_samples"] == len(lost)
    assert s["concealment_events"] >= 1
    # Repetition of the waveform, cross-faded in and out: no clicks.
    assert max_step(tr.out) < 1.5 * max_step(src)
    # The 4-packet burst fades toward silence, it does not cut to zeros.
    burst = tr.out[(tr.pos == -1)]
    assert np.abs(burst).max() > 5000


def test_packet_late_packets(rng):
    src = packet_source(rng, 100)
    arrivals = [0.05 + i * 0.02 for i in range(100)]
    arrivals[50] += 0.5  # far too late: its slot has long been concealed
    jb = JitterBuffer(PRATE, profile="packet", target_ms=40)
    tr, origin = play_packets(jb, src, arrivals)
    s = tr.check(src, origin)
    assert s["late_packets"] == 1 and s["late_samples"] == P
    assert s["concealed_samples"] == P
    assert set(range(50 * P, 51 * P)).isdisjoint((tr.consumed() - origin).tolist())


def test_packet_slightly_late_packet_is_still_played(rng):
    """The buffer runs dry waiting for a late packet: it stalls (conceals)
    and plays the packet when it comes instead of skipping it."""
    src = packet_source(rng, 100)
    arrivals = [0.05 + i * 0.02 for i in range(100)]
    for i in range(50, 100):
        arrivals[i] += 0.03  # a path change: 30 ms more from here on
    jb = JitterBuffer(PRATE, profile="packet", target_ms=20)
    tr, origin = play_packets(jb, src, arrivals)
    s = tr.check(src, origin)
    assert np.array_equal(tr.consumed() - origin, np.arange(len(src)))
    assert s["late_packets"] == 0 and s["concealed_samples"] > 0


@pytest.mark.parametrize("ppm", [2000, -2000])
def test_packet_clock_drift(ppm, rng):
    """+-2000 ppm for 60 s (120 ms of drift): time-scaling absorbs it, with no
    runaway growth and no loss."""
    n = 3000
    src = tone(n * P, hz=150, rate=PRATE)
    scale = 1 / (1 + ppm * 1e-6)
    arrivals = [0.05 + i * 0.02 * scale + abs(rng.normal(0, 0.003)) for i in range(n)]
    jb = JitterBuffer(PRATE, profile="packet")
    tr, origin = play_packets(jb, src, arrivals)
    s = tr.check(src, origin)
    assert s["concealed_samples"] < 0.01 * len(src)
    assert s["late_samples"] == 0
    assert s["high_water_ms"] < 150
    moved = s["removed_samples"] if ppm > 0 else s["inserted_samples"]
    assert moved > 0.5 * abs(ppm) * 1e-6 * len(src)


def test_packet_target_adapts_within_bounds(rng):
    n = 1500
    src = packet_source(rng, n)
    jittery = [0.05 + i * 0.02 + abs(rng.normal(0, 0.03)) for i in range(n)]
    jb = JitterBuffer(PRATE, profile="packet")
    play_packets(jb, src, jittery)
    assert jb.stats["target_delay_ms"] > 60
    bounded = JitterBuffer(PRATE, profile="packet", min_ms=30, max_ms=50)
    play_packets(bounded, src, jittery)
    assert 30 <= bounded.stats["target_delay_ms"] <= 50
    steady = JitterBuffer(PRATE, profile="packet", min_ms=30)
    play_packets(steady, src, [0.05 + i * 0.02 for i in range(n)])
    assert 30 <= steady.stats["target_delay_ms"] <= 32  # 1 ms histogram bins


def test_packet_timestamp_jump_restarts_timeline(rng):
    src = packet_source(rng, 20)
    jb = JitterBuffer(PRATE, profile="packet", target_ms=20)
    tr = Trace(jb)
    for i in range(10):
        jb.push(src[i * P : (i + 1) * P], seq=i, timestamp=i * P, arrival=i * 0.02)
    tr.pop(3)
    far = 10 * P + PRATE * 3600  # an hour ahead: the sender restarted its clock
    for i in range(10, 20):
        jb.push(src[i * P : (i + 1) * P], seq=i, timestamp=far + (i - 10) * P, arrival=i * 0.02)
    assert jb.stats["discarded_samples"] == 7 * P
    tr.pop(12)
    np.testing.assert_array_equal(tr.out[tr.pos >= 0][-10 * P :], src[10 * P :])


def test_packet_end_of_stream_stops_concealing(rng):
    src = packet_source(rng, 10)
    jb = JitterBuffer(PRATE, profile="packet", target_ms=20)
    for i in range(10):
        jb.push(src[i * P : (i + 1) * P], seq=i, arrival=i * 0.02)
    jb.end_turn()
    for _ in range(15):
        jb.pop()
    s = jb.stats
    assert s["played_samples"] + s["blended_samples"] >= 10 * P - P
    assert s["concealed_samples"] == 0
    assert not jb.playing


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(5, 120),
    spread=st.floats(0, 0.08),
    loss=st.floats(0, 0.3),
    dup=st.booleans(),
    target=st.sampled_from([None, 20, 60]),
    seq0=st.integers(0, 0xFFFF),
    ts0=st.integers(0, 0xFFFFFFFF),
    seed=st.integers(0, 2**32 - 1),
)
def test_packet_property(count, spread, loss, dup, target, seq0, ts0, seed):
    """Any jitter, loss, duplication and wrap point: every played sample is
    the right one, nothing plays twice or out of order, and only what was
    sent and not lost can play."""
    rng = np.random.default_rng(seed)
    src = noise(rng, count * P)
    arrivals = [i * 0.02 + rng.uniform(0, spread) for i in range(count)]
    drop = {i for i in range(count) if rng.random() < loss} - {0}
    kw = {} if target is None else {"target_ms": target}
    jb = JitterBuffer(PRATE, profile="packet", **kw)
    tr, origin = play_packets(jb, src, arrivals, seq0=seq0, ts0=ts0, drop=drop, dup=dup)
    s = tr.check(src, origin)
    consumed = tr.consumed() - origin
    lost = {j for i in drop for j in range(i * P, (i + 1) * P)}
    assert set(consumed.tolist()).isdisjoint(lost)
    assert consumed.min() >= 0 and consumed.max() < len(src)
    assert s["duplicate_packets"] == (count - len(drop) if dup else 0)


def test_rejected_chunk_is_still_checked():
    jb = JitterBuffer(RATE, channels=2)
    jb.push(bytes(4 * FRAME), turn=1)
    jb.flush()
    with pytest.raises(TypeError, match="expected int16 samples, got float32"):
        jb.push(np.zeros(4, np.float32), turn=1)
    with pytest.raises(ValueError, match="whole frames of 2"):
        jb.push(np.zeros(3, np.int16), turn=1)
    assert jb.push(np.zeros(6, np.int16), turn=1) is False
    assert jb.stats["rejected_samples"] == 3


def test_packet_turn_ids_are_labels_for_flush(rng):
    src = packet_source(rng, 20)
    jb = JitterBuffer(PRATE, profile="packet", target_ms=20)
    for i in range(10):
        jb.push(src[i * P : (i + 1) * P], seq=i, arrival=i * 0.02, turn="a" if i < 5 else "b")
    for _ in range(6):
        jb.pop()
    assert jb.played == 6 * P  # one stream, whatever the labels
    jb.flush()
    assert jb.push(src[10 * P : 11 * P], seq=10, turn="a") is False
    assert jb.push(src[10 * P : 11 * P], seq=10, turn="b") is False
    assert jb.push(src[10 * P : 11 * P], seq=10, turn="c") is True


def test_too_many_finished_turns_waiting():
    jb = JitterBuffer(RATE)
    for turn in range(65):  # each new id ends the previous turn: 64 waiting
        jb.push(b"\x01\x00" * 10, turn=turn)
    with pytest.raises(BufferError, match="too many finished turns"):
        jb.push(b"\x01\x00" * 10, turn=65)
    jb.pop()  # plays turn 0, making room
    assert jb.push(b"\x01\x00" * 10, turn=65)
