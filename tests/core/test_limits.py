"""One set of limits: every function that takes a channel count or a sample
rate accepts and refuses the same values, with the same message."""

import re
import struct

import numpy as np
import pytest

import audiocore
from audiocore import JitterBuffer, Resampler, read_wav, resample, to_wav, wav_header
from audiocore._jitter import STREAM, JitterCore
from audiocore._resample import ResamplerCore

TAKES_CHANNELS = {
    "Resampler": lambda n: Resampler(48000, 16000, channels=n),
    "resample": lambda n: resample(np.zeros(64, np.float32), 48000, 16000, channels=n),
    "JitterBuffer": lambda n: JitterBuffer(24000, channels=n),
    "wav_header": lambda n: wav_header(16000, channels=n),
    "to_wav": lambda n: to_wav(np.zeros(64, np.int16), 16000, channels=n),
}


def test_the_limits_are_the_documented_numbers():
    assert (audiocore.MAX_CHANNELS, audiocore.MAX_SAMPLE_RATE) == (64, 1_000_000)


@pytest.mark.parametrize("call", TAKES_CHANNELS.values(), ids=TAKES_CHANNELS.keys())
def test_channels_up_to_the_limit(call):
    call(1)
    call(np.int64(2))  # any integer type, not only int
    call(audiocore.MAX_CHANNELS)
    for bad in (0, audiocore.MAX_CHANNELS + 1, -1):
        message = f"channels: expected an integer from 1 to 64, got {bad}"
        with pytest.raises(ValueError, match=re.escape(message)):
            call(bad)
    for bad, name in ((2.0, "float"), (True, "bool"), ("2", "str"), (None, "NoneType")):
        with pytest.raises(TypeError, match=f"channels: expected an integer, got {name}$"):
            call(bad)


TAKES_A_RATE = {
    "Resampler in_rate": (lambda r: Resampler(r, r), "in_rate", 1),
    "Resampler out_rate": (lambda r: Resampler(48000, r), "out_rate", 1),
    "JitterBuffer": (lambda r: JitterBuffer(r), "sample_rate", 1000),
    "wav_header": (lambda r: wav_header(r), "sample_rate", 1),
}


@pytest.mark.parametrize(("call", "name", "lowest"), TAKES_A_RATE.values(), ids=TAKES_A_RATE.keys())
def test_sample_rates_up_to_the_limit(call, name, lowest):
    for bad in (lowest - 1, audiocore.MAX_SAMPLE_RATE + 1):
        message = f"{name}: expected a sample rate from {lowest} to 1000000 Hz, got {bad}"
        with pytest.raises(ValueError, match=re.escape(message)):
            call(bad)
    with pytest.raises(
        TypeError, match=f"{name}: expected an integer sample rate in Hz, got float"
    ):
        call(16000.0)


def test_read_wav_refuses_a_file_beyond_the_channel_limit():
    fmt = struct.pack("<HHIIHH", 1, 65, 8000, 8000 * 130, 130, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", 0)
    with pytest.raises(ValueError, match="fmt chunk says 65 channels, expected 1 to 64"):
        read_wav(b"RIFF" + struct.pack("<I", len(body)) + body)


def test_the_c_kernels_hold_the_same_limit():
    # Below the validation: the core itself refuses one channel more.
    table = np.zeros(16, np.float32)
    table[-1] = 1
    ResamplerCore(table, 1, 1, 16, 0, audiocore.MAX_CHANNELS, "f32", "f32")
    with pytest.raises(MemoryError):
        ResamplerCore(table, 1, 1, 16, 0, audiocore.MAX_CHANNELS + 1, "f32", "f32")
    JitterCore(8000, audiocore.MAX_CHANNELS, 160, STREAM, 640, 160, 160, False)
    with pytest.raises(MemoryError):
        JitterCore(8000, audiocore.MAX_CHANNELS + 1, 160, STREAM, 640, 160, 160, False)
