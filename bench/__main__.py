"""``python -m bench [--quick]``: every case, both sides, ratios, machine facts.

Prints a table and writes the same as JSON to ``bench/results/`` (``latest.json``;
``latest-quick.json`` in quick mode); a full run also writes ``bench/RESULTS.md`` (the
goals, the tables and the machine facts), which ``--report-only`` writes again from
``latest.json`` without measuring.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from . import _checkpoints as ck
from . import _modules as md
from ._harness import Result
from ._machine import machine_facts
from ._memory import measure
from ._report import render_markdown, render_results
from .cases import (
    FULL,
    QUICK,
    deflate_cases,
    hub_cache_cases,
    replay_cases,
    replay_dump_cases,
    scaling_cases,
    structure_cases,
    tensorclass_cases,
)
from .module_cases import module_cases
from .search import search_cases
from .start_cases import start_cases

RESULTS = Path(__file__).parent / "results"


def memory_cases(root: Path, leaves: int, rows: int, module_leaves: int) -> list[dict[str, object]]:
    """Case 7: peak memory of a flat tree's index and meta load, a replay buffer's mapped
    load, and a meta load of a module-shaped tree of ``module_leaves`` leaves (issue 18:
    no more than tensordict's peak; 1,000,000 leaves take 14 GB and 5 minutes to write)."""
    flat = root / f"flat{leaves}"
    if not flat.exists():
        ck.write_flat_tree(leaves, flat)
    replay = root / "replay"
    if not replay.exists():
        ck.replay_buffer(rows).memmap(replay)
    modules = md.write_module_tree(module_leaves, root / f"modules{module_leaves}")
    folders = sum(1 for _ in modules.rglob("meta.json"))
    rows_out = []
    for label, path, ops in (
        (
            f"{leaves} leaves: index vs meta load",
            flat,
            ["tdview index", "tdview meta", "tensordict meta"],
        ),
        (
            "replay buffer: mapped load, then one row",
            replay,
            ["tdview mapped", "tensordict mapped"],
        ),
        (
            f"module tree, {module_leaves} leaves in {folders} folders: meta load",
            modules,
            ["tdview meta", "tensordict meta"],
        ),
    ):
        rows_out.append(
            {"case": "7 memory", "variant": label, "sides": {op: measure(path, op) for op in ops}}
        )
    return rows_out


RESULTS_MD = Path(__file__).parent / "RESULTS.md"


def write_results_md(results: Path, markdown: Path) -> None:
    """``markdown`` from the reports in ``results`` (``latest.json`` and the rest)."""
    report = json.loads((results / "latest.json").read_text())
    markdown.write_text(render_results(report, results))
    print(f"wrote {markdown}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small sizes, under two minutes")
    parser.add_argument("--only", help="run cases whose number is in this list, e.g. 1,4")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON report")
    parser.add_argument(
        "--memory-leaves",
        type=int,
        help="leaves of case 7's module tree (default 100000, quick 2000; 1000000 is the "
        "million-leaf case of issue 18: 14 GB of disk)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: write --markdown from the JSON reports of --out",
    )
    parser.add_argument(
        "--markdown", type=Path, default=RESULTS_MD, help="where a full run writes its tables"
    )
    args = parser.parse_args()
    if args.report_only:
        write_results_md(args.out, args.markdown)
        return
    sizes = QUICK if args.quick else FULL
    only = set(args.only.split(",")) if args.only else None
    started = time.time()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="tdview-bench-") as tmp:
        root = Path(tmp)
        for number, run in (
            ("1", structure_cases),
            ("4", replay_cases),
            ("5", deflate_cases),
            ("6", scaling_cases),
            ("8", tensorclass_cases),
            ("9", replay_dump_cases),
            ("10", hub_cache_cases),
            ("11", module_cases),
            ("12", search_cases),
            ("13", start_cases),  # 13 first rows, 14 form load
        ):
            also = {"1": {"2", "3"}, "13": {"14"}}.get(number, set())  # cases run together
            if only is None or number in only or only & also:
                results += run(root, sizes)
                print(f"… cases {number} done ({time.time() - started:.0f} s)", flush=True)
        memory = (
            []
            if only is not None and "7" not in only
            else memory_cases(
                root,
                sizes.scaling[-1],
                sizes.replay_rows,
                args.memory_leaves or (2_000 if args.quick else 100_000),
            )
        )
    report = {
        "machine": machine_facts(),
        "mode": "quick" if args.quick else "full",
        "seconds": round(time.time() - started, 1),
        "timing": [r.as_json() for r in results],
        "memory": memory,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "latest-quick.json" if args.quick else "latest.json"
    (args.out / name).write_text(json.dumps(report, indent=1))
    print(render_markdown(report))
    if not args.quick and only is None:  # a partial run would leave cases out of the file
        write_results_md(args.out, args.markdown)


if __name__ == "__main__":
    main()
