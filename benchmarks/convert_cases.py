"""The conversion contenders, shared by the pytest-benchmark suite and the
comparison table so both time exactly the same calls.

Each case is built outside the timed region and returns a zero-argument
callable plus a function that extracts comparable bytes from its result.
"""

import warnings

import numpy as np

import audiocore
from audiocore import _convert

try:  # removed from the stdlib in 3.13
    with warnings.catch_warnings():
        # Its DeprecationWarning is known; under pytest's filterwarnings =
        # error it would end the collection of bench_convert.py.
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop
except ImportError:  # pragma: no cover
    audioop = None

SIZES = (960, 4800, 1_000_000)
ONE = np.float32(1)
SCALE = np.float32(32767)
INV = np.float32(1 / 32768)


def f32_input(n, seed=1):
    # Speech-like levels with some clipping, no NaN (numpy's cast of NaN is
    # undefined, so it could not be compared).
    return np.random.default_rng(seed).uniform(-1.2, 1.2, n).astype(np.float32)


def s16_input(n, seed=2):
    return np.random.default_rng(seed).integers(-32768, 32768, n, dtype=np.int16).tobytes()


def to_s16_cases(x):
    """name -> (call, result as PCM16 bytes)."""
    n = x.size
    out16 = np.empty(n, np.int16)
    tmp = np.empty(n, np.float32)

    def numpy_fastest():
        # Preallocated, in place, no temporaries: the best plain NumPy can do.
        np.multiply(x, SCALE, out=tmp)
        np.clip(tmp, -SCALE, SCALE, out=tmp)
        np.rint(tmp, out=tmp)
        np.copyto(out16, tmp, casting="unsafe")
        return out16

    return {
        "audiocore": (lambda: audiocore.float32_to_pcm16(x), bytes),
        "audiocore out=": (lambda: audiocore.float32_to_pcm16(x, out16), lambda _: out16.tobytes()),
        "numpy idiomatic": (
            lambda: np.rint(np.clip(x, -1, 1) * SCALE).astype("<i2").tobytes(),
            bytes,
        ),
        "numpy fastest": (numpy_fastest, lambda r: r.tobytes()),
        "memcpy floor": (lambda: _convert._copy(x, "f32"), None),
    }


def to_f32_cases(pcm):
    n = len(pcm) // 2
    out32 = np.empty(n, np.float32)
    cases = {
        "audiocore": (lambda: audiocore.pcm16_to_float32(pcm), lambda r: r.tobytes()),
        "audiocore out=": (
            lambda: audiocore.pcm16_to_float32(pcm, out32),
            lambda _: out32.tobytes(),
        ),
        "numpy idiomatic": (
            lambda: np.frombuffer(pcm, np.int16).astype(np.float32) / 32768,
            lambda r: r.tobytes(),
        ),
        "numpy fastest": (
            lambda: np.multiply(np.frombuffer(pcm, np.int16), INV, out=out32),
            lambda r: r.tobytes(),
        ),
        "memcpy floor": (lambda: _convert._copy(pcm, "s16"), None),
    }
    if audioop is not None:
        # No float output in audioop: widening to int32 is its nearest job.
        cases["audioop lin2lin s16->s32"] = (lambda: audioop.lin2lin(pcm, 2, 4), None)
    return cases
