import os
import zlib

import pytest

from audiocore import _convert

SEED = int(os.environ.get("AUDIOCORE_SEED", "20261130"))


def pytest_report_header(config):
    import audiocore

    return [
        f"audiocore from {os.path.dirname(audiocore.__file__)}",
        f"audiocore SIMD paths: {_convert._paths()} (default {_convert._get_path()}); seed {SEED}",
    ]


@pytest.fixture(params=_convert._paths())
def path(request):
    """Run the test once on every instruction-set path this CPU has."""
    before = _convert._get_path()
    _convert._set_path(request.param)
    yield request.param
    _convert._set_path(before)


@pytest.fixture
def rng(request):
    import numpy as np

    seed = SEED + zlib.crc32(request.node.name.encode()) % 1000
    print(f"rng seed {seed} (set AUDIOCORE_SEED to vary)")
    return np.random.default_rng(seed)
