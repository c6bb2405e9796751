"""tdview: browse and load tensordict checkpoints.

The reading is tdview's own (storage -> format -> index -> load); tensordict supplies
the result types.
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["__version__"]
