"""A short run of every core fuzz target (fuzz_core.py) on pseudo-random
bytes, without atheris: the same targets and the same pass rule as the long
coverage-guided run of benchmarks/fuzz/run.py, in CI's time."""

import fuzz_core
import pytest
from fuzz_core import TARGETS
from fuzz_input import smoke

# Inputs per target: a few thousand where an input takes tens of
# microseconds; fewer where one may design a filter.
INPUTS = {"resampler": 2000, "resampler_design": 10, "echo_canceller": 1000}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz_target_smoke(name, monkeypatch, tmp_path):
    if name == "resampler":
        # One ratio each way, whose filters design in milliseconds, and one
        # refused at once: a first design is in the run's time, up to
        # seconds on a loaded machine (the other ratios are the long run's).
        monkeypatch.setattr(fuzz_core, "_COMMON", [24000, 48000])
        monkeypatch.setattr(fuzz_core, "_HIGH", [24000, 48000])
        monkeypatch.setattr(fuzz_core, "_ODD_PAIRS", [(48000, 47999)])
    smoke(name, TARGETS[name], INPUTS.get(name, 3000), str(tmp_path))
