"""Every exception class of tdview's own, in one place (no other module defines one).

tdview raises these, and builtin exceptions (``ValueError``, ``TypeError``,
``FileNotFoundError``...) for bad arguments and missing files, as tensordict's loader
does. Each message names the file (or archive entry), the key when there is one, and the
offending value, so that a user with a million-key checkpoint can find the problem.
The classes also derive from the builtin exception the reference loader raises in
the same situation, so code written against tensordict keeps catching them.
"""

from __future__ import annotations

import errno
import os


class TDViewError(Exception):
    """Base class of every error raised by tdview."""


class NotACheckpointError(TDViewError, ValueError):
    """The path is neither a checkpoint directory nor a checkpoint archive."""


class NotACheckpointFolderError(FileNotFoundError, NotACheckpointError):
    """A directory with no ``meta.json`` given to the loader: a ``FileNotFoundError`` for
    ``<dir>/meta.json``, as the reference loader raises, and a
    :class:`NotACheckpointError` (a ``ValueError``), whose message goes on to name the
    checkpoints found in the folder."""

    def __init__(self, meta_path: str, found: str) -> None:
        super().__init__(errno.ENOENT, os.strerror(errno.ENOENT), meta_path)
        self.found = found

    def __str__(self) -> str:
        return f"{super().__str__()}. {self.found}"


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


class UntrustedLinkError(UnsafeCheckpointError):
    """A symlink leads out of the checkpoint root to a place no rule trusts.

    Links inside the root are followed, and so are links into a content store that
    holds the checkpoint (Hugging Face cache, git-annex, DVC) and links below a trusted
    path: :func:`tdview.trust_paths` or the ``TDVIEW_TRUSTED_PATHS`` environment
    variable. The message names the link, its target and the path to trust.
    """


class LinkWriteError(UnsafeCheckpointError, PermissionError):
    """``mode="r+"`` asked to write a file reached through a symlink out of the
    checkpoint root: tdview never writes through such a link (``mode="r"`` reads it).
    A ``PermissionError`` too, as an unwritable file is for ``mode="r+"``."""


class LimitExceededError(TDViewError, ValueError):
    """A size or depth bound was exceeded (metadata size, JSON depth, decompressed size)."""


class LeafDataError(TDViewError, RuntimeError):
    """A leaf's payload is missing, too short, or fails its checksum."""


class LeafNotAFileError(LeafDataError, IsADirectoryError):
    """A leaf's data file (``<key>.memmap``) is a folder."""


class MapRefusedError(TDViewError, OSError):
    """The system refused to map a checkpoint file (``mmap(2)``): most often a
    copy-on-write mapping (``mode="r"``) larger than the memory commit limit."""


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


class VariableBoundError(TDViewError, ValueError):
    """A load would replace a name already bound in the kernel, and was not asked to
    (``replace``): nothing is read; the message says what the name holds."""


class Cancelled(TDViewError):
    """The client cancelled the request."""


class NoCheckpointError(TDViewError):
    """The widget's checkpoint could not be opened; every request answers this."""


class PreviewUnsupportedError(TDViewError, TypeError):
    """The leaf's dtype has no display form (quantized, bit or sub-byte dtypes)."""


class PreviewIndexError(TDViewError, IndexError):
    """A preview's index does not fit the leaf: more parts than it has dims, or a single
    index past a dim's size."""


class ArchiveModeError(TDViewError, RuntimeError):
    """An archive entry cannot be mapped with ``mode="r+"`` (compressed, unaligned or nested)."""


class RemoteReadError(TDViewError, OSError):
    """A remote server answered a ranged read wrongly: it ignored the ``Range`` header
    (a whole body instead of the bytes asked for), or sent other, fewer or more bytes
    than it said."""


class RemoteModeError(TDViewError, ValueError):
    """``mode="r+"`` asked of a remote checkpoint: its leaves are read into memory, so
    nothing written to them could reach the remote files."""


class ProcessGroupError(TDViewError, RuntimeError):
    """A ``tdview.distributed`` load was called outside an initialized
    ``torch.distributed`` process group (``init_process_group``)."""


class MissingExtraError(TDViewError, ImportError):
    """A format needs a package that is not installed; the message names the tdview
    extra that installs it (``pip install "tdview[h5]"``)."""
