"""The one platform flag that both the stores and the key codec read: whether a key is
joined to a Windows path. A base module, so that the key codec (``format``) need not import
the stores for it."""

from __future__ import annotations

import os

__all__ = ["WINDOWS_PATHS"]

#: Whether a directory key is joined to a Windows path (backslash and drive prefixes count).
WINDOWS_PATHS = os.name == "nt"
