"""``tdview du PATH [SUBPATH]``: where the bytes of a checkpoint go, as ``du -d`` says it.

Sizes come from metadata alone (:func:`~tdview.answers.sizes`): nothing is read but
``meta.json`` files and listings. Lines are sorted largest first (as
``du -d N | sort -rh``), the sizes right-aligned in a column, the subtree's total first.
The exit status is 0, or 2 on an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .._units import human_bytes

BY = ("path", "dtype", "section")


def add_du_parser(commands: Any, parse_subpath: Any) -> None:
    """Add the ``du`` subcommand to ``commands`` (an argparse subparsers object)."""
    parser = commands.add_parser(
        "du",
        help="where the bytes of a checkpoint go, largest first (from metadata alone)",
        description="Bytes per key of a checkpoint (a directory, a .tdz archive or a folder "
        "of checkpoints), largest first, as `du -d N | sort -rh` prints a folder; or its "
        "totals by dtype or by section (the model, the optimizer, replay buffers, the "
        "rest). No payload byte is read unless --duplicates asks.",
    )
    parser.add_argument(
        "path", help="checkpoint directory or archive (.tdz), or a folder holding checkpoints"
    )
    parser.add_argument(
        "subpath",
        nargs="?",
        metavar="SUBPATH",
        help='start at this nested key: "a/b", or the keys as a JSON list',
    )
    parser.add_argument(
        "-d", "--depth", type=int, default=1, help="levels of keys to list (default: 1)"
    )
    parser.add_argument(
        "--by",
        choices=BY,
        default="path",
        help="list keys (path, the default), or the totals by dtype or by section",
    )
    parser.add_argument(
        "-b", "--bytes", action="store_true", help="exact byte counts instead of 21.2 MB"
    )
    parser.add_argument(
        "--duplicates",
        action="store_true",
        help="also the bytes stored twice (reads the payloads of leaves of equal size "
        "and dtype; an archive's CRC-32s first)",
    )
    parser.add_argument("--json", action="store_true", help="print the sizes as JSON")
    parser.set_defaults(run=lambda args: run(args, parse_subpath))


def run(args: argparse.Namespace, parse_subpath: Any) -> int:
    from .._text import printable
    from ..diff import ProgressBar
    from ..index import open_tree
    from ._sizes import sizes, walk_sizes

    if args.depth < 0:
        raise ValueError(f"--depth must be 0 or more, got {args.depth}")
    subpath = parse_subpath(args.subpath) if args.subpath else ()
    # reading payloads for duplicates: the diff's bar on a terminal
    bar = ProgressBar(sys.stderr) if args.duplicates and sys.stderr.isatty() else None
    try:
        with open_tree(args.path) as tree:
            report = sizes(tree, subpath, duplicates=args.duplicates, progress=bar)
            entries = list(walk_sizes(tree, subpath, args.depth)) if args.depth else []
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        doc = {
            "path": list(report.path),
            "bytes": report.bytes,
            "leaves": report.leaves,
            "by_dtype": report.by_dtype,
            "by_section": report.by_section,
            "entries": [e.to_json() for e in entries],
            "problems": report.problems,
            "duplicates_bytes": report.duplicates_bytes,
        }
        print(json.dumps(doc, ensure_ascii=True))
        return 0
    name = "/".join(report.path) or args.path
    if args.by == "path":
        rows = [(e.bytes, "/".join(e.path)) for e in entries]
        rows.sort(key=lambda row: -row[0])  # stable: a level's order among equals
    else:
        totals = report.by_dtype if args.by == "dtype" else report.by_section
        rows = [(n, key) for key, n in totals.items()]  # largest first already
    if report.duplicates_bytes is not None:
        rows.append((report.duplicates_bytes, "(stored twice: in duplicates)"))
    for line in du_lines([(report.bytes, name), *rows], exact=args.bytes):
        print(printable(line))  # keys are data: never terminal commands
    if report.problems:
        print(
            f"tdview du: {report.problems} node(s) below could not be read and are not "
            f"counted (tdview check {printable(args.path)} says why)",
            file=sys.stderr,
        )
    return 0


def du_lines(rows: list[tuple[int, str]], *, exact: bool = False) -> list[str]:
    """``(bytes, name)`` rows as ``du`` prints them: the sizes right-aligned.

    Examples
    --------
    >>> du_lines([(36136, "ckpt.tdz"), (23928, "optimizer"), (8, "step")])
    ['36.1 KB  ckpt.tdz', '23.9 KB  optimizer', '    8 B  step']
    >>> du_lines([(36136, "ckpt.tdz"), (8, "step")], exact=True)
    ['36136  ckpt.tdz', '    8  step']
    """
    sizes = [str(n) if exact else human_bytes(n) for n, _ in rows]
    width = max((len(s) for s in sizes), default=0)
    return [f"{size:>{width}}  {name}" for size, (_, name) in zip(sizes, rows, strict=True)]
