#include "jb_delay.h"

#include <stdlib.h>
#include <string.h>

#define DELAY_WINDOW_S 2.0 /* relative delay is measured against the fastest packet this recent */
#define DELAY_BIN_MS 1.0
#define DELAY_BINS 2048

int ac_delay_init(ac_delay *d, int rate, int frame)
{
    memset(d, 0, sizeof *d);
    d->rate = rate;
    d->frame = frame;
    d->nbins = DELAY_BINS;
    d->hist = calloc((size_t)d->nbins, sizeof(double));
    return d->hist ? 0 : -1;
}

void ac_delay_free(ac_delay *d)
{
    free(d->hist);
    d->hist = NULL;
}

void ac_delay_configure(ac_delay *d, double quantile, double forget)
{
    d->quantile = quantile;
    d->forget = forget;
}

int ac_delay_active(const ac_delay *d)
{
    return d->quantile > 0;
}

int64_t ac_delay_update(ac_delay *d, int64_t t, int64_t n, double arrival)
{
    double delay = arrival - (double)t / d->rate;
    /* Window of recent (arrival, delay) pairs in arrival order. */
    while (d->win_n &&
           (d->win_n == AC_DELAY_WINDOW ||
            d->win_arrival[(d->win_head - d->win_n + AC_DELAY_WINDOW) % AC_DELAY_WINDOW] <
                arrival - DELAY_WINDOW_S))
        d->win_n--;
    d->win_arrival[d->win_head] = arrival;
    d->win_delay[d->win_head] = delay;
    d->win_head = (d->win_head + 1) % AC_DELAY_WINDOW;
    d->win_n++;
    double dmin = delay;
    for (int i = 1; i <= d->win_n; i++) {
        double v = d->win_delay[(d->win_head - i + AC_DELAY_WINDOW) % AC_DELAY_WINDOW];
        dmin = v < dmin ? v : dmin;
    }
    int bin = (int)((delay - dmin) * 1000.0 / DELAY_BIN_MS);
    bin = bin < 0 ? 0 : (bin >= d->nbins ? d->nbins - 1 : bin);
    /* Forgetting ramps in, so the first packets are not outvoted by an
     * empty histogram. */
    d->packets_seen += 1;
    double f = d->forget < 1.0 - 1.0 / d->packets_seen ? d->forget : 1.0 - 1.0 / d->packets_seen;
    for (int b = 0; b < d->nbins; b++)
        d->hist[b] *= f;
    d->hist[bin] += 1.0 - f;
    double acc = 0, want = d->quantile;
    int q = 0;
    for (; q < d->nbins - 1; q++) {
        acc += d->hist[q];
        if (acc >= want)
            break;
    }
    double rel = (q + 1) * DELAY_BIN_MS / 1000.0;
    /* The frame being played, the relative delay to ride out, and half a
     * packet for the phase between arrivals and pops. */
    return d->frame + (int64_t)(rel * d->rate) + n / 2;
}
