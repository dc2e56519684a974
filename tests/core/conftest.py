import os
import zlib

import pytest

from audiocore import _aec, _convert, _resample

SEED = int(os.environ.get("AUDIOCORE_SEED", "20261130"))


def pytest_report_header(config):
    import audiocore

    return [
        f"audiocore from {os.path.dirname(audiocore.__file__)}",
        f"audiocore SIMD paths: {_convert._paths()} (default {_convert._get_path()}); seed {SEED}",
    ]


@pytest.fixture(autouse=True)
def _restore_simd_paths():
    """Every test leaves every kernel' instruction-set paths as it found
    them, also when it fails: a path is process-wide state."""
    convert, resample, aec = _convert._get_path(), _resample._get_path(), _aec._get_path()
    yield
    _convert._set_path(convert)
    _resample._set_path(resample)
    _aec._set_path(aec)


@pytest.fixture(params=_convert._paths())
def convert_path(request):
    """Run the test once on every conversion path this CPU has."""
    _convert._set_path(request.param)
    return request.param


@pytest.fixture(params=_resample._paths())
def resample_path(request):
    """Run the test once on every resampling path this CPU has (for
    Resamplers created from then on)."""
    _resample._set_path(request.param)
    return request.param


@pytest.fixture
def rng(request):
    import numpy as np

    seed = SEED + zlib.crc32(request.node.name.encode()) % 1000
    print(f"rng seed {seed} (set AUDIOCORE_SEED to vary)")
    return np.random.default_rng(seed)


@pytest.fixture(params=_aec._paths())
def aec_path(request):
    """Run the test once on every echo canceller path this CPU has (for
    EchoCancellers created from then on)."""
    _aec._set_path(request.param)
    return request.param
