import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from audiocore._typing import SampleBuffer

TAP_ALIGN: int

def _paths() -> list[str]: ...
def _get_path() -> str: ...
def _set_path(name: str) -> None: ...

@disjoint_base
class ResamplerCore:
    @property
    def channels(self) -> int: ...
    @property
    def delay(self) -> int: ...
    @property
    def _path(self) -> str | None: ...
    def __init__(
        self,
        table: npt.NDArray[np.float32],
        up: int,
        down: int,
        taps: int,
        delay: int,
        channels: int,
        input: str,
        output: str,
    ) -> None: ...
    def process(self, buf: SampleBuffer) -> bytes | npt.NDArray[np.float32]: ...
    def flush(self) -> bytes | npt.NDArray[np.float32]: ...
    def reset(self) -> None: ...
