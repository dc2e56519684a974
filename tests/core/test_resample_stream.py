"""Streaming semantics: chunking never changes a bit, every call returns all
it can, the delay is exact, the stream length is exact, flush/reset."""

import gc
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from resample_reference import expected_frames, noise, ratio

from audiocore.resample import Resampler, resample

PAIRS = [(48000, 16000), (24000, 48000), (44100, 16000), (16000, 44100), (11025, 8000)]
# The phone rate against the models' (16k, 24k) and the browser's (48k).
PHONE_PAIRS = [(8000, 16000), (16000, 8000), (8000, 24000), (24000, 8000), (8000, 48000)]
PRIMES = [1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 97, 211, 967]


def run_chunked(stream, x, sizes, channels=1):
    """Feeds `x` in chunks of `sizes` frames (cycled), then flushes; returns
    the concatenated output as a numpy array (int16 or float32)."""
    parts, pos, i = [], 0, 0
    frames = len(x) // channels
    while pos < frames:
        n = sizes[i % len(sizes)]
        parts.append(stream.process(x[pos * channels : (pos + n) * channels]))
        pos += n
        i += 1
    parts.append(stream.flush())
    return as_array(parts)


def as_array(parts):
    if isinstance(parts[0], bytes):
        return np.frombuffer(b"".join(parts), "<i2")
    return np.concatenate(parts)


CHUNKINGS = {
    "one call": [10**9],
    "20 ms": [960],
    "primes": PRIMES,
    "single frames": [1],
    "with empties": [0, 5, 0, 0, 700, 1, 0, 129],
}


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS + PHONE_PAIRS)
@pytest.mark.parametrize("output", ["s16", "f32"])
def test_chunking_never_changes_a_bit(rng, resample_path, chunking, in_rate, out_rate, output):
    channels = 2 if chunking == "primes" else 1
    x = noise(rng, 3 * in_rate // 50 + 17, channels)
    whole = np.asarray(resample(x, in_rate, out_rate, channels=channels, output=output))
    if output == "s16":
        whole = np.frombuffer(whole, "<i2")
    stream = Resampler(in_rate, out_rate, channels=channels, output=output)
    got = run_chunked(stream, x, CHUNKINGS[chunking], channels)
    assert np.array_equal(got, whole)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pair=st.sampled_from(PAIRS),
    quality=st.sampled_from(["voice", "high"]),
    channels=st.sampled_from([1, 2]),
    formats=st.sampled_from([("f32", "f32"), ("f32", "s16"), ("s16", "f32"), ("s16", "s16")]),
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=30),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_splits_equal_one_shot(pair, quality, channels, formats, sizes, seed):
    in_rate, out_rate = pair
    x = noise(np.random.default_rng(seed), 1500, channels)
    if formats[0] == "s16":
        x = (x * 32767).astype("<i2")
    kwargs = {"channels": channels, "quality": quality, "input": formats[0], "output": formats[1]}
    whole = as_array([resample(x, in_rate, out_rate, **kwargs)])
    if not any(sizes):
        sizes = [*sizes, 1]
    got = run_chunked(Resampler(in_rate, out_rate, **kwargs), x, sizes, channels)
    assert np.array_equal(got, whole)


@pytest.mark.parametrize(("in_rate", "out_rate"), [*PAIRS, *PHONE_PAIRS, (48000, 8000)])
def test_every_call_returns_all_it_can(in_rate, out_rate):
    # After N input frames exactly max(0, ceil(N * out / in) - delay) frames
    # are out, whatever the chunk sizes: nothing is held back.
    stream = Resampler(in_rate, out_rate, output="f32")
    rng = np.random.default_rng(7)
    received = emitted = 0
    for size in rng.integers(0, 300, 200):
        emitted += len(stream.process(np.zeros(size, np.float32)))
        received += size
        assert emitted == max(0, math.ceil(received * out_rate / in_rate) - stream.delay)
    assert emitted + len(stream.flush()) == expected_frames(received, in_rate, out_rate)


def test_a_20ms_chunk_always_yields_its_share():
    stream = Resampler(48000, 16000)
    counts = [len(stream.process(np.zeros(960, np.float32))) // 2 for _ in range(50)]
    assert counts[0] == 320 - stream.delay
    assert set(counts[1:]) == {320}


@pytest.mark.parametrize(
    ("in_rate", "out_rate"),
    [(48000, 16000), (16000, 48000), (44100, 16000), (8000, 24000), (24000, 8000)],
)
@pytest.mark.parametrize("quality", ["voice", "high"])
def test_impulse_lands_aligned_and_appears_exactly_after_delay(in_rate, out_rate, quality):
    up, down = ratio(in_rate, out_rate)
    k = 3 * down  # k * out / in is a whole output frame
    n = k * up // down
    stream = Resampler(in_rate, out_rate, quality=quality, output="f32")
    # Output n needs input frame floor((n + delay) * in / out); it must come
    # out on exactly the call that delivers that frame, one frame per call.
    needed = (n + stream.delay) * in_rate // out_rate
    out = []
    for frame in range(needed + 50):
        value = np.float32(1.0 if frame == k else 0.0)
        out.append(stream.process(np.array([value], np.float32)))
        if frame == needed - 1:
            assert sum(map(len, out)) <= n, "output n came out early"
        if frame == needed:
            assert sum(map(len, out)) >= n + 1, "output n came out late"
    y = np.concatenate(out)
    assert int(np.argmax(y)) == n
    # Symmetric (linear phase) around n: the impulse is centred, not shifted.
    m = min(n, len(y) - n - 1, 10)
    assert np.allclose(y[n - m : n], y[n + 1 : n + m + 1][::-1], atol=1e-6)


@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS + PHONE_PAIRS)
@pytest.mark.parametrize("frames", [0, 1, 2, 3, 959, 960, 961, 44101])
def test_stream_length_rounds_half_up(in_rate, out_rate, frames):
    stream = Resampler(in_rate, out_rate, output="f32")
    total = len(stream.process(np.zeros(frames, np.float32))) + len(stream.flush())
    assert total == expected_frames(frames, in_rate, out_rate)


def test_rounding_rule_known_answers():
    # 48k -> 16k: 1 frame is 1/3 of an output frame (rounds to 0), 2 frames
    # are 2/3 (1); 16k -> 48k is exact; 2 -> 1 at 44.1k -> 22.05k: 1 frame =
    # half an output frame, which rounds up.
    def frames(n, in_rate, out_rate):
        return len(resample(np.zeros(n, np.float32), in_rate, out_rate, output="f32"))

    assert frames(1, 48000, 16000) == 0
    assert frames(2, 48000, 16000) == 1
    assert frames(5, 16000, 48000) == 15
    assert frames(1, 44100, 22050) == 1
    assert frames(3, 44100, 22050) == 2


def test_flush_finishes_the_stream_and_reset_starts_a_new_one(rng):
    x = noise(rng, 4000)
    stream = Resampler(44100, 16000)
    first = stream.process(x) + stream.flush()
    with pytest.raises(RuntimeError, match=r"process\(\) after flush\(\).*call reset\(\)"):
        stream.process(x)
    with pytest.raises(RuntimeError, match=r"flush\(\) after flush\(\)"):
        stream.flush()
    stream.reset()
    assert stream.process(x) + stream.flush() == first == resample(x, 44100, 16000)
    # reset mid-stream forgets the history too
    stream.reset()
    stream.process(noise(rng, 333))
    stream.reset()
    assert stream.process(x) + stream.flush() == first


def test_no_state_is_dropped_between_calls(rng):
    x = noise(rng, 9600)
    stream = Resampler(48000, 16000)
    parts = []
    for i in range(0, 9600, 960):
        parts.append(stream.process(x[i : i + 960]))
        gc.collect()
        time.sleep(0.01)
    assert b"".join(parts) + stream.flush() == resample(x, 48000, 16000)


def test_delay_is_constant_and_reported(rng):
    stream = Resampler(48000, 16000)
    assert stream.delay == Resampler(48000, 16000).delay
    d = stream.delay
    stream.process(noise(rng, 12345))
    assert stream.delay == d
    assert 0 < d / 16000 <= 0.003


def test_metadata():
    stream = Resampler(44100, 16000, channels=2, quality="high", input="s16", output="f32")
    assert (stream.in_rate, stream.out_rate, stream.channels) == (44100, 16000, 2)
    assert (stream.quality, stream.input, stream.output) == ("high", "s16", "f32")
    assert "Resampler(44100, 16000, channels=2" in repr(stream)
    with pytest.raises(AttributeError):
        stream.delay = 3
