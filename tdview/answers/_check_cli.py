"""``tdview check PATH [SUBPATH] [--values] [--json]``: the command line of
:func:`tdview.check`.

The exit status is that of ``diff``: 0 when no problem was found, 1 when problems were,
2 when the checkpoint could not be checked (the error on one line, from
:func:`tdview.__main__.main`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_check_parser(commands: Any, parse_subpath: Any) -> None:
    """Add the ``check`` subcommand to ``commands`` (an argparse subparsers object)."""
    parser = commands.add_parser(
        "check",
        help="is a checkpoint healthy (exit status 0 healthy, 1 problems, 2 trouble)",
        description="Check a checkpoint (a directory, a .tdz archive, or any format tdview "
        "opens), or every checkpoint of a folder of them: what the index flags, each "
        "leaf's file against its shape and dtype, every archive entry's CRC-32; with "
        "--values, NaN, infinite and all-zero leaves. Exit status: 0 when no problem is "
        "found, 1 when problems are, 2 when nothing can be checked.",
    )
    parser.add_argument(
        "path", metavar="PATH", help="checkpoint, or folder of checkpoints, to check"
    )
    parser.add_argument(
        "subpath",
        nargs="?",
        metavar="SUBPATH",
        help='check from this nested key: "a/b" (a "/" inside a key is "\\/"), or a '
        "JSON list of keys",
    )
    parser.add_argument(
        "--values", action="store_true", help="read every value: NaN, Inf, all-zero leaves"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--threads", type=int, default=None, help="reading threads")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress bar on stderr (default: when it is a terminal)",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    parser.set_defaults(run=lambda args: run(args, parse_subpath))


def run(args: argparse.Namespace, parse_subpath: Any) -> int:
    from .._text import printable
    from ..diff import ProgressBar
    from ._check import check

    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = ProgressBar(sys.stderr) if show else None
    subpath = None if args.subpath is None else parse_subpath(args.subpath)
    try:
        report = check(
            args.path, subpath, values=args.values, progress=bar, num_threads=args.threads
        )
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(report.to_json(ensure_ascii=True))
    else:
        for line in report.lines():  # keys and messages are data: never terminal commands
            print(printable(line))
    return report.exit_status
