/* The jitter core's delay estimator (TIMELINE): how much buffering the
 * arrivals call for.
 *
 * Each packet's delay relative to the fastest packet of the last 2 s goes
 * into a histogram of 1 ms bins that forgets at a fixed rate per packet
 * (NetEq-like); the target level is the chosen percentile of it, plus the
 * frame being played and half a packet. */
#ifndef AUDIOCORE_JB_DELAY_H
#define AUDIOCORE_JB_DELAY_H

#include <stdint.h>

#define AC_DELAY_WINDOW 512 /* packets remembered for the fastest-recent delay */

typedef struct ac_delay {
    int rate, frame;
    double quantile, forget;
    double *hist;
    int nbins;
    double packets_seen;
    double win_arrival[AC_DELAY_WINDOW], win_delay[AC_DELAY_WINDOW];
    int win_head, win_n;
} ac_delay;

/* 0, or -1 when out of memory.  Starts inactive (quantile 0). */
int ac_delay_init(ac_delay *d, int rate, int frame);
void ac_delay_free(ac_delay *d);

/* Follow the `quantile` (0 < q < 1; <= 0 turns the estimator off) of the
 * relative delay, forgetting by `forget` per packet. */
void ac_delay_configure(ac_delay *d, double quantile, double forget);
int ac_delay_active(const ac_delay *d);

/* A packet of `n` sample frames at unwrapped timestamp `t` arrived at
 * `arrival` seconds; returns the target level it implies, in sample frames
 * (before the caller's clamping). */
int64_t ac_delay_update(ac_delay *d, int64_t t, int64_t n, double arrival);

#endif
