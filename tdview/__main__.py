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


def _tree(args: argparse.Namespace) -> int:
    from ._tree_text import TreeOptions, render_tree
    from .index import Checkpoint

    with Checkpoint(args.path, robust_key=False if args.legacy_keys else None) as ckpt:
        start = ckpt.node(args.subpath or ())
        depth = None if args.depth < 0 else args.depth
        options = TreeOptions(depth=depth, pattern=args.filter, limit=args.limit,
                              rollups=not args.no_rollups)
        for line in render_tree(ckpt, start, options):
            print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tdview", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="write the built-in demo checkpoint")
    demo.add_argument("--out", default="notebooks/demo", help="folder to write into")
    demo.add_argument("--replay-rows", type=int, default=100_000, help=argparse.SUPPRESS)
    demo.set_defaults(run=_demo)
    tree = commands.add_parser("tree", help="print the tree of a checkpoint from its metadata")
    tree.add_argument("path", help="checkpoint directory or archive (.tdz)")
    tree.add_argument("subpath", nargs="?", help='start at this nested key ("a/b")')
    tree.add_argument("--depth", type=int, default=2, help="levels to show (-1: all)")
    tree.add_argument("--filter", help="show only keys matching (substring, or glob with * ? [)")
    tree.add_argument("--limit", type=int, default=50, help="children shown per level")
    tree.add_argument("--no-rollups", action="store_true", help="skip subtree totals")
    tree.add_argument("--legacy-keys", action="store_true", help="read raw key names only")
    tree.set_defaults(run=_tree)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:  # `tdview tree … | head`
        sys.stderr.close()
        return 0
    except (OSError, ValueError, RuntimeError) as error:
        print(f"tdview: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
