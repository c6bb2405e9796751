"""Loads across the ranks of a ``torch.distributed`` process group.

Each rank reads its share of a checkpoint's rows and nothing more, on the engine users
already run (``torch.distributed``: gloo on CPU, nccl on GPU), not a transport of
tdview's own:

* :func:`load_shard`: rank ``r`` of ``W`` gets rows ``[r*n//W, (r+1)*n//W)`` of batch
  dim ``dim``, by an indexed load (``tdview.load_memmap(..., index=...)``: a local
  checkpoint maps them, a remote one reads their byte ranges), so that together the ranks
  read each payload byte once; with ``broadcast=True`` rank 0 reads the subtree once and
  scatters the rows (tensordict's ``scatter``);
* :func:`load`: every rank gets the whole subtree, read once by rank ``src`` and sent
  with tensordict's ``broadcast`` (model weights);
* :func:`rows_of_rank`: which rows a rank gets.

Stands on the loader (its face) and the index; imports torch when called.
"""

from __future__ import annotations

from ._shard import load, load_shard, rows_of_rank

__all__ = ["load", "load_shard", "rows_of_rank"]
