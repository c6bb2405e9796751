"""What a search pattern matches: one set of rules for the kernel's search, ``tdview tree
--filter`` and the widget's in-memory data source.

The rules are written once more in TypeScript (``js/src/search-match.ts``) and both are
checked against the same cases (``tests/search_cases.json``), so the two cannot drift.

A node of path ``(k1, ..., kn)`` has two spellings: its **subpath** ``k1/.../kn`` (what
the widget shows and copies, what ``load_memmap(subpath=...)`` takes) and its
**state_dict key** ``k1. ... .kn`` (the names PyTorch gives module parameters). The
pattern is trimmed of surrounding white space (an empty pattern matches nothing), and
case is ignored: both sides are lower-cased (``str.lower``; ``toLowerCase`` in
TypeScript). What users paste is read first (:mod:`._pasted`): a key tuple
``("model", "layers", "0")`` or a bracket form ``state_dict['layers.0.w']`` is a **key
path**, which matches a node whose state_dict key ends with its keys joined by ``.`` (at
a key boundary: ``td['model']`` is no ``model_ema``), and the ``module.`` and
``_orig_mod.`` prefixes of wrapped models are dropped from the start of any pattern.

* A **glob**, a pattern holding ``*``, ``?`` or ``[``, matches a node when it matches, as
  a whole, the end of either spelling that starts at a key boundary: ``*.bias``,
  ``layers/*/norm1/*``, ``**/exp_avg``, ``model/layers/1?``. In the subpath spelling the
  separator is ``/``, in the state_dict spelling ``.``; ``*`` is any run of characters
  but the separator, ``?`` one character but the separator, ``[abc]``, ``[a-z]`` and
  ``[!abc]`` one character (never the separator) of, or not of, the set (a ``[`` with no
  closing ``]`` is a plain character), ``**`` any run, separators included, and ``**``
  followed by the separator also none at all (``**/exp_avg`` matches a top-level
  ``exp_avg``). A leading ``/`` anchors the glob at the root (``/model/*``); ``\\`` is a
  plain character (write ``[*]`` for a literal ``*``).
* Any **other pattern** matches a node when

  - its key contains the pattern (``norm`` matches ``norm1``, ``config.json`` the side
    file ``config.json``); or
  - the pattern holds a ``/`` and the node's subpath ends with it at a key boundary
    (``model/layers/0``, ``layers/0/linear1``): empty parts are dropped (``a//b/`` is
    ``a/b``) and a leading ``/`` anchors it at the root (``/model`` is only the
    top-level ``model``); or
  - the pattern holds a ``.`` and the node's state_dict key ends with it at a key
    boundary (``linear1.weight``, ``layers.0.linear1.weight``); a leading ``.`` is that
    boundary (``.weight`` matches every key named ``weight``).

A match is a node, not its subtree: ``model/layers`` matches the node ``model/layers``,
and a view that filters in place shows what is below it. A key that itself holds a
``/`` or a ``.`` is spelled with it as it is, so a pattern may match across it
(``openai/clip`` matches the key ``openai/clip-vit-large-patch14`` by its key alone).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import cast

from ._pasted import read_pattern
from ._paths import NestedPath

#: Characters that make a pattern a glob.
GLOB_CHARS = frozenset("*?[")


def _tokens(glob: str) -> list[tuple[str, object]]:
    """A lower-cased glob as tokens: ``("lit", char)``, ``("star", None)`` (``*``),
    ``("any", None)`` (``**``), ``("one", None)`` (``?``) and ``("set", (negated,
    members))``, members a list of ``(first, last)`` character ranges."""
    out: list[tuple[str, object]] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if i + 1 < n and glob[i + 1] == "*":
                while i < n and glob[i] == "*":
                    i += 1
                out.append(("any", None))
                continue
            out.append(("star", None))
        elif c == "?":
            out.append(("one", None))
        elif c == "[":
            parsed = _char_set(glob, i)
            if parsed is None:
                out.append(("lit", c))
            else:
                end, negated, members = parsed
                out.append(("set", (negated, members)))
                i = end
        else:
            out.append(("lit", c))
        i += 1
    return out


def _char_set(glob: str, start: int) -> tuple[int, bool, list[tuple[str, str]]] | None:
    """The set opened by ``[`` at ``start``: ``(index of its ], negated, ranges)``, or
    None when no ``]`` closes it. A ``]`` first in the set is a member; ``a-z`` is a
    range (one whose first character comes after its last holds nothing)."""
    j = start + 1
    negated = j < len(glob) and glob[j] == "!"
    if negated:
        j += 1
    body_start = j
    if j < len(glob) and glob[j] == "]":
        j += 1
    while j < len(glob) and glob[j] != "]":
        j += 1
    if j >= len(glob):
        return None
    body = glob[body_start:j]
    members: list[tuple[str, str]] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            if body[k] <= body[k + 2]:
                members.append((body[k], body[k + 2]))
            k += 3
        else:
            members.append((body[k], body[k]))
            k += 1
    return j, negated, members


def _body(tokens: Sequence[tuple[str, object]], sep: str) -> str:
    """The regular expression of ``tokens`` over a spelling whose separator is ``sep``."""
    s = re.escape(sep)
    parts: list[str] = []
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "lit":
            parts.append(re.escape(str(value)))
        elif kind == "star":
            parts.append(f"[^{s}]*")
        elif kind == "one":
            parts.append(f"[^{s}]")
        elif kind == "any":
            if i + 1 < len(tokens) and tokens[i + 1] == ("lit", sep):
                parts.append(f"(?:.*{s})?")  # ``**/``: any levels, none included
                i += 1
            else:
                parts.append(".*")
        else:
            negated, members = cast("tuple[bool, list[tuple[str, str]]]", value)
            ranges = "".join(
                re.escape(a) if a == b else f"{re.escape(a)}-{re.escape(b)}" for a, b in members
            )
            if negated:
                parts.append(f"[^{ranges}{s}]")
            else:
                parts.append(f"(?!{s})[{ranges}]" if ranges else "(?!)")
        i += 1
    return "".join(parts)


def _literal_tail(tokens: list[tuple[str, object]], sep: str) -> str:
    """What a key must end with for the glob to match its spelling: the glob's trailing
    plain characters after their last separator (a necessary condition, no more)."""
    tail: list[str] = []
    for kind, value in reversed(tokens):
        if kind != "lit":
            break
        tail.append(str(value))
    return "".join(reversed(tail)).rsplit(sep, 1)[-1]


def _literal_runs(tokens: Sequence[tuple[str, object]]) -> list[str]:
    """The runs of plain characters of ``tokens``."""
    runs, run = [], []
    for kind, value in tokens:
        if kind == "lit":
            run.append(str(value))
        elif run:
            runs.append("".join(run))
            run = []
    if run:
        runs.append("".join(run))
    return runs


#: The end of the text (``$`` would also match before a final newline, as JavaScript's
#: does not: a key may end with one).
_END = r"\Z"


def _compile(source: str) -> re.Pattern[str]:
    return re.compile(source, re.DOTALL)


class _GlobSide:
    """A glob over one spelling (separator ``sep``), applied to the spelling with a
    separator in front (``"/" + subpath``): a match starts after a separator.

    ``full`` is the whole test. The test of a level's keys splits it where it can: when
    the glob's last part (after its last separator) holds no ``**``, a key without a
    separator matches when it matches that part (``last``: every key for ``*``, one key
    for plain characters, else a regular expression) and the parent's spelling matches
    the rest (``head``, once per level; None: any parent). Keys holding the separator
    take the whole test."""

    __slots__ = ("foreign", "full", "head", "last", "last_kind", "need", "split", "tail")

    def __init__(self, tokens: list[tuple[str, object]], sep: str, anchored: bool) -> None:
        s = re.escape(sep)
        start = f"^{s}" if anchored else f"(?<={s})"
        self.full = _compile(start + _body(tokens, sep) + _END)
        self.tail = _literal_tail(tokens, sep)
        # the other spelling's separator, when the glob must hold it: a level where
        # neither the parent nor a key holds it has no match in this spelling
        other = "." if sep == "/" else "/"
        self.foreign = other if any(t == ("lit", other) for t in tokens) else ""
        # where to split: the last separator that the spelling must hold (not one that
        # ``a**/`` makes optional; ``**/`` at the start keeps the split exact)
        cut = max(
            (
                i
                for i, t in enumerate(tokens)
                if t == ("lit", sep) and (i <= 1 or tokens[i - 1] != ("any", None))
            ),
            default=-1,
        )
        last = tokens[cut + 1 :]
        self.head: re.Pattern[str] | None = None
        self.last: object = None
        if last == [("any", None)]:  # ``a/**`` (a subtree) or ``**`` (everything)
            # a key without the separator matches when the parent does: the glob's
            # separator before ``**`` cannot be in the key, and ``**`` takes the key
            self.split, self.last_kind = True, "all"
            self.head = self.full if cut >= 0 else None
            self.need = ""
            return
        self.split = all(kind != "any" for kind, _ in last)
        if not self.split:  # the whole test for every key (that ends as the glob does)
            self.last_kind, self.need = "regex", ""
            return
        if cut >= 0:
            self.head = _compile(start + _body(tokens[: cut + 1], sep) + _END)
        elif anchored:
            self.head = _compile(f"^{s}{_END}")
        if last == [("star", None)]:
            self.last_kind = "all"
        elif all(kind == "lit" for kind, _ in last):
            self.last_kind, self.last = "literal", "".join(str(v) for _, v in last)
        else:
            self.last_kind, self.last = "regex", _compile(_body(last, sep)).fullmatch
        self.need = max(_literal_runs(last), key=len, default="")  # in every key it matches

    @property
    def checks(self) -> bool:
        """Whether :meth:`head_ok` may be false."""
        return bool(self.foreign) or self.head is not None

    def head_ok(self, keys: Keys, parent: str) -> bool:
        """Whether keys below a parent spelled ``parent`` may match at all, and (split
        globs) whether the parent matches the glob's head."""
        foreign = self.foreign
        if foreign and foreign not in parent and not keys.holding(foreign):
            return False
        return self.head is None or self.head.search(parent) is not None

    def level(self, keys: Keys, parent: str, sep: str, ok: bool) -> list[int]:
        """Indices of the keys that match below a parent spelled ``parent``; ``ok`` is
        :meth:`head_ok` of it (split globs)."""
        lower, full = keys.lower, self.full.search
        if not self.split:
            if not ok:  # the glob's foreign separator is nowhere
                return []
            return [i for i in keys.ending(self.tail) if full(parent + lower[i])]
        with_sep = keys.holding(sep)
        hits: list[int] = []
        if ok:
            if self.last_kind == "literal":
                hits = list(keys.positions(str(self.last)))
            elif self.last_kind == "all":
                hits = list(range(len(lower)))
                if with_sep:
                    skip = set(with_sep)
                    hits = [i for i in hits if i not in skip]
            else:
                last, need = cast("Callable[[str], object]", self.last), self.need
                hits = [i for i, k in enumerate(lower) if need in k and last(k)]
        extra = [i for i in with_sep if full(parent + lower[i])]
        return sorted(set(hits).union(extra)) if extra else hits


class Keys:
    """The lower-cased keys of one level, with what a search asks of them, computed on
    first use: where each key is, and which keys hold a ``/`` or a ``.``. A level of a
    model's layer is searched once per layer: identical levels share one."""

    __slots__ = ("_ending", "_holding", "_positions", "lower", "plain")

    def __init__(self, lower: Sequence[str]) -> None:
        self.lower = tuple(lower)
        self._positions: dict[str, list[int]] | None = None
        self._holding: dict[str, list[int]] = {}
        self._ending: dict[str, list[int]] = {}
        #: No key holds a ``/`` or a ``.``: then a level's matches depend on its parent
        #: only through the few facts :meth:`Matcher.keys` tests once.
        self.plain = not self.holding("/") and not self.holding(".")

    def positions(self, key: str) -> list[int]:
        """Indices of the keys equal to ``key`` (lower-cased)."""
        found = self._positions
        if found is None:
            found = self._positions = {}
            for i, k in enumerate(self.lower):
                found.setdefault(k, []).append(i)
        return found.get(key, [])

    def ending(self, tail: str) -> list[int]:
        """Indices of the keys that end with ``tail``."""
        found = self._ending.get(tail)
        if found is None:
            found = self._ending[tail] = [i for i, k in enumerate(self.lower) if k.endswith(tail)]
        return found

    def holding(self, char: str) -> list[int]:
        """Indices of the keys that contain ``char``."""
        found = self._holding.get(char)
        if found is None:
            found = self._holding[char] = [i for i, k in enumerate(self.lower) if char in k]
        return found


class Matcher:
    """A compiled search pattern (the rules of the module docstring).

    Call it with a path; :meth:`keys` tests the keys of one level at once (what a walk
    over ``meta.json`` records uses, without a node per key).

    Examples
    --------
    >>> m = Matcher("linear1.weight")
    >>> m(("model", "layers", "0", "linear1", "weight")), m(("linear1", "bias"))
    (True, False)
    >>> Matcher("layers/*/norm1/*")(("model", "layers", "3", "norm1", "bias"))
    True
    >>> Matcher("*.bias").keys(Keys(["bias", "weight"]), "/m/", ".m.")
    [0]
    """

    __slots__ = (
        "_dot",
        "_dot_head",
        "_dot_last",
        "_glob",
        "_memo",
        "_needle",
        "_slash",
        "_slash_anchor",
        "_slash_head",
        "_slash_last",
        "_suffixed",
        "empty",
        "notes",
        "pattern",
    )

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        reading = read_pattern(pattern)
        #: What reading a pasted form did (:mod:`._pasted`), for people.
        self.notes = reading.notes
        keys = reading.keys
        text = keys.lower() if keys is not None else reading.text.strip().lower()
        self.empty = not text
        # a key path is matched whole: no key need contain it (None)
        self._needle: str | None = text if keys is None else None
        # (id of a level's Keys, what its parent decides) -> (the Keys, its matches)
        self._memo: dict[tuple[int, tuple[bool, bool]], tuple[Keys, list[int]]] = {}
        self._slash: str | None = None  # "/" + the subpath the pattern names
        self._dot: str | None = None  # "." + the state_dict key it names
        self._slash_anchor = False
        self._slash_head = self._slash_last = self._dot_head = self._dot_last = ""
        self._glob: tuple[_GlobSide, _GlobSide] | None = None
        self._suffixed = keys is not None
        if keys is not None:  # its state_dict spelling's end, nothing else
            self._set_dot("." + text)
            return
        if GLOB_CHARS & set(text):
            anchored = text.startswith("/")
            tokens = _tokens(text.lstrip("/"))
            self._glob = (_GlobSide(tokens, "/", anchored), _GlobSide(tokens, ".", anchored))
            return
        parts = [part for part in text.split("/") if part]
        if "/" in text and parts:
            self._slash_anchor = text.startswith("/")
            self._slash = "/" + "/".join(parts)
            self._slash_head, self._slash_last = "/".join(parts[:-1]), parts[-1]
        if "." in text:
            self._set_dot(text)
        self._suffixed = self._slash is not None or self._dot is not None

    def _set_dot(self, text: str) -> None:
        """The state_dict rule: the node's state_dict key ends with ``text``."""
        self._dot = text if text.startswith(".") else "." + text
        head, cut, self._dot_last = self._dot[1:].rpartition(".")
        self._dot_head = f".{head}." if cut else "."  # how the parent must end

    def __repr__(self) -> str:
        return f"Matcher({self.pattern!r})"

    def __call__(self, path: NestedPath) -> bool:
        """Whether the node at ``path`` (a tuple of keys, not the root) matches."""
        if self.empty or not path:
            return False
        lower = [key.lower() for key in path]
        slash, dot = "/" + "/".join(lower), "." + ".".join(lower)
        if self._glob is not None:
            return bool(self._glob[0].full.search(slash) or self._glob[1].full.search(dot))
        if self._needle is not None and self._needle in lower[-1]:
            return True
        if self._slash is not None and (
            slash == self._slash if self._slash_anchor else slash.endswith(self._slash)
        ):
            return True
        return self._dot is not None and dot.endswith(self._dot)

    def keys(self, keys: Keys, slash: str, dot: str) -> list[int]:
        """The indices of the keys of one level that match, ascending.

        Parameters
        ----------
        keys : Keys
            The level's keys, lower-cased.
        slash, dot : str
            The parent's two spellings lower-cased, each with a separator in front and
            behind (``"/model/layers/"`` and ``".model.layers."``; ``"/"`` and ``"."``
            at the root): :func:`spellings`.
        """
        if self.empty:
            return []
        glob = self._glob
        if glob is not None:
            by_slash, by_dot = glob
            ok_slash = by_slash.head_ok(keys, slash) if by_slash.checks else True
            ok_dot = by_dot.head_ok(keys, dot) if by_dot.checks else True
            flags = (ok_slash, ok_dot)
            # a side that is not split depends on the parent through the keys that end
            # as it does: none, and it does not
            memo = (
                keys.plain
                and (by_slash.split or not ok_slash or not keys.ending(by_slash.tail))
                and (by_dot.split or not ok_dot or not keys.ending(by_dot.tail))
            )
        else:
            flags = self._ends(slash, dot) if self._suffixed else _NO_ENDS
            memo = keys.plain
        if memo:  # the same keys below an equivalent parent: the same matches
            found = self._memo.get((id(keys), flags))
            if found is not None and found[0] is keys:
                return found[1]
        if glob is not None:
            hits = glob[0].level(keys, slash, "/", flags[0])
            if len(hits) < len(keys.lower):
                dot_hits = glob[1].level(keys, dot, ".", flags[1])
                hits = sorted(set(hits).union(dot_hits)) if dot_hits else hits
        else:
            hits = self._plain_hits(keys, slash, dot, flags)
        if memo:
            self._memo[id(keys), flags] = (keys, hits)
        return hits

    def _ends(self, slash: str, dot: str) -> tuple[bool, bool]:
        """Whether the parent ends as the subpath rule and the state_dict rule ask (for
        a key without a separator, all that the parent decides)."""
        ok_slash = ok_dot = False
        if self._slash is not None:
            head = self._slash_head
            end = f"/{head}/" if head else "/"
            ok_slash = slash == end if self._slash_anchor else slash.endswith(end)
        if self._dot is not None:
            ok_dot = dot.endswith(self._dot_head)
        return ok_slash, ok_dot

    def _plain_hits(self, keys: Keys, slash: str, dot: str, ends: tuple[bool, bool]) -> list[int]:
        lower, needle = keys.lower, self._needle
        hits: list[int] = []
        if needle is not None:
            held = "/" if "/" in needle else "." if "." in needle else ""
            candidates = keys.holding(held) if held else range(len(lower))
            hits = [i for i in candidates if needle in lower[i]]
        more = self._suffix_hits(keys, slash, dot, ends)
        return sorted(set(hits).union(more)) if more else hits

    def _suffix_hits(self, keys: Keys, slash: str, dot: str, ends: tuple[bool, bool]) -> list[int]:
        """The keys matched by the subpath and state_dict rules of a plain pattern: a key
        without the separator must be the pattern's last part (and the parent must end
        with the rest: ``ends``); a key holding it takes the whole test."""
        lower, found = keys.lower, []
        target = self._slash
        if target is not None:
            if ends[0]:
                found += keys.positions(self._slash_last)
            if self._slash_anchor:
                found += [i for i in keys.holding("/") if slash + lower[i] == target]
            else:
                found += [i for i in keys.holding("/") if (slash + lower[i]).endswith(target)]
        target = self._dot
        if target is not None:
            if ends[1]:
                found += keys.positions(self._dot_last)
            found += [i for i in keys.holding(".") if (dot + lower[i]).endswith(target)]
        return found


_NO_ENDS = (False, False)


def compile_pattern(pattern: str) -> Matcher:
    """The :class:`Matcher` of ``pattern`` (see the module docstring for the rules)."""
    return Matcher(pattern)


def spellings(path: NestedPath) -> tuple[str, str]:
    """The lower-cased spellings of a node's path, with a separator in front and behind,
    as :meth:`Matcher.keys` takes those of a parent: ``("/a/b/", ".a.b.")``."""
    lower = [key.lower() for key in path]
    if not lower:
        return "/", "."
    return "/" + "/".join(lower) + "/", "." + ".".join(lower) + "."


def path_matcher(pattern: str) -> Callable[[NestedPath], bool]:
    """The test :func:`~tdview.index.search` applies to each path: a :class:`Matcher`."""
    return Matcher(pattern)
