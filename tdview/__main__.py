"""``tdview`` / ``python -m tdview``: the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from ._demo import write_demo

    paths = write_demo(args.out, replay_rows=args.replay_rows)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tdview", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="write the built-in demo checkpoint")
    demo.add_argument("--out", default="notebooks/demo", help="folder to write into")
    demo.add_argument("--replay-rows", type=int, default=100_000, help=argparse.SUPPRESS)
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
