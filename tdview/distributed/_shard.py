"""``load_shard`` and ``load``: a checkpoint's rows split across the ranks of a group."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ProcessGroupError, TDViewError
from ..index import Tree, open_tree, resolve_subpath

__all__ = ["load", "load_shard", "rows_of_rank"]


def rows_of_rank(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """The rows ``[start, stop)`` of ``n`` that rank ``rank`` of ``world_size`` gets:
    ``[rank*n//world_size, (rank+1)*n//world_size)`` (contiguous, sizes differing by at
    most one; empty when there are more ranks than rows).

    Examples
    --------
    >>> [rows_of_rank(10, r, 3) for r in range(3)]
    [(0, 3), (3, 6), (6, 10)]
    >>> rows_of_rank(2, 2, 3)
    (1, 2)
    """
    return rank * n // world_size, (rank + 1) * n // world_size


def _group(group: Any) -> tuple[int, int]:
    """``(rank, world size)`` in ``group``; a :class:`~tdview.errors.ProcessGroupError`
    outside an initialized process group, or on a process that is not in ``group``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise ProcessGroupError(
            "tdview.distributed loads run inside an initialized torch.distributed process "
            "group: call torch.distributed.init_process_group(backend='gloo' or 'nccl') "
            "first (torchrun sets the environment it reads), or use tdview.load_memmap "
            "with index= in a single process."
        )
    rank = dist.get_rank(group)
    if rank < 0:  # torch answers -1 to a process outside the group
        raise ProcessGroupError(
            f"this process (global rank {dist.get_rank()}) is not a member of the group "
            "passed as group=: only the group's ranks share its rows. Call it on those "
            "ranks alone (the ranks given to torch.distributed.new_group), or without "
            "group= to split the rows across every rank."
        )
    return rank, dist.get_world_size(group)


def _shard_index(tree: Tree, subpath: Any, dim: int, rank: int, world: int) -> Any:
    """The index of rank ``rank``'s rows along batch dim ``dim`` of the subtree (in a
    folder of checkpoints, of the member ``subpath`` reaches)."""
    ckpt, inner = tree.load_target(subpath, leaf=False, mode=None)
    node = resolve_subpath(ckpt, inner)
    batch = ckpt.batch_size(node)
    if batch is None or -1 in batch:
        raise TDViewError(
            f"{ckpt.path}: the batch size of {subpath or 'the root'!r} is not known from "
            f"its metadata ({batch}): it cannot be split into rows across ranks."
        )
    if type(dim) is not int or not -len(batch) <= dim < len(batch):
        raise IndexError(
            f"{ckpt.path}: dim={dim!r} is not a batch dim of {subpath or 'the root'!r} "
            f"(batch size {list(batch)})."
        )
    dim %= len(batch)
    start, stop = rows_of_rank(batch[dim], rank, world)
    return (slice(None),) * dim + (slice(start, stop),)


def _global(group: Any, rank: int) -> int:
    """The global rank of ``rank`` of ``group`` (what the collectives' ``src`` names)."""
    import torch.distributed as dist

    return rank if group is None else dist.get_global_rank(group, rank)


def _agree(error: BaseException | None, src: int, group: Any) -> None:
    """Every rank learns whether rank ``src`` failed (so that none waits forever in a
    collective); raised on the others as a ``TDViewError`` with its message."""
    import torch.distributed as dist

    said = [None if error is None else f"{type(error).__name__}: {error}"]
    dist.broadcast_object_list(said, src=src, group=group)
    if said[0] is not None:
        if error is not None:
            raise error
        raise TDViewError(f"rank {src} could not read the checkpoint: {said[0]}")


def load_shard(
    path: str | os.PathLike[str] | Tree,
    subpath: Any = None,
    *,
    dim: int = 0,
    group: Any = None,
    device: Any = None,
    broadcast: bool = False,
) -> Any:
    """This rank's rows of the tensordict at ``subpath``: rank ``r`` of ``W`` gets rows
    ``[r*n//W, (r+1)*n//W)`` of batch dim ``dim`` (``n`` its size).

    Parameters
    ----------
    path : str, Path or Checkpoint
        A checkpoint folder, archive or URL (as :func:`tdview.load_memmap` takes), a
        folder of checkpoints (``subpath`` then starts with the member), or an open
        :class:`~tdview.Checkpoint` (or folder of them).
    subpath : nested key or str, optional
        The tensordict to split (the root by default).
    dim : int, optional
        The batch dim split across the ranks.
    group : torch.distributed.ProcessGroup, optional
        The group whose ranks share the rows (the default group by default): with a
        subgroup (``torch.distributed.new_group([0, 2])``), its rank ``r`` of ``W`` gets
        rows ``[r*n//W, (r+1)*n//W)``; a process outside it gets a
        ``ProcessGroupError``.
    device : optional
        Where this rank's rows go (``"cuda:<local rank>"`` with nccl).
    broadcast : bool, optional
        False (the default): each rank reads its own rows (an indexed load: together the
        ranks read each payload byte once). True: the group's rank 0 reads the subtree
        once and scatters the rows (tensordict's ``scatter``), for stores where each
        read costs more than sending the bytes; the other ranks read nothing.

    Returns
    -------
    What ``tdview.load_memmap(path, subpath=subpath)[rows]`` gives; an empty tensordict
    of the same structure on a rank whose share is empty (more ranks than rows).

    Raises
    ------
    ProcessGroupError
        Called outside an initialized process group (the message names
        ``torch.distributed.init_process_group``), or on a process not in ``group``.
    IndexError
        ``dim`` is not a batch dim of the subtree.

    Examples
    --------
    Run with ``torchrun --nproc_per_node=4 train.py``:

    >>> import torch.distributed as dist, tdview.distributed      # doctest: +SKIP
    >>> dist.init_process_group("gloo")                            # doctest: +SKIP
    >>> rows = tdview.distributed.load_shard("s3://bucket/rb", "storage")  # doctest: +SKIP
    """
    rank, world = _group(group)
    if broadcast:
        return _scattered(path, subpath, dim, group, device, rank, world)
    with _Opened(path) as ckpt:
        index = _shard_index(ckpt, subpath, dim, rank, world)
        return ckpt.load(subpath, device=device, index=index)


def _scattered(
    path: Any, subpath: Any, dim: int, group: Any, device: Any, rank: int, world: int
) -> Any:
    """:func:`load_shard` with ``broadcast=True``."""
    from tensordict import TensorDict

    src = _global(group, 0)
    shards = None
    error: BaseException | None = None
    if rank == 0:
        try:
            with _Opened(path) as ckpt:
                whole = ckpt.load(subpath)
                shards = [whole[_shard_index(ckpt, subpath, dim, r, world)] for r in range(world)]
        except Exception as caught:  # noqa: BLE001 - told to every rank, then raised
            error = caught
    _agree(error, src, group)
    return TensorDict().scatter(src, shards, group=group, device=device)


def load(
    path: str | os.PathLike[str] | Tree,
    subpath: Any = None,
    *,
    src: int = 0,
    group: Any = None,
    device: Any = None,
) -> Any:
    """The whole tensordict at ``subpath`` on every rank, read once, by rank ``src`` of
    the group, and sent with tensordict's ``broadcast`` (model weights: one read of the
    store, not one per rank).

    Raises
    ------
    ProcessGroupError
        Called outside an initialized process group.

    Examples
    --------
    >>> weights = tdview.distributed.load("https://host/ckpt.tdz", "model")  # doctest: +SKIP
    """
    from tensordict import TensorDict

    rank, _ = _group(group)
    whole = None
    error: BaseException | None = None
    if rank == src:
        try:
            with _Opened(path) as ckpt:
                whole = ckpt.load(subpath, device=device)
        except Exception as caught:  # noqa: BLE001 - told to every rank, then raised
            error = caught
    root = _global(group, src)
    _agree(error, root, group)
    sent = whole if whole is not None else TensorDict()
    return sent.broadcast(root, group=group, device=device)


class _Opened:
    """``path`` opened as a Checkpoint and closed after (an open one is left open)."""

    def __init__(self, path: Any) -> None:
        self._own = not isinstance(path, Tree)
        self._ckpt = open_tree(path) if self._own else path

    def __enter__(self) -> Tree:
        return self._ckpt

    def __exit__(self, *exc: object) -> None:
        if self._own:
            self._ckpt.close()
