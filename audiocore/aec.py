"""Acoustic echo cancellation (docs/audio.md, "Echo cancellation"):
`EchoCanceller`.

The per-block work runs in C (`_aec`): `EchoCanceller.process` *is* the
compiled method, with no Python frame around it.  This module picks the
block and the filter's size for a rate and checks the arguments.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

import numpy as np

from audiocore._aec import EchoCancellerCore
from audiocore._validate import check_choice, check_int, check_real

if TYPE_CHECKING:
    import numpy.typing as npt

    from audiocore._typing import SampleBuffer

_Output = TypeVar("_Output", bound="bytes | npt.NDArray[np.float32]")

__all__ = ["EchoCanceller"]

_FORMATS = ("f32", "s16")
# A power of two near 8 ms at each rate (5.3 ms at 24 and 48 kHz): short
# enough for the latency, long enough that the FFTs are cheap per sample.
_BLOCKS = {8000: 64, 16000: 128, 24000: 128, 48000: 256}
# Blocks of filter kept ahead of the bulk delay the estimator finds (the
# direct sound may start up to a block before it): src/aec_align.c DELAY_MARGIN.
_MARGIN = 2


class EchoCanceller(EchoCancellerCore, Generic[_Output]):
    """Streaming acoustic echo canceller for one mono call; one per stream.

    ``process(far, near)`` takes the next chunk of the far end (the
    reference: what the loudspeaker played) and the same number of samples
    of the near end (the microphone), each any C-contiguous buffer of
    `input` samples read without copying, and returns as many samples of
    the near end with the echo of the far end removed: PCM16 `bytes` for
    ``output="s16"``, a float32 `numpy.ndarray` for ``output="f32"``.  The
    two must be equal in length in every call (`ValueError` otherwise): the
    caller pairs what it played with what it recorded at the same time; an
    unknown and slowly drifting delay between them (the audio device's
    buffers, a phone network) is the canceller's business, up to
    `max_delay` seconds.

    Timing.  Output sample t is the cleaned near-end sample t - `latency`
    (2 * `block` - 1 samples: 15.9 ms at 8 and 16 kHz, 10.6 ms at 24 and
    48 kHz); the first `latency` samples are zeros.  The output is the same
    however the input is split into calls (on one SIMD path: the paths round
    differently).

    Rates (`RATES`): 8000, 16000, 24000 or 48000 Hz.  `tail` (seconds, default 0.25)
    is how much of the echo path's impulse response the adaptive filter
    models after its start; `max_delay` (seconds, default 0.5) the longest
    bulk delay looked for before it.  `suppress` (default True) runs the
    residual echo suppressor after the linear filter; without it the output
    is the linear filter's error alone.

    Until it has found an echo to cancel (the bulk delay, `echo_delay`, or
    its filter taking half the microphone's power out while the far end
    plays), the output is the near end unchanged: on a line with no echo at
    all (a headset, most phone lines) a near end talking over the far end
    is never touched, though the filter adapts in that double talk.
    `echo_found` says when it has.

    A NaN or infinity in the input is refused (`ValueError`) before any of
    the call is used: it would spoil the filter for good.  An EchoCanceller
    belongs to one stream: using it from two threads at once raises
    `RuntimeError`.  Long chunks run without the GIL.
    """

    __slots__ = ("_tail", "_max_delay", "_input", "_output", "_suppress")

    #: The sample rates it runs at, in Hz.
    RATES: tuple[int, ...] = tuple(_BLOCKS)

    @overload
    def __init__(
        self: EchoCanceller[bytes],
        rate: int,
        *,
        tail: float = ...,
        max_delay: float = ...,
        suppress: bool = ...,
        input: str = ...,
        output: Literal["s16"] = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: EchoCanceller[npt.NDArray[np.float32]],
        rate: int,
        *,
        tail: float = ...,
        max_delay: float = ...,
        suppress: bool = ...,
        input: str = ...,
        output: Literal["f32"],
    ) -> None: ...
    @overload
    def __init__(
        self: EchoCanceller[Any],
        rate: int,
        *,
        tail: float = ...,
        max_delay: float = ...,
        suppress: bool = ...,
        input: str = ...,
        output: str,
    ) -> None: ...
    def __init__(
        self,
        rate: int,
        *,
        tail: float = 0.25,
        max_delay: float = 0.5,
        suppress: bool = True,
        input: str = "f32",
        output: str = "s16",
    ) -> None:
        rate = check_int("rate", rate, 8000, 48000, "a sample rate in Hz")
        if rate not in _BLOCKS:
            raise ValueError(f"rate: expected 8000, 16000, 24000 or 48000 Hz, got {rate}")
        tail = check_real("tail", tail, 0.01, 2.0, "an echo tail in seconds")
        max_delay = check_real("max_delay", max_delay, 0.0, 2.0, "a delay in seconds")
        if not isinstance(suppress, bool):
            raise TypeError(f"suppress: expected a bool, got {type(suppress).__name__}")
        check_choice("input", input, _FORMATS)
        check_choice("output", output, _FORMATS)
        block = _BLOCKS[rate]
        partitions = math.ceil(tail * rate / block) + _MARGIN
        max_lag = math.ceil(max_delay * rate / block)
        super().__init__(rate, block, partitions, max_lag, input, output, suppress)
        self._tail = tail
        self._max_delay = max_delay
        self._suppress = suppress
        self._input = input
        self._output = output

    if TYPE_CHECKING:  # the compiled method, typed by the output format

        def process(self, far: SampleBuffer, near: SampleBuffer) -> _Output: ...

    @property
    def tail(self) -> float:
        """Echo tail the filter models, in seconds (as given)."""
        return self._tail

    @property
    def max_delay(self) -> float:
        """Longest bulk delay looked for, in seconds (as given)."""
        return self._max_delay

    @property
    def suppress(self) -> bool:
        """Whether the residual echo suppressor runs."""
        return self._suppress

    @property
    def input(self) -> str:
        """Input sample format, ``"f32"`` or ``"s16"``."""
        return self._input

    @property
    def output(self) -> str:
        """Output sample format, ``"f32"`` or ``"s16"``."""
        return self._output

    def __repr__(self) -> str:
        return (
            f"EchoCanceller({self.rate}, tail={self._tail!r}, max_delay={self._max_delay!r}, "
            f"suppress={self._suppress!r}, input={self._input!r}, output={self._output!r})"
        )
