"""WAV (RIFF/WAVE) framing: write headers for PCM16 and float32, read any
PCM or IEEE-float file without copying its samples.

Header parsing is a few dozen bytes per file, so it stays in Python, where
every read is bounds-checked by construction.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, NamedTuple

from audiocore._convert import MAX_CHANNELS, check_samples
from audiocore._validate import (
    MAX_SAMPLE_RATE,
    check_channels,
    check_choice,
    check_int,
    check_rate,
)

if TYPE_CHECKING:
    from audiocore._typing import SampleBuffer

__all__ = ["WavInfo", "read_wav", "to_wav", "wav_header"]

# A chunk size of 0 or 0xFFFFFFFF marks a header written before its length
# was known (a stream); the data then runs to the end of the buffer.
_STREAMING = 0xFFFFFFFF

_PCM, _IEEE_FLOAT, _EXTENSIBLE = 0x0001, 0x0003, 0xFFFE
# The 14 bytes that follow the format tag in every standard SubFormat GUID.
_GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
_PCM_FORMATS = {1: "u8", 2: "s16", 3: "s24", 4: "s32"}
_FLOAT_FORMATS = {4: "f32", 8: "f64"}
_WRITABLE = {"s16": (_PCM, 2), "f32": (_IEEE_FLOAT, 4)}


class WavInfo(NamedTuple):
    """What `read_wav` found: `data` is a zero-copy view of the samples."""

    sample_rate: int
    channels: int
    format: str
    frames: int
    data: memoryview


def _writable_format(format: object) -> tuple[int, int]:
    return _WRITABLE[check_choice("format", format, tuple(_WRITABLE))]


def wav_header(
    sample_rate: int, *, channels: int = 1, format: str = "s16", data_bytes: int | None = None
) -> bytes:
    """A RIFF/WAVE header for `data_bytes` bytes of interleaved samples.

    "s16" gives the canonical 44-byte PCM header; "f32" an IEEE-float header
    with the `fact` chunk that non-PCM formats carry.  `data_bytes=None`
    writes a streaming header (sizes 0xFFFFFFFF) for data of unknown length.
    `sample_rate` is 1 Hz to `audiocore.MAX_SAMPLE_RATE` (1 MHz), `channels`
    1 to `audiocore.MAX_CHANNELS` (64).
    """
    rate = check_rate("sample_rate", sample_rate)
    nch = check_channels(channels, MAX_CHANNELS)
    tag, size = _writable_format(format)
    block = nch * size
    if tag == _PCM:
        fmt = struct.pack("<HHIIHH", tag, nch, rate, rate * block, block, 8 * size)
    else:
        fmt = struct.pack("<HHIIHHH", tag, nch, rate, rate * block, block, 8 * size, 0)
    head_bytes = 4 + (8 + len(fmt)) + (12 if tag != _PCM else 0) + 8
    if data_bytes is None:
        riff_size = data_size = frames = _STREAMING
    else:
        data_size = check_int(
            "data_bytes", data_bytes, 0, _STREAMING - 1 - head_bytes, "a byte count"
        )
        if data_size % block:
            raise ValueError(
                f"data_bytes: expected a whole number of {block}-byte frames, got {data_size}"
            )
        riff_size = head_bytes + data_size + (data_size & 1)
        frames = data_size // block
    parts = [
        b"RIFF",
        struct.pack("<I", riff_size),
        b"WAVE",
        b"fmt ",
        struct.pack("<I", len(fmt)),
        fmt,
    ]
    if tag != _PCM:
        parts += [b"fact", struct.pack("<II", 4, frames)]
    parts += [b"data", struct.pack("<I", data_size)]
    return b"".join(parts)


def to_wav(pcm: SampleBuffer, sample_rate: int, *, channels: int = 1, format: str = "s16") -> bytes:
    """A whole WAV file: header plus `pcm` (interleaved samples).

    `pcm` is any C-contiguous buffer of int16 samples for "s16" or float32
    samples for "f32" (or raw bytes holding them).  Limits as for
    `wav_header`.
    """
    _, size = _writable_format(format)
    nch = check_channels(channels, MAX_CHANNELS)
    samples = check_samples(pcm, format, "pcm")
    if samples % nch:
        raise ValueError(
            f"pcm: expected a whole number of {nch}-channel frames, got {samples} samples"
        )
    # (Arrays are buffers at run time; type checkers before 3.12 disagree.)
    data = memoryview(pcm).cast("B") if samples else b""  # type: ignore[arg-type]
    header = wav_header(sample_rate, channels=nch, format=format, data_bytes=samples * size)
    pad = b"\x00" if len(data) & 1 else b""
    return b"".join((header, data, pad))


def _format_of(tag: int, container: int, bits: int, fmt: memoryview) -> str:
    if tag == _EXTENSIBLE:
        if len(fmt) < 40:
            raise ValueError(f"WAVE_FORMAT_EXTENSIBLE fmt chunk is {len(fmt)} bytes, expected 40")
        sub = bytes(fmt[24:40])
        if sub[2:] != _GUID_TAIL:
            raise ValueError(f"unsupported WAV SubFormat GUID {sub.hex()}")
        tag = int.from_bytes(sub[:2], "little")
        (valid_bits,) = struct.unpack_from("<H", fmt, 18)
        # The container is wBitsPerSample; fewer valid bits are still stored
        # (and reported) at the container's size.
        sizes_agree = bits == 8 * container and valid_bits <= bits
    else:
        sizes_agree = bits > 0 and (bits + 7) // 8 == container
    table = _PCM_FORMATS if tag == _PCM else _FLOAT_FORMATS if tag == _IEEE_FLOAT else None
    if table is None:
        raise ValueError(
            f"unsupported WAV encoding: format tag 0x{tag:04x}; audiocore reads PCM and IEEE float"
        )
    kind = "PCM" if tag == _PCM else "IEEE float"
    if not sizes_agree:
        raise ValueError(
            f"fmt chunk's {bits}-bit {kind} samples do not fill {container}-byte blocks"
        )
    if container not in table:
        raise ValueError(f"unsupported {kind} sample size: {bits} bits")
    return table[container]


def read_wav(buf: SampleBuffer) -> WavInfo:
    """Parse a WAV file held in `buf` (bytes, bytearray, mmap, memoryview...).

    Reads PCM (8/16/24/32-bit: "u8", "s16", "s24", "s32") and IEEE float
    (32/64-bit: "f32", "f64"), WAVE_FORMAT_EXTENSIBLE included; skips other
    chunks.  A data size of 0 or 0xFFFFFFFF (a streaming header) means the
    samples run to the end of the buffer, cut to whole frames.  Raises
    ValueError saying what is wrong with a malformed file, or with one
    beyond audiocore's limits (more than `audiocore.MAX_CHANNELS`, 64,
    channels or a rate above `audiocore.MAX_SAMPLE_RATE`); never reads past
    the buffer.
    """
    try:
        view = memoryview(buf)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"buf: expected a bytes-like object, got {type(buf).__name__}") from None
    if not view.c_contiguous:
        raise ValueError("buf: expected a C-contiguous buffer")
    mv = view.cast("B") if view.format != "B" or view.ndim != 1 else view
    total = len(mv)
    if total < 12:
        raise ValueError(f"not a WAV file: {total} bytes is shorter than a RIFF header")
    head = bytes(mv[0:12])
    if head[0:4] != b"RIFF" or head[8:12] != b"WAVE":
        raise ValueError(f"not a RIFF/WAVE file: it starts with {head!r}")
    (riff_size,) = struct.unpack_from("<I", mv, 4)
    end = total
    riff_known = riff_size not in (0, _STREAMING)
    if riff_known:
        if 8 + riff_size > total:
            raise ValueError(
                f"truncated: the RIFF header claims {8 + riff_size} bytes, the buffer holds {total}"
            )
        end = 8 + riff_size

    fmt_info = None
    pos = 12
    while pos + 8 <= end:
        chunk_id = bytes(mv[pos : pos + 4])
        (size,) = struct.unpack_from("<I", mv, pos + 4)
        body = pos + 8
        if chunk_id == b"data":
            if fmt_info is None:
                raise ValueError("the data chunk comes before any fmt chunk")
            rate, nch, fmt_name, block = fmt_info
            # Size 0 is a stream unless a known RIFF size says chunks follow.
            if size == _STREAMING or (size == 0 and (not riff_known or end <= body)):
                stop = body + (total - body) // block * block
            elif body + size > end:
                raise ValueError(
                    f"truncated: the data chunk claims {size} bytes, {end - body} remain"
                )
            elif size % block:
                raise ValueError(
                    f"the data chunk holds {size} bytes, not a whole number of {block}-byte frames"
                )
            else:
                stop = body + size
            return WavInfo(rate, nch, fmt_name, (stop - body) // block, mv[body:stop])
        if body + size > end:
            raise ValueError(
                f"truncated: chunk {chunk_id!r} claims {size} bytes, {end - body} remain"
            )
        if chunk_id == b"fmt ":
            fmt_info = _parse_fmt(mv[body : body + size])
        pos = body + size + (size & 1)  # chunks are padded to even sizes
    if fmt_info is None:
        raise ValueError("no fmt chunk: not a playable WAV file")
    raise ValueError("no data chunk: not a playable WAV file")


def _parse_fmt(fmt: memoryview) -> tuple[int, int, str, int]:
    if len(fmt) < 16:
        raise ValueError(f"fmt chunk is {len(fmt)} bytes, expected at least 16")
    tag, nch, rate, _byte_rate, block, bits = struct.unpack_from("<HHIIHH", fmt)
    if not 1 <= nch <= MAX_CHANNELS:
        raise ValueError(f"fmt chunk says {nch} channels, expected 1 to {MAX_CHANNELS}")
    if not 1 <= rate <= MAX_SAMPLE_RATE:
        raise ValueError(f"fmt chunk says {rate} Hz, expected 1 to {MAX_SAMPLE_RATE}")
    if block == 0 or block % nch:
        raise ValueError(f"fmt chunk's block align {block} does not fit {nch} channels")
    fmt_name = _format_of(tag, block // nch, bits, fmt)
    return rate, nch, fmt_name, block
