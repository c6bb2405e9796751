"""The sections of a checkpoint: the model, the optimizer, buffers, the rest.

Sections answer "why is my checkpoint 128 MB when the model is 21 MB". A node's section
is decided by the first of its ancestors (itself included) within
:data:`SECTION_DEPTH` keys of its checkpoint's root that a rule recognises, from
``meta.json`` and names alone:

1. ``optimizer``: a node whose children include ``state`` and ``param_groups`` (an
   optimizer's ``state_dict`` saved as a tensordict), or a key with a word ``optim``,
   ``optimizer(s)`` or ``opt`` (words split on ``_ - .`` and spaces: ``optim_state``,
   ``optimizer``);
2. ``buffers``: a torchrl replay-buffer storage (a ``storage_metadata.json`` beside its
   ``meta.json``, as :func:`tdview.index.storage_rows` reads it), or a key with a word
   ``replay`` or named ``rb``/``replay_buffer``;
3. ``model``: the node whose parameters an optimizer's states were mapped to
   (:func:`tdview.index.optimizer_map`: shapes that leave exactly one assignment), or a
   key with a word ``model(s)``, ``module``, ``net``, ``network``, ``policy``,
   ``actor``, ``critic``, ``backbone``, ``encoder`` or ``decoder``, or named
   ``state_dict``, ``params``, ``parameters`` or ``weights``.

Whatever no rule recognises is ``rest``: a name that merely looks like a model is not
taken for one beyond these words, and nothing is guessed from shapes.
"""

from __future__ import annotations

import re

from ..errors import TDViewError
from ..index import NestedPath, Node, Tree, optimizer_map, storage_rows

MODEL, OPTIMIZER, BUFFERS, REST = "model", "optimizer", "buffers", "rest"
#: The sections, in the order the view lists them.
SECTIONS = (MODEL, OPTIMIZER, BUFFERS, REST)
#: How many keys below a checkpoint's root a section is looked for (``trainer/model``).
SECTION_DEPTH = 2

_WORDS = re.compile(r"[_\-. ]+")
_OPTIMIZER_WORDS = {"optim", "optimizer", "optimizers", "opt"}
_BUFFER_WORDS = {"replay"}
_BUFFER_NAMES = {"rb", "replay_buffer", "replaybuffer"}
_MODEL_WORDS = {
    "model",
    "models",
    "module",
    "net",
    "network",
    "policy",
    "actor",
    "critic",
    "backbone",
    "encoder",
    "decoder",
}
_MODEL_NAMES = {"state_dict", "params", "parameters", "weights"}


class SectionRules:
    """The rules of the module on one checkpoint, each node judged once."""

    def __init__(self, owner: Tree) -> None:
        self.owner = owner
        self._found: dict[NestedPath, str | None] = {}
        self._models: set[NestedPath] | None = None

    def section(self, node: Node) -> str | None:
        """The section the rules give ``node`` or an ancestor within SECTION_DEPTH."""
        path = node.path
        for depth in range(min(len(path), SECTION_DEPTH) + 1):
            at = path[:depth]
            if at in self._found:
                found = self._found[at]
            else:
                found = self._rule(node if depth == len(path) else self.owner.node(at))
                if not node.is_leaf or depth < len(path):
                    self._found[at] = found  # a folder's, asked again for its children
            if found is not None:
                return found
        return None

    def _rule(self, node: Node) -> str | None:
        if not node.is_leaf and _optimizer_like(self.owner, node):
            return OPTIMIZER
        if not node.is_leaf and _storage(self.owner, node):
            return BUFFERS
        if node.path in self._model_paths():
            return MODEL
        return by_name(node.key) if node.path else None

    def _model_paths(self) -> set[NestedPath]:
        """The models that optimizers near the root (the root or its children) were
        mapped to, parameter by parameter."""
        if self._models is None:
            self._models = set()
            root = self.owner.root
            for node in [root, *_nested(self.owner, root)]:
                if _optimizer_like(self.owner, node):
                    found = optimizer_map(self.owner, node.path)
                    if found is not None and found.model is not None and found.labels:
                        self._models.add(found.model)
        return self._models


def by_name(key: str) -> str | None:
    """The section a key's words name (None: none).

    Examples
    --------
    >>> by_name("optim_state"), by_name("ema_model"), by_name("replay_buffer"), by_name("step")
    ('optimizer', 'model', 'buffers', None)
    """
    key = key.lower()
    words = set(_WORDS.split(key))
    if words & _OPTIMIZER_WORDS:
        return OPTIMIZER
    if words & _BUFFER_WORDS or key in _BUFFER_NAMES:
        return BUFFERS
    if words & _MODEL_WORDS or key in _MODEL_NAMES:
        return MODEL
    return None


def _nested(owner: Tree, node: Node) -> list[Node]:
    try:
        return [child for child in owner.children(node) if not child.is_leaf]
    except (TDViewError, OSError):
        return []


def _optimizer_like(owner: Tree, node: Node) -> bool:
    """An optimizer's ``state_dict``: ``state`` and ``param_groups`` children."""
    try:
        return bool(owner.lookup(node, "state") and owner.lookup(node, "param_groups"))
    except (TDViewError, OSError):
        return False


def _storage(owner: Tree, node: Node) -> bool:
    try:
        return storage_rows(owner, node) is not None
    except (TDViewError, OSError):
        return False  # an unreadable storage_metadata.json: no rule from it
