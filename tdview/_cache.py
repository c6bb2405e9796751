"""One bounded cache for every layer: a dict that forgets everything once full.

A cache here is asked far more often than filled (a directory probe, a parsed
``meta.json``, a dtype's facts: 10^4 to 10^6 lookups a load), so a hit stays a plain
``dict`` lookup (``get``, ``in``, ``[]``: inherited, no Python code runs), and only a
miss calls :meth:`BoundedCache.put`. Full, it is cleared rather than trimmed: no order
to keep on the hit path, and a working set that fits is refilled by the next misses.
The process-wide ones are listed in ARCHITECTURE.md ("Process-wide caches").
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["BoundedCache"]

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A ``dict`` of at most ``bound`` entries, filled through :meth:`put`.

    Examples
    --------
    >>> cache = BoundedCache[str, int](2)
    >>> cache.put("a", 1), cache.put("b", 2), cache.get("a")
    (1, 2, 1)
    >>> cache.put("c", 3), sorted(cache)   # full: forgot a and b
    (3, ['c'])
    """

    __slots__ = ("bound",)

    def __init__(self, bound: int) -> None:
        super().__init__()
        self.bound = bound

    def put(self, key: K, value: V) -> V:
        """Remember ``value`` for ``key`` (clearing the cache first if it is full) and
        return it."""
        if len(self) >= self.bound:
            self.clear()
        self[key] = value
        return value
