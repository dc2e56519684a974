import io
import re
import shutil
import struct
import subprocess
import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audiocore import WavInfo, read_wav, to_wav, wav_header

SOX = shutil.which("sox")
needs_sox = pytest.mark.skipif(SOX is None, reason="sox is not installed (apt-get install sox)")


@pytest.fixture
def soundfile():
    """libsndfile's Python binding; only the tests that compare with it skip
    without it."""
    return pytest.importorskip("soundfile")


def chunk(cid, body):
    return cid + struct.pack("<I", len(body)) + body + (b"\x00" if len(body) & 1 else b"")


def riff(*chunks, size=None):
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body) if size is None else size) + body


def fmt_pcm(channels=1, rate=16000, bits=16, tag=1, block=None):
    block = channels * bits // 8 if block is None else block
    return struct.pack("<HHIIHH", tag, channels, rate, (rate * block) & 0xFFFFFFFF, block, bits)


# Writing


def test_s16_header_is_canonical_and_matches_wave_module():
    pcm = np.int16([1, -2, 3, -4]).tobytes()
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(48000)
        w.writeframes(pcm)
    assert len(wav_header(48000, channels=2, data_bytes=8)) == 44
    assert to_wav(pcm, 48000, channels=2) == out.getvalue()


def test_f32_header_has_fact_chunk():
    h = wav_header(24000, format="f32", data_bytes=40)
    assert h[12:16] == b"fmt " and struct.unpack_from("<I", h, 16)[0] == 18
    assert struct.unpack_from("<HH", h, 20) == (3, 1)
    assert h[38:42] == b"fact" and struct.unpack_from("<I", h, 46)[0] == 10
    assert h[50:54] == b"data" and struct.unpack_from("<I", h, 54)[0] == 40
    assert len(h) == 58


def test_streaming_header():
    h = wav_header(16000)
    assert struct.unpack_from("<I", h, 4)[0] == 0xFFFFFFFF
    assert struct.unpack_from("<I", h, 40)[0] == 0xFFFFFFFF
    pcm = np.arange(10, dtype=np.int16).tobytes()
    info = read_wav(h + pcm + b"\x01")  # a partial frame at the end is cut
    assert info.frames == 10 and bytes(info.data) == pcm


@pytest.mark.parametrize("fmt,dtype", [("s16", np.int16), ("f32", np.float32)])
@pytest.mark.parametrize("channels", [1, 2, 6])
@pytest.mark.parametrize("frames", [0, 1, 7, 480])
def test_round_trip(rng, fmt, dtype, channels, frames):
    if dtype is np.int16:
        x = rng.integers(-32768, 32768, (frames, channels), dtype=np.int16)
    else:
        x = rng.uniform(-1, 1, (frames, channels)).astype(np.float32)
    blob = to_wav(x, 22050, channels=channels, format=fmt)
    info = read_wav(blob)
    assert info == WavInfo(22050, channels, fmt, frames, info.data)
    assert bytes(info.data) == x.tobytes()


@pytest.mark.parametrize("fmt,dtype", [("s16", np.int16), ("f32", np.float32)])
@pytest.mark.parametrize("channels", [1, 2, 6])
@pytest.mark.parametrize("frames", [0, 1, 7, 480])
def test_libsndfile_reads_ours(rng, soundfile, fmt, dtype, channels, frames):
    if dtype is np.int16:
        x = rng.integers(-32768, 32768, (frames, channels), dtype=np.int16)
    else:
        x = rng.uniform(-1, 1, (frames, channels)).astype(np.float32)
    blob = to_wav(x, 22050, channels=channels, format=fmt)
    # libsndfile agrees on every sample.
    data, rate = soundfile.read(io.BytesIO(blob), dtype=np.dtype(dtype).name, always_2d=True)
    assert rate == 22050 and data.shape == (frames, channels)
    np.testing.assert_array_equal(data, x)


def test_odd_data_is_padded():
    # s16 data is always even; an odd size comes from 8-bit files: the pad
    # byte after it must be skipped, not read as the next chunk's id.
    odd = riff(
        chunk(b"fmt ", fmt_pcm(bits=8)), chunk(b"data", b"\x80\x81\x82"), chunk(b"LIST", b"INFOx")
    )
    info = read_wav(odd)
    assert info.format == "u8" and bytes(info.data) == b"\x80\x81\x82"
    odd_first = riff(chunk(b"fmt ", fmt_pcm()), chunk(b"odd ", b"abc"), chunk(b"data", b"\x01\x00"))
    assert bytes(read_wav(odd_first).data) == b"\x01\x00"


def test_read_is_zero_copy():
    buf = bytearray(to_wav(np.int16([5, 6, 7]), 16000))
    info = read_wav(buf)
    buf[44] = 0x09
    assert bytes(info.data[:2]) == b"\x09\x00"
    with pytest.raises(BufferError):
        buf.extend(b"\x00\x00")  # the view pins the buffer
    info.data.release()


def test_read_numpy_and_memoryview_inputs():
    blob = to_wav(np.int16([1, 2]), 8000)
    for buf in (np.frombuffer(blob, np.uint8), memoryview(blob), bytearray(blob)):
        assert bytes(read_wav(buf).data) == np.int16([1, 2]).tobytes()


# Reading what others write

SF_SUBTYPES = [
    ("PCM_U8", "u8"),
    ("PCM_16", "s16"),
    ("PCM_24", "s24"),
    ("PCM_32", "s32"),
    ("FLOAT", "f32"),
    ("DOUBLE", "f64"),
]


def decode(info):
    """Samples as float64 in [-1, 1], the same scale libsndfile uses."""
    raw = bytes(info.data)
    if info.format == "u8":
        return (np.frombuffer(raw, np.uint8).astype(float) - 128) / 128
    if info.format == "s24":
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        return np.where(v >= 1 << 23, v - (1 << 24), v) / 2.0**23
    dtype, scale = {
        "s16": ("<i2", 2.0**15),
        "s32": ("<i4", 2.0**31),
        "f32": ("<f4", 1),
        "f64": ("<f8", 1),
    }[info.format]
    return np.frombuffer(raw, dtype).astype(float) / scale


@pytest.mark.parametrize("container", ["WAV", "WAVEX"])
@pytest.mark.parametrize(("subtype", "fmt"), SF_SUBTYPES)
def test_reads_libsndfile_files(rng, soundfile, container, subtype, fmt):
    x = rng.uniform(-0.9, 0.9, (101, 2))
    out = io.BytesIO()
    soundfile.write(out, x, 32000, subtype=subtype, format=container)
    info = read_wav(out.getvalue())
    assert (info.sample_rate, info.channels, info.format, info.frames) == (32000, 2, fmt, 101)
    expected, _ = soundfile.read(io.BytesIO(out.getvalue()), dtype="float64", always_2d=True)
    np.testing.assert_array_equal(decode(info).reshape(-1, 2), expected)


@needs_sox
@pytest.mark.parametrize(
    ("args", "fmt"),
    [
        (["-b", "8", "-e", "unsigned-integer"], "u8"),
        (["-b", "16"], "s16"),
        (["-b", "24"], "s24"),
        (["-b", "32", "-e", "signed-integer"], "s32"),
        (["-b", "32", "-e", "floating-point"], "f32"),
        (["-b", "64", "-e", "floating-point"], "f64"),
    ],
)
@pytest.mark.parametrize("channels", [1, 3])
def test_reads_sox_files(tmp_path, soundfile, args, fmt, channels):
    f = tmp_path / "tone.wav"
    subprocess.run(
        [
            SOX,
            "-n",
            "-r",
            "44100",
            "-c",
            str(channels),
            *args,
            str(f),
            "synth",
            "0.05",
            "sine",
            "440",
            "vol",
            "0.5",
        ],
        check=True,
    )
    info = read_wav(f.read_bytes())
    assert (info.sample_rate, info.channels, info.format, info.frames) == (
        44100,
        channels,
        fmt,
        2205,
    )
    expected, _ = soundfile.read(str(f), dtype="float64", always_2d=True)
    np.testing.assert_array_equal(decode(info).reshape(-1, channels), expected)


@needs_sox
@pytest.mark.parametrize("fmt", ["s16", "f32"])
def test_sox_reads_our_files(tmp_path, rng, fmt):
    x = rng.uniform(-0.5, 0.5, (2400, 2)).astype(np.float32)
    pcm = x if fmt == "f32" else np.rint(x * 32767).astype(np.int16)
    f = tmp_path / "ours.wav"
    f.write_bytes(to_wav(pcm, 48000, channels=2, format=fmt))
    info = subprocess.run([SOX, "--i", str(f)], check=True, capture_output=True, text=True).stdout
    assert re.search(r"Channels\s*: 2", info) and re.search(r"Sample Rate\s*: 48000", info)
    assert re.search(r"Duration\s*: 00:00:00.05 = 2400 samples", info)
    raw = subprocess.run(
        [SOX, str(f), "-t", "raw", "-e", "floating-point", "-b", "32", "-"],
        check=True,
        capture_output=True,
    ).stdout
    got = np.frombuffer(raw, np.float32).reshape(-1, 2)
    expected = x if fmt == "f32" else pcm / np.float32(32768)
    np.testing.assert_allclose(got, expected, atol=1e-7)


def test_wave_module_reads_ours():
    pcm = np.arange(-50, 50, dtype=np.int16)
    with wave.open(io.BytesIO(to_wav(pcm, 11025)), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (
            1,
            2,
            11025,
            100,
        )
        assert w.readframes(100) == pcm.tobytes()


# Chunks and streaming forms


def test_skips_unknown_chunks_and_odd_padding():
    data = np.int16([1, 2, 3]).tobytes()
    blob = riff(
        chunk(b"JUNK", b"abc"),
        chunk(b"fmt ", fmt_pcm()),
        chunk(b"LIST", b"INFOabcde"),
        chunk(b"fact", b"\x03\x00\x00\x00"),
        chunk(b"zzzz", b""),
        chunk(b"data", data),
    )
    info = read_wav(blob)
    assert bytes(info.data) == data and info.frames == 3


@pytest.mark.parametrize("riff_size", [0, 0xFFFFFFFF])
@pytest.mark.parametrize("data_size", [0, 0xFFFFFFFF])
def test_streaming_sizes_run_to_the_end(riff_size, data_size):
    data = np.int16([9, 8, 7, 6]).tobytes()
    blob = b"RIFF" + struct.pack("<I", riff_size) + b"WAVE" + chunk(b"fmt ", fmt_pcm())
    blob += b"data" + struct.pack("<I", data_size) + data
    assert bytes(read_wav(blob).data) == data


def test_header_written_before_data_then_appended():
    # A writer that put RIFF=36 / data=0 before it knew the length.
    blob = wav_header(16000, data_bytes=0) + np.int16([4, 5]).tobytes()
    assert read_wav(blob).frames == 2


def test_empty_data_followed_by_chunks_is_empty():
    blob = riff(chunk(b"fmt ", fmt_pcm()), chunk(b"data", b""), chunk(b"LIST", b"INFOabcd"))
    assert read_wav(blob).frames == 0


def test_extensible_24_in_32():
    ext = struct.pack("<HHIIHHHHI", 0xFFFE, 2, 48000, 48000 * 8, 8, 32, 22, 24, 3)
    ext += b"\x01\x00" + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
    info = read_wav(riff(chunk(b"fmt ", ext), chunk(b"data", b"\x00" * 16)))
    assert (info.format, info.frames) == ("s32", 2)


# Malformed files: a clear ValueError, never a read past the buffer.

GOOD = to_wav(np.int16([1, 2, 3, 4]), 16000, channels=2)

MALFORMED = [
    (b"", "shorter than a RIFF header"),
    (b"RIFX" + GOOD[4:], "not a RIFF/WAVE file"),
    (GOOD[:8] + b"AVI " + GOOD[12:], "not a RIFF/WAVE file"),
    (riff(chunk(b"data", b"\x00\x00")), "data chunk comes before any fmt chunk"),
    (riff(chunk(b"fmt ", fmt_pcm())), "no data chunk"),
    (riff(chunk(b"LIST", b"abcd")), "no fmt chunk"),
    (riff(chunk(b"fmt ", fmt_pcm(channels=0, block=2)), chunk(b"data", b"")), "0 channels"),
    (riff(chunk(b"fmt ", fmt_pcm(rate=0)), chunk(b"data", b"")), "says 0 Hz"),
    (riff(chunk(b"fmt ", fmt_pcm(rate=4_000_000_000)), chunk(b"data", b"")), "says 4000000000 Hz"),
    (riff(chunk(b"fmt ", fmt_pcm(block=3, channels=2)), chunk(b"data", b"")), "block align 3"),
    (riff(chunk(b"fmt ", fmt_pcm(block=0)), chunk(b"data", b"")), "block align 0"),
    (riff(chunk(b"fmt ", fmt_pcm(tag=7, bits=8)), chunk(b"data", b"")), "format tag 0x0007"),
    (
        riff(chunk(b"fmt ", fmt_pcm(bits=12, block=4)), chunk(b"data", b"")),
        "12-bit PCM samples do not fill 4-byte blocks",
    ),
    (riff(chunk(b"fmt ", fmt_pcm(bits=0, block=2)), chunk(b"data", b"")), "0-bit PCM samples"),
    (
        riff(chunk(b"fmt ", fmt_pcm(bits=40)), chunk(b"data", b"")),
        "unsupported PCM sample size: 40 bits",
    ),
    (
        riff(chunk(b"fmt ", fmt_pcm(tag=3, bits=16)), chunk(b"data", b"")),
        "unsupported IEEE float sample size: 16 bits",
    ),
    (riff(chunk(b"fmt ", fmt_pcm()[:14]), chunk(b"data", b"")), "fmt chunk is 14 bytes"),
    (
        riff(chunk(b"fmt ", fmt_pcm(tag=0xFFFE)), chunk(b"data", b"")),
        "EXTENSIBLE fmt chunk is 16 bytes",
    ),
    (
        riff(chunk(b"fmt ", fmt_pcm()), chunk(b"data", b"\x00\x00\x00")),
        "not a whole number of 2-byte frames",
    ),
    (GOOD[:4] + struct.pack("<I", 1000) + GOOD[8:], "the RIFF header claims 1008 bytes"),
    (GOOD[:40] + struct.pack("<I", 100) + GOOD[44:], "data chunk claims 100 bytes"),
    (GOOD[:16] + struct.pack("<I", 1000) + GOOD[20:], "chunk b'fmt ' claims 1000 bytes"),
]


@pytest.mark.parametrize(("blob", "message"), MALFORMED)
def test_malformed(blob, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        read_wav(blob)


def test_every_truncation_is_an_error():
    for n in range(len(GOOD)):
        with pytest.raises(ValueError):
            read_wav(GOOD[:n])


def test_bad_extensible_guid():
    ext = (
        struct.pack("<HHIIHHHHI", 0xFFFE, 1, 8000, 16000, 2, 16, 22, 16, 4)
        + b"\x01\x00"
        + b"\xff" * 14
    )
    with pytest.raises(ValueError, match="unsupported WAV SubFormat GUID"):
        read_wav(riff(chunk(b"fmt ", ext), chunk(b"data", b"")))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_fuzzed_files_fail_cleanly(data):
    blob = bytearray(to_wav(np.int16(range(10)), 8000, channels=2, format="s16"))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    blob = bytes(blob[: data.draw(st.integers(0, len(blob)))])
    try:
        info = read_wav(blob)
    except ValueError:
        return
    # Whatever parsed must lie inside the buffer and add up.
    assert (
        len(info.data)
        == info.frames
        * info.channels
        * {"u8": 1, "s16": 2, "s24": 3, "s32": 4, "f32": 4, "f64": 8}[info.format]
    )
    assert info.data.obj is not None


ARG_ERRORS = [
    (
        lambda: wav_header(0),
        ValueError,
        "sample_rate: expected a sample rate from 1 to 1000000 Hz, got 0",
    ),
    (
        lambda: wav_header(16000.0),
        TypeError,
        "sample_rate: expected an integer sample rate in Hz, got float",
    ),
    (
        lambda: wav_header(True),
        TypeError,
        "sample_rate: expected an integer sample rate in Hz, got bool",
    ),
    (
        lambda: wav_header(16000, channels=0),
        ValueError,
        "channels: expected an integer from 1 to 64, got 0",
    ),
    (
        lambda: wav_header(16000, format="s24"),
        ValueError,
        "format: expected 's16' or 'f32', got 's24'",
    ),
    (lambda: wav_header(16000, data_bytes=3), ValueError, "whole number of 2-byte frames, got 3"),
    (
        lambda: wav_header(16000, data_bytes=-2),
        ValueError,
        "data_bytes: expected a byte count from 0 to",
    ),
    (
        lambda: wav_header(16000, data_bytes=2**32),
        ValueError,
        "data_bytes: expected a byte count from 0 to",
    ),
    (
        lambda: to_wav(np.zeros(4, np.float32), 16000),
        TypeError,
        "pcm: expected int16 samples, got float32",
    ),
    (
        lambda: to_wav(np.zeros(4, np.int16), 16000, format="f32"),
        TypeError,
        "pcm: expected float32 samples, got int16",
    ),
    (
        lambda: to_wav(np.zeros(3, np.int16), 16000, channels=2),
        ValueError,
        "whole number of 2-channel frames, got 3 samples",
    ),
    (lambda: to_wav(b"\x00" * 3, 16000), ValueError, "whole number of 2-byte samples, got 3 bytes"),
    (lambda: to_wav("abc", 16000), TypeError, "pcm: expected a buffer of int16 samples, got str"),
    (lambda: read_wav("RIFF"), TypeError, "buf: expected a bytes-like object, got str"),
    (lambda: read_wav(np.zeros((8, 8), np.uint8)[:, 0]), ValueError, "C-contiguous"),
]


@pytest.mark.parametrize(("call", "exc", "message"), ARG_ERRORS)
def test_argument_errors(call, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        call()
