"""The goals the issues set, read off a report: each says what it measured and if it is met.

A goal names the rows it reads (case, a variant's words, cache, side) and a bound on
their ratio (tdview time / tensordict time), their median time, or their memory; every
matching row must be within it. Figures that ``python -m bench`` does not measure (the
widget's, in the browser tests; ``tdview diff``'s and remote loads', in their own
scripts) are not goals here: ``docs/benchmarks.md`` says where they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

MIB = 2**20


@dataclass(frozen=True)
class Goal:
    text: str  # the goal, with its issue
    case: str  # a timing row's case (exact), or "memory"
    side: str
    bound: float  # largest ratio, median seconds, or peak bytes allowed
    words: tuple[str, ...] = ()  # words every matching variant contains
    cache: str = "warm"
    kind: str = "ratio"  # "ratio" | "median" | "memory" (peak added, against `against`)
    against: str = ""  # memory: the other side; the bound is then a fraction of it
    unless: tuple[str, ...] = ("+0.2 ms",)  # words no matching variant contains


GOALS = (
    Goal(
        "Index of 10,000 leaves, ≥ 5× faster (#3): archive",
        "1 structure",
        "tdview index",
        0.20,
        ("archive",),
    ),
    Goal(
        "Index of 10,000 leaves, ≥ 5× faster (#3): directory",
        "1 structure",
        "tdview index",
        0.20,
        ("directory",),
    ),
    Goal(
        "Open a 20,000-entry archive and list one node, < 5 % of tensordict (#3)",
        "2 open + list",
        "tdview open + list",
        0.05,
    ),
    Goal(
        '`device="meta"` load of 10,000 leaves, ≥ 2.5× faster (#4)',
        "1 structure",
        "tdview meta",
        0.40,
    ),
    Goal(
        "Memory-mapped load of 10,000 leaves, ≥ 4× faster (#4): archive",
        "3 mapped load",
        "tdview",
        0.25,
        ("archive",),
    ),
    Goal(
        "Memory-mapped load of 10,000 leaves, ≥ 4× faster (#4): directory",
        "3 mapped load",
        "tdview",
        0.25,
        ("directory",),
    ),
    Goal(
        "`subpath=` 7-leaf load from a 10,000-leaf `.tdz`, ≥ 25× first access (#4)",
        "2 subpath",
        "tdview first access",
        0.04,
        ("archive",),
    ),
    Goal(
        "… ≥ 100× with an open `Checkpoint` (#4)",
        "2 subpath",
        "tdview open Checkpoint",
        0.01,
        ("archive",),
    ),
    Goal(
        "Replay buffer loaded and read, ratio ≤ 1.05, warm (#4)", "4 replay buffer", "tdview", 1.05
    ),
    Goal(
        "Replay buffer loaded and read, ratio ≤ 1.05, cold (#4)",
        "4 replay buffer",
        "tdview",
        1.05,
        cache="cold",
    ),
    Goal(
        "Deflate `num_threads=2`, ≥ 1.2× faster (#4)",
        "5 deflate load",
        "tdview",
        1 / 1.2,
        ("num_threads=2",),
    ),
    Goal(
        "Index peak memory ≤ ½ of tensordict's meta load, 100,000 leaves (#5)",
        "memory",
        "tdview index",
        0.5,
        ("index vs meta load",),
        kind="memory",
        against="tensordict meta",
    ),
    Goal(
        "No slower than tensordict on every real kind, within 5 % (#14): tensorclasses, "
        "lazy stacks",
        "8 tensorclass",
        "tdview",
        1.05,
    ),
    Goal("… a torchrl replay-buffer dump (#14)", "9 replay dump", "tdview", 1.05),
    Goal("… checkpoints in a Hugging Face cache (#14)", "10 hub cache", "tdview", 1.05),
    Goal(
        "Module-shaped tree, meta load ≥ 2.5× faster (#18)",
        "11 module tree",
        "tdview meta",
        0.40,
        ("directory, meta",),
    ),
    Goal(
        "Module-shaped tree, mapped load ≥ 2.5× faster (#18)",
        "11 module tree",
        "tdview",
        0.40,
        ("folders, directory, mapped",),
    ),
    Goal(
        "Module-shaped tree, `subpath=` first access of the `.tdz` ≥ 25× (#18)",
        "11 module tree",
        "tdview",
        0.04,
        ("archive, first access",),
    ),
    Goal(
        "Meta load of a module tree peaks at no more than tensordict (#18)",
        "memory",
        "tdview meta",
        1.0,
        ("module tree",),
        kind="memory",
        against="tensordict meta",
    ),
    Goal(
        "Search over ~1,000,000 keys, first page < 500 ms (#15): an open index",
        "12 search",
        "search",
        0.5,
        ("matches)",),
        kind="median",
    ),
    Goal(
        "… a fresh checkpoint's first page (its count comes after it) (#15)",
        "12 search",
        "count off",
        0.5,
        ("first page",),
        kind="median",
    ),
)


def _names(goal: Goal, variant: str) -> bool:
    return all(w in variant for w in goal.words) and not any(w in variant for w in goal.unless)


def _timing_values(goal: Goal, report: dict) -> Iterator[float]:
    for row in report["timing"]:
        if row["case"] != goal.case or row["cache"] != goal.cache:
            continue
        if goal.side not in row["stats"] or not _names(goal, row["variant"]):
            continue
        if goal.kind == "median":
            yield row["stats"][goal.side]["median"] / row["per"]
        else:
            yield row["ratios"][goal.side]


def _memory_values(goal: Goal, report: dict) -> Iterator[float]:
    for row in report["memory"]:
        sides = row["sides"]
        if _names(goal, row["variant"]) and goal.side in sides:
            yield sides[goal.side]["peak_added"] / sides[goal.against]["peak_added"]


def _show(goal: Goal, values: list[float]) -> str:
    fmt: Callable[[float], str] = {
        "ratio": lambda v: f"{v:.2f}×",
        "median": lambda v: f"{v * 1e3:.0f} ms",
        "memory": lambda v: f"{v:.2f}× of {goal.against}'s peak",
    }[goal.kind]
    low, high = fmt(min(values)), fmt(max(values))
    return low if low == high else f"{low} – {high}"


def render_goals(report: dict) -> str:
    """A Markdown table: each goal, the measured range over its rows, met or not."""
    lines = [
        "| goal (issue) | cache | rows | measured | bound | met? |",
        "|---|---|---|---|---|---|",
    ]
    for goal in GOALS:
        reader = _memory_values if goal.kind == "memory" else _timing_values
        values = list(reader(goal, report))
        cache = "" if goal.kind == "memory" else goal.cache
        bound = {
            "ratio": f"≤ {goal.bound:.2f}×",
            "median": f"< {goal.bound * 1e3:.0f} ms",
            "memory": f"≤ {goal.bound:.2f}×",
        }[goal.kind]
        if not values:
            lines.append(f"| {goal.text} | {cache} | 0 | not measured | {bound} | |")
            continue
        met = "yes" if max(values) <= goal.bound else "**no**"
        shown = _show(goal, values)
        lines.append(f"| {goal.text} | {cache} | {len(values)} | {shown} | {bound} | {met} |")
    return "\n".join(lines)
