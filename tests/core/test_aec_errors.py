"""EchoCanceller's bad arguments and bad input: a clear TypeError or
ValueError naming what was expected, and nothing of a refused call used."""

import array
import threading

import numpy as np
import pytest
from aec_reference import noise
from gated_buffer import gated_buffer

from audiocore import EchoCanceller


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((44100,), {}, ValueError, r"rate: expected 8000, 16000, 24000 or 48000 Hz, got 44100"),
        (
            (96000,),
            {},
            ValueError,
            r"rate: expected a sample rate in Hz from 8000 to 48000, got 96000",
        ),
        ((0,), {}, ValueError, r"rate: expected a sample rate in Hz from 8000 to 48000, got 0"),
        ((16000.0,), {}, TypeError, r"rate: expected a sample rate in Hz, got float"),
        (("16000",), {}, TypeError, r"rate: expected a sample rate in Hz, got str"),
        ((True,), {}, TypeError, r"rate: expected a sample rate in Hz, got bool"),
        (
            (16000,),
            {"tail": 0},
            ValueError,
            r"tail: expected an echo tail in seconds from 0.01 to 2, got 0",
        ),
        ((16000,), {"tail": 100.0}, ValueError, r"tail: expected .* from 0.01 to 2, got 100.0"),
        ((16000,), {"tail": float("nan")}, ValueError, r"tail: expected .* got nan"),
        ((16000,), {"tail": "long"}, TypeError, r"tail: expected an echo tail in seconds, got str"),
        (
            (16000,),
            {"max_delay": -1},
            ValueError,
            r"max_delay: expected a delay in seconds from 0 to 2, got -1",
        ),
        ((16000,), {"max_delay": 10}, ValueError, r"max_delay: expected .* got 10"),
        ((16000,), {"suppress": 1}, TypeError, r"suppress: expected a bool, got int"),
        ((16000,), {"input": "f64"}, ValueError, r"input: expected 'f32' or 's16', got 'f64'"),
        ((16000,), {"output": None}, ValueError, r"output: expected 'f32' or 's16', got None"),
    ],
)
def test_bad_arguments(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        EchoCanceller(*args, **kwargs)


def test_far_and_near_must_be_as_long():
    aec = EchoCanceller(16000)
    with pytest.raises(
        ValueError,
        match=r"expected as many near-end samples as far-end samples, got 160 near and 320 far",
    ):
        aec.process(np.zeros(320, np.float32), np.zeros(160, np.float32))


@pytest.mark.parametrize(
    ("far", "near", "error", "message"),
    [
        (
            np.zeros(4, np.float64),
            np.zeros(4, np.float32),
            TypeError,
            r"far: expected float32 samples, got float64",
        ),
        (
            np.zeros(4, np.float32),
            np.zeros(4, np.int16),
            TypeError,
            r"near: expected float32 samples, got int16",
        ),
        (
            np.zeros(4, ">f4"),
            np.zeros(4, np.float32),
            TypeError,
            r"far: expected float32 samples, got big-endian float32",
        ),
        (
            "abcd",
            np.zeros(1, np.float32),
            TypeError,
            r"far: expected a buffer of float32 samples, got str",
        ),
        (
            None,
            np.zeros(1, np.float32),
            TypeError,
            r"far: expected a buffer of float32 samples, got NoneType",
        ),
        (
            b"\0" * 6,
            b"\0" * 6,
            ValueError,
            r"far: float32 data must be a whole number of 4-byte samples, got 6 bytes",
        ),
        (
            np.zeros((4, 2), np.float32)[:, 0],
            np.zeros(4, np.float32),
            ValueError,
            r"far: expected a C-contiguous buffer",
        ),
    ],
)
def test_bad_buffers(far, near, error, message):
    with pytest.raises(error, match=message):
        EchoCanceller(16000).process(far, near)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("which", ["far", "near"])
def test_non_finite_samples_are_refused_and_nothing_is_used(rng, bad, which):
    far, near = noise(rng, 1000), noise(rng, 1000)
    clean = EchoCanceller(16000, output="f32")
    want = clean.process(far, near)

    aec = EchoCanceller(16000, output="f32")
    spoilt = (far if which == "far" else near).copy()
    spoilt[123] = bad
    args = (spoilt, near) if which == "far" else (far, spoilt)
    with pytest.raises(
        ValueError, match=rf"{which}: expected finite samples, got .*{bad!r}.* at sample 123"
    ):
        aec.process(*args)
    assert np.array_equal(aec.process(far, near), want)


def test_pcm16_takes_any_buffer_and_needs_no_finiteness_check(rng):
    pcm = (noise(rng, 320) * 32767).astype("<i2")
    outs = []
    for make in (
        bytes,
        bytearray,
        memoryview,
        lambda b: array.array("h", b),
        lambda b: np.frombuffer(b, "<i2"),
    ):
        aec = EchoCanceller(16000, input="s16")
        outs.append(aec.process(make(pcm.tobytes()), make(pcm.tobytes())))
    assert all(o == outs[0] for o in outs)


def test_pcm16_must_be_whole_samples():
    with pytest.raises(
        ValueError, match=r"near: int16 data must be a whole number of 2-byte samples, got 3 bytes"
    ):
        EchoCanceller(16000, input="s16").process(b"\0\0", b"\0\0\0")


def test_empty_chunks_give_empty_output():
    aec = EchoCanceller(16000, output="f32")
    out = aec.process(b"", np.zeros(0, np.float32))
    assert out.dtype == np.float32 and len(out) == 0
    assert EchoCanceller(16000).process(b"", b"") == b""


def test_a_long_chunk_runs(rng):
    # A minute in one call: without the GIL, and as long as the input.
    n = 60 * 16000
    far = np.zeros(n, np.float32)
    out = EchoCanceller(16000, output="f32").process(far, far)
    assert len(out) == n and not np.any(out)


def test_process_before_init_is_a_runtime_error():
    aec = EchoCanceller.__new__(EchoCanceller)
    assert aec.echo_delay is None and not aec.echo_found  # read, never a crash
    with pytest.raises(
        RuntimeError, match=r"process\(\) on an EchoCanceller whose __init__ did not run"
    ):
        aec.process(b"", b"")


def test_concurrent_use_raises_instead_of_corrupting():
    # The worker's call holds the canceller from the moment its far buffer is
    # asked for; the buffer is handed over only once this thread has been
    # refused, so the calls overlap by construction, not by timing.
    rng = np.random.default_rng(5)
    far, near = noise(rng, 16000), noise(rng, 16000)
    aec = EchoCanceller(16000, output="f32")
    inside, tried = threading.Event(), threading.Event()

    def hold() -> None:
        inside.set()
        tried.wait(60)

    result = {}

    def worker():
        result["out"] = aec.process(gated_buffer(far, hold), near)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert inside.wait(60), "the worker never asked for its buffer"
        with pytest.raises(RuntimeError, match="another thread is inside this EchoCanceller"):
            aec.process(far[:10], near[:10])
        with pytest.raises(RuntimeError, match="another thread is inside this EchoCanceller"):
            aec.reset()
    finally:
        tried.set()
        thread.join()
    # The refused calls changed nothing: the output is a fresh canceller's.
    fresh = EchoCanceller(16000, output="f32")
    assert np.array_equal(result["out"], fresh.process(far, near))
