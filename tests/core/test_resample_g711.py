"""The phone paths: a Resampler reading or writing G.711 is the codec
composed with the PCM16 resampler, bit for bit, and keeps its streaming
guarantees (chunking never changes a bit, flush, reset)."""

import re

import numpy as np
import pytest
from g711_reference import decode, encode
from resample_reference import expected_frames, noise

import audiocore
from audiocore.resample import Resampler, resample

# (in_rate, out_rate, input, output): the call into the model (Gemini
# 16 kHz, OpenAI 24 kHz) and the model's voice back to the call.
PHONE_PATHS = [
    (8000, 16000, "ulaw", "s16"),
    (8000, 24000, "ulaw", "s16"),
    (8000, 16000, "alaw", "f32"),
    (8000, 24000, "alaw", "s16"),
    (24000, 8000, "s16", "ulaw"),
    (24000, 8000, "f32", "alaw"),
    (16000, 8000, "s16", "alaw"),
    (16000, 8000, "f32", "ulaw"),
    (48000, 8000, "f32", "ulaw"),
]
PRIMES = [1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 97, 211, 967]
CHUNKINGS = {
    "one call": [10**9],
    "20 ms": None,  # 20 ms at the input rate
    "primes": PRIMES,
    "single frames": [1],
    "with empties": [0, 5, 0, 0, 700, 1, 0, 129],
}
LAW = {"ulaw": "ulaw", "alaw": "alaw"}


def phone_input(rng, fmt, frames, channels=1):
    """Speech-level noise in `fmt`: G.711 codes, PCM16 or float32."""
    x = noise(rng, frames, channels, level=0.3)
    if fmt == "f32":
        return x
    pcm = np.rint(x * 32767).astype(np.int16)
    return pcm if fmt == "s16" else encode(fmt, pcm)


def as_pcm16(data, fmt):
    """A stream's output as int16 (G.711 decoded) or float32."""
    if fmt == "f32":
        return np.asarray(data)
    data = bytes(data)
    return np.frombuffer(data if fmt == "s16" else decode(fmt, data), "<i2")


def run_chunked(stream, x, sizes):
    parts, pos, i = [], 0, 0
    while pos < len(x):
        n = sizes[i % len(sizes)]
        parts.append(stream.process(x[pos : pos + n]))
        pos += n
        i += 1
    parts.append(stream.flush())
    if isinstance(parts[0], bytes):
        return b"".join(parts)
    return np.concatenate(parts)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize(("in_rate", "out_rate", "input", "output"), PHONE_PATHS)
def test_chunking_never_changes_a_bit(
    rng, resample_path, chunking, in_rate, out_rate, input, output
):
    x = phone_input(rng, input, 3 * in_rate // 50 + 17)
    kwargs = {"input": input, "output": output}
    whole = resample(x, in_rate, out_rate, **kwargs)
    sizes = CHUNKINGS[chunking] or [in_rate // 50]
    got = run_chunked(Resampler(in_rate, out_rate, **kwargs), x, sizes)
    assert type(got) is type(whole)
    assert np.array_equal(np.asarray(as_pcm16(got, output)), np.asarray(as_pcm16(whole, output)))
    assert len(as_pcm16(got, output)) == expected_frames(len(x), in_rate, out_rate)


@pytest.mark.parametrize(("in_rate", "out_rate", "input", "output"), PHONE_PATHS)
def test_fused_path_is_the_codec_composed_with_the_resampler(
    rng, resample_path, in_rate, out_rate, input, output
):
    # Decoding G.711 first (ulaw_to_pcm16, which is audioop.ulaw2lin), or
    # encoding the PCM16 output after, gives the same bits as the one pass.
    x = phone_input(rng, input, 4001)
    fused = resample(x, in_rate, out_rate, input=input, output=output)
    if input in LAW:
        pcm_in = decode(input, bytes(x))
        composed = resample(pcm_in, in_rate, out_rate, input="s16", output=output)
        if output == "f32":
            np.testing.assert_array_equal(fused, composed)
        else:
            assert fused == composed
    else:
        pcm_out = resample(x, in_rate, out_rate, input=input, output="s16")
        assert fused == encode(output, np.frombuffer(pcm_out, "<i2"))


@pytest.mark.parametrize("law", ["ulaw", "alaw"])
def test_phone_round_trip_keeps_speech(rng, law):
    # 8 kHz G.711 -> 16 kHz PCM16 -> 8 kHz G.711: the band below 3.5 kHz
    # survives; what comes back correlates with what went in.
    t = np.arange(8000) / 8000
    x = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((180, 360, 900, 2100), 1))
    pcm = np.rint(0.3 * x / 2.1 * 32767).astype(np.int16)
    up = resample(encode(law, pcm), 8000, 16000, input=law, output="s16")
    down = resample(up, 16000, 8000, input="s16", output=law)
    back = np.frombuffer(decode(law, down), "<i2").astype(np.float64)
    assert np.corrcoef(pcm[100:-100], back[100:-100])[0, 1] >= 0.99


@pytest.mark.parametrize(
    ("input", "output"),
    [
        ("ulaw", "s16"),
        ("alaw", "f32"),
        ("s16", "ulaw"),
        ("f32", "alaw"),
        ("ulaw", "alaw"),
        ("alaw", "alaw"),
    ],
)
def test_same_rate_is_the_conversion(rng, input, output):
    x = phone_input(rng, input, 999)
    got = resample(x, 8000, 8000, input=input, output=output)
    to_pcm16 = {
        "ulaw": audiocore.ulaw_to_pcm16,
        "alaw": audiocore.alaw_to_pcm16,
        "f32": audiocore.float32_to_pcm16,
        "s16": bytes,
    }[input]
    pcm = to_pcm16(x)
    expected = {
        "s16": lambda p: p,
        "f32": audiocore.pcm16_to_float32,
        "ulaw": audiocore.pcm16_to_ulaw,
        "alaw": audiocore.pcm16_to_alaw,
    }[output](pcm)
    if input == output:
        expected = bytes(x)
    if output == "f32":
        np.testing.assert_array_equal(got, expected)
    else:
        assert got == expected


def test_interleaved_channels_equal_separate_mono_streams(rng):
    pcm = rng.integers(-20000, 20000, 2 * 1601, dtype=np.int16)
    codes = encode("ulaw", pcm)
    both = resample(codes, 8000, 24000, channels=2, input="ulaw")
    back = resample(pcm, 24000, 8000, channels=2, input="s16", output="alaw")
    for ch in range(2):
        mono = codes[ch::2]
        left = np.frombuffer(both, "<i2")[ch::2]
        assert left.tobytes() == resample(mono, 8000, 24000, input="ulaw")
        one = np.ascontiguousarray(pcm[ch::2])
        assert back[ch::2] == resample(one, 24000, 8000, input="s16", output="alaw")


def test_silence_in_silence_out():
    stream = Resampler(8000, 16000, input="ulaw")
    assert stream.process(b"\xff" * 160) + stream.flush() == b"\x00" * 2 * 320
    stream = Resampler(24000, 8000, input="s16", output="ulaw")
    assert stream.process(bytes(960)) + stream.flush() == b"\xff" * 160
    stream = Resampler(24000, 8000, input="f32", output="alaw")
    assert stream.process(np.zeros(480, np.float32)) + stream.flush() == b"\xd5" * 160


def test_a_20ms_frame_yields_its_share():
    # Twilio's 20 ms frame is 160 codes; every frame after the first gives
    # exactly 20 ms at the model's rate, and back.
    up = Resampler(8000, 16000, input="ulaw")
    counts = [len(up.process(b"\xff" * 160)) // 2 for _ in range(10)]
    assert counts[0] == 320 - up.delay and set(counts[1:]) == {320}
    down = Resampler(24000, 8000, input="s16", output="ulaw")
    counts = [len(down.process(bytes(960))) for _ in range(10)]
    assert counts[0] == 160 - down.delay and set(counts[1:]) == {160}


def test_flush_and_reset(rng):
    codes = phone_input(rng, "ulaw", 1000)
    stream = Resampler(8000, 24000, input="ulaw")
    first = stream.process(codes) + stream.flush()
    with pytest.raises(RuntimeError, match=re.escape("process() after flush()")):
        stream.process(codes)
    stream.reset()
    assert stream.process(codes) + stream.flush() == first


def test_metadata():
    stream = Resampler(8000, 16000, input="ulaw", output="f32")
    assert (stream.input, stream.output) == ("ulaw", "f32")
    assert repr(stream) == (
        "Resampler(8000, 16000, channels=1, quality='voice', input='ulaw', output='f32')"
    )


@pytest.mark.parametrize(
    ("make", "buf", "error", "message"),
    [
        (
            lambda: Resampler(8000, 16000, input="ulaw"),
            np.zeros(4, np.int16),
            TypeError,
            "buf: expected μ-law samples, got int16",
        ),
        (
            lambda: Resampler(8000, 16000, input="alaw"),
            [1, 2],
            TypeError,
            "buf: expected a buffer of A-law samples, got list",
        ),
        (
            lambda: Resampler(8000, 16000, channels=2, input="ulaw"),
            b"\xff" * 3,
            ValueError,
            "buf: expected a whole number of 2-channel frames, got 3 samples",
        ),
        (
            lambda: Resampler(24000, 8000, input="s16", output="ulaw"),
            b"\x00" * 3,
            ValueError,
            "buf: int16 data must be a whole number of 2-byte samples, got 3 bytes",
        ),
        (
            lambda: Resampler(24000, 8000, output="alaw"),
            np.zeros(4, np.float64),
            TypeError,
            "buf: expected float32 samples, got float64",
        ),
    ],
)
def test_bad_buffers(make, buf, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make().process(buf)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input": "mulaw"}, "input: expected one of 'f32', 's16', 'ulaw' or 'alaw', got 'mulaw'"),
        ({"output": "g711"}, "output: expected one of 'f32', 's16', 'ulaw' or 'alaw', got 'g711'"),
    ],
)
def test_bad_formats(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Resampler(8000, 16000, **kwargs)
