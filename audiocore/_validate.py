"""Argument checks for every public function, with the one set of limits.

A check returns the value as the kernels want it (an `int`, a `float`) or
raises with the argument's name, what was expected and what came:
``TypeError`` for a wrong type, ``ValueError`` for a value out of range,
e.g. "channels: expected an integer from 1 to 64, got 0".

Pure Python on purpose: the layers go one way (``.py`` -> ``.pyx`` -> C),
so a limit that belongs to the C kernels (the channel count) comes in as an
argument from the module that wraps them, never by importing a compiled
module here (tests/core/test_layers.py).
"""

from __future__ import annotations

import math
import operator

__all__ = [
    "MAX_SAMPLE_RATE",
    "check_channels",
    "check_choice",
    "check_int",
    "check_rate",
    "check_real",
    "check_time",
]

# Sample rates, in Hz, that any function accepts: up to 1 MHz, above the
# 768 kHz that the fastest audio interfaces run at.  (The jitter buffer also
# has a lower bound of its own.)
MAX_SAMPLE_RATE = 1_000_000


def _index(name: str, value: object, what: str) -> int:
    """`value` as an int: ints and anything with ``__index__`` (numpy
    integers), never bool or float."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected {what}, got bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name}: expected {what}, got {type(value).__name__}") from None


def check_int(name: str, value: object, lo: int, hi: int, what: str = "an integer") -> int:
    """An integer from `lo` to `hi`; `what` names it in messages."""
    result = _index(name, value, what)
    if not lo <= result <= hi:
        raise ValueError(f"{name}: expected {what} from {lo} to {hi}, got {result}")
    return result


def check_rate(name: str, value: object, lo: int = 1) -> int:
    """A sample rate in Hz, from `lo` to MAX_SAMPLE_RATE."""
    rate = _index(name, value, "an integer sample rate in Hz")
    if not lo <= rate <= MAX_SAMPLE_RATE:
        raise ValueError(
            f"{name}: expected a sample rate from {lo} to {MAX_SAMPLE_RATE} Hz, got {rate}"
        )
    return rate


def check_channels(value: object, limit: int) -> int:
    """A channel count, from 1 to `limit`: the kernels' MAX_CHANNELS, which
    the caller takes from the compiled module (one number, in pcm.h)."""
    return check_int("channels", value, 1, limit)


def check_real(name: str, value: object, lo: float, hi: float, what: str) -> float:
    """A real number (int or float) from `lo` to `hi`; NaN is out of range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected {what}, got {type(value).__name__}")
    result = float(value)
    if not lo <= result <= hi:  # also refuses NaN
        raise ValueError(f"{name}: expected {what} from {lo:g} to {hi:g}, got {value!r}")
    return result


def check_time(name: str, value: object) -> float:
    """Seconds on the caller's monotonic clock: any finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name}: expected seconds on a monotonic clock (float), got {type(value).__name__}"
        )
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{name}: expected a finite time in seconds, got {value!r}")
    return result


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """One of the strings in `choices`."""
    if not isinstance(value, str) or value not in choices:
        names = [repr(c) for c in choices]
        if len(names) == 2:
            expected = " or ".join(names)
        else:
            expected = "one of " + ", ".join(names[:-1]) + " or " + names[-1]
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    return value
