"""Fuzz targets for every public audiocore entry point (issue 13).

Each target takes one input (bytes), turns it into calls through
`FuzzInput`, and returns normally when the package answered as documented:
a result that passes the target's checks, or a refusal of a documented type
raised by audiocore itself — `ValueError`, `TypeError`, `BufferError`,
`RuntimeError` (see `fuzz_input.documented`).  Anything else escapes: an
undocumented exception, a documented type raised from numpy or the
interpreter, or a failed check (`Finding`).  A crash or a hang is the
runner's to see.

Run under atheris by benchmarks/fuzz/run.py (a million inputs each), and
with plain random bytes by test_fuzz_smoke.py in CI.
"""

from __future__ import annotations

import array
import math
import struct
from collections.abc import Callable

import numpy as np
from fuzz_input import FuzzInput, check, documented
from g711_reference import decode as g711_decode
from g711_reference import encode as g711_encode

import audiocore
from audiocore.jitter import PROFILES
from audiocore.wav import read_wav, to_wav, wav_header

_REFUSED = (ValueError, TypeError, BufferError, RuntimeError)

# ---- buffers -------------------------------------------------------------


# Samples as typed buffers hold them: float32, PCM16, G.711 codes (bytes).
_DTYPES = {"f32": "<f4", "s16": "<i2", "u8": "u1"}
_TYPECODES = {"f32": "f", "s16": "h", "u8": "B"}


def _buffer(fi: FuzzInput, raw: bytes, sample: str) -> object:
    """`raw` in one of the buffer kinds the API accepts (or one it refuses:
    other dtypes, non-contiguous views, a read-only array where a writable
    one is needed)."""
    kind = fi.int(0, 9)
    if kind == 0:
        return raw
    if kind == 1:
        return bytearray(raw)
    if kind == 2:
        return memoryview(raw)
    dtype = _DTYPES[sample]
    size = np.dtype(dtype).itemsize
    usable = raw[: len(raw) // size * size]
    if kind == 3:
        return np.frombuffer(usable, dtype)
    if kind == 4:
        return array.array(_TYPECODES[sample], usable)
    if kind == 5:  # a wrong element type
        dtype = fi.pick(["<f8", "<i4", "<u2", "<f2", "u1", ">i2", ">f4"])
        width = np.dtype(dtype).itemsize
        return np.frombuffer(raw[: len(raw) // width * width], dtype)
    if kind == 6:  # not C-contiguous
        arr = np.frombuffer(usable, dtype)
        return arr[:: fi.int(1, 3)]
    if kind == 7:  # 2-D, contiguous
        arr = np.frombuffer(usable, dtype)
        rows = fi.int(1, 4)
        return arr[: len(arr) // rows * rows].reshape(rows, -1)
    if kind == 8:  # unaligned: one byte in
        padded = bytearray(1 + len(raw))
        padded[1:] = raw
        return memoryview(padded)[1:]
    return fi.pick([None, 3, 1.5, "text", [0.0, 1.0], object()])


def _float_samples(fi: FuzzInput, most: int) -> bytes:
    """Float32 samples: mostly audio-like, sometimes raw bit patterns (NaN,
    infinities, subnormals)."""
    if fi.chance(4):
        return fi.bytes(4 * most)
    n = fi.int(0, most)
    level = fi.pick([0.0, 0.3, 1.0, 1.5, 1e30])
    seed = fi.int(0, 2**32 - 1)
    return (np.random.default_rng(seed).standard_normal(n) * level).astype("<f4").tobytes()


# ---- conversion ----------------------------------------------------------


def _pcm16_reference(raw: bytes) -> bytes:
    x = np.frombuffer(raw, "<f4")
    x = np.where(np.isnan(x), np.float32(0), x)
    return np.rint(np.clip(x, -1, 1) * np.float32(32767)).astype("<i2").tobytes()


def fuzz_convert(data: bytes) -> None:
    """float32_to_pcm16 and pcm16_to_float32, with and without `out`, on
    every kind of buffer; results checked against NumPy's reading of the
    PCM policy."""
    fi = FuzzInput(data)
    to_s16 = fi.chance(2)
    raw = _float_samples(fi, 2048) if to_s16 else fi.bytes(4096)
    src = _buffer(fi, raw, "f32" if to_s16 else "s16")
    convert: Callable[..., object] = (
        audiocore.float32_to_pcm16 if to_s16 else audiocore.pcm16_to_float32
    )
    with documented(*_REFUSED):
        if fi.chance(2):
            result = convert(src)
        else:
            out_fmt = "s16" if to_s16 else "f32"
            n_out = fi.int(0, 2100)
            out = _buffer(fi, bytes(n_out * (2 if to_s16 else 4)), out_fmt)
            if fi.chance(8):
                out = src  # in place: refused as overlapping
            written = convert(src, out=out)
            if out is None:  # out=None is no out
                result = written
            else:
                check(isinstance(written, int), "out= returns a count")
                result = memoryview(out).tobytes()[: written * (2 if to_s16 else 4)]
        view = memoryview(src).tobytes()
        if to_s16:
            want = _pcm16_reference(bytes(view))
            got = result if isinstance(result, bytes) else bytes(result)
            check(got == want, "float32_to_pcm16 differs from the PCM policy")
        else:
            want_f = np.frombuffer(bytes(view), "<i2").astype(np.float32) / np.float32(32768)
            got_f = np.frombuffer(memoryview(result).cast("B"), "<f4")
            check(np.array_equal(got_f, want_f), "pcm16_to_float32 differs from x / 32768")


def fuzz_g711(data: bytes) -> None:
    """The eight G.711 conversions, with and without `out`, on every kind of
    buffer (codes as any buffer kind too: typed ones other than bytes are
    refused); results checked against the NumPy spelling of G.711 (which
    the tests check against audioop)."""
    fi = FuzzInput(data)
    law = fi.pick(["ulaw", "alaw"])
    source = fi.pick(["s16", "f32", law])
    target = law if source != law else fi.pick(["s16", "f32"])
    name = {"s16": "pcm16", "f32": "float32", "ulaw": "ulaw", "alaw": "alaw"}
    convert: Callable[..., object] = getattr(audiocore, f"{name[source]}_to_{name[target]}")
    raw = _float_samples(fi, 1024) if source == "f32" else fi.bytes(2048)
    src = _buffer(fi, raw, source) if source != law else _buffer(fi, raw, "u8")
    width = {"s16": 2, "f32": 4, "ulaw": 1, "alaw": 1}
    with documented(*_REFUSED):
        if fi.chance(2):
            result = convert(src)
        else:
            out = _buffer(fi, bytes(fi.int(0, 2100) * width[target]), "u8")
            if fi.chance(8):
                out = src  # in place: refused as overlapping
            written = convert(src, out=out)
            if out is None:
                result = written
            else:
                check(isinstance(written, int), "out= returns a count")
                result = memoryview(out).tobytes()[: written * width[target]]
        view = memoryview(src).tobytes()
        got = memoryview(result).tobytes()
        if source == "s16":
            want = g711_encode(law, np.frombuffer(view, "<i2"))
        elif source == "f32":
            want = g711_encode(law, np.frombuffer(_pcm16_reference(view), "<i2"))
        else:
            pcm = g711_decode(law, view)
            want = pcm if target == "s16" else audiocore.pcm16_to_float32(pcm).tobytes()
        check(got == want, f"{source} -> {target} ({law}) differs from G.711")


# ---- WAV -----------------------------------------------------------------

_FORMAT_TAGS = [0x0001, 0x0003, 0xFFFE, 0x0002, 0x0006, 0x0000]
_CHUNK_IDS = [b"fmt ", b"data", b"fact", b"LIST", b"JUNK", b"\0\0\0\0"]


def _wav_bytes(fi: FuzzInput) -> bytes:
    """A RIFF/WAVE file built from the input: mostly well-formed headers
    with drawn sizes, rates and formats, so the parser's deep checks are
    reached without the fuzzer having to find "RIFF" first."""
    chunks = []
    for _ in range(fi.int(0, 4)):
        cid = fi.pick(_CHUNK_IDS)
        if cid == b"fmt ":
            tag = fi.pick(_FORMAT_TAGS)
            nch = fi.pick([1, 2, 0, 64, 65, fi.int(0, 0xFFFF)])
            rate = fi.pick([8000, 16000, 48000, 0, 1_000_000, 1_000_001, fi.int(0, 2**32 - 1)])
            bits = fi.pick([8, 16, 24, 32, 64, 0, 12, fi.int(0, 0xFFFF)])
            block = fi.pick([nch * ((bits + 7) // 8), fi.int(0, 0xFFFF)]) & 0xFFFF
            body = struct.pack(
                "<HHIIHH", tag, nch & 0xFFFF, rate, rate * block & 0xFFFFFFFF, block, bits
            )
            if tag == 0xFFFE or fi.chance(4):
                guid_tag = fi.pick([1, 3, 2, fi.int(0, 0xFFFF)])
                tail = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
                if fi.chance(8):
                    tail = fi.bytes(14).ljust(14, b"\0")
                valid = fi.pick([bits, fi.int(0, 0xFFFF)])
                body += struct.pack("<HHI", 22, valid, 3) + struct.pack("<H", guid_tag) + tail
            body = body[: fi.pick([len(body), fi.int(0, len(body))])]
        else:
            body = fi.bytes(64)
        size = fi.pick([len(body), 0, 0xFFFFFFFF, fi.int(0, 2**32 - 1), len(body) + 1])
        chunks.append(cid + struct.pack("<I", size) + body + (b"\0" if len(body) & 1 else b""))
    payload = b"WAVE" + b"".join(chunks) + fi.bytes(256)
    riff = fi.pick([len(payload), 0, 0xFFFFFFFF, fi.int(0, 2**32 - 1)])
    return b"RIFF" + struct.pack("<I", riff) + payload


_SAMPLE_WIDTH = {"u8": 1, "s16": 2, "s24": 3, "s32": 4, "f32": 4, "f64": 8}


def _read_and_check(buf: object) -> None:
    info = read_wav(buf)
    total = memoryview(buf).nbytes
    check(info.format in _SAMPLE_WIDTH, f"unknown format {info.format!r}")
    check(1 <= info.channels <= audiocore.MAX_CHANNELS, "channels out of range")
    check(1 <= info.sample_rate <= audiocore.MAX_SAMPLE_RATE, "rate out of range")
    check(
        info.data.nbytes == info.frames * info.channels * _SAMPLE_WIDTH[info.format],
        "data is not frames x block bytes",
    )
    check(info.data.nbytes <= total - 12, "data larger than the buffer")


def fuzz_read_wav(data: bytes) -> None:
    """read_wav on raw bytes, on built headers, in every kind of buffer."""
    fi = FuzzInput(data)
    raw = _wav_bytes(fi) if fi.int(0, 3) else fi.rest()
    kind = fi.int(0, 5)
    buf: object
    if kind == 0:
        buf = raw
    elif kind == 1:
        buf = bytearray(raw)
    elif kind == 2:
        buf = memoryview(raw)[: fi.int(0, len(raw))]
    elif kind == 3:  # a typed view: read as bytes
        buf = np.frombuffer(raw[: len(raw) // 2 * 2], "<i2")
    elif kind == 4:  # not contiguous
        buf = memoryview(raw)[:: fi.int(1, 3)]
    else:
        buf = fi.pick([None, 42, "RIFF", [1, 2]])
    with documented(ValueError, TypeError):
        _read_and_check(buf)


def fuzz_wav_roundtrip(data: bytes) -> None:
    """to_wav and wav_header with drawn arguments; what to_wav writes,
    read_wav reads back unchanged."""
    fi = FuzzInput(data)
    fmt = fi.pick(["s16", "f32", "s16", "f32", "u8", "s24", None, 16])
    rate: object = fi.pick(
        [16000, 48000, 1, 1_000_000, 0, 1_000_001, fi.int(-5, 2**40), 44100.0, True]
    )
    channels: object = fi.pick([1, 2, 6, 64, 0, 65, fi.int(-3, 70), 2.0, None])
    with documented(ValueError, TypeError):
        if fi.chance(3):
            data_bytes: object = fi.pick([None, 0, 1, 44, 2**32, -1, fi.int(0, 2**33), 2.5])
            header = wav_header(rate, channels=channels, format=fmt, data_bytes=data_bytes)
            check(header[:4] == b"RIFF" and header[8:12] == b"WAVE", "not a RIFF/WAVE header")
            if data_bytes is None or data_bytes == 0:
                info = read_wav(header)
                check(info.sample_rate == rate and info.channels == channels, "header fields")
                check(info.format == fmt and info.frames == 0, "header format or frames")
            return
        width = 4 if fmt == "f32" else 2
        raw = _float_samples(fi, 1024) if fmt == "f32" else fi.bytes(2048)
        if fi.chance(8):
            raw += b"\1"  # not whole samples
        wav = to_wav(
            _buffer(fi, raw, "f32" if fmt == "f32" else "s16"), rate, channels=channels, format=fmt
        )
        info = read_wav(wav)
        check(info.sample_rate == rate and info.channels == channels, "rate or channels changed")
        check(info.format == fmt, "format changed")
        check(len(wav) % 2 == 0, "RIFF file of odd length")
        body = bytes(info.data)
        check(info.frames * info.channels * width == len(body), "frames do not match the data")
        check(body == raw[: len(body)], "samples changed")


# ---- resampler -----------------------------------------------------------

_COMMON = [8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000]
# "high" between these only.  audiocore keeps the last 64 designs (ratio
# and quality) and a design takes up to a second (more under load:
# benchmarks/README.md), so the target's ratios must fit in that cache or it
# designs all the time: 31 ratios of _COMMON at "voice", 9 of these at
# "high", and the odd pairs below at both.
_HIGH = [8000, 16000, 24000, 48000]
# Pairs away from the usual rates, each tried rarely: long filters, ratios
# refused as too big to design, the limits, and 44100 -> 95800 at "high"
# (no design with two BLAS threads: ValueError since the fix).
_ODD_PAIRS = [
    (44100, 95800),
    (1, 2),
    (7, 1_000_000),
    (1_000_000, 1),
    (48000, 47999),
    (96000, 48000),
    (8000, 1_000_000),
    (1000, 1001),
]


def _stream_args(fi: FuzzInput) -> tuple[object, object, object]:
    """Rates and quality: mostly the usual, sometimes odd, rarely invalid."""
    pick = fi.int(0, 63)
    if pick == 0:  # invalid arguments
        bad: list[object] = [0, -1, 1_000_001, 16000.0, "16000", True, None, np.int64(16000)]
        return fi.pick(bad), fi.pick(_COMMON), fi.pick(["voice", "high", "best", None])
    if pick <= 2:
        return (*fi.pick(_ODD_PAIRS), fi.pick(["voice", "high"]))
    if pick <= 15:
        return fi.pick(_HIGH), fi.pick(_HIGH), "high"
    return fi.pick(_COMMON), fi.pick(_COMMON), "voice"


def fuzz_resampler(data: bytes) -> None:
    """Resampler construction with drawn rates and parameters, then
    process/flush/reset with random chunking; the stream is checked against
    the one-shot `resample` of the same input (bit-identical whatever the
    chunking) and the documented length."""
    fi = FuzzInput(data)
    in_rate, out_rate, quality = _stream_args(fi)
    channels: object = fi.pick([1, 1, 2, 3, 0, 65, 1.0]) if fi.chance(16) else fi.int(1, 2)
    inp = fi.pick(["f32", "s16", "f32", "s16", "f64"])
    out = fi.pick(["s16", "f32", "s16", "f32", None])
    with documented(*_REFUSED):
        stream = audiocore.Resampler(
            in_rate,
            out_rate,
            channels=channels,
            quality=quality,
            input=inp,
            output=out,
        )
        nch = stream.channels
        width = 4 if inp == "f32" else 2
        fed: list[bytes] = []
        outputs: list[bytes] = []
        finished = False
        for _ in range(fi.int(0, 12)):
            op = fi.int(0, 15)
            if op == 0:
                with documented(RuntimeError):  # flush twice: refused
                    outputs.append(_as_bytes(stream.flush()))
                    check(not finished, "flush after flush was accepted")
                finished = True
            elif op == 1:
                stream.reset()
                fed, outputs, finished = [], [], False
            else:
                if op == 2:  # any buffer: refused, or read like raw bytes
                    buf = _buffer(fi, fi.bytes(64), inp)
                else:
                    frames = fi.pick([0, 1, 2, 3, 7, 160, 441, 960, fi.int(0, 4096)])
                    if inp == "f32":
                        raw = _float_samples(fi, frames * nch)
                    else:
                        raw = fi.bytes(2 * frames * nch)
                    raw = raw[: len(raw) // (width * nch) * (width * nch)]
                    buf = _buffer(fi, raw, inp)
                with documented(*_REFUSED):
                    outputs.append(_as_bytes(stream.process(buf)))
                    check(not finished, "process after flush was accepted")
                    fed.append(memoryview(buf).tobytes())
        if not finished:
            outputs.append(_as_bytes(stream.flush()))
        _check_stream(stream, b"".join(fed), b"".join(outputs), nch, width)


def _as_bytes(result: object) -> bytes:
    return result if isinstance(result, bytes) else np.asarray(result).tobytes()


def _check_stream(
    stream: audiocore.Resampler, fed: bytes, got: bytes, nch: int, width: int
) -> None:
    frames_in = len(fed) // (width * nch)
    want_frames = (2 * frames_in * stream.out_rate + stream.in_rate) // (2 * stream.in_rate)
    out_width = 4 if stream.output == "f32" else 2
    check(len(got) == want_frames * nch * out_width, "stream length is not round(n x out / in)")
    once = audiocore.resample(
        fed,
        stream.in_rate,
        stream.out_rate,
        channels=nch,
        quality=stream.quality,
        input=stream.input,
        output=stream.output,
    )
    check(_same_output(_as_bytes(once), got, stream.output), "chunked output differs from one-shot")


def _same_output(a: bytes, b: bytes, output: str) -> bool:
    """Bit for bit, except that any NaN equals any NaN: inputs large enough
    to overflow the filter's sums make inf - inf, and which operand's NaN
    an x86 addition returns (its sign) follows operand order, which the
    documentation does not promise ("NaN or +-inf in float32 output")."""
    if a == b:
        return True
    if output != "f32" or len(a) != len(b):
        return False
    x, y = np.frombuffer(a, "<f4"), np.frombuffer(b, "<f4")
    same_bits = x.view("<u4") == y.view("<u4")
    return bool(np.all(same_bits | (np.isnan(x) & np.isnan(y))))


def fuzz_resampler_design(data: bytes) -> None:
    """Resampler construction at arbitrary rates (1 Hz to 1 MHz and past
    the limits): designed, or refused with a ValueError.  New ratios take
    milliseconds to seconds each, so this target runs far fewer inputs."""
    fi = FuzzInput(data)
    in_rate = fi.int(0, 1_000_001)
    out_rate = fi.int(0, 1_000_001)
    if fi.chance(2):  # near each other or simple multiples: designs, not refusals
        out_rate = max(1, in_rate * fi.int(1, 8) // fi.int(1, 8) + fi.int(-2, 2))
    quality = fi.pick(["voice", "high"])
    with documented(ValueError):
        stream = audiocore.Resampler(in_rate, out_rate, quality=quality)
        check(stream.delay >= 0, "negative delay")
        y = stream.process(np.zeros(64, np.float32)) + stream.flush()
        want = (2 * 64 * out_rate + in_rate) // (2 * in_rate)
        check(len(y) == 2 * want, "length of a short stream")


# ---- jitter buffer -------------------------------------------------------


def _jitter(fi: FuzzInput) -> audiocore.JitterBuffer:
    profile: object = fi.pick(PROFILES) if fi.int(0, 31) else fi.pick(["fast", None, 1])
    rate: object = fi.pick([8000, 16000, 24000, 48000, 44100, 1000, 999, fi.int(1000, 96000)])
    if fi.chance(32):
        rate = fi.pick([0, 1_000_001, 16000.0, True])
    channels: object = fi.int(1, 2) if fi.int(0, 15) else fi.pick([0, 3, 8, 65, 2.0])
    frame_ms: object = fi.pick([20, 10, 40, 1, 200, 201, 2.5, 0.5, fi.float(), math.nan])
    kwargs: dict[str, object] = {}
    for name in ("preroll_ms", "target_ms", "min_ms", "max_ms", "capacity_ms", "high_water_ms"):
        if fi.chance(4):
            kwargs[name] = fi.pick([0, 10, 20, 60, 100, 1000, 10_000, -1, math.inf, fi.float()])
    return audiocore.JitterBuffer(
        rate, channels=channels, frame_ms=frame_ms, profile=profile, **kwargs
    )


def fuzz_jitter(data: bytes) -> None:
    """A JitterBuffer with drawn parameters, then a drawn sequence of push
    (any chunk size, seq/timestamp/arrival/turn/final), pop, flush,
    end_turn and the read-only properties.  Every pop is exactly one frame;
    the counters stay consistent."""
    fi = FuzzInput(data)
    jb = None
    with documented(ValueError, TypeError):
        jb = _jitter(fi)
    if jb is None:
        return
    clock = 0.0
    seq, ts = fi.int(0, 0xFFFF), fi.int(0, 0xFFFFFFFF)
    frame_bytes = jb.frame_bytes
    for _ in range(fi.int(0, 16)):
        op = fi.int(0, 9)
        with documented(ValueError, TypeError, BufferError):
            if op <= 3:
                samples = fi.pick(
                    [0, 1, jb.frame_samples, 3 * jb.frame_samples // 2, fi.int(0, 4000)]
                )
                pcm = fi.bytes(2 * samples * jb.channels)
                if fi.chance(16):
                    pcm += b"\0"  # half a sample
                kwargs: dict[str, object] = {}
                if jb.profile == "packet" or fi.chance(16):
                    seq = (seq + fi.pick([1, 1, 1, 0, 2, -1, 30000])) & 0xFFFF
                    ts = (ts + fi.pick([jb.frame_samples, len(pcm) // 2, 0, 12345])) & 0xFFFFFFFF
                    if fi.int(0, 3):
                        kwargs["seq"] = fi.pick([seq, seq, -1, 0x10000]) if fi.chance(8) else seq
                    if fi.int(0, 3):
                        kwargs["timestamp"] = ts
                clock += fi.pick([0.0, 0.02, 0.001, 0.5, 5.0])
                if fi.int(0, 1):
                    kwargs["arrival"] = fi.pick([clock, clock, math.nan, math.inf, -1e300, "now"])
                if fi.int(0, 1):
                    kwargs["turn"] = fi.pick([1, 2, 3, "a", None, (1, 2), [1]])
                if fi.chance(4):
                    kwargs["final"] = fi.pick([True, False, 1])
                result = jb.push(_buffer(fi, pcm, "s16") if fi.chance(8) else pcm, **kwargs)
                check(isinstance(result, bool), "push returns a bool")
            elif op <= 6:
                for _ in range(fi.pick([1, 1, 2, 5])):
                    frame = jb.pop()
                    check(
                        isinstance(frame, bytes) and len(frame) == frame_bytes, "pop is one frame"
                    )
            elif op == 7:
                fade: object = fi.pick([5, 0, 1000, 1001, -1, math.nan, fi.float(), "5"])
                played = jb.flush(fade)
                check(isinstance(played, int) and played >= 0, "flush returns a played count")
            elif op == 8:
                jb.end_turn()
            else:
                stats = jb.stats
                check(all(isinstance(v, (int, float)) for v in stats.values()), "stats are numbers")
                check(jb.read_position >= 0 and jb.write_position >= 0, "negative positions")
                check(jb.buffered_ms >= 0 and jb.frames_ready >= 0, "negative levels")
                check(jb.turn_played >= 0 and jb.played >= 0, "negative played counts")
                _ = (jb.playing, jb.turn_open, jb.turn_samples, jb.backpressure)


def _echo_canceller(fi: FuzzInput) -> tuple[object, dict[str, object]]:
    """Arguments: mostly valid, sometimes odd, rarely invalid."""
    rate = (
        fi.pick([8000, 16000, 24000, 48000])
        if not fi.chance(16)
        else fi.pick([44100, 0, -16000, 16000.0, "16000", True, 96000])
    )
    kwargs: dict[str, object] = {
        "input": fi.pick(["f32", "s16", "f32", "s16", "f64"]),
        "output": fi.pick(["s16", "f32", "s16", "f32", None]),
    }
    if fi.chance(4):
        kwargs["tail"] = fi.pick([0.01, 0.05, 0.25, 2.0, 0.0, 3.0, float("nan"), "1"])
    if fi.chance(4):
        kwargs["max_delay"] = fi.pick([0.0, 0.1, 0.5, 2.0, -1.0, 5, None])
    if fi.chance(4):
        kwargs["suppress"] = fi.pick([True, False, 1, None])
    return rate, kwargs


def fuzz_echo_canceller(data: bytes) -> None:
    """EchoCanceller construction with drawn arguments, then process/reset
    with random chunking, far and near of drawn (sometimes unequal) lengths
    and kinds; every accepted call returns as many samples as it took, and
    the stream equals a fresh canceller fed the accepted input in one call
    (chunk-exactness; refused calls use nothing)."""
    fi = FuzzInput(data)
    rate, kwargs = _echo_canceller(fi)
    with documented(*_REFUSED):
        aec = audiocore.EchoCanceller(rate, **kwargs)
        inp = aec.input
        width = 4 if inp == "f32" else 2
        out_width = 4 if aec.output == "f32" else 2
        fed_far: list[bytes] = []
        fed_near: list[bytes] = []
        outputs: list[bytes] = []
        for _ in range(fi.int(0, 10)):
            op = fi.int(0, 15)
            if op == 0:
                aec.reset()
                fed_far, fed_near, outputs = [], [], []
                continue
            n = fi.pick([0, 1, 2, 3, 7, 127, 128, 160, 480, fi.int(0, 3000)])
            raw = [_float_samples(fi, n) if inp == "f32" else fi.bytes(2 * n) for _ in range(2)]
            if op != 1:  # equal lengths, as the API wants; op 1: as drawn
                m = min(len(raw[0]), len(raw[1])) // width * width
                raw = [r[:m] for r in raw]
            far, near = (_buffer(fi, r, inp) if op == 2 else r for r in raw)
            with documented(*_REFUSED):
                got = _as_bytes(aec.process(far, near))
                f, d = memoryview(far).tobytes(), memoryview(near).tobytes()
                check(len(f) == len(d), "far and near of unequal lengths were accepted")
                check(len(got) == len(f) // width * out_width, "output length differs from input")
                fed_far.append(f)
                fed_near.append(d)
                outputs.append(got)
        fresh = audiocore.EchoCanceller(rate, **kwargs)
        once = _as_bytes(fresh.process(b"".join(fed_far), b"".join(fed_near)))
        check(once == b"".join(outputs), "chunked output differs from one call")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "read_wav": fuzz_read_wav,
    "wav_roundtrip": fuzz_wav_roundtrip,
    "convert": fuzz_convert,
    "g711": fuzz_g711,
    "resampler": fuzz_resampler,
    "resampler_design": fuzz_resampler_design,
    "jitter": fuzz_jitter,
    "echo_canceller": fuzz_echo_canceller,
}
