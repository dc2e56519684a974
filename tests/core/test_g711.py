"""G.711 μ-law and A-law against audioop over the whole input space, the
NumPy spelling of the standard, known answers, every SIMD path, every kind
of buffer, and the errors."""

import array
import re
import threading

import numpy as np
import pytest
from g711_reference import LAWS, audioop, audioop_decode, audioop_encode, decode, encode
from reference import f32_from_pcm16, pcm16_from_f32

import audiocore
from audiocore import _convert

ENCODE = {"ulaw": audiocore.pcm16_to_ulaw, "alaw": audiocore.pcm16_to_alaw}
ENCODE_F32 = {"ulaw": audiocore.float32_to_ulaw, "alaw": audiocore.float32_to_alaw}
DECODE = {"ulaw": audiocore.ulaw_to_pcm16, "alaw": audiocore.alaw_to_pcm16}
DECODE_F32 = {"ulaw": audiocore.ulaw_to_float32, "alaw": audiocore.alaw_to_float32}
EVERY_PCM16 = np.arange(-32768, 32768, dtype=np.int16)
EVERY_CODE = bytes(range(256))
LENGTHS = [0, 1, 7, 8, 15, 16, 17, 31, 33, 160, 161, 4801]
needs_audioop = pytest.mark.skipif(audioop is None, reason="no audioop (3.13+: audioop-lts)")


@needs_audioop
@pytest.mark.parametrize("law", LAWS)
def test_encode_matches_audioop_for_every_pcm16_value(convert_path, law):
    pcm = EVERY_PCM16.tobytes()
    assert ENCODE[law](pcm) == audioop_encode(law, pcm)
    # The same values in another order, so that each meets every lane.
    shuffled = np.random.default_rng(37).permutation(EVERY_PCM16).tobytes()
    assert ENCODE[law](shuffled) == audioop_encode(law, shuffled)


@needs_audioop
@pytest.mark.parametrize("law", LAWS)
def test_decode_matches_audioop_for_every_code(convert_path, law):
    for start in range(17):  # every code at every lane and in the tails
        codes = EVERY_CODE[start:] + EVERY_CODE[:start]
        assert DECODE[law](codes) == audioop_decode(law, codes)


@needs_audioop
@pytest.mark.parametrize("law", LAWS)
def test_the_numpy_reference_is_audioop(law):
    # So that the tests below hold where audioop is missing.
    assert encode(law, EVERY_PCM16) == audioop_encode(law, EVERY_PCM16.tobytes())
    assert decode(law, EVERY_CODE) == audioop_decode(law, EVERY_CODE)


@pytest.mark.parametrize("law", LAWS)
@pytest.mark.parametrize("n", LENGTHS)
def test_matches_the_numpy_reference(convert_path, rng, law, n):
    pcm = rng.integers(-32768, 32768, n, dtype=np.int16)
    assert ENCODE[law](pcm) == encode(law, pcm)
    codes = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    assert DECODE[law](codes) == decode(law, codes)


# Known answers (ITU-T G.711; audioop gives the same).
KNOWN_ENCODE = [
    # (pcm16, μ-law, A-law)
    (0, 0xFF, 0xD5),  # silence
    (1, 0xFF, 0xD5),
    (8, 0xFE, 0xD5),
    (-1, 0x7E, 0x55),
    (-8, 0x7E, 0x55),
    (32767, 0x80, 0xAA),  # full scale
    (-32768, 0x00, 0x2A),
    (32124, 0x80, 0xAA),  # μ-law's largest value
]
KNOWN_DECODE = [
    # (code, μ-law value, A-law value)
    (0xFF, 0, 848),
    (0x7F, 0, -848),  # μ-law's other zero
    (0xD5, 716, 8),  # A-law's silence: the smallest step, either sign
    (0x55, -716, -8),
    (0x80, 32124, 5504),
    (0x00, -32124, -5504),
    (0xAA, 5372, 32256),  # A-law's largest
    (0x2A, -5372, -32256),
]


@pytest.mark.parametrize(("value", "ulaw", "alaw"), KNOWN_ENCODE)
def test_known_codes(convert_path, value, ulaw, alaw):
    for n in (1, 20, 40):  # in the scalar tail and inside a vector
        pcm = np.zeros(n, np.int16)
        pcm[-1] = value
        assert ENCODE["ulaw"](pcm) == b"\xff" * (n - 1) + bytes([ulaw])
        assert ENCODE["alaw"](pcm) == b"\xd5" * (n - 1) + bytes([alaw])


@pytest.mark.parametrize(("code", "ulaw", "alaw"), KNOWN_DECODE)
def test_known_values(convert_path, code, ulaw, alaw):
    for n in (1, 20, 40):
        codes = bytes([code]) * n
        assert np.frombuffer(DECODE["ulaw"](codes), "<i2").tolist() == [ulaw] * n
        assert np.frombuffer(DECODE["alaw"](codes), "<i2").tolist() == [alaw] * n


def test_silence_and_full_scale_float():
    assert audiocore.float32_to_ulaw(np.zeros(3, np.float32)) == b"\xff" * 3
    assert audiocore.float32_to_alaw(np.zeros(3, np.float32)) == b"\xd5" * 3
    assert audiocore.float32_to_ulaw(np.float32([1.0, -1.0, np.nan])) == b"\x80\x00\xff"
    assert audiocore.ulaw_to_float32(b"\x80").tolist() == [32124 / 32768]


def float_edges(rng):
    """The PCM conversion's edge values and random speech levels."""
    one = np.float32(1)
    specials = [0.0, -0.0, 1.0, -1.0, 2.0, -7.5, np.inf, -np.inf, np.nan, -np.nan, 1e-45]
    specials += [np.nextafter(one, np.float32(2)), np.nextafter(one, np.float32(0))]
    halves = [(k + 0.5) / 32767 for k in range(-40, 40)]
    return np.concatenate(
        [np.float32(specials + halves), rng.uniform(-1.2, 1.2, 5000).astype(np.float32)]
    )


@pytest.mark.parametrize("law", LAWS)
def test_float32_is_the_pcm_policy_then_the_codec(convert_path, rng, law):
    x = float_edges(rng)
    for start in range(0, 17):  # every alignment of the edges in the vectors
        expected = encode(law, np.frombuffer(pcm16_from_f32(x[start:]), "<i2"))
        assert ENCODE_F32[law](x[start:]) == expected
    codes = EVERY_CODE * 3
    for start in range(0, 9):
        got = DECODE_F32[law](codes[start:])
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, f32_from_pcm16(decode(law, codes[start:])))


def test_paths_are_bit_identical(rng):
    x = float_edges(rng)
    pcm = rng.integers(-32768, 32768, 10_001, dtype=np.int16)
    codes = rng.integers(0, 256, 10_001, dtype=np.uint8).tobytes()
    outs = {}
    for path in _convert._paths():
        _convert._set_path(path)
        outs[path] = tuple(
            bytes(f(src))
            for law in LAWS
            for f, src in (
                (ENCODE[law], pcm),
                (ENCODE_F32[law], x),
                (DECODE[law], codes),
                (DECODE_F32[law], codes),
            )
        )
    assert len(set(outs.values())) == 1, list(outs)


def test_round_trip_of_speech_like_audio_keeps_its_shape(rng):
    # μ-law keeps about 38 dB of SNR at speech levels: the decoded signal
    # follows the input closely at any level, quiet or loud.
    t = np.arange(16000) / 8000
    envelope = 0.05 + 0.6 * np.abs(np.sin(2 * np.pi * 1.3 * t))
    voiced = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((140, 280, 420, 700), 1))
    x = envelope * voiced / 2.1 + 0.01 * rng.standard_normal(len(t))
    pcm = np.rint(np.clip(x, -1, 1) * 32767).astype(np.int16)
    for law in LAWS:
        back = np.frombuffer(DECODE[law](ENCODE[law](pcm)), "<i2").astype(np.float64)
        correlation = np.corrcoef(pcm.astype(np.float64), back)[0, 1]
        assert correlation >= 0.99, (law, correlation)
        # Decoding then encoding again changes nothing (G.711 decodes to the
        # middle of each step), but for μ-law's negative zero, 0x7F, which
        # decodes to 0 like 0xFF.
        expected = EVERY_CODE.replace(b"\x7f", b"\xff") if law == "ulaw" else EVERY_CODE
        assert ENCODE[law](DECODE[law](EVERY_CODE)) == expected


def test_large_buffer_releases_gil_and_stays_exact(rng):
    pcm = rng.integers(-32768, 32768, 300_001, dtype=np.int16)
    expected = encode("ulaw", pcm)
    results = []

    def work():
        results.append(audiocore.pcm16_to_ulaw(pcm))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4
    assert audiocore.ulaw_to_pcm16(expected) == decode("ulaw", expected)


# ---- buffers ------------------------------------------------------------------


def code_inputs(codes: bytes):
    return {
        "bytes": codes,
        "bytearray": bytearray(codes),
        "memoryview": memoryview(codes),
        "uint8-ndarray": np.frombuffer(codes, np.uint8),
        "int8-ndarray": np.frombuffer(codes, np.int8),
        "array-B": array.array("B", codes),
        "unaligned": memoryview(b"\x00" + codes)[1:],
    }


def pcm16_inputs(values):
    a = np.asarray(values, np.int16)
    raw = a.tobytes()
    return {
        "ndarray": a,
        "ndarray-2d": a.reshape(-1, 2),
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview-h": memoryview(raw).cast("h"),
        "array-h": array.array("h", a.tolist()),
        "unaligned": memoryview(b"\x00" + raw)[1:],
    }


@pytest.mark.parametrize("kind", list(code_inputs(b"")))
@pytest.mark.parametrize("law", LAWS)
def test_input_types_codes(convert_path, law, kind):
    codes = bytes(range(0, 256, 7))
    src = code_inputs(codes)[kind]
    assert DECODE[law](src) == decode(law, codes)
    np.testing.assert_array_equal(DECODE_F32[law](src), f32_from_pcm16(decode(law, codes)))


@pytest.mark.parametrize("kind", list(pcm16_inputs([0, 0])))
@pytest.mark.parametrize("law", LAWS)
def test_input_types_pcm16(convert_path, law, kind):
    values = [0, 1, -1, 32767, -32768, 12345, -999, 8]
    assert ENCODE[law](pcm16_inputs(values)[kind]) == encode(law, np.int16(values))


def test_zero_copy_reads_live_memory():
    buf = bytearray(np.int16([1000, 1000]).tobytes())
    view = memoryview(buf)
    first = audiocore.pcm16_to_ulaw(view)
    buf[0:2] = np.int16(-1000).tobytes()
    assert audiocore.pcm16_to_ulaw(view) != first


def test_return_types_and_empty_input():
    assert type(audiocore.pcm16_to_ulaw(np.zeros(3, np.int16))) is bytes
    assert type(audiocore.alaw_to_pcm16(b"\xd5" * 3)) is bytes
    f = audiocore.ulaw_to_float32(b"\xff" * 3)
    assert type(f) is np.ndarray and f.dtype == np.float32 and f.shape == (3,)
    for name in ("pcm16_to_ulaw", "pcm16_to_alaw", "float32_to_ulaw", "float32_to_alaw"):
        assert getattr(audiocore, name)(b"") == b""
    assert audiocore.ulaw_to_pcm16(b"") == b""
    assert audiocore.alaw_to_float32(b"").shape == (0,)


@pytest.mark.parametrize("law", LAWS)
def test_out(convert_path, law):
    pcm = np.int16([0, 1000, -1000, 32767])
    for out in (bytearray(4), np.zeros(10, np.uint8), array.array("B", [7] * 5)):
        assert ENCODE[law](pcm, out=out) == 4
        assert bytes(memoryview(out).cast("B"))[:4] == encode(law, pcm)
    tail = np.full(6, 7, np.uint8)
    ENCODE_F32[law](np.float32([0.5, -0.5]), out=tail)
    assert tail[2:].tolist() == [7] * 4  # nothing past the samples
    codes = encode(law, pcm)
    for out in (np.zeros(4, np.int16), bytearray(8)):
        assert DECODE[law](codes, out=out) == 4
        assert bytes(memoryview(out).cast("B"))[:8] == decode(law, codes)
    out32 = np.zeros(4, np.float32)
    assert DECODE_F32[law](codes, out=out32) == 4
    np.testing.assert_array_equal(out32, f32_from_pcm16(decode(law, codes)))


ERRORS = [
    (
        lambda: audiocore.pcm16_to_ulaw(np.zeros(3, np.float32)),
        TypeError,
        "src: expected int16 samples, got float32",
    ),
    (
        lambda: audiocore.pcm16_to_alaw([0, 1]),
        TypeError,
        "src: expected a buffer of int16 samples, got list",
    ),
    (
        lambda: audiocore.pcm16_to_ulaw(b"\x00" * 3),
        ValueError,
        "src: int16 data must be a whole number of 2-byte samples, got 3 bytes",
    ),
    (
        lambda: audiocore.float32_to_ulaw(np.zeros(2, np.float64)),
        TypeError,
        "src: expected float32 samples, got float64",
    ),
    (
        lambda: audiocore.float32_to_alaw(b"\x00" * 6),
        ValueError,
        "float32 data must be a whole number of 4-byte samples, got 6 bytes",
    ),
    (
        lambda: audiocore.ulaw_to_pcm16(np.zeros(2, np.int16)),
        TypeError,
        "src: expected μ-law samples, got int16",
    ),
    (
        lambda: audiocore.alaw_to_float32(array.array("h", [1])),
        TypeError,
        "src: expected A-law samples, got int16",
    ),
    (
        lambda: audiocore.alaw_to_pcm16(np.zeros(2, np.float32)),
        TypeError,
        "src: expected A-law samples, got float32",
    ),
    (
        lambda: audiocore.ulaw_to_pcm16("\xff"),
        TypeError,
        "src: expected a buffer of μ-law samples, got str",
    ),
    (lambda: audiocore.ulaw_to_float32(None), TypeError, "got NoneType"),
    (
        lambda: audiocore.pcm16_to_ulaw(np.zeros(4, np.int16), out=bytes(4)),
        TypeError,
        "out: expected a writable buffer, got read-only bytes",
    ),
    (
        lambda: audiocore.pcm16_to_ulaw(np.zeros(4, np.int16), out=bytearray(3)),
        ValueError,
        "out: holds 3 samples, need 4",
    ),
    (
        lambda: audiocore.pcm16_to_alaw(np.zeros(4, np.int16), out=np.zeros(4, np.int16)),
        TypeError,
        "out: expected A-law samples, got int16",
    ),
    (
        lambda: audiocore.ulaw_to_pcm16(b"\xff" * 4, out=np.zeros(4, np.float32)),
        TypeError,
        "out: expected int16 samples, got float32",
    ),
    (
        lambda: audiocore.ulaw_to_pcm16(b"\xff" * 4, out=bytearray(7)),
        ValueError,
        "whole number of 2-byte samples, got 7 bytes",
    ),
    (
        lambda: audiocore.alaw_to_float32(b"\xff" * 4, out=np.zeros(3, np.float32)),
        ValueError,
        "out: holds 3 samples, need 4",
    ),
]


@pytest.mark.parametrize(("call", "exc", "message"), ERRORS)
def test_errors(call, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        call()


def test_overlapping_out_is_refused():
    buf = bytearray(16)
    with pytest.raises(ValueError, match="overlaps src"):
        audiocore.pcm16_to_ulaw(memoryview(buf)[:8], out=memoryview(buf)[4:8])
    assert audiocore.pcm16_to_ulaw(memoryview(buf)[:8], out=memoryview(buf)[8:12]) == 4


def test_errors_release_buffers():
    src = bytearray(3)
    with pytest.raises(ValueError):
        audiocore.pcm16_to_ulaw(src)
    out = bytearray(1)
    with pytest.raises(ValueError):
        audiocore.ulaw_to_pcm16(b"\xff", out=out)
    src.extend(b"x")  # would raise BufferError if still exported
    out.extend(b"x")
