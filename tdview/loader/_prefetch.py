"""Decompressing the compressed leaves of a subtree in parallel (``num_threads``).

Every compressed entry the load will read is submitted to a thread pool up front, in load
order; the loader then takes each result when it reaches that leaf. zlib, bz2 and lzma
release the GIL while they work, so the threads run in parallel, and a large entry
occupies one thread while the others go on with the rest; a thread that is free checks
the CRC of the large entry's finished chunks meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..storage import Store

__all__ = ["Prefetcher"]


class Prefetcher:
    """Decompress archive entries in ``num_threads`` threads, one future per entry.

    Parameters
    ----------
    store : Store
        A store whose files may be compressed (``Store.packed``).
    keys : iterable of str
        The compressed entries to decompress, in the order the load needs them.
    num_threads : int
        At least 2.

    Examples
    --------
    >>> with Prefetcher(store, ["a.memmap", "b.memmap"], 4) as pre:   # doctest: +SKIP
    ...     data = pre.take("a.memmap")   # a CRC-checked uint8 array, or None
    """

    def __init__(self, store: Store, keys: Iterable[str], num_threads: int) -> None:
        self._executor = ThreadPoolExecutor(num_threads, thread_name_prefix="tdview-inflate")
        self._futures: dict[str, Future[np.ndarray]] = {}
        try:
            for key in keys:
                if key in self._futures:
                    continue
                try:
                    # read the local header here, so that the threads only decompress
                    located = store.locate(key)
                except Exception:  # noqa: BLE001 - the loader meets it if it needs the leaf
                    continue
                if located.error is not None:
                    continue
                self._futures[key] = self._executor.submit(
                    store.decompress, key, None, self._executor
                )
        except BaseException:
            self.close()
            raise

    def take(self, key: str) -> np.ndarray | None:
        """The decompressed bytes of ``key`` (waiting for them), or None if not scheduled.

        The result is handed over once: the prefetcher keeps no reference to it.
        Errors of the decompression (bad CRC, corrupt stream) are raised here.
        """
        future = self._futures.pop(key, None)
        return None if future is None else future.result()

    def close(self) -> None:
        """Cancel what has not started and wait for the threads (results are dropped)."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._futures.clear()

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
