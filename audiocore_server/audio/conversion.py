"""Audio conversion at the edges of a connection, on top of audiocore.

``InputAudio``: client audio in the negotiated format → 16 kHz PCM16 in
steady chunks for the model (one fused audiocore pass: resample and convert),
cleaned of the loudspeaker's echo as it comes when the server cancels it:
after the conversion, or before it at the client's own rate when that is
the lower (a phone line's 8 kHz: half the canceller's work).
``OutputAudio``: model PCM16 at its rate → PCM16 at the client's rate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import audiocore

from ..wire.protocol import InputFormat


def _identity(buf: bytes) -> bytes:
    return bytes(buf)


# Any input format to PCM16 at its own rate, for a canceller that runs there.
_TO_PCM16: dict[str, Callable[[bytes], bytes]] = {
    "s16": _identity,
    "f32": audiocore.float32_to_pcm16,
    "ulaw": audiocore.ulaw_to_pcm16,
}


class InputAudio:
    """``clean``, when given, takes each call's converted audio (and the
    resampler's tail) before anything else sees it and returns as many
    samples (a ValueError says when it did not): the server's echo
    canceller (``audio/echo.py``), which is exact however its input is
    split, so it runs on the client's frames as
    they come and the voice cut below judges the cleaned audio. What the
    chunks carry is exactly the cleaned stream, in order. With
    ``clean_rate`` the input's own rate (lower than ``out_rate``), it takes
    the input as PCM16 at that rate instead, before the resampler."""

    def __init__(
        self,
        fmt: InputFormat,
        *,
        out_rate: int,
        chunk_ms: int,
        clean: Callable[[bytes], bytes] | None = None,
        clean_rate: int | None = None,
    ) -> None:
        self.format = fmt
        self.out_rate = out_rate
        self._clean = clean
        self._chunk_bytes = out_rate * chunk_ms // 1000 * 2
        self._pending = bytearray()
        self._resampler: Any = None
        self._convert: Callable[[bytes], Any]
        # ``clean`` runs at ``clean_rate``: ``out_rate`` (the default), after
        # the conversion; or the input's own rate, before it.
        self._clean_first = clean is not None and clean_rate not in (None, out_rate)
        if self._clean_first and clean_rate != fmt.sample_rate:
            raise ValueError(
                f"clean runs at {clean_rate} Hz: neither the input's {fmt.sample_rate} Hz "
                f"nor the output's {out_rate} Hz"
            )
        if self._clean_first:
            self._to_pcm16 = _TO_PCM16[fmt.format]
            self._resampler = audiocore.Resampler(
                fmt.sample_rate, out_rate, input="s16", output="s16"
            )
            self._convert = _identity  # process() calls _cleaned_first (no cycle)
        elif fmt.sample_rate != out_rate:
            self._resampler = audiocore.Resampler(
                fmt.sample_rate, out_rate, input=fmt.format, output="s16"
            )
            self._convert = self._resampler.process
        elif fmt.format == "f32":
            self._convert = audiocore.float32_to_pcm16
        else:
            self._convert = _identity

    def process(self, data: bytes, cut: Callable[[bytes], bool] | None = None) -> list[bytes]:
        """Converted audio, as whole chunks; the remainder waits for more.
        ``cut`` is asked about this call's audio alone, converted and
        cleaned: when it says so, nothing waits — the remainder goes as a
        short chunk, then this audio as one (the chunks after count from
        there)."""
        pending = self._pending
        if self._clean_first:
            converted = self._cleaned_first(data)
        else:
            converted = self._convert(data)
            if self._clean is not None and converted:
                converted = self._cleaned(converted)
        if cut is None:
            pending += converted
            return self._take_chunks() if len(pending) >= self._chunk_bytes else []
        if not isinstance(converted, bytes):
            converted = bytes(converted)
        if not (converted and cut(converted)):
            pending += converted
            return self._take_chunks() if len(pending) >= self._chunk_bytes else []
        chunks = [bytes(pending)] if pending else []
        pending.clear()
        return [*chunks, converted]

    def flush(self) -> list[bytes]:
        """End of a turn: the resampler's tail and any short remainder."""
        if self._resampler is not None:
            tail = self._resampler.flush()
            self._resampler.reset()
            if self._clean is not None and not self._clean_first and tail:
                tail = self._cleaned(tail)
            self._pending += tail
        chunks = self._take_chunks()
        if self._pending:
            chunks.append(bytes(self._pending))
            self._pending.clear()
        return chunks

    def _cleaned_first(self, data: bytes) -> bytes:
        pcm = self._to_pcm16(data)
        return bytes(self._resampler.process(self._cleaned(pcm) if pcm else pcm))

    def _cleaned(self, audio: bytes) -> bytes:
        assert self._clean is not None
        cleaned = self._clean(audio)
        if len(cleaned) != len(audio):
            # A sample lost or added here would shift every later chunk.
            raise ValueError(f"clean returned {len(cleaned)} bytes for {len(audio)}")
        return cleaned

    def _take_chunks(self) -> list[bytes]:
        size = self._chunk_bytes
        n = len(self._pending) // size * size
        if not n:
            return []
        data = bytes(self._pending[:n])
        del self._pending[:n]
        return [data[i : i + size] for i in range(0, n, size)]


class OutputAudio:
    """Model audio → the client's rate. One resampler per source rate."""

    def __init__(self, out_rate: int) -> None:
        self.out_rate = out_rate
        self._resamplers: dict[int, Any] = {}

    def process(self, pcm: bytes, rate: int) -> bytes:
        if rate == self.out_rate:
            return pcm
        resampler = self._resamplers.get(rate)
        if resampler is None:
            resampler = audiocore.Resampler(rate, self.out_rate, input="s16", output="s16")
            self._resamplers[rate] = resampler
        return bytes(resampler.process(pcm))

    def end_turn(self, *, discard: bool = False) -> bytes:
        """The resamplers' tails (nothing if ``discard``); state reset for the next turn."""
        tail = b""
        for resampler in self._resamplers.values():
            if not discard:
                tail += bytes(resampler.flush())
            resampler.reset()
        return tail
