"""A short run of the server's decoder fuzz targets (fuzz_protocol.py) on
pseudo-random bytes, without atheris: the same targets and pass rule as the
long coverage-guided run of benchmarks/fuzz/run.py, in CI's time."""

from __future__ import annotations

import pathlib

import pytest
from fuzz_input import smoke
from fuzz_protocol import TARGETS


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_protocol_fuzz_target_smoke(name: str, tmp_path: pathlib.Path) -> None:
    smoke(name, TARGETS[name], 3000, str(tmp_path))
