"""``tdview`` / ``python -m tdview``: the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from ._demo import write_demo

    paths = write_demo(args.out, replay_rows=args.replay_rows)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def parse_cli_subpath(text: str) -> tuple[str, ...]:
    r"""The nested key a command-line SUBPATH names.

    ``a/b`` is split on ``/``; ``\/`` is a ``/`` inside a key and ``\\`` a backslash;
    a JSON list of strings names the keys as they are.

    Examples
    --------
    >>> parse_cli_subpath("model/layers/0")
    ('model', 'layers', '0')
    >>> parse_cli_subpath(r"openai\/clip-vit-large-patch14/weight")
    ('openai/clip-vit-large-patch14', 'weight')
    >>> parse_cli_subpath('["openai/clip", "weight"]')
    ('openai/clip', 'weight')
    """
    if text.lstrip().startswith("["):
        try:
            keys = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"SUBPATH {text!r} is not a JSON list of keys: {error}") from None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError(f"SUBPATH {text!r}: a JSON SUBPATH is a list of strings")
        return tuple(keys)
    keys, current, chars = [], [], iter(text)
    for char in chars:
        if char == "\\":
            current.append(next(chars, "\\"))
        elif char == "/":
            keys.append("".join(current))
            current = []
        else:
            current.append(char)
    keys.append("".join(current))
    return tuple(key for key in keys if key)


def _tree(args: argparse.Namespace) -> int:
    from ._text import printable
    from .index import is_folder, open_tree
    from .views import (
        TreeOptions,
        holds_checkpoints,
        nothing_found,
        render_collection,
        render_tree,
    )

    path = parse_cli_subpath(args.subpath) if args.subpath else ()
    depth = None if args.depth < 0 else args.depth
    options = TreeOptions(
        depth=depth, pattern=args.filter, limit=args.limit, rollups=not args.no_rollups
    )
    with open_tree(args.path, robust_key=False if args.legacy_keys else None) as ckpt:
        if is_folder(ckpt):
            if not holds_checkpoints(ckpt):
                print(f"tdview: {printable(nothing_found(ckpt))}", file=sys.stderr)
                return 1
            owner, prefix, inner = ckpt.locate(path)
            if owner is ckpt:
                lines = render_collection(ckpt, ckpt.node(inner), options)
            else:
                lines = render_tree(owner, owner.node(inner), options)
                print(printable(f"in {'/'.join(prefix)} ({owner.path}):"))
        else:
            lines = render_tree(ckpt, ckpt.node(path), options)
        for line in lines:  # keys and values are data: never terminal commands
            print(printable(line))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tdview", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="write the built-in demo checkpoint")
    demo.add_argument("--out", default="notebooks/demo", help="folder to write into")
    demo.add_argument("--replay-rows", type=int, default=100_000, help=argparse.SUPPRESS)
    demo.set_defaults(run=_demo)
    tree = commands.add_parser("tree", help="print the tree of a checkpoint from its metadata")
    tree.add_argument(
        "path", help="checkpoint directory or archive (.tdz), or a folder holding checkpoints"
    )
    tree.add_argument(
        "subpath",
        nargs="?",
        metavar="SUBPATH",
        help='start at this nested key: "a/b"; a "/" inside a key is written '
        '"\\/" (a backslash "\\\\"), or give the keys as a JSON list: '
        '\'["openai/clip-vit-large-patch14", "weight"]\'',
    )
    tree.add_argument("--depth", type=int, default=2, help="levels to show (-1: all)")
    tree.add_argument(
        "--filter",
        metavar="PATTERN",
        help="show only the keys matching, at any depth, and the way to them "
        "(a substring of a key, or a glob with * ? [ over the key or the a/b "
        'path); prints "no matches" when none does',
    )
    tree.add_argument("--limit", type=int, default=50, help="children shown per level")
    tree.add_argument("--no-rollups", action="store_true", help="skip subtree totals")
    tree.add_argument("--legacy-keys", action="store_true", help="read raw key names only")
    tree.set_defaults(run=_tree)
    from .diff import add_parser as add_diff_parser

    add_diff_parser(commands, parse_cli_subpath)
    from .answers import add_check_parser

    add_check_parser(commands, parse_cli_subpath)
    from .answers import add_du_parser

    add_du_parser(commands, parse_cli_subpath)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit status is 0, 1 (nothing to show), 2 (an error: its
    message on stderr, escaped and bounded) or 3 (a bug in tdview: reported, with the
    traceback under ``TDVIEW_DEBUG=1``). No exception escapes but ``SystemExit`` (from
    argparse) and ``KeyboardInterrupt``."""
    from ._text import error_text
    from .errors import TDViewError

    args = build_parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a key with no form in the locale's encoding
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return int(args.run(args))
    except BrokenPipeError:  # `tdview tree … | head`
        sys.stderr.close()
        return 0
    except (TDViewError, OSError, ValueError, RuntimeError) as error:
        print(f"tdview: {error_text(error)}", file=sys.stderr)
        return 2
    except Exception as error:  # a bug: said as one, never a raw traceback
        if os.environ.get("TDVIEW_DEBUG"):
            raise
        print(
            f"tdview: internal error ({type(error).__name__}: {error_text(error)}); "
            "please report it (TDVIEW_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
