# C declarations of the echo canceller (audiocore/src/aec.h, fft.h).
from libc.stdint cimport int64_t


cdef extern from "aec.h" nogil:
    ctypedef struct ac_aec:
        pass

    ac_aec *ac_aec_new(int rate, int block, int partitions, int max_lag, int in_format,
                       int out_format, int suppress, int path)
    void ac_aec_free(ac_aec *a)
    void ac_aec_reset(ac_aec *a)
    void ac_aec_process(ac_aec *a, const void *far, const void *near, int64_t n, void *out)
    int64_t ac_aec_first_nonfinite(const void *buf, int64_t n)
    int ac_aec_latency(const ac_aec *a)
    int64_t ac_aec_echo_delay(const ac_aec *a)
    int ac_aec_echo_found(const ac_aec *a)
    int ac_aec_path(const ac_aec *a)


cdef extern from "fft.h" nogil:
    ctypedef struct ac_rfft:
        pass

    ac_rfft *ac_rfft_new(int n)
    void ac_rfft_free(ac_rfft *f)
    void ac_rfft_forward(ac_rfft *f, const float *x, float *re, float *im)
    void ac_rfft_inverse(ac_rfft *f, const float *re, const float *im, float *x)
