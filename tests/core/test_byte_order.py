"""PCM16 byte order: every kernel reads and writes PCM16 through pcm.h's
little-endian loads and stores, which swap on a big-endian host.

No big-endian machine runs these tests, so they compile the C kernels a
second time with the swap forced on (AC_PCM16_SWAP=1, warnings as errors)
and load that build with ctypes.  It then reads and writes *big*-endian
PCM16 on this host, exactly as a big-endian host's build reads and writes
little-endian: fed byte-swapped input, it must give the normal build's
output, byte-swapped.  A kernel that reads or writes PCM16 around the
helpers breaks that.  (A swapping build has only the scalar paths, as a
big-endian host would, so the comparison is with the scalar paths.)
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from audiocore import _resample, float32_to_pcm16, pcm16_to_float32
from audiocore._filters import design
from audiocore.resample import Resampler

SOURCES = Path(__file__).resolve().parents[2] / "audiocore" / "src"
F32, S16 = 0, 1  # pcm.h's enum ac_sample_format


def swapped(pcm: bytes) -> bytes:
    return np.frombuffer(pcm, "<i2").byteswap().tobytes()


@pytest.fixture(scope="module")
def swapping_build(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    if not SOURCES.is_dir():
        pytest.skip(f"the C sources are not here ({SOURCES}): run from a checkout or sdist")
    if sys.platform == "win32":
        pytest.skip("the harness is built with a Unix C compiler")
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if shutil.which(compiler[0]) is None:
        pytest.skip(f"no C compiler ({compiler[0]})")
    library = tmp_path_factory.mktemp("swap") / "libaudiocore_swap.so"
    command = [
        *compiler,
        "-std=c11",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-shared",
        "-fPIC",
        "-DAC_PCM16_SWAP=1",
        f"-I{SOURCES}",
        *sorted(str(p) for p in SOURCES.glob("*.c")),
        "-o",
        str(library),
        "-lm",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, f"{shlex.join(command)}\n{done.stderr}"
    lib = ctypes.CDLL(str(library))
    size = ctypes.c_ssize_t
    lib.ac_f32_to_s16.argtypes = lib.ac_s16_to_f32.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        size,
    ]
    lib.ac_resampler_new.restype = ctypes.c_void_p
    lib.ac_resampler_new.argtypes = [ctypes.c_void_p] + [ctypes.c_int] * 8
    lib.ac_resampler_free.argtypes = [ctypes.c_void_p]
    for name in ("ac_resampler_process_frames", "ac_resampler_flush_frames"):
        getattr(lib, name).restype = ctypes.c_int64
    lib.ac_resampler_process_frames.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.ac_resampler_flush_frames.argtypes = [ctypes.c_void_p]
    lib.ac_resampler_process.restype = lib.ac_resampler_flush.restype = ctypes.c_int64
    lib.ac_resampler_process.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    lib.ac_resampler_flush.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib


def test_a_swapping_build_runs_scalar_only(swapping_build):
    supported = [swapping_build.ac_path_supported(p) for p in range(4)]
    assert supported == [1, 0, 0, 0]
    assert swapping_build.ac_best_path() == 0


def test_conversion_swaps(swapping_build, rng):
    x = np.concatenate([rng.uniform(-1.2, 1.2, 1001), [np.nan, 1, -1, 0.5]]).astype(np.float32)
    out = ctypes.create_string_buffer(2 * len(x))
    swapping_build.ac_f32_to_s16(x.tobytes(), out, len(x))
    assert swapped(out.raw) == float32_to_pcm16(x)

    pcm = rng.integers(-32768, 32768, 1001, dtype=np.int16).tobytes()
    back = np.empty(1001, np.float32)
    swapping_build.ac_s16_to_f32(swapped(pcm), back.ctypes.data, 1001)
    assert np.array_equal(back, pcm16_to_float32(pcm))


def run_swapping(lib, in_rate, out_rate, channels, input, output, data):
    """One stream through the swapping build: process all of `data`, then flush."""
    common = np.gcd(in_rate, out_rate)
    up, down = out_rate // common, in_rate // common
    table = design(up, down, "voice")
    formats = {"f32": F32, "s16": S16}
    r = lib.ac_resampler_new(
        table.table.ctypes.data,
        up,
        down,
        table.taps,
        table.delay,
        channels,
        formats[input],
        formats[output],
        0,
    )
    assert r
    try:
        size = (4 if output == "f32" else 2) * channels
        frames = len(data) // ((4 if input == "f32" else 2) * channels)
        head = ctypes.create_string_buffer(size * lib.ac_resampler_process_frames(r, frames))
        lib.ac_resampler_process(r, data, frames, head)
        tail = ctypes.create_string_buffer(size * lib.ac_resampler_flush_frames(r))
        lib.ac_resampler_flush(r, tail)
        return head.raw + tail.raw
    finally:
        lib.ac_resampler_free(r)


@pytest.mark.parametrize(("in_rate", "out_rate"), [(48000, 16000), (16000, 24000), (16000, 16000)])
@pytest.mark.parametrize(("input", "output"), [("s16", "s16"), ("f32", "s16"), ("s16", "f32")])
@pytest.mark.parametrize("channels", [1, 2])
def test_resampler_swaps(swapping_build, rng, in_rate, out_rate, input, output, channels):
    _resample._set_path("scalar")  # restored by conftest
    x = rng.uniform(-0.9, 0.9, 1234 * channels).astype(np.float32)
    data = x.tobytes() if input == "f32" else float32_to_pcm16(x)
    reference = Resampler(in_rate, out_rate, channels=channels, input=input, output=output)
    want = b"".join(
        out if isinstance(out, bytes) else out.tobytes()
        for out in (reference.process(data), reference.flush())
    )
    got = run_swapping(
        swapping_build,
        in_rate,
        out_rate,
        channels,
        input,
        output,
        swapped(data) if input == "s16" else data,
    )
    assert (swapped(got) if output == "s16" else got) == want
