# C declarations of the resampling kernels (audiocore/src/resample.h).
from libc.stdint cimport int64_t


cdef extern from "resample.h" nogil:
    int AC_RESAMPLE_TAP_ALIGN

    ctypedef struct ac_resampler:
        pass

    ac_resampler *ac_resampler_new(const float *coefs, int up, int down, int taps, int delay,
                                   int channels, int in_format, int out_format, int path)
    void ac_resampler_free(ac_resampler *r)
    void ac_resampler_reset(ac_resampler *r)
    int64_t ac_resampler_process_frames(const ac_resampler *r, int64_t in_frames)
    int64_t ac_resampler_process(ac_resampler *r, const void *inp, int64_t in_frames, void *out)
    int64_t ac_resampler_flush_frames(const ac_resampler *r)
    int64_t ac_resampler_flush(ac_resampler *r, void *out)
    int ac_resampler_path(const ac_resampler *r)
