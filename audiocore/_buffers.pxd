# Zero-copy access to sample buffers, shared by every kernel module.
#
# A buffer is taken as it is (bytes, bytearray, memoryview, numpy array,
# array.array, ...): typed buffers must hold the expected element type, raw
# byte buffers are read as packed little-endian samples.  This runs on every
# call, so it uses the raw buffer protocol instead of typed memoryviews,
# whose setup per argument costs more than converting a 20 ms chunk
# (benchmarks/README.md has the per-call figures).

from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_FORMAT,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)

cdef extern from "pcm.h" nogil:
    # The C kernels' format codes, under the short names the modules use.
    enum:
        F32 "AC_FORMAT_F32"
        S16 "AC_FORMAT_S16"
        ULAW "AC_FORMAT_ULAW"
        ALAW "AC_FORMAT_ALAW"
    # Channels per interleaved frame, at most (audiocore.MAX_CHANNELS).
    enum:
        AC_MAX_CHANNELS


cdef inline str format_name(int fmt):
    if fmt == ULAW or fmt == ALAW:
        return "μ-law" if fmt == ULAW else "A-law"
    return "float32" if fmt == F32 else "int16"


cdef inline Py_ssize_t format_size(int fmt) noexcept nogil:
    if fmt == ULAW or fmt == ALAW:
        return 1
    return 4 if fmt == F32 else 2


cdef inline bint _is_byte_format(const char *f) noexcept nogil:
    return f == NULL or (f[1] == 0 and (f[0] == b'B' or f[0] == b'b' or f[0] == b'c'))


cdef inline bint _is_native_format(const char *f, char code) noexcept nogil:
    # Native or explicitly little-endian single items: "f", "<f", "=f", "@f".
    if f[0] == code and f[1] == 0:
        return True
    return (f[0] == b'<' or f[0] == b'=' or f[0] == b'@') and f[1] == code and f[2] == 0


cdef inline str describe_format(Py_buffer *view):
    # Error path only: names what a typed buffer holds, for the message.
    fmt = (<bytes>view.format).decode("ascii", "replace")
    big = fmt[:1] in (">", "!")
    code = fmt.lstrip("<>!=@")
    kind = {"f": "float", "d": "float", "e": "float", "?": "bool"}.get(
        code, "uint" if code.isupper() else "int"
    )
    name = f"{kind}{8 * view.itemsize}" if len(code) == 1 else f"items of format {fmt!r}"
    return f"big-endian {name}" if big else name


cdef inline object _buffer_error(object obj, BaseException exc, str what, int fmt, bint writable):
    if isinstance(exc, TypeError):
        return TypeError(
            f"{what}: expected a buffer of {format_name(fmt)} samples, got {type(obj).__name__}"
        )
    if writable and memoryview(obj).readonly:
        return TypeError(f"{what}: expected a writable buffer, got read-only {type(obj).__name__}")
    return ValueError(f"{what}: expected a C-contiguous buffer ({exc})")


cdef inline Py_ssize_t get_samples(
    object obj, Py_buffer *view, int fmt, bint writable, str what
) except -1:
    """Fill `view` with `obj`'s memory and return its length in samples.

    `what` names the argument in messages ("src", "out").  On success the
    caller owns the view and must release it; on error nothing is held.
    """
    cdef int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS
    if writable:
        flags |= PyBUF_WRITABLE
    try:
        PyObject_GetBuffer(obj, view, flags)
    except (TypeError, BufferError, ValueError) as exc:
        raise _buffer_error(obj, exc, what, fmt, writable) from None

    cdef Py_ssize_t size = format_size(fmt)
    if _is_byte_format(view.format):
        if view.len % size:
            PyBuffer_Release(view)
            raise ValueError(
                f"{what}: {format_name(fmt)} data must be a whole number of {size}-byte "
                f"samples, got {view.len} bytes"
            )
        return view.len // size
    # G.711 codes are bytes: any other typed buffer is the wrong thing.
    if (
        fmt == ULAW
        or fmt == ALAW
        or view.itemsize != size
        or not _is_native_format(view.format, b'f' if fmt == F32 else b'h')
    ):
        got = describe_format(view)
        PyBuffer_Release(view)
        raise TypeError(f"{what}: expected {format_name(fmt)} samples, got {got}")
    return view.len // size
