import array
import os
import re
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import f32_from_pcm16, pcm16_from_f32

import audiocore
from audiocore import _convert, float32_to_pcm16, pcm16_to_float32

F32_MIN_DENORMAL = np.float32(1e-45)
LENGTHS = [0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 960, 961, 4801]


# Known answers, worked by hand from the policy.
KNOWN = [
    (0.0, 0),
    (-0.0, 0),
    (1.0, 32767),
    (-1.0, -32767),
    (2.0, 32767),
    (-7.5, -32767),
    (float("inf"), 32767),
    (float("-inf"), -32767),
    (float("nan"), 0),
    (0.5, 16384),  # 16383.5 rounds half to even
    (-0.5, -16384),
    (1.5 / 32767, 2),  # 1.5 (in float32: just below) -> nearest
    (2.5 / 32767, 2),  # 2.5 -> 2, half to even
    (1e-45, 0),  # denormal
]


@pytest.mark.parametrize(("value", "expected"), KNOWN)
def test_known_answers(convert_path, value, expected):
    # Each value at several positions, so vector bodies and tails both see it.
    for n in (1, 9, 40):
        x = np.zeros(n, np.float32)
        x[-1] = value
        got = np.frombuffer(float32_to_pcm16(x), "<i2")
        assert got[-1] == expected, (value, n)
        assert not got[:-1].any()


def test_known_answers_reverse(convert_path):
    pcm = struct.pack("<5h", 0, 1, -1, 32767, -32768)
    assert pcm16_to_float32(pcm).tolist() == [0.0, 2**-15, -(2**-15), 32767 / 32768, -1.0]


def edge_values():
    one = np.float32(1)
    specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        np.nextafter(one, np.float32(2)),
        np.nextafter(one, np.float32(0)),
        -np.nextafter(one, np.float32(2)),
        -np.nextafter(one, np.float32(0)),
        np.nan,
        -np.nan,
        np.inf,
        -np.inf,
        F32_MIN_DENORMAL,
        -F32_MIN_DENORMAL,
        np.finfo(np.float32).max,
        -np.finfo(np.float32).max,
        np.finfo(np.float32).tiny,
    ]
    # Every exact half-way point k + 0.5 near the ends and the middle.
    halves = [(k + 0.5) / 32767 for k in (*range(-40, 40), *range(32700, 32767))]
    return np.array(specials + halves + [-h for h in halves], dtype=np.float32)


@pytest.mark.parametrize("n", LENGTHS)
def test_matches_reference_random(convert_path, rng, n):
    x = (rng.standard_normal(n) * 0.7).astype(np.float32)
    x[rng.random(n) < 0.05] = np.nan
    assert float32_to_pcm16(x) == pcm16_from_f32(x)
    pcm = rng.integers(-32768, 32768, n, dtype=np.int16).tobytes()
    np.testing.assert_array_equal(pcm16_to_float32(pcm), f32_from_pcm16(pcm))


def test_matches_reference_edges(convert_path):
    x = edge_values()
    for start in range(0, 33):  # every alignment of the edges in the vectors
        assert float32_to_pcm16(x[start:]) == pcm16_from_f32(x[start:])


def test_all_int16_values_round_trip(convert_path):
    pcm = np.arange(-32768, 32768, dtype=np.int16)
    f = pcm16_to_float32(pcm)
    np.testing.assert_array_equal(f, f32_from_pcm16(pcm.tobytes()))
    # f32 -> s16 scales by 32767, not 32768: only the ends may move by one.
    back = np.frombuffer(float32_to_pcm16(f), "<i2").astype(int)
    assert np.abs(back - pcm).max() == 1
    assert back[0] == -32767


def test_paths_are_bit_identical(rng):
    x = np.concatenate([edge_values(), rng.uniform(-1.2, 1.2, 10_000).astype(np.float32)])
    pcm = rng.integers(-32768, 32768, 10_001, dtype=np.int16)
    outs = {}
    for p in _convert._paths():
        _convert._set_path(p)
        outs[p] = (float32_to_pcm16(x), pcm16_to_float32(pcm).tobytes())
    assert len(set(outs.values())) == 1, list(outs)


def test_large_buffer_releases_gil_and_stays_exact(rng):
    # Above the no-GIL threshold; also run from threads at the same time,
    # since the functions are documented as thread-safe.
    x = rng.uniform(-1.5, 1.5, 300_001).astype(np.float32)
    expected = pcm16_from_f32(x)
    results = []

    def work():
        results.append(float32_to_pcm16(x))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4
    back = pcm16_to_float32(expected)
    np.testing.assert_array_equal(back, f32_from_pcm16(expected))


# The input-type matrix: every kind of buffer, read without copying.


def f32_inputs(values):
    a = np.asarray(values, dtype=np.float32)
    raw = a.tobytes()
    return {
        "ndarray": a,
        "ndarray-2d": a.reshape(-1, 2) if len(a) % 2 == 0 else a.reshape(-1, 1),
        "ndarray-le": a.astype("<f4"),
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview": memoryview(raw),
        "memoryview-f": memoryview(raw).cast("f"),
        "array": array.array("f", a.tolist()),
        "uint8-ndarray": np.frombuffer(raw, np.uint8),
        "slice": np.concatenate([[np.float32(9)], a])[1:],
    }


def s16_inputs(values):
    a = np.asarray(values, dtype=np.int16)
    raw = a.tobytes()
    return {
        "ndarray": a,
        "ndarray-2d": a.reshape(-1, 2) if len(a) % 2 == 0 else a.reshape(-1, 1),
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview": memoryview(raw),
        "memoryview-h": memoryview(raw).cast("h"),
        "array": array.array("h", a.tolist()),
        # An odd start address: kernels must not need alignment.
        "unaligned": memoryview(b"\x00" + raw)[1:],
    }


@pytest.mark.parametrize("kind", list(f32_inputs([0.0, 0.0])))
def test_input_types_f32(convert_path, kind):
    values = [0.25, -0.5, 1.0, np.nan, 0.125, -1.0]
    assert float32_to_pcm16(f32_inputs(values)[kind]) == pcm16_from_f32(values)


@pytest.mark.parametrize("kind", list(s16_inputs([0, 0])))
def test_input_types_s16(convert_path, kind):
    values = [0, 1, -1, 32767, -32768, 12345]
    src = s16_inputs(values)[kind]
    np.testing.assert_array_equal(pcm16_to_float32(src), f32_from_pcm16(np.int16(values).tobytes()))


def test_unaligned_float_input(convert_path):
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    for offset in (1, 2, 3):
        raw = memoryview(b"\x00" * offset + x.tobytes())[offset:]
        assert float32_to_pcm16(raw) == pcm16_from_f32(x)


def test_zero_copy_reads_live_memory():
    buf = bytearray(np.float32([0.5, 0.5]).tobytes())
    view = memoryview(buf)
    first = float32_to_pcm16(view)
    buf[0:4] = np.float32(-1).tobytes()
    assert float32_to_pcm16(view) != first  # the call read the buffer, not a copy


def test_return_types():
    assert type(float32_to_pcm16(np.zeros(3, np.float32))) is bytes
    out = pcm16_to_float32(b"\x01\x00" * 3)
    assert type(out) is np.ndarray and out.dtype == np.float32 and out.shape == (3,)
    assert float32_to_pcm16(b"") == b""
    assert pcm16_to_float32(b"").shape == (0,)


# out=


def test_out_f32_to_s16(convert_path):
    x = np.float32([0.5, -0.25, 1.0])
    for out in (
        bytearray(6),
        np.zeros(3, np.int16),
        np.zeros(10, np.int16),
        array.array("h", [7] * 4),
    ):
        assert float32_to_pcm16(x, out=out) == 3
        assert bytes(memoryview(out).cast("B"))[:6] == pcm16_from_f32(x)
    tail = np.full(5, 7, np.int16)
    float32_to_pcm16(x, out=tail)
    assert tail[3:].tolist() == [7, 7]  # nothing written past the samples


def test_out_s16_to_f32(convert_path):
    pcm = np.int16([1, -2, 3]).tobytes()
    for out in (np.zeros(3, np.float32), bytearray(12), array.array("f", [0.0] * 5)):
        assert pcm16_to_float32(pcm, out=out) == 3
        np.testing.assert_array_equal(np.frombuffer(out, np.float32)[:3], f32_from_pcm16(pcm))


ERRORS = [
    # (call, exception, message fragment)
    (
        lambda: float32_to_pcm16(np.zeros(3, np.int16)),
        TypeError,
        "src: expected float32 samples, got int16",
    ),
    (
        lambda: float32_to_pcm16(np.zeros(3, np.float64)),
        TypeError,
        "src: expected float32 samples, got float64",
    ),
    (
        lambda: float32_to_pcm16(np.zeros(3, ">f4")),
        TypeError,
        "expected float32 samples, got big-endian float32",
    ),
    (lambda: float32_to_pcm16(np.zeros(3, np.float16)), TypeError, "got float16"),
    (lambda: float32_to_pcm16(array.array("d", [1.0])), TypeError, "got float64"),
    (
        lambda: float32_to_pcm16([0.0, 1.0]),
        TypeError,
        "src: expected a buffer of float32 samples, got list",
    ),
    (lambda: float32_to_pcm16(None), TypeError, "got NoneType"),
    (lambda: float32_to_pcm16("abcd"), TypeError, "got str"),
    (
        lambda: float32_to_pcm16(b"\x00" * 7),
        ValueError,
        "whole number of 4-byte samples, got 7 bytes",
    ),
    (lambda: float32_to_pcm16(np.zeros((4, 4), np.float32)[:, 0]), ValueError, "C-contiguous"),
    (
        lambda: float32_to_pcm16(np.zeros(4, np.float32), out=bytes(8)),
        TypeError,
        "out: expected a writable buffer, got read-only bytes",
    ),
    (
        lambda: float32_to_pcm16(np.zeros(4, np.float32), out=bytearray(6)),
        ValueError,
        "out: holds 3 samples, need 4",
    ),
    (
        lambda: float32_to_pcm16(np.zeros(4, np.float32), out=np.zeros(4, np.float32)),
        TypeError,
        "out: expected int16 samples, got float32",
    ),
    (
        lambda: float32_to_pcm16(np.zeros(4, np.float32), out=5),
        TypeError,
        "out: expected a buffer of int16 samples, got int",
    ),
    (
        lambda: pcm16_to_float32(b"\x00" * 3),
        ValueError,
        "int16 data must be a whole number of 2-byte samples, got 3 bytes",
    ),
    (
        lambda: pcm16_to_float32(np.zeros(2, np.float32)),
        TypeError,
        "src: expected int16 samples, got float32",
    ),
    (lambda: pcm16_to_float32(np.zeros(2, np.uint16)), TypeError, "got uint16"),
    (lambda: pcm16_to_float32(3.0), TypeError, "got float"),
    (
        lambda: pcm16_to_float32(b"\x00" * 4, out=np.zeros(1, np.float32)),
        ValueError,
        "out: holds 1 samples, need 2",
    ),
    (
        lambda: pcm16_to_float32(b"\x00" * 4, out=np.zeros(2, np.int16)),
        TypeError,
        "out: expected float32 samples, got int16",
    ),
    (
        lambda: pcm16_to_float32(b"\x00" * 4, out=bytearray(7)),
        ValueError,
        "whole number of 4-byte samples, got 7 bytes",
    ),
    (lambda: float32_to_pcm16(), TypeError, "takes at least 1 positional argument"),
]


@pytest.mark.parametrize(("call", "exc", "message"), ERRORS)
def test_errors(call, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        call()


def test_overlapping_out_is_refused():
    buf = bytearray(24)
    with pytest.raises(ValueError, match="overlaps src"):
        pcm16_to_float32(memoryview(buf)[:8], out=memoryview(buf)[4:20])
    assert pcm16_to_float32(memoryview(buf)[:8], out=memoryview(buf)[8:24]) == 4  # adjacent is fine
    a = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="overlaps src"):
        float32_to_pcm16(a, out=a.view(np.int16)[:8])


def test_errors_release_buffers():
    # A failed call must not leave the input exported (it could not resize).
    buf = bytearray(7)
    with pytest.raises(ValueError):
        float32_to_pcm16(buf)
    out = bytearray(2)
    with pytest.raises(ValueError):
        float32_to_pcm16(np.zeros(4, np.float32), out=out)
    buf.extend(b"x")
    out.extend(b"x")


def test_set_path_errors():
    with pytest.raises(ValueError, match="unknown path 'altivec'"):
        _convert._set_path("altivec")
    # Every CPU lacks the other architecture's paths (x86-64's or NEON).
    foreign = next(p for p in ("neon", "sse2") if p not in _convert._paths())
    with pytest.raises(ValueError, match=f"path '{foreign}' is not supported on this CPU"):
        _convert._set_path(foreign)


def test_huge_input_converts_in_one_pass():
    # 256 MiB of float32 (far above the no-GIL threshold), both ends checked.
    if sys.maxsize < 2**32:
        pytest.skip("32-bit")
    x = np.full(64 * 1024 * 1024, 0.5, np.float32)
    out = float32_to_pcm16(x)
    assert len(out) == 2 * x.size
    assert out[:4] == out[-4:] == struct.pack("<2h", 16384, 16384)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), max_size=100))
def test_property_matches_reference(values):
    x = np.array(values, dtype=np.float32)
    assert float32_to_pcm16(x) == pcm16_from_f32(x)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200).filter(lambda b: len(b) % 2 == 0))
def test_property_s16_round_trip(raw):
    f = pcm16_to_float32(raw)
    np.testing.assert_array_equal(f, f32_from_pcm16(raw))
    back = np.frombuffer(float32_to_pcm16(f), "<i2").astype(int)
    orig = np.frombuffer(raw, "<i2").astype(int)
    assert np.all(np.abs(back - orig) <= 1)


def run_with_simd(value, cwd):
    # The child imports the audiocore under test, not whatever its working
    # directory holds (in an unpacked sdist, the uncompiled sources).
    code = "import audiocore; from audiocore import _convert; print(_convert._get_path())"
    package_root = os.path.dirname(os.path.dirname(audiocore.__file__))
    env = {**os.environ, "AUDIOCORE_SIMD": value, "PYTHONPATH": package_root}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), done.stderr


@pytest.mark.parametrize("name", _convert._paths())
def test_environment_caps_the_path(name, tmp_path):
    assert run_with_simd(name, tmp_path) == (name, "")


def test_environment_caps_a_width_on_either_architecture(tmp_path):
    # One setting means the same on x86-64 and aarch64: 128-bit vectors.
    paths = _convert._paths()
    if "neon" in paths:
        assert run_with_simd("avx2", tmp_path) == ("neon", "")
    elif "sse2" in paths:
        assert run_with_simd("neon", tmp_path) == ("sse2", "")
    else:
        pytest.skip(f"no vector path here: {paths}")


def test_environment_typo_warns_and_uses_the_best_path(tmp_path):
    path, err = run_with_simd("avx9000", tmp_path)
    assert path == _convert._paths()[-1]
    assert "AUDIOCORE_SIMD='avx9000' is not one of" in err
