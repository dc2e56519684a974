"""Filter design for the resampler (docs/audio.md): the quality presets, the
equiripple (Parks-McClellan) low-pass design, and the polyphase tables that
`resample.Resampler` runs, cached per ratio and quality.

Runs in numpy when a ratio and quality is first used; the tables are shared
by every stream that uses them.  Pure Python, no compiled module: the row
alignment the kernels need comes in as `design`'s argument, from
resample.py (tests/core/test_layers.py).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "MAX_COEFFICIENTS",
    "QUALITIES",
    "Design",
    "RatioRefused",
    "design",
    "prototype",
    "remez_lowpass",
]

# 4 MiB of float32 coefficients, over six times what any pair of the usual
# rates up to 96 kHz needs (11025 -> 32000 at "high": 163840).  Ratios of
# nearby awkward rates (48000 -> 47999) would need far more; they are
# refused rather than built slowly.
MAX_COEFFICIENTS = 1 << 20


class RatioRefused(ValueError):
    """A ratio refused with its reason (too many coefficients, or no
    design); any other error from a design is a bug, never reworded."""


class _NoDesign(Exception):
    """A stage (or the whole filter, after every margin) found no design
    meeting its specification: the caller names the ratio and quality."""


class _Spec(NamedTuple):
    """A quality preset, with frequencies relative to the lower Nyquist."""

    passband: float  # flat up to here
    stopband: float  # rejected from here up
    ripple_db: float  # promised: passband gain within +- this
    rejection_db: float  # promised: stopband at least this far down


# "voice": a tone at f > Nyquist aliases to 2 * Nyquist - f, so rejecting
# everything from 1.125 x Nyquist keeps [0, 0.875 x Nyquist] clean while the
# band in between, which only aliases onto itself, buys a short filter (the
# delay). "high": nothing at or above Nyquist survives.
QUALITIES = {
    "voice": _Spec(passband=0.875, stopband=1.125, ripple_db=0.1, rejection_db=96.0),
    "high": _Spec(passband=0.9, stopband=1.0, ripple_db=0.01, rejection_db=120.0),
}
# Filters are designed this far inside both promises (ripple and rejection
# in dB of the error): room for the float32 table, for the grid on which the
# design is measured, and for measurements of the running resampler.
_MARGIN_DB = 2.0


class Design(NamedTuple):
    table: np.ndarray  # up rows of `taps` float32, flattened, read-only
    taps: int
    delay: int  # output frames


# ---- filter design -----------------------------------------------------------
#
# Equiripple (Parks-McClellan) rather than a windowed sinc: for the same
# ripple and rejection it needs a third to 40% fewer taps, for every ratio
# (Kaiser's window spends its ripple evenly, so the 0.1 dB passband
# allowance buys it nothing), and fewer taps is both less delay and less
# work per sample.  The delay is what forced the change: with an 8 kHz side
# a Kaiser design took 3.25 ms at "voice" and 10.4 ms at "high", over the
# 3 ms and 10 ms budgets.  One method for every ratio, no Kaiser fallback
# (equiripple is the shorter everywhere): where a single exchange would be
# long, the same exchange designs the stages of an interpolated FIR (see
# `_lowpass`).

# The longest filter one Remez exchange designs here: up to this length the
# exchange below converges from its start for every band layout and ripple
# this module asks for (tests compare it with scipy.signal.remez).  Longer
# filters are built from shorter ones, whose stages aim at _STAGE taps:
# short enough that each step of the length search is cheap (design times
# are in benchmarks/README.md).
_REMEZ_MAX = 701
_STAGE = 241


def remez_lowpass(
    length: int, passband: float, stopband: float, stop_weight: float
) -> tuple[np.ndarray, float, float]:
    """Linear-phase (odd `length`, symmetric) low-pass with the least
    maximum of the weighted error: gain 1 on [0, passband], 0 on
    [stopband, 0.5] (cycles per sample), stopband error weighted by
    `stop_weight`.  Returns the taps and the largest passband and stopband
    errors measured on the design grid.

    Remez exchange on the amplitude A(w) = sum_k a_k cos(k w), k <= m =
    (length - 1) / 2, over a grid 16 times finer than the ripple (plus the
    two band edges): each iteration solves for a_k and the level on the
    reference (m + 2 points) directly, then one FFT gives A on the whole
    grid, O(m^3) with a small constant plus O(m log m) where the textbook
    evaluation on the grid costs 16 m^2.
    """
    m = (length - 1) // 2
    grid = 32 << max(3, (m - 1).bit_length())  # >= 32 points per ripple
    omega = np.pi * np.arange(grid + 1) / grid
    w_pass, w_stop = 2 * np.pi * passband, 2 * np.pi * stopband
    in_pass = np.flatnonzero(omega < w_pass)
    in_stop = np.flatnonzero(omega > w_stop)
    n_pass = len(in_pass) + 1  # grid points of the passband, its edge last
    w = np.concatenate((omega[in_pass], [w_pass, w_stop], omega[in_stop]))
    desired = np.zeros(len(w))
    desired[:n_pass] = 1.0
    weight = np.full(len(w), stop_weight)
    weight[:n_pass] = 1.0
    k = np.arange(m + 1)
    edges = np.cos(np.outer([w_pass, w_stop], k))
    # Start spread evenly over the bands, each band's edges included: with
    # the two points either side of the transition in it, the first
    # reference already sees the step it has to make.
    in_band = max(2, min(m, round((m + 2) * n_pass / len(w))))
    ref = np.concatenate(
        (
            np.linspace(0, n_pass - 1, in_band).round(),
            np.linspace(n_pass, len(w) - 1, m + 2 - in_band).round(),
        )
    ).astype(np.intp)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for _ in range(60):
        if len(ref) != m + 2:
            # A band with fewer grid points than the reference needs there
            # (a very short filter for its bands): the exchange cannot
            # keep m + 2 points, so this length is a miss.
            break
        # The m + 2 conditions A(w_i) + (-1)^i delta / W_i = D_i, solved in
        # the cosine basis, which stays well conditioned for any spread of
        # points (the barycentric form loses delta to cancellation when a
        # band holds few points).
        alternate = (-1.0) ** np.arange(m + 2)
        system = np.column_stack((np.cos(np.outer(w[ref], k)), alternate / weight[ref]))
        solution = np.linalg.solve(system, desired[ref])
        coef, delta = solution[:-1], float(solution[-1])
        on_grid = np.fft.rfft(coef, 2 * grid).real  # A(pi j / grid)
        amp = np.concatenate((on_grid[in_pass], edges @ coef, on_grid[in_stop]))
        err = weight * (desired - amp)
        worst = float(np.abs(err).max())
        if not np.isfinite(worst):
            break
        if best is None or worst < best[0]:
            best = (worst, coef, err)
        if worst - abs(delta) <= 1e-6 * worst:
            break  # equiripple: optimal on the grid
        ref = _exchange(ref, err, abs(delta), n_pass)
    if best is None:  # not even a first solution: counts as a miss
        return np.zeros(length), math.inf, math.inf
    _, coef, err = best
    half = coef[1:] / 2
    taps = np.concatenate((half[::-1], coef[:1], half))
    return taps, float(np.abs(err[:n_pass]).max()), float(np.abs(err[n_pass:]).max() / stop_weight)


def _exchange(ref: np.ndarray, err: np.ndarray, delta: float, n_pass: int) -> np.ndarray:
    """The next reference: as many points, alternating in sign, each with
    an error of at least `delta`, holding the largest error.

    Near the optimum, every local extremum is a candidate (Remez's multiple
    exchange: few iterations).  Far from it, at the start or when that
    fails, each point moves to the largest error of its sign between the
    midpoints to its neighbours, as in Parks and McClellan's program:
    taking every extremum there lets a band whose errors are still tiny
    lose all its points, and the exchange never recovers."""
    if np.abs(err).max() <= 3 * delta:
        found = []
        for lo, hi in ((0, n_pass), (n_pass, len(err))):
            e = err[lo:hi]
            rises = np.concatenate(([True], e[1:] >= e[:-1]))
            falls = np.concatenate((e[:-1] >= e[1:], [True]))
            sinks = np.concatenate(([True], e[1:] <= e[:-1])) & np.concatenate(
                (e[:-1] <= e[1:], [True])
            )
            found.append(lo + np.flatnonzero((rises & falls & (e > 0)) | (sinks & (e < 0))))
        cand = np.concatenate(found)
        cand = np.union1d(cand[np.abs(err[cand]) >= delta], ref)
        # Runs of one sign keep their largest; then the smallest go, in
        # pairs inside the run (which keeps the alternation), one at an end.
        starts = np.flatnonzero(np.concatenate(([True], np.diff(err[cand] < 0))))
        size = np.maximum.reduceat(np.abs(err[cand]), starts)
        run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(cand))))
        at_max = np.flatnonzero(np.abs(err[cand]) == size[run])
        keep = cand[at_max[np.unique(run[at_max], return_index=True)[1]]]
        while len(keep) > len(ref):
            k = int(np.argmin(size))
            if len(keep) - len(ref) >= 2 and 0 < k < len(keep) - 1:
                drop = [k, k - 1 if size[k - 1] < size[k + 1] else k + 1]
            else:
                drop = [0 if size[0] < size[-1] else len(keep) - 1]
            keep, size = np.delete(keep, drop), np.delete(size, drop)
        if len(keep) == len(ref):
            return keep
    bounds = np.concatenate(([0], (ref[:-1] + ref[1:] + 1) // 2, [len(err)]))
    window = np.repeat(np.arange(len(ref)), np.diff(bounds))
    signed = np.where(err[ref] < 0, -1.0, 1.0)[window] * err
    at_peak = np.flatnonzero(signed == np.maximum.reduceat(signed, bounds[:-1])[window])
    ref = at_peak[np.unique(window[at_peak], return_index=True)[1]]
    # The largest error joins, replacing its neighbour of the same sign, or
    # shifting the whole reference when it lies beyond an end.
    j = int(np.argmax(np.abs(err)))
    k = int(np.searchsorted(ref, j))
    if k < len(ref) and ref[k] == j:
        return ref
    negative = err[j] < 0
    if k == len(ref):
        return np.append(ref[:-1] if (err[ref[-1]] < 0) == negative else ref[1:], j)
    if k == 0:
        return np.insert(ref[1:] if (err[ref[0]] < 0) == negative else ref[:-1], 0, j)
    ref[k - 1 if (err[ref[k - 1]] < 0) == negative else k] = j
    return ref


def _length_estimate(width: float, ripple: float, rejection: float) -> float:
    """Taps of an equiripple low-pass with this transition width (cycles
    per sample) and ripples, by Herrmann, Rabiner and Chan (1973)."""
    lp, ls = math.log10(ripple), math.log10(rejection)
    d = (0.005309 * lp * lp + 0.07114 * lp - 0.4761) * ls - (
        0.00266 * lp * lp + 0.5941 * lp + 0.4278
    )
    return d / width - (11.01217 + 0.51244 * (lp - ls)) * width + 1


def _shortest(
    passband: float, stopband: float, ripple: float, rejection: float
) -> np.ndarray | None:
    """The shortest Remez design whose measured errors meet `ripple` and
    `rejection`: from the estimate, up (or down) in doubling steps until
    the answer changes, then by bisection.  Longer never does worse (the
    shorter optimum padded with zeros is a candidate), so the search is
    over a monotone answer.  None if it takes more than _REMEZ_MAX taps."""
    weight = ripple / rejection
    results: dict[int, np.ndarray | None] = {}

    def meets(half: int) -> bool:
        if half not in results:
            taps, err_pass, err_stop = remez_lowpass(2 * half + 1, passband, stopband, weight)
            results[half] = taps if err_pass <= ripple and err_stop <= rejection else None
        return results[half] is not None

    estimate = _length_estimate(stopband - passband, ripple, rejection)
    good: int | None = None
    bad: int | None = None
    half = max(1, round((estimate - 1) / 2))
    step = max(1, half // 50)
    if meets(half):
        good = half
        while bad is None and good > 1:
            probe = max(1, good - step)
            good, bad = (probe, None) if meets(probe) else (good, probe)
            step *= 2
    else:
        bad = half
        while good is None:
            probe = min(bad + step, (_REMEZ_MAX - 1) // 2)
            if probe == bad:
                return None
            if meets(probe):
                good = probe
            else:
                bad = probe
            step *= 2
    while bad is not None and good - bad > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if meets(mid) else (good, mid)
    return results[good]


def _lowpass(
    passband: float, stopband: float, ripple: float, rejection: float, longest: int = _REMEZ_MAX
) -> np.ndarray:
    """A linear-phase low-pass (odd length; gain 1 +- `ripple` up to
    `passband`, at most `rejection` from `stopband` to 0.5) of near-minimal
    length.

    Up to `longest` taps, one Remez design.  Longer ones, the narrow
    low-passes at the prototype rate up x in_rate (44.1k -> 16k needs some
    15000 taps at "voice", 50000 at "high"), are interpolated FIRs (Neuvo,
    Dong and Mitra, 1984): g(z^K) i(z), where g is the same response
    designed K times wider, so K times shorter, and i, designed by this
    same function, removes g's images at multiples of 1/K.  Each stage is
    equiripple; the product is the direct design's length plus i's, 1-3%
    more, and is designed in a small fraction of the time one exchange over
    thousands of taps would take (which, from any start we know, does not
    converge either)."""
    estimate = _length_estimate(stopband - passband, ripple, rejection)
    if estimate <= 0.95 * longest:
        direct = _shortest(passband, stopband, ripple, rejection)
        if direct is not None:
            return direct
    # The smallest K that brings g to _STAGE taps keeps i shortest.  g, the
    # long stage, takes most of the ripple; both reject fully, since each
    # passes (near unity) the other's stopband.  i rejects 20 dB more than
    # asked: it is short, so that costs a few taps in thousands, and it
    # governs the far stopband, where the many images that a rational ratio
    # folds into its output lie: at 44.1k -> 16k their sum, which is what a
    # 1 kHz tone's SNR measures, drops from -95 dB to -112 dB.
    stretch = math.ceil(estimate / _STAGE)
    inner = _shortest(stretch * passband, stretch * stopband, 0.85 * ripple, rejection)
    images = _lowpass(passband, 1 / stretch - stopband, 0.14 * ripple, rejection / 10, _STAGE)
    if inner is None:
        raise _NoDesign
    # inner(z^K) * images(z), one shifted copy of `images` per tap of
    # `inner`: a few hundred slices, where np.convolve would also multiply
    # every zero of the stretched `inner`.
    h = np.zeros(stretch * (len(inner) - 1) + len(images))
    for j, tap in enumerate(inner):
        h[j * stretch : j * stretch + len(images)] += tap * images
    return h


def _measure(h: np.ndarray, passband: float, stopband: float) -> tuple[float, float]:
    """Largest passband deviation from 1 and largest stopband gain of `h`
    as the table stores it (float32), on a grid 8 times finer than its
    ripple."""
    response = np.abs(np.fft.rfft(h.astype(np.float32), 1 << (8 * len(h)).bit_length()))
    f = np.linspace(0, 0.5, len(response))
    return (
        float(np.abs(response[f <= passband] - 1).max()),
        float(response[f >= stopband].max()),
    )


def _make_prototype(up: int, down: int, quality: str) -> tuple[np.ndarray, int]:
    spec = QUALITIES[quality]
    nyquist = 0.5 / max(up, down)
    passband, stopband = spec.passband * nyquist, spec.stopband * nyquist
    ripple = 1 - 10 ** (-spec.ripple_db / 20)  # the tighter side of +-dB
    rejection = 10 ** (-spec.rejection_db / 20)
    if up > 1 and down > 1:
        # A tone's images (at multiples of in_rate, either side) fold at
        # multiples of out_rate; for a ratio with both terms above 1 the
        # folds put two of them on each output frequency, so the worst
        # alias is the sum of two stopband values: 6 dB more to reject.
        # (An equiripple stopband is flat; a windowed sinc's decays, and
        # its far half hid this.)
        rejection /= 2
    # Designed inside the promises by _MARGIN_DB, and measured: a miss (the
    # stages' errors compound; i's transition band is unconstrained) is
    # designed again with a margin one dB wider.
    accept = 10 ** (-_MARGIN_DB / 40)  # half the design margin, in dB
    # Some awkward ratios find no design: a stage's exchange can miss its
    # length limit, and whether it does depends on rounding that differs
    # with the BLAS thread count (44100 -> 95800 at "high" designs with one
    # thread and fails with two).  That is the caller's ratio, not a bug in
    # their program: a ValueError like the size limit's, never an
    # ArithmeticError from inside.
    try:
        for extra_db in range(6):
            margin = 10 ** (-(_MARGIN_DB + extra_db) / 20)
            h = _lowpass(passband, stopband, ripple * margin, rejection * margin)
            err_pass, err_stop = _measure(h, passband, stopband)
            if err_pass <= ripple * accept and err_stop <= rejection * accept:
                break
        else:  # pragma: no cover - not reached for any ratio the tests try
            raise _NoDesign
    except _NoDesign:
        raise RatioRefused(
            f"the ratio {up}/{down} cannot be designed at quality {quality!r}: no filter "
            f"meets its specification; use rates with a simpler ratio"
            + (' or quality "voice"' if quality != "voice" else "")
        ) from None
    # Exactly symmetric (the stages' product is, up to the order of its
    # sums), centred on a whole output frame, so that `delay` is exact.
    h = 0.5 * (h + h[::-1])
    half = (len(h) - 1) // 2
    centre = -(-half // down) * down
    h = np.pad(h * up, centre - half)
    h.flags.writeable = False
    return h, centre


# The last few prototypes (read-only), for the tables and for `prototype`.
_prototype = functools.lru_cache(maxsize=8)(_make_prototype)


def prototype(up: int, down: int, quality: str) -> tuple[np.ndarray, int]:
    """The low-pass prototype (float64, at up x in_rate, passband gain `up`)
    and its centre index, a multiple of `down`: equiripple, as `_lowpass`
    designs it."""
    h, centre = _prototype(up, down, quality)
    return h.copy(), centre


def _estimated_centre(up: int, down: int, quality: str) -> int:
    """The prototype's centre as the length estimate predicts it (the
    design comes out a little longer and is checked again), to refuse a
    hopeless ratio before spending time on it."""
    spec = QUALITIES[quality]
    width = (spec.stopband - spec.passband) * 0.5 / max(up, down)
    length = _length_estimate(
        width, 1 - 10 ** (-spec.ripple_db / 20), 10 ** (-spec.rejection_db / 20)
    )
    return math.ceil(length / 2 / down) * down


def _row_length(up: int, centre: int, tap_align: int) -> tuple[int, int]:
    """Taps per phase, and that rounded up to the vector alignment."""
    per_phase = -(-(2 * centre + 1) // up)
    return per_phase, -(-per_phase // tap_align) * tap_align


def _make_design(up: int, down: int, quality: str, tap_align: int) -> Design:
    """The polyphase table for `up`/`down` at `quality`, each row padded to
    a multiple of `tap_align` taps (the kernels' TAP_ALIGN)."""
    if up == down == 1:  # same rate: the C side passes samples straight through
        table = np.zeros(tap_align, np.float32)
        table[-1] = 1.0
        table.flags.writeable = False
        return Design(table, tap_align, 0)

    def check_size(centre: int) -> None:
        coefficients = up * _row_length(up, centre, tap_align)[1]
        if coefficients > MAX_COEFFICIENTS:
            raise RatioRefused(
                f"the ratio {up}/{down} needs {coefficients} filter coefficients at quality "
                f"{quality!r}; expected at most {MAX_COEFFICIENTS}: use rates with a simpler ratio"
            )

    check_size(_estimated_centre(up, down, quality))  # before any time is spent
    h, centre = _prototype(up, down, quality)
    check_size(centre)
    per_phase, taps = _row_length(up, centre, tap_align)
    # Row p holds h[p], h[p + up], ... newest-last, so it lines up with the
    # `taps` most recent input frames; the padding goes in front (oldest).
    phases = np.zeros(per_phase * up)
    phases[: len(h)] = h
    rows = phases.reshape(per_phase, up).T[:, ::-1]
    table = np.zeros((up, taps), np.float32)
    table[:, taps - per_phase :] = rows
    table = table.reshape(-1)
    table.flags.writeable = False
    return Design(table, taps, centre // down)


# One table per (up, down, quality, alignment), shared by every stream that uses it.
design = functools.lru_cache(maxsize=64)(_make_design)
