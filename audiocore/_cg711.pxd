# C declarations of the G.711 kernels (audiocore/src/g711.h).

cdef extern from "g711.h" nogil:
    ctypedef void (*ac_g711_fn)(const void *src, void *dst, Py_ssize_t n) noexcept nogil
    enum:
        AC_S16_TO_ULAW
        AC_S16_TO_ALAW
        AC_F32_TO_ULAW
        AC_F32_TO_ALAW
        AC_ULAW_TO_S16
        AC_ALAW_TO_S16
        AC_ULAW_TO_F32
        AC_ALAW_TO_F32
    ac_g711_fn ac_g711_kernel(int path, int op)
