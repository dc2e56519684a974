"""What the fuzz targets (tests/core/fuzz_core.py, tests/server/fuzz_protocol.py)
share: values drawn from the fuzzer's bytes, and the rule that tells a
documented exception from a finding.

The targets read their input through `FuzzInput` rather than atheris's
FuzzedDataProvider so that the CI smoke tests can feed them plain random
bytes without atheris installed; under atheris the same reads are what its
coverage guidance learns to steer.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import struct
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class FuzzInput:
    """Draws from `data` front to back.  Past its end every draw gives its
    smallest value (zero bytes), so any input, even empty, is a whole case
    and a mutation of one byte changes one decision."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def remaining(self) -> int:
        return max(0, len(self._data) - self._pos)

    def _take(self, n: int) -> bytes:
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk.ljust(n, b"\0")

    def int(self, lo: int, hi: int) -> int:
        """An integer from `lo` to `hi` inclusive."""
        span = hi - lo
        if span <= 0:
            return lo
        raw = int.from_bytes(self._take((span.bit_length() + 7) // 8), "little")
        return lo + raw % (span + 1)

    def chance(self, one_in: int) -> bool:
        """True once in `one_in` draws of random bytes."""
        return self.int(0, one_in - 1) == 0

    def pick(self, choices: Sequence[T]) -> T:
        return choices[self.int(0, len(choices) - 1)]

    def bytes(self, most: int) -> bytes:
        """Up to `most` bytes, however many the input still holds."""
        n = min(self.int(0, most), self.remaining())
        return self._take(n)

    def rest(self) -> bytes:
        return self._take(self.remaining())

    def float(self) -> float:
        """Any float64 bit pattern: NaNs, infinities and subnormals included."""
        value: float = struct.unpack("<d", self._take(8))[0]
        return value

    def text(self, most: int) -> str:
        """Up to `most` bytes decoded as UTF-8, invalid bytes as lone
        surrogates (so the JSON decoders meet those too)."""
        return self.bytes(most).decode("utf-8", "surrogateescape")


class Finding(AssertionError):
    """A target's own check failed: the result is wrong, not refused."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Finding(what)


def _package_dirs(*names: str) -> tuple[str, ...]:
    """Where the packages are imported from: the checkout, or an installed
    wheel's site-packages (CI tests the wheel from a copy of tests/)."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        for location in (spec and spec.submodule_search_locations) or ():
            found.append(os.path.abspath(location) + os.sep)
    return tuple(found)


_PACKAGE_DIRS = _package_dirs("audiocore", "audiocore_server")


def _raised_in(exc: BaseException, roots: tuple[str, ...]) -> bool:
    """Whether the innermost frame of `exc`'s traceback is our code (a
    ValueError that numpy or the interpreter raises on the way is a finding
    even when its type is documented)."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    if last is None:
        return False
    path = os.path.abspath(last)
    # Cython frames name their .pyx relative to the package (audiocore/_x.pyx).
    return path.startswith(roots) or last.startswith(("audiocore/", "audiocore" + os.sep))


_NUMBER = re.compile(r"\d+")


def shape_of(exc: BaseException) -> str:
    """An exception with its numbers and quoted values blurred, so the
    distinct documented messages a run met can be listed."""
    text = _NUMBER.sub("N", str(exc))
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return f"{type(exc).__name__}: {text[:120]}"


class Outcomes:
    """The documented exceptions a run met, by shape (for the report)."""

    def __init__(self) -> None:
        self.shapes: dict[str, int] = {}

    def add(self, exc: BaseException) -> None:
        key = shape_of(exc)
        if key in self.shapes or len(self.shapes) < 200:
            self.shapes[key] = self.shapes.get(key, 0) + 1


OUTCOMES = Outcomes()


@contextlib.contextmanager
def documented(
    *types: type[BaseException], roots: tuple[str, ...] = _PACKAGE_DIRS
) -> Iterator[Any]:
    """Inside it, an exception of one of `types` raised by our own code is
    a documented refusal: counted and swallowed.  Anything else escapes and
    is a finding."""
    try:
        yield
    except types as exc:
        if isinstance(exc, Finding) or not _raised_in(exc, roots):
            raise
        OUTCOMES.add(exc)


def smoke(name: str, target: Any, inputs: int, save_dir: str) -> None:
    """Feed `target` `inputs` pseudo-random byte strings (no atheris: CI's
    short run), from AUDIOCORE_SEED as in tests/core/conftest.py.  A finding
    fails with the input saved for ``benchmarks/fuzz/run.py --replay``."""
    import random
    import traceback

    seed = int(os.environ.get("AUDIOCORE_SEED", "20261130"))
    rng = random.Random(f"{name}:{seed}")
    for i in range(inputs):
        # Mostly short (each byte is a decision), a few long.
        data = rng.randbytes(rng.choice([0, 1, 4, 16, 64, 256, 256, 1024, 4096]))
        try:
            target(data)
        except Exception as exc:
            path = os.path.join(save_dir, f"{name}-{i}.bin")
            with open(path, "wb") as f:
                f.write(data)
            tb = "".join(traceback.format_exception(exc))
            raise AssertionError(
                f"{name}: input {i} of AUDIOCORE_SEED={seed} is a finding; replay it with\n"
                f"  python benchmarks/fuzz/run.py --replay {path} --target {name}\n{tb}"
            ) from None
