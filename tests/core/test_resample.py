"""Resampler output against references: the naive polyphase definition,
scipy's resample_poly with the same filter, analytic sines, the PCM policy,
and every SIMD path against the others."""

import math

import numpy as np
import pytest
from resample_reference import (
    expected_frames,
    fit_tone,
    noise,
    pcm16_policy,
    ratio,
    resample_naive,
    spur_db,
    steady,
    tone,
)

from audiocore import _resample
from audiocore._filters import QUALITIES, design, prototype, remez_lowpass
from audiocore._resample import TAP_ALIGN
from audiocore.resample import Resampler, resample

RATES = [8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000]
PAIRS = [(a, b) for a in RATES for b in RATES if a != b]
BENCH_PAIRS = [(48000, 16000), (48000, 24000), (24000, 48000), (44100, 16000), (16000, 44100)]
# The phone rate both ways against the models' rates (the G.711 paths).
PHONE_PAIRS = [(8000, 16000), (16000, 8000), (8000, 24000), (24000, 8000)]
UNIT_ROUNDOFF = 2.0**-24  # float32


def rounding_bound(in_rate, out_rate, quality, peak):
    """How far a float32 dot product over a table row may stray from the
    exact float64 one: (taps + 2) unit roundoffs (summation, coefficient and
    result rounding) times the largest sum of |coefficients| of any phase."""
    up, down = ratio(in_rate, out_rate)
    designed = design(up, down, quality, TAP_ALIGN)
    rows = np.abs(designed.table.reshape(up, designed.taps).astype(np.float64)).sum(axis=1)
    return (designed.taps + 2) * UNIT_ROUNDOFF * rows.max() * peak


@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS)
def test_matches_naive_reference_for_every_usual_pair(rng, in_rate, out_rate):
    x = noise(rng, 700)
    up, down = ratio(in_rate, out_rate)
    h, centre = prototype(up, down, "voice")
    got = resample(x, in_rate, out_rate, output="f32")
    want = resample_naive(x, up, down, h, centre, expected_frames(700, in_rate, out_rate))
    assert got.dtype == np.float32
    assert len(got) == len(want)
    err = np.abs(got - want).max()
    assert err <= rounding_bound(in_rate, out_rate, "voice", 1.0), err


@pytest.mark.parametrize("quality", list(QUALITIES))
@pytest.mark.parametrize(("in_rate", "out_rate"), BENCH_PAIRS + PHONE_PAIRS)
def test_every_path_within_the_rounding_bound(rng, resample_path, in_rate, out_rate, quality):
    x = noise(rng, 1500)
    up, down = ratio(in_rate, out_rate)
    h, centre = prototype(up, down, quality)
    got = resample(x, in_rate, out_rate, quality=quality, output="f32")
    want = resample_naive(x, up, down, h, centre, len(got))
    err = np.abs(got - want).max()
    assert err <= rounding_bound(in_rate, out_rate, quality, float(np.abs(x).max())), err
    # In practice the error is far inside the bound: rounding noise only.
    assert np.sqrt(np.mean((got - want) ** 2)) < 2e-7


def test_paths_differ_by_at_most_one_lsb_in_pcm16(rng):
    x = noise(rng, 48000, level=0.5)
    outputs = {}
    for name in _resample._paths():
        _resample._set_path(name)
        outputs[name] = np.frombuffer(resample(x, 48000, 16000), "<i2").astype(int)
    first = next(iter(outputs.values()))
    for name, got in outputs.items():
        assert np.abs(got - first).max() <= 1, name


@pytest.mark.parametrize(("in_rate", "out_rate"), [(48000, 16000), (44100, 16000), (16000, 44100)])
def test_matches_scipy_resample_poly_with_the_same_filter(rng, in_rate, out_rate):
    signal = pytest.importorskip("scipy.signal")
    x = noise(rng, 3000)
    up, down = ratio(in_rate, out_rate)
    h, _ = prototype(up, down, "voice")
    want = signal.resample_poly(x.astype(np.float64), up, down, window=h / up)
    got = resample(x, in_rate, out_rate, output="f32")
    # scipy's length is ceil(n * up / down); ours rounds, so compare the overlap.
    assert abs(len(want) - len(got)) <= 1
    n = min(len(got), len(want))
    assert np.abs(got[:n] - want[:n]).max() <= rounding_bound(in_rate, out_rate, "voice", 1.0)


def passband_gain(in_rate, out_rate, quality, freq):
    """The prototype's gain at `freq` Hz: A(f) = sum h[n] cos(2 pi f (n - centre)) / up."""
    up, down = ratio(in_rate, out_rate)
    h, centre = prototype(up, down, quality)
    n = np.arange(len(h)) - centre
    return float(h @ np.cos(2 * np.pi * freq / (up * in_rate) * n)) / up


@pytest.mark.parametrize(
    ("in_rate", "out_rate"), BENCH_PAIRS + PHONE_PAIRS + [(8000, 48000), (48000, 8000)]
)
def test_sine_comes_out_aligned_and_exact(resample_path, in_rate, out_rate):
    # Known answer: a passband sine resamples to the same sine sampled at
    # the output rate, in phase (output frame n is input time n * in / out),
    # scaled by the filter's gain at its frequency, which is within the
    # promised ripple (equiripple: up to 0.1 dB at "voice", not ~0).  What
    # else comes out is aliases, each at least 96 dB down (tested below);
    # with a flat equiripple stopband their sum in time is not 2e-5 small
    # for every ratio, so the sine is fitted rather than subtracted.
    freq = 0.6 * min(in_rate, out_rate) / 2
    frames = in_rate // 4
    gain = passband_gain(in_rate, out_rate, "voice", freq)
    assert abs(20 * math.log10(gain)) <= QUALITIES["voice"].ripple_db
    got = resample(tone(freq, in_rate, frames), in_rate, out_rate, output="f32")
    margin = 4 * Resampler(in_rate, out_rate).delay  # silence before 0 and after the end
    n = np.arange(len(got))[margin:-margin]
    phase = 2 * np.pi * freq / out_rate * n
    basis = np.stack([np.sin(phase), np.cos(phase)], axis=1)
    (in_phase, quadrature), *_ = np.linalg.lstsq(basis, got[margin:-margin], rcond=None)
    assert abs(in_phase - 0.5 * gain) < 2e-6
    assert abs(quadrature) < 2e-6


@pytest.mark.parametrize("channels", [1, 2, 3])
def test_pcm16_output_is_the_pcm_policy_of_the_float_output(rng, resample_path, channels):
    # Loud enough to clip: the fused store must clip, scale and round exactly
    # as the policy does to the float32 result of the same path.
    x = noise(rng, 4801, channels, level=0.9)
    x[::97] = 1.0
    as_float = resample(x, 48000, 16000, channels=channels, output="f32")
    as_pcm = resample(x, 48000, 16000, channels=channels, output="s16")
    assert isinstance(as_pcm, bytes)
    assert np.array_equal(np.frombuffer(as_pcm, "<i2"), pcm16_policy(as_float))


@pytest.mark.parametrize("output", ["f32", "s16"])
def test_pcm16_input_reads_as_value_over_32768(rng, resample_path, output):
    pcm = rng.integers(-32768, 32768, 3001).astype("<i2")
    from_pcm = resample(pcm.tobytes(), 44100, 16000, input="s16", output=output)
    from_float = resample(pcm.astype(np.float32) / np.float32(32768), 44100, 16000, output=output)
    assert np.array_equal(np.asarray(from_pcm), np.asarray(from_float))


@pytest.mark.parametrize("channels", [2, 5])
@pytest.mark.parametrize(("in_rate", "out_rate"), [(48000, 16000), (24000, 48000), (44100, 16000)])
def test_interleaved_channels_equal_separate_mono_streams(
    rng, resample_path, in_rate, out_rate, channels
):
    x = noise(rng, 2500, channels)
    got = resample(x, in_rate, out_rate, channels=channels, output="f32")
    assert len(got) == channels * expected_frames(2500, in_rate, out_rate)
    for ch in range(channels):
        mono = resample(np.ascontiguousarray(x[ch::channels]), in_rate, out_rate, output="f32")
        assert np.array_equal(got[ch::channels], mono), ch


@pytest.mark.parametrize(
    ("input", "output"), [("f32", "f32"), ("f32", "s16"), ("s16", "f32"), ("s16", "s16")]
)
def test_same_rate_passes_through_with_conversion(rng, input, output):
    x = noise(rng, 1000, 2, level=0.9)
    x[5] = np.nan
    buf = x if input == "f32" else pcm16_policy(x)
    stream = Resampler(16000, 16000, channels=2, input=input, output=output)
    assert stream.delay == 0
    got = np.asarray(stream.process(buf)) if output == "f32" else stream.process(buf)
    assert len(stream.flush()) == 0
    if input == "f32":
        expected = x if output == "f32" else pcm16_policy(x).tobytes()
    else:
        expected = buf.astype(np.float32) / np.float32(32768) if output == "f32" else buf.tobytes()
    if output == "f32":
        assert np.array_equal(got, expected, equal_nan=True)
    else:
        assert got == expected


# ---- quality, measured with sines ------------------------------------------


def _spec_rates(in_rate, out_rate, quality):
    nyquist = min(in_rate, out_rate) / 2
    spec = QUALITIES[quality]
    return nyquist, spec.passband * nyquist, spec.stopband * nyquist


@pytest.mark.parametrize("quality", list(QUALITIES))
@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS)
def test_passband_is_flat(in_rate, out_rate, quality):
    ripple = QUALITIES[quality].ripple_db
    _, passband, _ = _spec_rates(in_rate, out_rate, quality)
    stream = Resampler(in_rate, out_rate, quality=quality)
    worst = 0.0
    for freq in np.linspace(20, passband, 15):
        y = resample(
            tone(freq, in_rate, in_rate // 5), in_rate, out_rate, quality=quality, output="f32"
        )
        amplitude, _ = fit_tone(steady(y, 4 * stream.delay), freq, out_rate)
        worst = max(worst, abs(20 * math.log10(amplitude / 0.5)))
    assert worst <= ripple, f"{worst:.4f} dB"


@pytest.mark.parametrize("quality", list(QUALITIES))
@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS)
def test_aliases_and_images_are_rejected(in_rate, out_rate, quality):
    # Down: tones above the stopband edge fold into the output, and with
    # both ratio terms above 1 so do the images of passband tones; up:
    # passband tones leave images above the input's Nyquist.  All must stay
    # below the promised floor (voice 96 dB, high 120 dB) relative to the
    # tone.  (Tones between the passband and the stopband edge, all there
    # is above the passband for 24k -> 22.05k, only fold onto that band.)
    floor = -QUALITIES[quality].rejection_db
    nyquist, passband, stopband = _spec_rates(in_rate, out_rate, quality)
    stream = Resampler(in_rate, out_rate, quality=quality)
    if out_rate < in_rate:
        freqs = np.linspace(50, passband, 6)
        if stopband < in_rate / 2 * 0.999:
            freqs = np.append(freqs, np.linspace(stopband, in_rate / 2 * 0.999, 8))
    else:
        top = passband if quality == "voice" else 0.999 * nyquist
        freqs = np.linspace(50, top, 12)
    worst = -999.0
    for freq in freqs:
        y = resample(
            tone(freq, in_rate, in_rate // 2, 0.9), in_rate, out_rate, quality=quality, output="f32"
        )
        y = steady(y, 4 * stream.delay)[: 1 << 13]
        exclude = freq if freq < out_rate / 2 else None
        worst = max(worst, spur_db(y, out_rate, exclude, 0.9))
    assert worst <= floor, f"{worst:.1f} dB"


@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS)
def test_delay_budget(in_rate, out_rate):
    voice = Resampler(in_rate, out_rate).delay / out_rate
    high = Resampler(in_rate, out_rate, quality="high").delay / out_rate
    # The promise, for every pair of the usual rates, 8 kHz included.
    assert voice <= 0.003
    assert high <= 0.010
    # What the equiripple design measures at worst, by the lower rate (the
    # delay scales with its period), pinned so that a longer design shows.
    low = min(in_rate, out_rate)
    budget = {8000: (0.0022, 0.0074), 11025: (0.0016, 0.0054), 16000: (0.0011, 0.0037)}
    voice_max, high_max = budget[max(r for r in budget if r <= low)]
    assert voice <= voice_max
    assert high <= high_max


# ---- the design itself ---------------------------------------------------------


def response(h, points=1 << 16):
    """|H| of taps `h` at `points` + 1 frequencies from 0 to 0.5 cycles per
    sample, zero-padded FFT at least 8 times finer than the ripple."""
    size = max(2 * points, 1 << (8 * len(h)).bit_length())
    return np.linspace(0, 0.5, size // 2 + 1), np.abs(np.fft.rfft(h, size))


@pytest.mark.parametrize(
    ("length", "passband", "stopband", "weight"),
    [
        (31, 0.2, 0.3, 1.0),  # textbook
        (65, 0.21875, 0.28125, 714.0),  # "voice" at 2:1
        (97, 0.0729, 0.09375, 714.0),  # "voice" at 6:1
        (215, 0.225, 0.25, 1000.0),  # "high" at 2:1
        (323, 0.15, 0.16667, 1150.0),  # "high" at 3:1
        (251, 0.00918, 0.0362, 137.0),  # an image stage: tiny passband, wide transition
        (121, 0.0396, 0.0510, 714.0),  # a long interpolated stage
        (401, 0.04, 0.045, 100.0),  # narrow, long
        (677, 0.0375, 0.041667, 1150.0),  # "high" at 6:1, near the longest single exchange
    ],
)
def test_remez_matches_scipy(length, passband, stopband, weight):
    # Our numpy exchange against scipy's compiled Parks-McClellan, measured
    # the same way: the same optimum (the weighted error is unique), so the
    # largest weighted error agrees to the grid's resolution and the taps
    # agree closely.
    signal = pytest.importorskip("scipy.signal")
    ours, _, _ = remez_lowpass(length, passband, stopband, weight)
    theirs = signal.remez(
        length, [0, passband, stopband, 0.5], [1, 0], weight=[1, weight], maxiter=100
    )

    def weighted_error(h):
        f, gain = response(h)
        return max(np.abs(gain[f <= passband] - 1).max(), weight * gain[f >= stopband].max())

    assert len(ours) == length
    assert np.array_equal(ours, ours[::-1])  # linear phase
    assert weighted_error(ours) <= 1.01 * weighted_error(theirs)
    assert np.abs(ours - theirs).max() <= 1e-3 * np.abs(theirs).max()


@pytest.mark.parametrize("quality", list(QUALITIES))
@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS)
def test_prototype_meets_the_spec_with_margin(in_rate, out_rate, quality):
    # The filter as the table holds it (float32), on a grid 8 times finer
    # than its ripple: a linear-phase low-pass centred on a whole output
    # frame, inside both promises by at least 1 dB, and 6 dB further
    # inside the rejection when both ratio terms exceed 1 (two images then
    # fold onto each output frequency).
    spec = QUALITIES[quality]
    up, down = ratio(in_rate, out_rate)
    h, centre = prototype(up, down, quality)
    assert centre % down == 0
    assert len(h) == 2 * centre + 1
    assert np.array_equal(h, h[::-1])
    nyquist = 0.5 / max(up, down)
    f, gain = response(h.astype(np.float32).astype(np.float64) / up)
    ripple_db = np.abs(20 * np.log10(gain[f <= spec.passband * nyquist])).max()
    stop_db = 20 * np.log10(gain[f >= spec.stopband * nyquist].max())
    folds_db = 6.0 if up > 1 and down > 1 else 0.0
    # ripple: 1 dB of margin on the error delta = 10**(ripple_db / 20) - 1
    assert ripple_db <= 20 * np.log10(1 + (10 ** (spec.ripple_db / 20) - 1) * 10 ** (-1 / 20))
    assert stop_db <= -(spec.rejection_db + folds_db + 1)


@pytest.mark.parametrize(
    ("in_rate", "out_rate"),
    [(16000, 8000), (8000, 16000), (48000, 16000), (8000, 48000), (16000, 24000)],
)
@pytest.mark.parametrize("quality", list(QUALITIES))
def test_prototype_is_as_short_as_scipy_remez_allows(in_rate, out_rate, quality):
    # Fewest taps: the shortest scipy.signal.remez design that meets the
    # same targets (weights and margin as ours) is no shorter than ours by
    # more than the rounding of the centre to a whole output frame.
    signal = pytest.importorskip("scipy.signal")
    spec = QUALITIES[quality]
    up, down = ratio(in_rate, out_rate)
    _, centre = prototype(up, down, quality)
    nyquist = 0.5 / max(up, down)
    bands = [0, spec.passband * nyquist, spec.stopband * nyquist, 0.5]
    margin = 10 ** (-2 / 20)
    ripple = (1 - 10 ** (-spec.ripple_db / 20)) * margin
    rejection = 10 ** (-spec.rejection_db / 20) * margin / (2 if up > 1 and down > 1 else 1)

    def meets(half):
        h = signal.remez(2 * half + 1, bands, [1, 0], weight=[1, ripple / rejection], maxiter=100)
        f, gain = response(h)
        return (
            np.abs(gain[f <= bands[1]] - 1).max() <= ripple
            and gain[f >= bands[2]].max() <= rejection
        )

    half = centre
    while half > 1 and meets(half - 1):
        half -= 1
    assert centre <= math.ceil(half / down) * down
