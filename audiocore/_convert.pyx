"""Sample format conversion: float32 <-> PCM16 (docs/audio.md: the PCM
policy) and G.711 μ-law and A-law (docs/audio.md: G.711).

These functions are the public API as they stand: a Python frame around
them would cost about as much as converting a 20 ms chunk
(benchmarks/README.md), so the argument checks live here, before the GIL
is released.
"""

from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy

from audiocore._buffers cimport AC_MAX_CHANNELS, ALAW, F32, S16, ULAW, format_size, get_samples
from audiocore._cconvert cimport (
    ac_convert_get_path,
    ac_convert_set_path,
    ac_f32_to_s16,
    ac_s16_to_f32,
)
from audiocore._cg711 cimport (
    AC_ALAW_TO_F32,
    AC_ALAW_TO_S16,
    AC_F32_TO_ALAW,
    AC_F32_TO_ULAW,
    AC_S16_TO_ALAW,
    AC_S16_TO_ULAW,
    AC_ULAW_TO_F32,
    AC_ULAW_TO_S16,
    ac_g711_fn,
    ac_g711_kernel,
)
from audiocore._simd cimport ac_best_path, path_index, path_name, supported_paths

import numpy

# Channels per interleaved frame, at most, for every audiocore module (the C
# kernels' limit, pcm.h); the Python modules pass it to audiocore._validate.
MAX_CHANNELS = AC_MAX_CHANNELS

# Below this many samples the kernel takes less time than releasing and
# re-taking the GIL, so small chunks keep it.
cdef enum:
    NOGIL_SAMPLES = 65536

cdef object _empty = numpy.empty
cdef object _float32 = numpy.dtype(numpy.float32)


cdef inline bint _overlaps(Py_buffer *a, Py_buffer *b) noexcept nogil:
    cdef char *pa = <char *>a.buf
    cdef char *pb = <char *>b.buf
    return pa < pb + b.len and pb < pa + a.len


ctypedef void (*kernel_fn)(const void *src, void *dst, Py_ssize_t n) noexcept nogil


cdef inline void _run(kernel_fn kernel, const void *src, void *dst, Py_ssize_t n) noexcept:
    if n < NOGIL_SAMPLES:
        kernel(src, dst, n)
    else:
        with nogil:
            kernel(src, dst, n)


cdef object _convert_into(kernel_fn kernel, Py_buffer *src, Py_ssize_t n, object out, int out_fmt):
    """Convert `n` samples of `src` into the caller's `out`; returns `n`."""
    cdef Py_buffer ov
    cdef Py_ssize_t have = get_samples(out, &ov, out_fmt, True, "out")
    try:
        if have < n:
            raise ValueError(f"out: holds {have} samples, need {n}")
        if n and _overlaps(&ov, src):
            raise ValueError("out: overlaps src; convert into a separate buffer")
        _run(kernel, src.buf, ov.buf, n)
    finally:
        PyBuffer_Release(&ov)
    return n


cdef object _convert(kernel_fn kernel, object src, int src_fmt, object out, int out_fmt):
    """Every public function: `src` converted into `out` (returning the
    sample count), or into a new bytes (s16, G.711) or float32 array (f32)."""
    cdef Py_buffer sv
    cdef Py_ssize_t n = get_samples(src, &sv, src_fmt, False, "src")
    try:
        if out is not None:
            return _convert_into(kernel, &sv, n, out, out_fmt)
        if out_fmt != F32:
            result = PyBytes_FromStringAndSize(NULL, format_size(out_fmt) * n)
            _run(kernel, sv.buf, PyBytes_AS_STRING(result), n)
        else:
            result = _empty(n, _float32)
            _convert_into(kernel, &sv, n, result, F32)
        return result
    finally:
        PyBuffer_Release(&sv)


def float32_to_pcm16(src, out=None):
    """Convert float32 samples to PCM16 (signed 16-bit little-endian).

    Clips to [-1, 1], scales by 32767 in float32 arithmetic and rounds half
    to even; NaN becomes 0.  `src` is any C-contiguous buffer of float32 (or
    raw bytes holding them) and is read without copying.  Returns `bytes`;
    with `out` (a writable int16 or byte buffer with room for the result)
    writes into it and returns the number of samples written.
    """
    return _convert(ac_f32_to_s16, src, F32, out, S16)


def pcm16_to_float32(src, out=None):
    """Convert PCM16 (signed 16-bit little-endian) samples to float32.

    Each sample is multiplied by 1/32768, so the result lies in [-1, 1).
    `src` is any C-contiguous buffer of int16 (or raw bytes, even length)
    and is read without copying.  Returns a float32 `numpy.ndarray`; with
    `out` (a writable float32 or byte buffer with room for the result)
    writes into it and returns the number of samples written.
    """
    return _convert(ac_s16_to_f32, src, S16, out, F32)


# G.711: the kernels of the current path, set with it (_set_path).  A
# function pointer per direction, called through _convert like the two above.
cdef ac_g711_fn _s16_to_ulaw, _s16_to_alaw, _f32_to_ulaw, _f32_to_alaw
cdef ac_g711_fn _ulaw_to_s16, _alaw_to_s16, _ulaw_to_f32, _alaw_to_f32


cdef void _use_g711_path(int path) noexcept:
    global _s16_to_ulaw, _s16_to_alaw, _f32_to_ulaw, _f32_to_alaw
    global _ulaw_to_s16, _alaw_to_s16, _ulaw_to_f32, _alaw_to_f32
    _s16_to_ulaw = ac_g711_kernel(path, AC_S16_TO_ULAW)
    _s16_to_alaw = ac_g711_kernel(path, AC_S16_TO_ALAW)
    _f32_to_ulaw = ac_g711_kernel(path, AC_F32_TO_ULAW)
    _f32_to_alaw = ac_g711_kernel(path, AC_F32_TO_ALAW)
    _ulaw_to_s16 = ac_g711_kernel(path, AC_ULAW_TO_S16)
    _alaw_to_s16 = ac_g711_kernel(path, AC_ALAW_TO_S16)
    _ulaw_to_f32 = ac_g711_kernel(path, AC_ULAW_TO_F32)
    _alaw_to_f32 = ac_g711_kernel(path, AC_ALAW_TO_F32)


def pcm16_to_ulaw(src, out=None):
    """Encode PCM16 (signed 16-bit little-endian) samples as G.711 μ-law.

    Bit-exact with ``audioop.lin2ulaw(src, 2)``: one code byte per sample,
    silence is 0xFF.  `src` is any C-contiguous buffer of int16 (or raw
    bytes, even length) and is read without copying.  Returns `bytes`; with
    `out` (a writable byte buffer with room for the result) writes into it
    and returns the number of samples written.
    """
    return _convert(_s16_to_ulaw, src, S16, out, ULAW)


def pcm16_to_alaw(src, out=None):
    """Encode PCM16 samples as G.711 A-law: ``audioop.lin2alaw(src, 2)``
    bit for bit (silence is 0xD5).  Arguments and result as
    `pcm16_to_ulaw`."""
    return _convert(_s16_to_alaw, src, S16, out, ALAW)


def float32_to_ulaw(src, out=None):
    """Encode float32 samples as G.711 μ-law: the PCM policy to PCM16
    (`float32_to_pcm16`, NaN -> 0), then `pcm16_to_ulaw`, in one pass.
    `src` is any C-contiguous buffer of float32 (or raw bytes holding them);
    returns `bytes`, or with `out` the number of samples written."""
    return _convert(_f32_to_ulaw, src, F32, out, ULAW)


def float32_to_alaw(src, out=None):
    """Encode float32 samples as G.711 A-law: `float32_to_pcm16`, then
    `pcm16_to_alaw`, in one pass.  Arguments and result as
    `float32_to_ulaw`."""
    return _convert(_f32_to_alaw, src, F32, out, ALAW)


def ulaw_to_pcm16(src, out=None):
    """Decode G.711 μ-law codes to PCM16: ``audioop.ulaw2lin(src, 2)`` bit
    for bit.  `src` is any C-contiguous buffer of bytes (one code a sample;
    an int8 or uint8 array counts as bytes), read without copying.  Returns
    `bytes`; with `out` (a writable int16 or byte buffer with room for the
    result) writes into it and returns the number of samples written.
    """
    return _convert(_ulaw_to_s16, src, ULAW, out, S16)


def alaw_to_pcm16(src, out=None):
    """Decode G.711 A-law codes to PCM16: ``audioop.alaw2lin(src, 2)`` bit
    for bit.  Arguments and result as `ulaw_to_pcm16`."""
    return _convert(_alaw_to_s16, src, ALAW, out, S16)


def ulaw_to_float32(src, out=None):
    """Decode G.711 μ-law codes to float32: `ulaw_to_pcm16`, then
    `pcm16_to_float32` (x 1/32768), in one pass.  Returns a float32
    `numpy.ndarray`; with `out` (a writable float32 or byte buffer) writes
    into it and returns the number of samples written."""
    return _convert(_ulaw_to_f32, src, ULAW, out, F32)


def alaw_to_float32(src, out=None):
    """Decode G.711 A-law codes to float32: `alaw_to_pcm16`, then
    `pcm16_to_float32`, in one pass.  Arguments and result as
    `ulaw_to_float32`."""
    return _convert(_alaw_to_f32, src, ALAW, out, F32)


# Instruction-set paths, for tests and benchmarks: every path gives the same
# bits, so switching only changes speed.

def _paths():
    """Names of the paths this CPU can run, narrowest first."""
    return supported_paths()


def _get_path():
    """Name of the path in use."""
    return path_name(ac_convert_get_path())


def _set_path(str name):
    """Use the named path ("scalar", "sse2", "avx2", "avx512", "neon"), for
    the PCM and the G.711 kernels alike."""
    cdef int path = path_index(name)
    if ac_convert_set_path(path) != 0:
        raise ValueError(f"path {name!r} has no conversion kernel")
    _use_g711_path(path)


ac_convert_set_path(ac_best_path())
_use_g711_path(ac_best_path())


def _copy(src, str format="f32"):
    """A plain copy of `src` through the same argument handling as the
    kernels: the floor the benchmarks measure the kernels against."""
    cdef Py_buffer view
    get_samples(src, &view, F32 if format == "f32" else S16, False, "src")
    try:
        result = PyBytes_FromStringAndSize(NULL, view.len)
        memcpy(PyBytes_AS_STRING(result), view.buf, view.len)
        return result
    finally:
        PyBuffer_Release(&view)


def check_samples(src, str format, str what="src"):
    """Number of `format` ("f32"/"s16") samples in `src`, checked exactly as
    the kernels check their input: for pure-Python callers (wav)."""
    cdef Py_buffer view
    cdef Py_ssize_t n = get_samples(src, &view, F32 if format == "f32" else S16, False, what)
    PyBuffer_Release(&view)
    return n
