"""A buffer whose export runs a Python callback first: a test can hold a
kernel inside its call (after it has claimed the object, before it reads)
for exactly as long as it needs, with no timing involved.

Python 3.12 has ``__buffer__`` for this; the type built here through the C
API's PyType_FromSpec works on every version the package supports.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np


class _Slot(ctypes.Structure):
    _fields_ = [("slot", ctypes.c_int), ("pfunc", ctypes.c_void_p)]


class _Spec(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("basicsize", ctypes.c_int),
        ("itemsize", ctypes.c_int),
        ("flags", ctypes.c_uint),
        ("slots", ctypes.POINTER(_Slot)),
    ]


_Py_bf_getbuffer = 1  # typeslots.h
_Py_TPFLAGS_DEFAULT = 1 << 18  # Py_TPFLAGS_HAVE_VERSION_TAG
_GETBUFFER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_int)

_api = ctypes.pythonapi
_api.PyBuffer_FillInfo.argtypes = [
    ctypes.c_void_p,
    ctypes.py_object,
    ctypes.c_void_p,
    ctypes.c_ssize_t,
    ctypes.c_int,
    ctypes.c_int,
]
_api.PyBuffer_FillInfo.restype = ctypes.c_int
_api.PyType_FromSpec.argtypes = [ctypes.POINTER(_Spec)]
_api.PyType_FromSpec.restype = ctypes.py_object


def gated_buffer(data: np.ndarray, before_export: Callable[[], None]) -> object:
    """An object exporting `data`'s bytes (read-only, format "B") that calls
    `before_export()` each time a consumer asks for its buffer.  The
    callback must not raise: it runs inside the consumer's C call."""
    data = np.ascontiguousarray(data)

    def getbuffer(exporter: object, view: int, flags: int) -> int:
        before_export()
        return int(_api.PyBuffer_FillInfo(view, exporter, data.ctypes.data, data.nbytes, 1, flags))

    callback = _GETBUFFER(getbuffer)
    slots = (_Slot * 2)((_Py_bf_getbuffer, ctypes.cast(callback, ctypes.c_void_p)), (0, None))
    spec = _Spec(b"gated_buffer.GatedBuffer", object.__basicsize__, 0, _Py_TPFLAGS_DEFAULT, slots)
    exporter_type = _api.PyType_FromSpec(ctypes.byref(spec))
    # The C type points at these: they live as long as the type does.
    exporter_type._keep_alive = (callback, slots, spec, data)
    return exporter_type()
