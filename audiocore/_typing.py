"""Annotations shared by the modules and stubs; nothing here runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np
    from typing_extensions import Buffer

    # NumPy declares the buffer protocol to type checkers only from Python
    # 3.12 on, so arrays are named beside Buffer for older targets.
    SampleBuffer: TypeAlias = Buffer | np.ndarray[Any, Any]
