"""Optimizer state by parameter name: which parameter each ``state/<i>`` belongs to.

``optimizer.state_dict()`` saved as a tensordict (``TensorDict({"model": ..., "optim":
optim.state_dict()})`` with the state's ids as strings) keys its moments by number:
``optim/state/3/exp_avg``. torch numbers the parameters in ``param_groups`` order, each
group's ``params`` listing its ids. This module finds, from ``meta.json`` alone, the
parameter of each number, in the model saved beside the optimizer (a sibling node: a
``from_module`` tree or a state dict), and says why when it cannot:

* ``param_groups`` kept as JSON (a ``NonTensorStack``: tensordict's way with a list of
  dicts) gives each group's ids; kept as tensors (a dict of groups), each group's
  ``params`` is a 1-D int64 leaf whose length is enough (its ids are the next ones in
  order, as torch numbers them): no payload byte is read.
* The model's parameters are its floating-point leaves in load order (``named_parameters``
  order: ``from_module`` and ``state_dict`` keep it), less the buffers of torch's norm
  layers (``running_mean``, ``running_var``; ``num_batches_tracked`` is an integer).
* A state's shape is its moments' (every leaf but ``step``); an id without state has
  none to check.
* **In order**: the ids taken by the parameters in order (frozen ones skipped) where the
  shapes leave exactly one way to do so: one group, or groups that take the model's
  parameters in order.
* **By shape**: otherwise, an id is labelled only when its shape is that of exactly one
  parameter; the others get the reason (``3 parameters of model have shape [32, 32]``).
* Several models beside the optimizer that fit equally: no label, and the reason names
  them. Never a guess.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from ..errors import TDViewError
from ._cancel import cancel_point
from ._loading import Indexed as Checkpoint  # typed by what it reads: no circle
from ._node import LEAF, NON_TENSOR_STACK, TENSORCLASS, TENSORDICT, Node
from ._paths import NestedPath, show_path

__all__ = ["OptimizerMap", "ParamLabel", "optimizer_map", "param_label"]

#: Buffers of torch's norm layers that are floating point (known by name: ``meta.json``
#: does not tell a parameter from a buffer).
NORM_BUFFERS = frozenset({"running_mean", "running_var"})
#: The most cells of the in-order count (ids x the parameters they may skip).
MAX_ORDER_CELLS = 4_000_000
STATE, GROUPS = "state", "param_groups"


@dataclass(frozen=True)
class ParamLabel:
    """The parameter of one ``state/<i>``: its name (``"encoder.0.weight"``) and path in
    the model, or None and the reason."""

    name: str | None
    path: NestedPath | None
    reason: str | None


@dataclass
class OptimizerMap:
    """The parameter of each state id of one optimizer node (``labels``), the reason of
    each id left without one (``reasons``), and ``reason`` for them all when no mapping
    was made (no model, the ids numbered otherwise...)."""

    optimizer: NestedPath
    model: NestedPath | None = None
    labels: dict[str, tuple[str, NestedPath]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    reason: str | None = None
    rule: str | None = None  # "order" or "shape"

    def label(self, key: str) -> ParamLabel:
        found = self.labels.get(key)
        if found is not None:
            return ParamLabel(found[0], found[1], None)
        why = self.reasons.get(key) or self.reason or "no parameter is known for this state"
        return ParamLabel(None, None, why)


@dataclass(frozen=True)
class _Param:
    name: str
    path: NestedPath
    shape: tuple[int, ...]


_MAPS: weakref.WeakKeyDictionary[Checkpoint, dict[NestedPath, OptimizerMap | None]] = (
    weakref.WeakKeyDictionary()
)


def param_label(ckpt: Checkpoint, node: Node) -> ParamLabel | None:
    """The parameter of an optimizer's ``state/<i>`` node; None for any other node.

    Examples
    --------
    >>> param_label(ckpt, ckpt.node("optim/state/0"))                   # doctest: +SKIP
    ParamLabel(name='encoder.weight', path=('model', 'encoder', 'weight'), reason=None)
    """
    path = node.path
    if len(path) < 2 or path[-2] != STATE or not _numbered(path[-1]) or node.kind != TENSORDICT:
        return None
    found = optimizer_map(ckpt, path[:-2])
    return None if found is None else found.label(path[-1])


def state_labels(ckpt: Checkpoint, state_path: NestedPath, keys: tuple[str, ...]) -> list[str]:
    """The parameter name of each of ``keys`` (children of ``state_path``), "" where none:
    what a search matches beside the keys (empty when the node is no optimizer state)."""
    if not state_path or state_path[-1] != STATE:
        return []
    found = optimizer_map(ckpt, state_path[:-1])
    if found is None or not found.labels:
        return []
    return [found.labels[key][0] if key in found.labels else "" for key in keys]


def optimizer_map(ckpt: Checkpoint, path: NestedPath) -> OptimizerMap | None:
    """The mapping of the optimizer state dict at ``path`` (cached per checkpoint), or
    None when the node there is not one (no ``state`` of numbered entries beside
    ``param_groups``).

    Examples
    --------
    >>> optimizer_map(ckpt, ("optim",)).labels["0"]                     # doctest: +SKIP
    ('encoder.weight', ('model', 'encoder', 'weight'))
    """
    maps = _MAPS.get(ckpt)
    if maps is None:
        maps = _MAPS[ckpt] = {}
    if path not in maps:
        try:
            maps[path] = _build(ckpt, ckpt.node(path))
        except (TDViewError, OSError):
            maps[path] = None
    return maps[path]


def _numbered(key: str) -> bool:
    return key.isascii() and key.isdigit()


def _child(ckpt: Checkpoint, node: Node, key: str) -> Node | None:
    return next((c for c in ckpt.children(node) if c.key == key), None)


def _is_optimizer(ckpt: Checkpoint, node: Node) -> bool:
    if node.kind != TENSORDICT:
        return False
    state, groups = _child(ckpt, node, STATE), _child(ckpt, node, GROUPS)
    if state is None or groups is None or state.kind != TENSORDICT:
        return False
    return all(_numbered(c.key) and not c.is_leaf for c in ckpt.children(state))


def _build(ckpt: Checkpoint, node: Node) -> OptimizerMap | None:
    if not _is_optimizer(ckpt, node):
        return None
    result = OptimizerMap(node.path)
    state = _child(ckpt, node, STATE)
    assert state is not None
    shapes = {c.key: _state_shape(ckpt, c) for c in ckpt.children(state)}
    if not shapes:
        result.reason = "the optimizer keeps no state (SGD without momentum, or no step yet)"
        return result
    ids = _group_ids(ckpt, node, result)
    if ids is None:
        return result
    unknown = sorted(set(shapes) - set(map(str, ids)), key=int)
    if unknown:
        result.reason = f"state {unknown[0]} is in no param group"
        return result
    wanted = [shapes.get(str(i)) for i in ids]
    _choose_model(ckpt, node, wanted, result)
    return result


def _state_shape(ckpt: Checkpoint, state: Node) -> tuple[int, ...] | None:
    """The shape of a state's moments (every leaf but ``step``), None when none or when
    they disagree."""
    shapes = {
        c.record.shape
        for c in ckpt.children(state)
        if c.is_leaf and c.record is not None and c.key != "step" and not c.record.is_nested
    }
    return shapes.pop() if len(shapes) == 1 else None


def _group_ids(ckpt: Checkpoint, node: Node, result: OptimizerMap) -> list[int] | None:
    """The ids of the groups in order, checked to be numbered in ``param_groups`` order."""
    groups = _child(ckpt, node, GROUPS)
    assert groups is not None
    lists: list[list[int]] = []
    if groups.kind == NON_TENSOR_STACK and groups.has_value and isinstance(groups.value, list):
        for group in groups.value:
            params = group.get("params") if isinstance(group, dict) else None
            if not isinstance(params, list) or not all(type(p) is int for p in params):
                result.reason = "param_groups holds a group without a list of params"
                return None
            lists.append(params)
    elif groups.kind == TENSORDICT:
        members = ckpt.children(groups)
        if [m.key for m in members] != [str(g) for g in range(len(members))]:
            result.reason = "param_groups is not numbered 0, 1, ..."
            return None
        start = 0
        for member in members:
            params = _child(ckpt, member, "params") if not member.is_leaf else None
            record = params.record if params is not None else None
            if record is None or len(record.shape) != 1 or record.dtype.kind not in ("int", "uint"):
                result.reason = f"param_groups/{member.key} has no 1-D integer params"
                return None
            lists.append(list(range(start, start + record.shape[0])))  # torch's numbering
            start += record.shape[0]
    else:
        result.reason = "param_groups is neither a list of groups nor a tensordict of groups"
        return None
    ids = [i for group in lists for i in group]
    if ids != list(range(len(ids))):
        result.reason = "the ids of param_groups are not numbered in order (0, 1, ...)"
        return None
    return ids


def _choose_model(
    ckpt: Checkpoint, node: Node, wanted: list[tuple[int, ...] | None], result: OptimizerMap
) -> None:
    """Map the ids on the one model beside the optimizer that fits (see the module)."""
    if len(node.path) == 0:
        result.reason = "the optimizer state is the checkpoint's root: no model beside it"
        return
    parent = ckpt.node(node.path[:-1])
    models = [
        c
        for c in ckpt.children(parent)
        if c.kind in (TENSORDICT, TENSORCLASS) and c is not node and not _is_optimizer(ckpt, c)
    ]
    fits: list[OptimizerMap] = []
    for model in models:
        trial = OptimizerMap(node.path, model.path)
        if _map_on(_params(ckpt, model), wanted, trial):
            fits.append(trial)
    if not models:
        result.reason = f"no model beside the optimizer state in {show_path(parent.path) or '/'}"
    elif not fits:
        names = ", ".join(show_path(m.path) for m in models)
        result.reason = f"the shapes of the optimizer state fit no model beside it ({names})"
    elif len(fits) > 1:
        names = ", ".join(show_path(f.model or ()) for f in fits)
        result.reason = f"the shapes fit several models ({names}): which one is not known"
    else:
        found = fits[0]
        result.model, result.labels, result.reasons = found.model, found.labels, found.reasons
        result.rule = found.rule


def _params(ckpt: Checkpoint, model: Node) -> list[_Param]:
    """The model's parameters: floating-point leaves in load order, norm buffers out."""
    found: list[_Param] = []
    stack = [iter(ckpt.children(model))]
    while stack:
        cancel_point()
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        if child.kind != LEAF:
            stack.append(iter(ckpt.children(child)))
            continue
        record = child.record
        if record is None or record.is_nested or record.dtype.kind not in ("float", "complex"):
            continue
        if child.key.rsplit(".", 1)[-1] in NORM_BUFFERS:  # a state dict's "bn.running_mean" too
            continue
        inner = child.path[len(model.path) :]
        found.append(_Param(".".join(inner), child.path, record.shape))
    return found


def _map_on(params: list[_Param], wanted: list[tuple[int, ...] | None], out: OptimizerMap) -> bool:
    """Fill ``out`` with the ids' parameters; False when the shapes fit no assignment."""
    if len(wanted) > len(params):
        return False
    order = _in_order(params, wanted)
    if order is not None:
        out.rule = "order"
        for i, p in enumerate(order):
            out.labels[str(i)] = (params[p].name, params[p].path)
        return True
    return _by_shape(params, wanted, out)


def _in_order(params: list[_Param], wanted: list[tuple[int, ...] | None]) -> list[int] | None:
    """The one way the ids take the parameters in order (skipping some), where the shapes
    leave exactly one; else None."""
    n, m = len(wanted), len(params)
    if n == 0:
        return None
    slack = m - n  # id i takes a parameter i .. i + slack
    if n * (slack + 1) > MAX_ORDER_CELLS:
        return None

    def fits(i: int, j: int) -> bool:
        shape = wanted[i]
        return shape is None or shape == params[j].shape

    # ways[i][d]: ways (capped at 2) to place ids 0..i with id i on parameter i + d
    ways: list[list[int]] = []
    previous = [1] * (slack + 1)  # before id 0: any start
    for i in range(n):
        row, running = [], 0
        for d in range(slack + 1):
            if i == 0:
                running = 1
            else:
                running = min(2, running + previous[d])  # id i-1 at i-1+d' with d' <= d
            row.append(min(2, running) if fits(i, i + d) else 0)
        ways.append(row)
        previous = row
    if sum(ways[-1]) != 1:
        return None
    taken, d = [], ways[-1].index(1)
    for i in range(n - 1, -1, -1):
        taken.append(i + d)
        if i:
            d = next(e for e in range(d, -1, -1) if ways[i - 1][e])
    return taken[::-1]


def _by_shape(
    params: list[_Param], wanted: list[tuple[int, ...] | None], out: OptimizerMap
) -> bool:
    """Label each id whose shape is that of one parameter only; False when some shape
    has more ids than parameters."""
    by_shape: dict[tuple[int, ...], list[_Param]] = {}
    for p in params:
        by_shape.setdefault(p.shape, []).append(p)
    counts: dict[tuple[int, ...], int] = {}
    for shape in wanted:
        if shape is not None:
            counts[shape] = counts.get(shape, 0) + 1
    if any(count > len(by_shape.get(shape, ())) for shape, count in counts.items()):
        return False
    out.rule = "shape"
    for i, shape in enumerate(wanted):
        if shape is None:
            continue
        same = by_shape[shape]
        if len(same) == 1:
            out.labels[str(i)] = (same[0].name, same[0].path)
        else:
            out.reasons[str(i)] = (
                f"{len(same)} parameters have shape {list(shape)} and the param groups do "
                "not take them in order: the shapes do not say which"
            )
    return True
