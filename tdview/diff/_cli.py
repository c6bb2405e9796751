"""``tdview diff A B``: the command line of :func:`tdview.diff`.

The exit status is that of ``diff``: 0 when the checkpoints are equal at the level
asked, 1 when they differ, 2 on trouble (an error, or a key that could not be read).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Any

from .._units import human_bytes

LEVELS = ("auto", "metadata", "fingerprint", "values")


def add_parser(commands: Any, parse_subpath: Any) -> None:
    """Add the ``diff`` subcommand to ``commands`` (an argparse subparsers object)."""
    parser = commands.add_parser(
        "diff",
        help="what changed between two checkpoints (exit status 0 equal, 1 differ, 2 trouble)",
        description="Compare two checkpoints (directories or .tdz archives, in any mix) key "
        "by key: by default what needs no payload byte (metadata; two archives also by the "
        "sizes and CRC-32s they record), then fingerprints or values if asked. Exit "
        "status: 0 when equal at the level asked, 1 when they differ, 2 on trouble.",
    )
    parser.add_argument("a", metavar="A", help="the old checkpoint")
    parser.add_argument("b", metavar="B", help="the new checkpoint")
    parser.add_argument(
        "--level",
        choices=LEVELS,
        default="auto",
        help="metadata: no payload byte read; fingerprint: sizes and CRC-32s "
        "of archive entries, bytes of files, renames; values: element-wise "
        "statistics; auto: fingerprint when both are archives (their CRC-32s "
        "are recorded: still no payload byte read), else metadata "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--only-changed", action="store_true", help="print only the keys that differ"
    )
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")
    parser.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="relative tolerance of the value tier (|a-b| <= atol + rtol*|a|)",
    )
    parser.add_argument(
        "--atol", type=float, default=0.0, help="absolute tolerance of the value tier"
    )
    parser.add_argument(
        "--subpath",
        metavar="SUBPATH",
        help='compare from this nested key on both sides ("a/b", or a JSON list of keys)',
    )
    parser.add_argument("--subpath-a", metavar="SUBPATH", help="the subpath of A only")
    parser.add_argument("--subpath-b", metavar="SUBPATH", help="the subpath of B only")
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="unpickle pickled values to compare them (trusted files only)",
    )
    parser.add_argument("--threads", type=int, default=None, help="reading threads")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress bar on stderr (default: when it is a terminal, for the value tier)",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    parser.set_defaults(run=lambda args: run(args, parse_subpath))


def run(args: argparse.Namespace, parse_subpath: Any) -> int:
    from . import diff
    from ._text import printable, render

    def sub(text: str | None) -> object:
        return None if text is None else parse_subpath(text)

    show = args.progress
    if show is None:
        show = args.level == "values" and sys.stderr.isatty()
    bar = ProgressBar(sys.stderr) if show else None
    try:
        result = diff(
            args.a,
            args.b,
            level=args.level,
            rtol=args.rtol,
            atol=args.atol,
            subpath=sub(args.subpath),
            subpath_a=sub(args.subpath_a),
            subpath_b=sub(args.subpath_b),
            allow_pickle=args.allow_pickle,
            progress=bar,
            num_threads=args.threads,
        )
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(result.to_json(only_changed=args.only_changed, ensure_ascii=True))
    else:
        for line in render(result, only_changed=args.only_changed):
            print(printable(line))
    if result.problems:
        return 2
    return 0 if result.equal else 1


class ProgressBar:
    """``[#####.....]  45%  450.0 MiB / 1.0 GiB  values`` on one line of ``stream``,
    redrawn at most ten times a second."""

    def __init__(self, stream: IO[str], width: int = 30) -> None:
        self.stream, self.width = stream, width
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        fraction = done / total if total else 1.0
        filled = int(self.width * fraction)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(
            f"\r[{bar}] {fraction:4.0%}  {human_bytes(done)} / {human_bytes(total)}  {label}\x1b[K"
        )
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
