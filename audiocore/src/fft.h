/* A small real FFT of power-of-two sizes, for the echo canceller's blocks.
 *
 * A real transform of size n is a complex radix-2 transform of size n/2 over
 * the even and odd samples, untangled by one twiddle pass.  Spectra are
 * split: bins 0 .. n/2 as separate real and imaginary arrays (n/2 + 1 of
 * each), the layout the filter kernels want.  No scaling forward; the
 * inverse divides by n, so inverse(forward(x)) == x up to rounding. */
#ifndef AUDIOCORE_FFT_H
#define AUDIOCORE_FFT_H

typedef struct ac_rfft ac_rfft;

/* A plan for real transforms of `n` samples, 4 <= n <= 65536, a power of
 * two; NULL when out of memory or for any other n. */
ac_rfft *ac_rfft_new(int n);
void ac_rfft_free(ac_rfft *f);

/* n samples of `x` -> n/2 + 1 bins in `re`, `im` (imaginary parts of bins 0
 * and n/2 are 0).  `x` is not modified. */
void ac_rfft_forward(ac_rfft *f, const float *x, float *re, float *im);

/* n/2 + 1 bins -> n samples (the imaginary parts of bins 0 and n/2 are
 * ignored: a real signal has none). */
void ac_rfft_inverse(ac_rfft *f, const float *re, const float *im, float *x);

#endif
