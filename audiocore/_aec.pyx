# Typed kernels of the echo canceller: buffers in, buffers out, no defaults
# and no choice of block or filter length (those live in aec.py).
# process() is called per 10-20 ms chunk, so it takes the raw buffer
# protocol and allocates exactly one result object.
cimport cython
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t

from audiocore._buffers cimport F32, S16, get_samples
from audiocore._caec cimport (
    ac_aec,
    ac_aec_echo_delay,
    ac_aec_echo_found,
    ac_aec_first_nonfinite,
    ac_aec_free,
    ac_aec_latency,
    ac_aec_new,
    ac_aec_path,
    ac_aec_process,
    ac_aec_reset,
    ac_rfft,
    ac_rfft_forward,
    ac_rfft_free,
    ac_rfft_inverse,
    ac_rfft_new,
)
from audiocore._simd cimport ac_best_path, path_index, path_name, supported_paths

import numpy as np

cdef object _empty = np.empty
cdef object _float32 = np.dtype(np.float32)

# Below this many samples a call is short enough that dropping the GIL would
# cost more than it frees (a 20 ms chunk at 48 kHz is 960).
cdef int64_t _NOGIL_SAMPLES = 4096
# Keeps sizes in bytes far from overflow.
cdef int64_t _MAX_SAMPLES = 1 << 40

cdef int _path = ac_best_path()


def _get_path():
    """Name of the SIMD path new echo cancellers use ("sse2", "avx2", ...)."""
    return path_name(_path)


def _paths():
    """Names of the paths this CPU can run, narrowest first."""
    return supported_paths()


def _set_path(str name):
    """Forces the SIMD path of echo cancellers created from now on (for tests)."""
    global _path
    _path = path_index(name)


def _rfft(const float[::1] x not None):
    """The real FFT of the C core, for tests: len(x) samples (a power of two
    from 4 to 65536) -> len(x) // 2 + 1 complex bins, unscaled."""
    cdef Py_ssize_t n = x.shape[0]
    cdef ac_rfft *f = ac_rfft_new(<int>n) if 4 <= n <= 65536 else NULL
    if f == NULL:
        raise ValueError(f"expected a power of two from 4 to 65536 samples, got {n}")
    re = np.zeros(n // 2 + 1, np.float32)
    im = np.zeros(n // 2 + 1, np.float32)
    cdef float[::1] r = re, i = im
    ac_rfft_forward(f, &x[0], &r[0], &i[0])
    ac_rfft_free(f)
    return re + 1j * im.astype(np.complex64)


def _irfft(const float[::1] re not None, const float[::1] im not None):
    """The inverse of `_rfft`, for tests: n // 2 + 1 bins -> n samples."""
    cdef Py_ssize_t bins = re.shape[0], n = 2 * (bins - 1)
    if im.shape[0] != bins:
        raise ValueError(f"expected {bins} imaginary parts, got {im.shape[0]}")
    cdef ac_rfft *f = ac_rfft_new(<int>n) if 4 <= n <= 65536 else NULL
    if f == NULL:
        raise ValueError(f"expected 2**k + 1 bins for k from 1 to 15, got {bins}")
    x = np.zeros(n, np.float32)
    cdef float[::1] out = x
    ac_rfft_inverse(f, &re[0], &im[0], &out[0])
    ac_rfft_free(f)
    return x


cdef int _check_finite(Py_buffer *view, int64_t n, str what) except -1:
    # A NaN or infinity would poison the adaptive filter for good: refused
    # before any of the call is consumed.
    cdef int64_t bad = ac_aec_first_nonfinite(view.buf, n)
    if bad >= 0:
        value = (<const float *>view.buf)[bad]
        raise ValueError(f"{what}: expected finite samples, got {value!r} at sample {bad}")
    return 0


# A stream's state is a C pointer and its point is being live: no pickling.
@cython.auto_pickle(False)
cdef class EchoCancellerCore:
    """Runs one far/near stream pair through the C echo canceller."""

    cdef ac_aec *_a
    cdef int _in_format, _out_format
    cdef bint _busy
    cdef readonly int rate
    cdef readonly int block
    cdef readonly int latency

    def __cinit__(self, *args, **kwargs):
        self._a = NULL

    def __init__(
        self,
        int rate,
        int block,
        int partitions,
        int max_lag,
        str input,
        str output,
        bint suppress,
    ):
        if self._busy:
            raise RuntimeError("cannot re-initialise an EchoCanceller while it is processing")
        if input not in ("f32", "s16") or output not in ("f32", "s16"):
            raise ValueError(f"expected formats 'f32' or 's16', got {input!r} and {output!r}")
        self._in_format = S16 if input == "s16" else F32
        self._out_format = S16 if output == "s16" else F32
        cdef ac_aec *a = ac_aec_new(
            rate, block, partitions, max_lag, self._in_format, self._out_format, suppress, _path
        )
        if a == NULL:
            raise MemoryError("could not allocate the echo canceller (or its sizes are invalid)")
        ac_aec_free(self._a)
        self._a = a
        self.rate = rate
        self.block = block
        self.latency = ac_aec_latency(a)

    def __dealloc__(self):
        ac_aec_free(self._a)

    @property
    def _path(self):
        """The SIMD path this stream runs on, fixed at construction."""
        return None if self._a == NULL else path_name(ac_aec_path(self._a))

    @property
    def echo_delay(self):
        """The echo's bulk delay found so far in samples, or None."""
        if self._a == NULL:
            return None
        cdef int64_t d = ac_aec_echo_delay(self._a)
        return None if d < 0 else d

    @property
    def echo_found(self):
        """Whether it has found an echo to cancel; until then its output is
        the near end unchanged."""
        return self._a != NULL and ac_aec_echo_found(self._a) != 0

    cdef int _enter(self, str what) except -1:
        if self._a == NULL:
            raise RuntimeError(f"{what} on an EchoCanceller whose __init__ did not run")
        if self._busy:
            raise RuntimeError(
                f"{what} while another thread is inside this EchoCanceller; an EchoCanceller "
                "belongs to one stream, so give each thread its own"
            )
        self._busy = True
        return 0

    cdef object _new_output(self, int64_t n, void **dst):
        cdef Py_buffer view
        if self._out_format == S16:
            data = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>(n * 2))
            dst[0] = PyBytes_AS_STRING(data)
            return data
        array = _empty(<Py_ssize_t>n, _float32)
        # numpy never moves an array's data, so the pointer outlives the view.
        PyObject_GetBuffer(array, &view, PyBUF_WRITABLE)
        dst[0] = view.buf
        PyBuffer_Release(&view)
        return array

    def process(self, far, near):
        """Consumes equal lengths of far end and near end; returns as many
        samples of cleaned near end."""
        cdef Py_buffer far_view, near_view
        cdef void *dst = NULL
        cdef Py_ssize_t n_far, n_near
        self._enter("process()")
        try:
            n_far = get_samples(far, &far_view, self._in_format, False, "far")
            try:
                n_near = get_samples(near, &near_view, self._in_format, False, "near")
                try:
                    if n_far != n_near:
                        raise ValueError(
                            f"expected as many near-end samples as far-end samples, got "
                            f"{n_near} near and {n_far} far"
                        )
                    if n_far > _MAX_SAMPLES:
                        raise ValueError(
                            f"far, near: expected at most {_MAX_SAMPLES} samples, got {n_far}"
                        )
                    if self._in_format == F32:
                        _check_finite(&far_view, n_far, "far")
                        _check_finite(&near_view, n_near, "near")
                    out = self._new_output(n_far, &dst)
                    if n_far > _NOGIL_SAMPLES:
                        with nogil:
                            ac_aec_process(self._a, far_view.buf, near_view.buf, n_far, dst)
                    else:
                        ac_aec_process(self._a, far_view.buf, near_view.buf, n_far, dst)
                finally:
                    PyBuffer_Release(&near_view)
            finally:
                PyBuffer_Release(&far_view)
        finally:
            self._busy = False
        return out

    def reset(self):
        """Forgets the stream: filter, delay estimate and buffers."""
        if self._a == NULL:
            raise RuntimeError("reset() on an EchoCanceller whose __init__ did not run")
        if self._busy:
            raise RuntimeError(
                "reset() while another thread is inside this EchoCanceller; an EchoCanceller "
                "belongs to one stream, so give each thread its own"
            )
        ac_aec_reset(self._a)
