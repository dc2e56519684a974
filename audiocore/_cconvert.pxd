# C declarations of the conversion kernels (audiocore/src/convert.h).

cdef extern from "convert.h" nogil:
    int ac_convert_set_path(int path)
    int ac_convert_get_path()
    void ac_f32_to_s16(const void *src, void *dst, Py_ssize_t n)
    void ac_s16_to_f32(const void *src, void *dst, Py_ssize_t n)
