"""What a payload job is (:class:`Span`, :class:`Job`, their kinds), apart from the pool
that runs them (:mod:`._pool`, which needs torch): a fingerprint of two archives, found
from their central directories alone, makes no job and so imports no torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..storage import Store, crc32_combine

if TYPE_CHECKING:
    from ._stats import Acc

CRC, COMPARE, VALUES = "crc", "compare", "values"


@dataclass(frozen=True)
class Span:
    """The first ``size`` bytes of a store key."""

    store: Store
    key: str
    size: int

    @property
    def random_access(self) -> bool:
        if not self.store.packed:  # a file of its own, stored as it is
            return True
        return self.store.entry(self.key).compression == "stored"


@dataclass(eq=False)
class Job:
    """One payload computation; ``done(job)`` is called in the caller's thread once every
    piece is in (``error`` set if one failed)."""

    kind: str
    a: Span
    b: Span | None
    done: Callable[[Job], None]
    dtype_a: Any = None  # torch.dtype
    dtype_b: Any = None
    rtol: float = 0.0
    atol: float = 0.0
    # results
    acc: Acc | None = None
    differs: bool = False
    crc_parts: list[tuple[int, int, int]] = field(default_factory=list)
    error: BaseException | None = None
    pending: int = 0

    @property
    def nbytes(self) -> int:
        return self.a.size + (self.b.size if self.b is not None else 0)

    @property
    def crc(self) -> int:
        crc = 0
        for _, part, length in sorted(self.crc_parts):
            crc = crc32_combine(crc, part, length)
        return crc

    def unit(self) -> int:
        """Bytes of ``a`` per element (values), else 1: pieces are cut in these units."""
        if self.kind == VALUES:
            assert self.dtype_a is not None
            return self.dtype_a.itemsize
        return 1

    def length(self) -> int:
        """The job's length in units."""
        return self.a.size // self.unit()
