"""The layers import in one direction (ARCHITECTURE.md, "Layers").

Every ``import`` and ``from ... import`` statement of every module under ``tdview/`` is
read with :mod:`ast` (nothing is imported), resolved to the tdview module it names, and
checked against :data:`MAY_IMPORT`: a layer may import the layers to its left in the
picture ``storage -> format -> index -> load -> diff -> protocol -> widget`` (the static
text and HTML views stand on the index beside the loader), never one to its right.

Imports inside functions and under ``if TYPE_CHECKING:`` are checked like the others.
A function-level import still runs, so it is still a dependency of the layer; it only
hides an import cycle (and keeps torch out of the importer). The few that go right on
purpose are listed, each with its reason, in :data:`DEFERRED`; a new one fails this test
until it is listed there and in ARCHITECTURE.md.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tdview"

#: Modules at the root of the package that import nothing of tdview: any layer may use them.
BASE = frozenset({"errors", "_version", "_units", "_text", "_gc", "_platform", "_cache"})

#: Layer -> the layers it may import (its own modules always). A module of the package
#: root belongs to the layer named here by its module name (``_compare_widget`` -> widget).
MAY_IMPORT: dict[str, frozenset[str]] = {
    **{name: frozenset() for name in BASE},
    # keys and bytes only: knows nothing of meta.json, nor of anything above it
    "storage": frozenset({"errors", "_platform", "_cache"}),
    "format": BASE,  # bytes and JSON to records: reads no store
    "index": BASE | {"storage", "format"},
    "loader": BASE | {"storage", "format", "index"},
    # the static text tree (`tdview tree`, the saved output) and its HTML: index only
    "views": BASE | {"storage", "format", "index"},
    "diff": BASE | {"storage", "format", "index", "loader"},
    # loads across the ranks of a torch.distributed group: indexed loads of the loader
    "distributed": BASE | {"storage", "format", "index", "loader"},
    # check, sizes, duplicates: walks over the index, as the diff is
    "answers": BASE | {"storage", "format", "index", "loader", "diff"},
    "protocol": BASE | {"storage", "format", "index", "loader", "diff", "answers"},
    "widget": BASE
    | {"storage", "format", "index", "loader", "diff", "answers", "views", "protocol"},
    "demo": BASE,  # writes with tensordict's own writers, reads nothing of tdview
    # the command line and the package's lazy re-exports stand on top of everything
    "cli": BASE
    | {"storage", "format", "index", "loader", "diff", "answers", "views", "protocol", "demo"},
    "tdview": BASE
    | {"storage", "format", "index", "loader", "diff", "answers", "views", "protocol", "widget"},
}

#: Root modules that are not a layer of their own name.
ROOT_LAYER = {"_compare_widget": "widget", "_demo": "demo", "__main__": "cli", "__init__": "tdview"}

#: Function-level imports that go right on purpose: (importing file, imported module).
DEFERRED = {
    # Tree.load and Tree.load_leaf (a checkpoint's, a folder of checkpoints') are the
    # index's doors into the loader, so that an open index makes later loads O(subtree):
    # each builds a LoadRequest and calls run (run finds a folder's member). Imported when
    # called: load stands on index (a top-level import would be a cycle), and `import
    # tdview.index` stays free of torch and tensordict. A hook registered by the load
    # package would only hide this arrow (ARCHITECTURE.md, Layers).
    ("index/_tree.py", "tdview.loader"),
}

#: Imports of another package's private module or name (``tdview.Y._z``, ``from tdview.Y
#: import _z``) allowed, each with its reason: (importing file, imported module) -> why.
#: Empty: every package's ``__init__`` names what the other layers use of it.
PRIVATE_DOORS: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> str:
    """``tdview.index._walk`` -> ``index``; ``tdview.views._tree`` -> ``views``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "tdview"
    name = parts[1]
    return ROOT_LAYER.get(name, name)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The tdview modules an import statement names (``from . import _out`` names
    ``<package>._out``; ``from ..index import Node`` names ``tdview.index``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[: len(package) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if node.module is None or target == "tdview":
        # `from . import x` / `from tdview import x`: x may be a submodule (a layer)
        return [f"{target}.{alias.name}" for alias in node.names]
    return [target]


def _deferred(tree: ast.Module) -> set[int]:
    """Ids of the import statements inside a function (they run when it is called)."""
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom))
    return inside


def violations(root: Path = PACKAGE) -> list[str]:
    """Every import under ``root`` (a ``tdview`` package folder) that breaks the rule."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        here = layer_of(module)
        rel = path.relative_to(root).as_posix()
        if here not in MAY_IMPORT:
            found.append(f"tdview/{rel}: in no layer: name its layer in ROOT_LAYER")
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        in_function = _deferred(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in imported(node, module, path.name == "__init__.py"):
                if target != "tdview" and not target.startswith("tdview."):
                    continue
                there = layer_of(target)
                if there == here or there in MAY_IMPORT[here] or target == "tdview":
                    continue
                if id(node) in in_function and (rel, target) in DEFERRED:
                    continue
                where = "in a function" if id(node) in in_function else "at module level"
                found.append(
                    f"tdview/{rel}:{node.lineno}: {here} imports {target} ({there}) {where}"
                )
    return found


def test_layers_import_only_to_their_left() -> None:
    assert violations() == []


def test_every_deferred_exception_is_still_needed() -> None:
    """An exception that no import uses any more is taken out of :data:`DEFERRED`."""
    used = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = module_name(path, PACKAGE)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in imported(node, module, path.name == "__init__.py"):
                    used.add((path.relative_to(PACKAGE).as_posix(), target))
    assert DEFERRED <= used, DEFERRED - used


@pytest.mark.parametrize(
    ("file", "line", "expected"),
    [
        ("storage/_base.py", "from ..format import DTYPES", "storage imports tdview.format"),
        ("storage/_zip.py", "from .. import _text", "storage imports tdview._text"),
        ("format/_keys.py", "import tdview.index", "format imports tdview.index"),
        ("format/_keys.py", "from ..storage import Store", "format imports tdview.storage"),
        (
            "index/_node.py",
            "def f():\n    from ..protocol import handle\n",
            "index imports tdview.protocol (protocol) in a function",
        ),
        (
            "index/_rollup.py",
            "def g():\n    from ..loader._api import load_checkpoint\n",
            "index imports tdview.loader._api (loader) in a function",
        ),
        (
            "loader/_api.py",
            "from ..protocol._load import load",
            "loader imports tdview.protocol._load",
        ),
        ("protocol/_load.py", "from tdview.widget import TDView", "protocol imports tdview.widget"),
        ("views/_tree.py", "from ..loader import load_memmap", "views imports tdview.loader"),
        ("errors.py", "from .storage import Store", "errors imports tdview.storage"),
    ],
)
def test_a_forbidden_import_fails(tmp_path: Path, file: str, line: str, expected: str) -> None:
    """The check itself: a copy of the package with one forbidden import added fails."""
    copy = tmp_path / "tdview"
    shutil.copytree(
        PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static", "labextension")
    )
    target = copy / file
    target.write_text(target.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    found = violations(copy)
    assert len(found) == 1 and expected in found[0], found


def test_a_root_module_of_no_layer_fails(tmp_path: Path) -> None:
    copy = tmp_path / "tdview"
    shutil.copytree(
        PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static", "labextension")
    )
    (copy / "_helper.py").write_text('"""A new module at the package root."""\n')
    assert violations(copy) == ["tdview/_helper.py: in no layer: name its layer in ROOT_LAYER"]


def package_of(module: str) -> str | None:
    """``tdview.index._walk`` -> ``index``; a module at the package root -> None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and _is_package(parts[1])) else None


def _is_package(name: str, root: Path = PACKAGE) -> bool:
    return (root / name / "__init__.py").is_file()


def private_imports(
    root: Path = PACKAGE, doors: dict[tuple[str, str], str] = PRIVATE_DOORS
) -> list[str]:
    """Every import of another package's private module or name under ``root``: a module
    of package X (or at the package root) naming ``tdview.Y._z`` or ``from tdview.Y import
    _z``, Y != X. The other layers go through Y's face, its ``__init__``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        here = package_of(module) if path.parent != root else None
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = imported(node, module, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom):  # `from tdview.y import _z`: a private name
                targets += [f"{targets[0]}.{a.name}" for a in node.names if a.name[0] == "_"]
            for target in targets:
                parts = target.split(".")
                if parts[0] != "tdview" or len(parts) < 3 or parts[1] == here:
                    continue
                if not _is_package(parts[1], root) or (rel, target) in doors:
                    continue
                if any(part.startswith("_") for part in parts[2:]):
                    found.append(f"tdview/{rel}:{node.lineno}: imports {target} past its face")
    return found


def test_other_packages_are_imported_through_their_faces() -> None:
    """Another package's public names only, from its ``__init__``: what a layer offers the
    others is written in one place, and a private module can change behind it."""
    assert private_imports() == []


def test_every_private_door_is_still_needed() -> None:
    """An exception that no import uses any more is taken out of :data:`PRIVATE_DOORS`."""
    used = {
        line.split(":")[0] + " " + line.split(" imports ")[1] for line in private_imports(doors={})
    }
    assert {f"tdview/{file} {target} past its face" for file, target in PRIVATE_DOORS} <= used


@pytest.mark.parametrize(
    ("file", "line", "expected"),
    [
        ("widget.py", "from .protocol._load import load_value", "tdview.protocol._load"),
        ("diff/_walk.py", "from ..index._facts import pickle_key", "tdview.index._facts"),
        ("views/_html.py", "from ..index import _collection", "tdview.index._collection"),
        ("diff/_stream.py", "from ..storage import _codecs", "tdview.storage._codecs"),
        (
            "index/_node.py",
            "def f():\n    import tdview.loader._api\n",
            "tdview.loader._api",
        ),
    ],
)
def test_a_private_import_fails(tmp_path: Path, file: str, line: str, expected: str) -> None:
    """The check itself: a copy of the package with one import past a face fails."""
    copy = tmp_path / "tdview"
    shutil.copytree(
        PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static", "labextension")
    )
    target = copy / file
    target.write_text(target.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    found = private_imports(copy)
    assert len(found) == 1 and f"imports {expected} past its face" in found[0], found


def import_graph(folder: Path, root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, read with :mod:`ast`: at
    module level, inside functions and under ``if TYPE_CHECKING:`` alike (``from . import
    _x`` names ``_x``; the package's ``__init__`` is a module of it too)."""
    files = {module_name(path, root): path for path in sorted(folder.glob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[module] = {
            target
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for target in imported(node, module, path.name == "__init__.py")
            if target in files
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph``: its strongly connected components of more than one
    module, or of one that imports itself, each sorted (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component: list[str] = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in graph[module]:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


@pytest.mark.parametrize(
    "package",
    ["protocol", "index"],
)
def test_no_circle_of_imports_inside_a_package(package: str) -> None:
    """No module of ``protocol/`` or ``index/`` imports, however indirectly, one that
    imports it back (a circle of 8 files made a request go round protocol/'s dispatcher,
    table and messages four times)."""
    assert cycles(import_graph(PACKAGE / package)) == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # at module level, in a function, and for the type checker only: each is a circle
        ("from ._params import load_params", "_params"),
        ("def f():\n    from . import _diff_params\n", "_diff_params"),
        ("if TYPE_CHECKING:\n    from ._messages import Request\n", "_messages"),
    ],
)
def test_a_circle_of_imports_fails(tmp_path: Path, line: str, expected: str) -> None:
    """The check itself: a copy of protocol/ whose shared checks import back a module
    that stands on them has one circle, naming both."""
    copy = tmp_path / "tdview" / "protocol"
    shutil.copytree(PACKAGE / "protocol", copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "_checks.py"
    target.write_text(target.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    found = cycles(import_graph(copy, tmp_path / "tdview"))
    assert len(found) == 1, found
    assert found[0] == sorted(["tdview.protocol._checks", f"tdview.protocol.{expected}"])


def test_protocol_modules_share_only_public_names() -> None:
    """A module of ``protocol/`` imports another's public names only (``from ._checks
    import path``, never ``from ._messages import _path``): what two modules share, one
    of them says it shares."""
    found = []
    for path in sorted((PACKAGE / "protocol").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                private = [a.name for a in node.names if a.name.startswith("_")]
                found += [f"protocol/{path.name}:{node.lineno}: {name}" for name in private]
    assert found == []


#: The most ``# type: ignore`` comments tdview/ may hold: each one is a place mypy cannot
#: follow (tensordict's private attributes, ctypes, a stdlib private); a new one fixes
#: the type instead (a real type, a Protocol, a ``@final`` class that narrows).
MAX_TYPE_IGNORES = 10


def test_few_type_ignores() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "# type: ignore" in text
    ]
    assert len(found) <= MAX_TYPE_IGNORES, found


#: Caches still bounded by hand, each with its reason (ARCHITECTURE.md, "Process-wide
#: caches"); every other one is a ``tdview._cache.BoundedCache``.
HAND_BOUNDED = {
    "storage/_names.py": "a store's folders: a drop keeps the folders above the key",
    "loader/_context.py": "a load's folder paths: the root's is set again after a drop",
    "index/_tree.py": "a checkpoint's metas: bounded for one load only",
}


def clear_when_full(root: Path = PACKAGE) -> dict[str, int]:
    """File -> how many ``if len(c) >= bound: c.clear()`` it writes out."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.If):
                continue
            sized = any(
                isinstance(n, ast.Call) and getattr(n.func, "id", None) == "len"
                for n in ast.walk(node.test)
            )
            clears = any(
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "clear"
                for statement in node.body
                for n in ast.walk(statement)
            )
            if sized and clears:
                rel = path.relative_to(root).as_posix()
                found[rel] = found.get(rel, 0) + 1
    return found


def test_caches_are_bounded_by_one_helper() -> None:
    """ "Clear when full" is written once, in ``_cache.py``; the few left by hand are
    listed with their reason (and each is still there)."""
    found = clear_when_full()
    assert set(found) - {"_cache.py"} == set(HAND_BOUNDED), found


def test_a_cache_bounded_by_hand_fails(tmp_path: Path) -> None:
    copy = tmp_path / "tdview"
    shutil.copytree(
        PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static", "labextension")
    )
    target = copy / "diff" / "_walk.py"
    added = "\n_SEEN = {}\n\ndef seen(k):\n    if len(_SEEN) >= 9:\n        _SEEN.clear()\n"
    target.write_text(target.read_text(encoding="utf-8") + added, encoding="utf-8")
    assert clear_when_full(copy).get("diff/_walk.py") == 1


#: The most lines a module may hold (Python under tdview/, TypeScript under js/src and
#: labextension/src): past it a module has more than one job, and is split by job.
MAX_MODULE_LINES = 600
SOURCES = (PACKAGE, PACKAGE.parent / "js" / "src", PACKAGE.parent / "labextension" / "src")


def long_modules(roots: tuple[Path, ...] = SOURCES) -> dict[str, int]:
    """Module -> its line count, for each one over :data:`MAX_MODULE_LINES`."""
    found: dict[str, int] = {}
    for root in roots:
        for path in sorted(p for pattern in ("*.py", "*.ts") for p in root.rglob(pattern)):
            if "node_modules" in path.parts or path.name.endswith(".d.ts"):
                continue
            count = len(path.read_text(encoding="utf-8").splitlines())
            if count > MAX_MODULE_LINES:
                found[path.relative_to(root.parent).as_posix()] = count
    return found


def test_no_module_is_over_the_line_cap() -> None:
    assert long_modules() == {}


def test_a_long_module_fails(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "pkg" / "small.ts").write_text("let x = 1;\n" * MAX_MODULE_LINES)
    assert long_modules((tmp_path / "pkg",)) == {"pkg/big.py": MAX_MODULE_LINES + 1}
