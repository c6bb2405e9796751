"""Every error tdview raises, in one place.

Each message names the file (or archive entry), the key when there is one, and the
offending value, so that a user with a million-key checkpoint can find the problem.
The classes also derive from the builtin exception the reference loader raises in
the same situation, so code written against tensordict keeps catching them.
"""

from __future__ import annotations


class TDViewError(Exception):
    """Base class of every error raised by tdview."""


class NotACheckpointError(TDViewError, ValueError):
    """The path is neither a checkpoint directory nor a checkpoint archive."""


class CheckpointFormatError(TDViewError, ValueError):
    """A ``meta.json`` or a record inside it does not follow the format."""


class UnsupportedFormatVersionError(TDViewError, RuntimeError):
    """A node was written by a newer format version than tdview reads."""


class ArchiveError(TDViewError, ValueError):
    """The zip structure of an archive is corrupt, truncated or inconsistent."""


class UnsafeCheckpointError(TDViewError, ValueError):
    """The checkpoint tries something tdview refuses on principle.

    Examples: a key or symlink that resolves outside the checkpoint root, an entry
    name with ``..`` or an absolute path, an encrypted zip entry, overlapping entries.
    """


class LimitExceededError(TDViewError, ValueError):
    """A size or depth bound was exceeded (metadata size, JSON depth, decompressed size)."""


class LeafDataError(TDViewError, RuntimeError):
    """A leaf's payload is missing, too short, or fails its checksum."""


class PickleRefusedError(TDViewError, RuntimeError):
    """Pickled data was found and the caller did not allow unpickling."""


class DeviceUnavailableError(TDViewError, RuntimeError):
    """A saved tensordict records a device this process cannot use (``cuda:0`` without
    CUDA); loading with ``device=`` puts it elsewhere."""


class SubpathError(TDViewError, ValueError):
    """A subpath (nested key or ``"a/b"`` path) names nothing loadable in the checkpoint."""


# -- the widget protocol's own errors (their class names travel as the reply's error type)


class RequestError(TDViewError, ValueError):
    """A message that is not a valid protocol v1 request (or cancel)."""


class Cancelled(TDViewError):
    """The client cancelled the request."""


class NoCheckpointError(TDViewError):
    """The widget's checkpoint could not be opened; every request answers this."""


class PreviewUnsupportedError(TDViewError, TypeError):
    """The leaf's dtype has no display form (quantized, bit or sub-byte dtypes)."""


class ArchiveModeError(TDViewError, RuntimeError):
    """An archive entry cannot be mapped with ``mode="r+"`` (compressed, unaligned or nested)."""
