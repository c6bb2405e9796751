"""tdview: browse and load tensordict checkpoints.

The reading is tdview's own (storage -> format -> index -> load); tensordict supplies
the result types.
"""

from __future__ import annotations

from ._version import __version__
from .widget import TDView

__all__ = ["TDView", "__version__"]
