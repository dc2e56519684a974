"""Streaming sample-rate conversion (docs/audio.md): `Resampler` and `resample`.

A polyphase FIR for the rational ratio out_rate/in_rate; its filter comes
from `_filters` (designed in numpy when a ratio and quality is first used,
shared by every stream that uses it).  The per-chunk work runs in C
(`_resample`): `Resampler.process` *is* the compiled method, with no Python
frame around it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

import numpy as np

from audiocore._convert import MAX_CHANNELS
from audiocore._filters import QUALITIES, RatioRefused, design
from audiocore._resample import TAP_ALIGN, ResamplerCore
from audiocore._validate import check_channels, check_choice, check_rate

if TYPE_CHECKING:
    import numpy.typing as npt

    from audiocore._typing import SampleBuffer

# What process() and flush() return: bytes for output="s16", a float32
# array for output="f32" (only for type checkers; no cost at run time).
_Output = TypeVar("_Output", bound="bytes | npt.NDArray[np.float32]")

__all__ = ["QUALITIES", "Resampler", "resample"]

# Sample formats: float32, PCM16, and G.711's two laws (one byte a sample).
_FORMATS = ("f32", "s16", "ulaw", "alaw")


class Resampler(ResamplerCore, Generic[_Output]):
    """Streaming resampler from `in_rate` to `out_rate` Hz; one per stream.

    ``process(buf)`` takes the next chunk (any C-contiguous buffer of
    interleaved `input` samples, read without copying) and returns every
    output frame that the input so far determines: PCM16 `bytes` for
    ``output="s16"``, a 1-D float32 `numpy.ndarray` (interleaved) for
    ``output="f32"``, G.711 codes in `bytes` for ``output="ulaw"`` or
    ``"alaw"``.  Conversion is fused into the filter, so float32 at 48 kHz
    becomes PCM16 at 16 kHz in one pass, and a phone call's μ-law at 8 kHz
    PCM16 at 16 kHz (``Resampler(8000, 16000, input="ulaw")``).  ``flush()`` returns the tail
    and finishes the stream; ``process`` or ``flush`` after it raise
    `RuntimeError` until ``reset()`` starts a new stream.  Rates are 1 Hz to
    `audiocore.MAX_SAMPLE_RATE` (1 MHz) with a ratio whose filter table fits
    and can be designed at `quality` (`ValueError` says when it does not);
    `channels` is 1 to
    `audiocore.MAX_CHANNELS` (64).

    Timing.  The output is aligned with the input, like a one-shot
    ``scipy.signal.resample_poly``: output frame n is the signal at input
    time ``n * in_rate / out_rate`` (an impulse at input frame k lands on
    output frame ``k * out_rate / in_rate`` when that is whole), with no
    leading run of silence.  `delay` is the latency this costs, in output
    frames: output frame n is returned by the first ``process`` call after
    which the stream holds input frame ``floor((n + delay) * in_rate /
    out_rate)``.  Nothing is held back beyond that, so after N input frames
    exactly ``max(0, ceil(N * out_rate / in_rate) - delay)`` frames have
    come out, whatever the chunking.  ``flush()`` completes the stream to
    ``round(N * out_rate / in_rate)`` frames, halves rounded up, treating
    the input as continued by silence.

    Output is bit-identical however the input is split into calls.  The SIMD
    paths (SSE2, AVX2, AVX-512, NEON, picked at run time) sum in different orders,
    so they may differ by float rounding: on every path an output is within
    ``(taps + 2) * 2**-24 * sum(|filter row|) * peak input`` of the exact
    sum, so two paths differ by at most twice that (5e-5 of full scale at
    "voice", 1.9e-4 at "high" for the usual ratios; in practice rounding
    noise far below it, and at most 1 LSB in PCM16 output).

    Quality ``"voice"`` (default): flat within 0.1 dB up to 0.875 x the
    Nyquist frequency of the lower rate, and at least 96 dB below anything
    that would alias (or image) into that band; the transition band
    0.875-1.125 x Nyquist only folds onto itself.  ``"high"``: flat within
    0.01 dB to 0.9 x Nyquist, at least 120 dB rejection from Nyquist up.
    The filters are equiripple, so the passband ripple uses its allowance
    (up to about 0.08 dB at "voice"): a full-scale passband sine can come
    out that much louder and clip in PCM16.  The delay is at most 1.1 ms
    ("voice") and 3.7 ms ("high") when both rates are 16 kHz or more; it
    scales with the lower rate's period: at most 1.6 ms and 5.4 ms from
    11.025 kHz up, and 2.2 ms and 7.4 ms with an 8 kHz side.

    Input ``"s16"`` reads little-endian PCM16 as value / 32768; output
    ``"s16"`` follows the PCM policy (clip to [-1, 1], x 32767, round half to
    even).  Input ``"ulaw"``/``"alaw"`` is decoded to PCM16 as
    `audiocore.ulaw_to_pcm16` does (``audioop.ulaw2lin``) and read as
    PCM16; output ``"ulaw"``/``"alaw"`` is the PCM16 output encoded as
    `audiocore.pcm16_to_ulaw` does (``audioop.lin2ulaw``).  At equal rates
    the stream is that conversion alone.

    A NaN or infinity in the input spoils the outputs whose filter window
    holds it (NaN or +-inf in float32 output, and by the PCM policy
    0 or full scale in PCM16), and the stream recovers once it has passed;
    which NaN (its sign and payload) may depend on the chunking, since an
    addition of two NaNs returns one of them by operand order.

    A Resampler belongs to one stream: using it from two threads at once
    raises `RuntimeError`.  Large chunks are filtered without the GIL.
    """

    __slots__ = ("_in_rate", "_out_rate", "_quality", "_input", "_output")

    @overload
    def __init__(
        self: Resampler[bytes],
        in_rate: int,
        out_rate: int,
        *,
        channels: int = ...,
        quality: str = ...,
        input: str = ...,
        output: Literal["s16", "ulaw", "alaw"] = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: Resampler[npt.NDArray[np.float32]],
        in_rate: int,
        out_rate: int,
        *,
        channels: int = ...,
        quality: str = ...,
        input: str = ...,
        output: Literal["f32"],
    ) -> None: ...
    @overload
    def __init__(
        self: Resampler[Any],
        in_rate: int,
        out_rate: int,
        *,
        channels: int = ...,
        quality: str = ...,
        input: str = ...,
        output: str,
    ) -> None: ...
    def __init__(
        self,
        in_rate: int,
        out_rate: int,
        *,
        channels: int = 1,
        quality: str = "voice",
        input: str = "f32",
        output: str = "s16",
    ) -> None:
        in_rate = check_rate("in_rate", in_rate)
        out_rate = check_rate("out_rate", out_rate)
        channels = check_channels(channels, MAX_CHANNELS)
        check_choice("quality", quality, tuple(QUALITIES))
        check_choice("input", input, _FORMATS)
        check_choice("output", output, _FORMATS)
        common = math.gcd(in_rate, out_rate)
        up, down = out_rate // common, in_rate // common
        try:
            designed = design(up, down, quality, TAP_ALIGN)
        except RatioRefused as exc:
            raise ValueError(f"{in_rate} -> {out_rate} Hz: {exc}") from None
        super().__init__(
            designed.table, up, down, designed.taps, designed.delay, channels, input, output
        )
        self._in_rate = in_rate
        self._out_rate = out_rate
        self._quality = quality
        self._input = input
        self._output = output

    if TYPE_CHECKING:  # the compiled methods, typed by the output format

        def process(self, buf: SampleBuffer) -> _Output: ...
        def flush(self) -> _Output: ...

    @property
    def in_rate(self) -> int:
        """Input sample rate in Hz."""
        return self._in_rate

    @property
    def out_rate(self) -> int:
        """Output sample rate in Hz."""
        return self._out_rate

    @property
    def quality(self) -> str:
        """``"voice"`` or ``"high"``."""
        return self._quality

    @property
    def input(self) -> str:
        """Input sample format: ``"f32"``, ``"s16"``, ``"ulaw"`` or ``"alaw"``."""
        return self._input

    @property
    def output(self) -> str:
        """Output sample format: ``"f32"``, ``"s16"``, ``"ulaw"`` or ``"alaw"``."""
        return self._output

    def __repr__(self) -> str:
        return (
            f"Resampler({self._in_rate}, {self._out_rate}, channels={self.channels}, "
            f"quality={self._quality!r}, input={self._input!r}, output={self._output!r})"
        )


@overload
def resample(
    buf: SampleBuffer,
    in_rate: int,
    out_rate: int,
    *,
    channels: int = ...,
    quality: str = ...,
    input: str = ...,
    output: Literal["s16", "ulaw", "alaw"] = ...,
) -> bytes: ...
@overload
def resample(
    buf: SampleBuffer,
    in_rate: int,
    out_rate: int,
    *,
    channels: int = ...,
    quality: str = ...,
    input: str = ...,
    output: Literal["f32"],
) -> npt.NDArray[np.float32]: ...
@overload
def resample(
    buf: SampleBuffer,
    in_rate: int,
    out_rate: int,
    *,
    channels: int = ...,
    quality: str = ...,
    input: str = ...,
    output: str,
) -> bytes | npt.NDArray[np.float32]: ...
def resample(
    buf: SampleBuffer,
    in_rate: int,
    out_rate: int,
    *,
    channels: int = 1,
    quality: str = "voice",
    input: str = "f32",
    output: str = "s16",
) -> bytes | npt.NDArray[np.float32]:
    """Resample a whole signal at once: the same output as a `Resampler`'s
    ``process(buf)`` followed by ``flush()``, so ``round(n * out_rate /
    in_rate)`` frames, aligned with the input.  Arguments as for
    `Resampler`; returns PCM16 or G.711 `bytes`, or a float32
    `numpy.ndarray`."""
    stream: Resampler[Any] = Resampler(
        in_rate, out_rate, channels=channels, quality=quality, input=input, output=output
    )
    head, tail = stream.process(buf), stream.flush()
    if isinstance(head, bytes) and isinstance(tail, bytes):
        return head + tail
    return np.concatenate((head, tail))
