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

from audiocore import _jitter, _resample, float32_to_pcm16, pcm16_to_float32
from audiocore._filters import design
from audiocore._jitter import JitterCore
from audiocore._resample import TAP_ALIGN
from audiocore.resample import Resampler

SOURCES = Path(__file__).resolve().parents[2] / "audiocore" / "src"
F32, S16 = 0, 1  # pcm.h's enum ac_sample_format


class JitterConfig(ctypes.Structure):
    _fields_ = [  # jitter.h's ac_jb_config
        ("rate", ctypes.c_int),
        ("channels", ctypes.c_int),
        ("frame", ctypes.c_int),
        ("mode", ctypes.c_int),
        ("capacity", ctypes.c_int64),
        ("start_level", ctypes.c_int64),
        ("resume_level", ctypes.c_int64),
        ("drop_on_overflow", ctypes.c_int),
    ]


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
    lib.ac_jb_new.restype = ctypes.c_void_p
    lib.ac_jb_new.argtypes = [ctypes.POINTER(JitterConfig)]
    lib.ac_jb_free.argtypes = [ctypes.c_void_p]
    lib.ac_jb_push.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_double,
    ]
    lib.ac_jb_pop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.ac_jb_end_turn.argtypes = [ctypes.c_void_p]
    lib.ac_jb_flush.argtypes = [ctypes.c_void_p, ctypes.c_int64]
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
    table = design(up, down, "voice", TAP_ALIGN)
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


@pytest.mark.parametrize("mode", ["stream", "timeline"])
@pytest.mark.parametrize("channels", [1, 2])
def test_jitter_core_swaps(swapping_build, rng, mode, channels):
    # Pushes with stalls (concealment, then a cross-fade back), a turn end
    # and a flush fade: every way a sample reaches the output.
    rate, frame = 16000, 320
    cfg = (rate, channels, frame, getattr(_jitter, mode.upper()), 16000, frame, frame, False)
    reference = JitterCore(*cfg)
    lib = swapping_build
    jb = lib.ac_jb_new(ctypes.byref(JitterConfig(*cfg)))
    assert jb
    try:
        t = np.arange(40 * frame)
        tone = (8000 * np.sin(2 * np.pi * 180 * t / rate)).astype(np.int16)
        source = np.repeat(tone[:, None], channels, axis=1) + rng.integers(
            -300, 300, (len(t), channels), dtype=np.int16
        )
        script = ["push", "push", "pop", "pop", "pop", "pop", "push", "pop", "pop", "push"]
        script += ["end", "pop", "pop", "pop", "push", "pop", "flush", "pop", "pop"]
        packet = 0
        for step in script:
            if step == "push":
                chunk = source[packet * frame : (packet + 1) * frame].tobytes()
                seq = packet if mode == "timeline" else -1
                reference.push(chunk, seq, -1, float("nan"))
                lib.ac_jb_push(jb, swapped(chunk), frame, seq, -1, float("nan"))
                packet += 1
            elif step == "pop":
                want_pos = np.empty(frame, np.int64)
                want = reference.pop(want_pos)
                got = ctypes.create_string_buffer(2 * frame * channels)
                got_pos = np.empty(frame, np.int64)
                lib.ac_jb_pop(jb, got, got_pos.ctypes.data)
                assert swapped(got.raw) == want
                assert np.array_equal(got_pos, want_pos)
            elif step == "end":
                reference.end_turn()
                lib.ac_jb_end_turn(jb)
            else:
                reference.flush(80)
                lib.ac_jb_flush(jb, 80)
        assert reference.stats()["concealed"] > 0 and reference.stats()["blended"] > 0
    finally:
        lib.ac_jb_free(jb)
