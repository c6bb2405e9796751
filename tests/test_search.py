"""The search rules (tdview/index/_match.py) against the cases shared with the JS tests
(tests/search_cases.json), and the search walk (tdview/index/_search.py): counts, pages,
order, the record walk against the node walk, collections, the CLI's --filter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from tdview.index import (
    Checkpoint,
    Matcher,
    iter_matches,
    path_matcher,
    search,
    search_page,
    walk,
)
from tdview.index._match import Keys, spellings

CASES_FILE = Path(__file__).parent / "search_cases.json"
DOC = json.loads(CASES_FILE.read_text())
CASES = DOC["cases"]


def _case_id(case: dict) -> str:
    return f"{case['tree']}:{case['pattern']!r}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_case_by_path(case: dict) -> None:
    """``Matcher(pattern)(path)`` for every path of the case's tree."""
    tree = DOC["trees"][case["tree"]]
    match = Matcher(case["pattern"])
    assert [p for p in tree if match(tuple(p))] == case["matches"], case["why"]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_case_notes(case: dict) -> None:
    """What reading the pattern did: the notes a search reply carries."""
    assert list(Matcher(case["pattern"]).notes) == case.get("notes", []), case["why"]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_case_by_level(case: dict) -> None:
    """``Matcher.keys`` (what the record walk uses) agrees with the test per path."""
    tree = DOC["trees"][case["tree"]]
    levels: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path in tree:
        levels[tuple(path[:-1])].append(path[-1])
    match = Matcher(case["pattern"])
    found = set()
    for parent, keys in levels.items():
        slash, dot = spellings(parent)
        for i in match.keys(Keys([k.lower() for k in keys]), slash, dot):
            found.add((*parent, keys[i]))
    assert sorted(found) == sorted(tuple(p) for p in case["matches"])


def test_every_case_has_a_reason_and_the_trees_are_in_load_order() -> None:
    assert all(case["why"] for case in CASES)
    for tree in DOC["trees"].values():
        paths = [tuple(p) for p in tree]
        assert len(set(paths)) == len(paths)
        for path in paths:  # parents come before their children
            assert len(path) == 1 or path[:-1] in paths[: paths.index(path)]


def _write_tree(paths: list[list[str]], root: Path) -> Path:
    """A checkpoint written by tensordict whose nodes are exactly ``paths`` (a path with
    none below it is a leaf), in that order."""
    below = {tuple(p[:-1]) for p in paths}

    def build(prefix: tuple[str, ...]) -> TensorDict:
        td = TensorDict()
        for p in paths:
            if tuple(p[:-1]) == prefix:
                key = tuple(p)
                td[p[-1]] = build(key) if key in below else torch.zeros(2)
        return td

    build(()).memmap(root)
    return root


@pytest.fixture(scope="module")
def model_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Checkpoint:
    root = _write_tree(DOC["trees"]["model"], tmp_path_factory.mktemp("search") / "model")
    return Checkpoint(root)


@pytest.fixture(scope="module")
def pasted_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Checkpoint:
    """A from_module-like tree beside a flat state_dict (dotted keys) and an optimizer
    state keyed by parameter name, written by tensordict."""
    root = _write_tree(DOC["trees"]["pasted"], tmp_path_factory.mktemp("search") / "pasted")
    return Checkpoint(root)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["tree"] in ("model", "pasted")], ids=_case_id
)
def test_case_on_a_checkpoint(case: dict, model_ckpt: Checkpoint, pasted_ckpt: Checkpoint) -> None:
    """The search of a real checkpoint finds the case's matches, in its order, and
    says how it read the pattern."""
    ckpt = model_ckpt if case["tree"] == "model" else pasted_ckpt
    page = search_page(ckpt, case["pattern"], limit=1000)
    assert page.matches == [tuple(p) for p in case["matches"]]
    assert page.total == len(case["matches"])
    assert list(page.notes) == case.get("notes", [])
    uncounted = search_page(ckpt, case["pattern"], limit=1, count=False)
    assert list(uncounted.notes) == case.get("notes", [])


@pytest.mark.parametrize("case", DOC["pages"], ids=lambda c: c["why"][:40])
def test_page_case_on_a_checkpoint(case: dict, model_ckpt: Checkpoint) -> None:
    """A page with the count on or off, as the in-memory data source gives it too."""
    page = search_page(
        model_ckpt, case["pattern"], offset=case["offset"], limit=case["limit"], count=case["count"]
    )
    assert page.matches == [tuple(p) for p in case["matches"]], case["why"]
    assert (page.total, page.counted, page.truncated) == (
        case["total"],
        case["counted"],
        case["truncated"],
    ), case["why"]


def test_the_record_walk_finds_what_the_node_walk_finds(demo_paths: dict[str, Path]) -> None:
    """On the demo (tensorclasses, lazy stacks, non-tensor data, a view of nothing):
    the same paths, in the same order, as testing every node of ``walk``."""
    for kind in ("directory", "archive"):
        with Checkpoint(demo_paths[kind]) as ckpt:
            every = [node.path for node in walk(ckpt, ckpt.root)]
            for pattern in (
                "o",
                "*",
                "weight",
                "0",
                "episodes/*",
                "exp_avg",
                "**/step",
                "layers.0",
                "replay/next",
                "model/layers/0/attn",
            ):
                match = path_matcher(pattern)
                assert list(iter_matches(ckpt, pattern)) == [p for p in every if match(p)], (
                    kind,
                    pattern,
                )


def test_counts_and_pages(demo_paths: dict[str, Path]) -> None:
    with Checkpoint(demo_paths["directory"]) as ckpt:
        everything = list(iter_matches(ckpt, "*"))
        page = search_page(ckpt, "*", offset=5, limit=7)
        assert page.total == len(everything) and page.matches == everything[5:12]
        assert page.truncated
        last = search_page(ckpt, "*", offset=len(everything) - 2, limit=7)
        assert last.matches == everything[-2:] and not last.truncated
        assert search_page(ckpt, "*", offset=10**9).matches == []
        count = search_page(ckpt, "*", limit=0)
        assert count.total == len(everything) and count.matches == []
        under = search_page(ckpt, "weight", under="model/layers/0", limit=100)
        assert under.matches and all(p[:3] == ("model", "layers", "0") for p in under.matches)
        assert search(ckpt, "*", limit=3) == (everything[:3], True)


def test_a_thousand_matches_are_all_counted(tmp_path: Path) -> None:
    """The issue's case: 1,000 matches are 1,000, not "50+", and every page is reached."""
    td = TensorDict(
        {f"m{i}": TensorDict(w=torch.zeros(1), bias=torch.zeros(1)) for i in range(500)}
    )
    td.memmap(tmp_path / "ckpt")
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        pages = [search_page(ckpt, "*", offset=o, limit=300) for o in range(0, 1500, 300)]
        assert {p.total for p in pages} == {1500}
        flat = [m for p in pages for m in p.matches]
        assert len(flat) == len(set(flat)) == 1500
        assert search_page(ckpt, "bias").total == 500


def test_a_second_search_reads_no_metadata(tmp_path: Path) -> None:
    td = TensorDict(
        {f"g{i}": TensorDict({f"k{j}": torch.zeros(1) for j in range(5)}) for i in range(20)}
    )
    td.memmap(tmp_path / "ckpt")
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        assert search_page(ckpt, "k3").total == 20
        read = ckpt.meta_bytes_read
        assert search_page(ckpt, "g1*/k*").total == 11 * 5
        assert ckpt.meta_bytes_read == read


def test_search_is_cancellable(demo_paths: dict[str, Path]) -> None:
    from tdview.errors import Cancelled
    from tdview.index import cancellable

    def stop() -> None:
        raise Cancelled("stop")

    with Checkpoint(demo_paths["directory"]) as ckpt, cancellable(stop), pytest.raises(Cancelled):
        search_page(ckpt, "*")


def test_a_missing_folder_is_a_match_with_nothing_below(tmp_path: Path) -> None:
    import shutil

    TensorDict(a=TensorDict(w=torch.zeros(1)), b=torch.zeros(1)).memmap(tmp_path / "ckpt")
    shutil.rmtree(tmp_path / "ckpt" / "a")
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        assert list(iter_matches(ckpt, "*")) == [("b",), ("a",)]
        assert [n.path for n in walk(ckpt, ckpt.root)] == [("b",), ("a",)]


def test_collection_search_spans_member_names(tmp_path: Path) -> None:
    """A subpath through a member's name, and a state_dict key inside members."""
    td = TensorDict(model=TensorDict(linear1=TensorDict(weight=torch.zeros(1))))
    td.memmap(tmp_path / "run" / "step_1000")
    td.save(tmp_path / "run" / "step_2000.tdz")
    with Checkpoint(tmp_path / "run") as run:
        assert list(iter_matches(run, "step_1000/model")) == [("step_1000", "model")]
        assert list(iter_matches(run, "linear1.weight")) == [
            ("step_1000", "model", "linear1", "weight"),
            ("step_2000.tdz", "model", "linear1", "weight"),
        ]
        page = search_page(run, "*", offset=1, limit=2)
        assert page.total == 8 and page.matches == [
            ("step_1000", "model"),
            ("step_1000", "model", "linear1"),
        ]
        assert search_page(run, "weight", under="step_2000.tdz").matches == [
            ("step_2000.tdz", "model", "linear1", "weight")
        ]
    from tdview.protocol import Session, handle

    session = Session(Checkpoint(tmp_path / "run"), "run")
    reply, _ = handle(
        session,
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "search",
            "params": {"pattern": "*", "limit": 3},
        },
    )
    assert reply is not None and reply["ok"], reply
    nodes = reply["result"]["nodes"]
    assert [(n["path"], n["kind"]) for n in nodes] == [
        (["step_1000"], "checkpoint"),
        (["step_1000", "model"], "tensordict"),
        (["step_1000", "model", "linear1"], "tensordict"),
    ]
    member = {"source": "run/step_1000", "depth": 1, "container": "directory"}
    assert all(n["member"] == member for n in nodes)


def test_cli_filter_takes_a_state_dict_key(model_ckpt: Checkpoint) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tdview",
            "tree",
            model_ckpt.path,
            "--filter",
            "layers.1.linear1.weight",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    keys = [line.split("── ")[1].split("  ")[0] for line in out.stdout.splitlines()[1:]]
    assert keys == ["model", "layers", "1", "linear1", "weight"]


_KEY = st.sampled_from(["a", "b", "A", "a.b", "a/b", "1", "_", "ab"]) | st.text(
    alphabet="ab.A/_1", min_size=1, max_size=4
)
_PATTERN = st.text(alphabet="ab.A/*?[]!-1 ", max_size=8)
#: What users paste: key tuples, bracket forms, the prefixes of wrapped models.
_PASTED = st.one_of(
    st.lists(_KEY, min_size=1, max_size=3).map(lambda ks: f"({', '.join(map(repr, ks))},)"),
    st.lists(_KEY, min_size=1, max_size=3).map(lambda ks: "td" + "".join(f"[{k!r}]" for k in ks)),
    st.tuples(
        st.sampled_from(["module.", "_orig_mod.", "/module/", "module._orig_mod."]), _PATTERN
    ).map("".join),
)


@settings(max_examples=400, deadline=None)
@given(
    tree=st.lists(st.lists(_KEY, min_size=1, max_size=4), max_size=12),
    pattern=_PATTERN | _PASTED,
)
def test_the_level_test_is_the_path_test(tree: list[list[str]], pattern: str) -> None:
    """:meth:`Matcher.keys` (split per level, with shortcuts) agrees with the whole test
    of each path, whatever the keys hold (separators included) and the pattern is."""
    paths = {tuple(p[:i]) for p in tree for i in range(1, len(p) + 1)}
    levels: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path in sorted(paths):
        levels[path[:-1]].append(path[-1])
    match = Matcher(pattern)
    shared: dict[tuple[str, ...], Keys] = {}  # as identical meta.json files share theirs
    for parent, keys in levels.items():
        slash, dot = spellings(parent)
        lower = tuple(k.lower() for k in keys)
        fast = match.keys(shared.setdefault(lower, Keys(lower)), slash, dot)
        assert fast == [i for i, k in enumerate(keys) if match((*parent, k))], (parent, keys)


def test_odd_keys_and_a_broken_folder_are_found_as_the_node_walk_finds_them(tmp_path: Path) -> None:
    """Keys the writer encodes in folder names, and a sub-folder whose meta.json is not
    JSON: the record walk sees the tree the index sees."""
    odd = ["a b", "x%y", "π", "dots.in.key", "UPPER", "0"]
    td = TensorDict(
        {k: TensorDict({k: TensorDict(w=torch.zeros(1)), "v": torch.zeros(1)}) for k in odd}
    )
    td["broken"] = TensorDict(inner=TensorDict(w=torch.zeros(1)))
    td.memmap(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "broken" / "inner" / "meta.json").write_text("{not json")
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        every = [node.path for node in walk(ckpt, ckpt.root)]
    for pattern in ("*", "w", "π/*", "dots.in.key", "x%y/x%y/w", "**/w", "broken/*"):
        with Checkpoint(tmp_path / "ckpt") as ckpt:  # a fresh index: the cold walk
            match = path_matcher(pattern)
            assert list(iter_matches(ckpt, pattern)) == [p for p in every if match(p)], pattern
