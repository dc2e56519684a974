# Typed kernels of the streaming resampler: buffers in, buffers out, no
# defaults and no filter design (those live in resample.py and _filters.py).
# process() is called per 20 ms chunk, so it takes the raw buffer protocol
# (no memoryview objects) and allocates exactly one result object.
cimport cython
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t

from audiocore._buffers cimport ALAW, F32, S16, ULAW, format_size, get_samples
from audiocore._cresample cimport (
    AC_RESAMPLE_TAP_ALIGN,
    ac_resampler,
    ac_resampler_flush,
    ac_resampler_flush_frames,
    ac_resampler_free,
    ac_resampler_new,
    ac_resampler_path,
    ac_resampler_process,
    ac_resampler_process_frames,
    ac_resampler_reset,
)
from audiocore._simd cimport ac_best_path, path_index, path_name, supported_paths

import numpy as np

cdef object _empty = np.empty
cdef object _float32 = np.dtype(np.float32)

# Below this many multiply-adds a call is short enough that dropping the GIL
# would cost more than it frees (a mono 20 ms chunk at the usual rates stays
# below it).
cdef int64_t _NOGIL_WORK = 1 << 17
# Keeps frames * up, and output sizes in bytes, far from int64 overflow.
cdef int64_t _MAX_FRAMES = 1 << 40

cdef int _path = ac_best_path()

# The sample formats by name: resample.py's "f32", "s16", "ulaw", "alaw".
cdef dict _FORMAT_CODES = {"f32": F32, "s16": S16, "ulaw": ULAW, "alaw": ALAW}

# Filter rows must be a multiple of this many taps long: resample.py hands
# it to _filters.design, which pads the rows.
TAP_ALIGN = AC_RESAMPLE_TAP_ALIGN


def _get_path():
    """Name of the SIMD path new Resamplers use ("sse2", "avx2", ...)."""
    return path_name(_path)


def _paths():
    """Names of the paths this CPU can run, narrowest first."""
    return supported_paths()


def _set_path(str name):
    """Forces the SIMD path of Resamplers created from now on (for tests)."""
    global _path
    _path = path_index(name)


# A stream's state is a C pointer and its point is being live: no pickling
# support (and none of Cython's module-level pickle helpers to stub).
@cython.auto_pickle(False)
cdef class ResamplerCore:
    """Runs one stream through a polyphase table made by _filters.py."""

    cdef ac_resampler *_r
    cdef object _table  # the borrowed coefficient table, kept alive
    cdef int _in_format, _out_format, _taps
    cdef bint _busy, _finished
    cdef readonly int channels
    cdef readonly int delay

    def __cinit__(self, *args, **kwargs):
        self._r = NULL

    def __init__(
        self,
        const float[::1] table not None,
        int up,
        int down,
        int taps,
        int delay,
        int channels,
        str input,
        str output,
    ):
        if self._busy:
            raise RuntimeError("cannot re-initialise a Resampler while it is processing")
        if input not in _FORMAT_CODES or output not in _FORMAT_CODES:
            raise ValueError(
                f"expected formats 'f32', 's16', 'ulaw' or 'alaw', got {input!r} and {output!r}"
            )
        if up < 1 or taps < 1 or table.shape[0] != <Py_ssize_t>up * taps:
            raise ValueError(
                f"expected a table of {up} x {taps} coefficients, got {table.shape[0]}"
            )
        self._in_format = _FORMAT_CODES[input]
        self._out_format = _FORMAT_CODES[output]
        cdef ac_resampler *r = ac_resampler_new(
            &table[0], up, down, taps, delay, channels, self._in_format, self._out_format, _path
        )
        if r == NULL:
            raise MemoryError("could not allocate the resampler (or its table is inconsistent)")
        ac_resampler_free(self._r)
        self._r = r
        self._table = table
        self._taps = taps
        self.channels = channels
        self.delay = delay
        self._finished = False

    def __dealloc__(self):
        ac_resampler_free(self._r)

    @property
    def _path(self):
        """The SIMD path this stream runs on, fixed at construction."""
        return None if self._r == NULL else path_name(ac_resampler_path(self._r))

    cdef int _enter(self, str what) except -1:
        if self._r == NULL:
            raise RuntimeError(f"{what} on a Resampler whose __init__ did not run")
        if self._busy:
            raise RuntimeError(
                f"{what} while another thread is inside this Resampler; a Resampler belongs "
                "to one stream, so give each thread its own"
            )
        if self._finished:
            raise RuntimeError(
                f"{what} after flush(): the stream is finished; call reset() to start a new one"
            )
        self._busy = True
        return 0

    cdef object _new_output(self, int64_t frames, void **dst):
        cdef Py_buffer view
        cdef Py_ssize_t n = <Py_ssize_t>(frames * self.channels)
        if self._out_format != F32:  # PCM16 or G.711 codes
            data = PyBytes_FromStringAndSize(NULL, n * format_size(self._out_format))
            dst[0] = PyBytes_AS_STRING(data)
            return data
        array = _empty(n, _float32)
        # numpy never moves an array's data, so the pointer outlives the view.
        PyObject_GetBuffer(array, &view, PyBUF_WRITABLE)
        dst[0] = view.buf
        PyBuffer_Release(&view)
        return array

    def process(self, buf):
        """Consumes one chunk and returns every output frame it determines."""
        cdef Py_buffer view
        cdef void *dst = NULL
        cdef int64_t frames, n_out, written
        cdef Py_ssize_t samples
        self._enter("process()")
        try:
            samples = get_samples(buf, &view, self._in_format, False, "buf")
            try:
                if samples % self.channels:
                    raise ValueError(
                        f"buf: expected a whole number of {self.channels}-channel frames, "
                        f"got {samples} samples"
                    )
                frames = samples // self.channels
                if frames > _MAX_FRAMES:
                    raise ValueError(f"buf: expected at most {_MAX_FRAMES} frames, got {frames}")
                n_out = ac_resampler_process_frames(self._r, frames)
                if n_out > _MAX_FRAMES:
                    raise ValueError(
                        f"buf: {frames} frames would make {n_out} output frames in one call; "
                        f"expected at most {_MAX_FRAMES}"
                    )
                out = self._new_output(n_out, &dst)
                if <double>n_out * self._taps * self.channels > _NOGIL_WORK:
                    with nogil:
                        written = ac_resampler_process(self._r, view.buf, frames, dst)
                else:
                    written = ac_resampler_process(self._r, view.buf, frames, dst)
            finally:
                PyBuffer_Release(&view)
        finally:
            self._busy = False
        assert written == n_out
        return out

    def flush(self):
        """Returns the tail and finishes the stream."""
        cdef void *dst = NULL
        cdef int64_t n_out, written
        self._enter("flush()")
        try:
            n_out = ac_resampler_flush_frames(self._r)
            out = self._new_output(n_out, &dst)
            if <double>n_out * self._taps * self.channels > _NOGIL_WORK:
                with nogil:
                    written = ac_resampler_flush(self._r, dst)
            else:
                written = ac_resampler_flush(self._r, dst)
            self._finished = True
        finally:
            self._busy = False
        assert written == n_out
        return out

    def reset(self):
        """Forgets the stream: history, counters and the flushed state."""
        if self._r == NULL:
            raise RuntimeError("reset() on a Resampler whose __init__ did not run")
        if self._busy:
            raise RuntimeError(
                "reset() while another thread is inside this Resampler; a Resampler belongs "
                "to one stream, so give each thread its own"
            )
        ac_resampler_reset(self._r)
        self._finished = False
