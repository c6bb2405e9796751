"""The benchmark tables, as Markdown: printed, and written to ``bench/RESULTS.md``."""

from __future__ import annotations

import json
from pathlib import Path

from ._goals import render_goals


def _ms(seconds: float, per: int) -> str:
    value = seconds / per
    return f"{value * 1e6:.1f} µs" if per > 1 else f"{value * 1e3:.1f} ms"


def render_markdown(report: dict) -> str:
    facts = report["machine"]
    gpu = f", {facts['gpu']}" if facts.get("gpu") else ""
    lines = [
        f"Machine: {facts['cpu']}, {facts['cores']} cores{gpu}; Python {facts['python']}, "
        f"torch {facts['torch']}, tensordict {facts['tensordict']}, tdview {facts['tdview']} "
        f"({report['mode']} run, {report['seconds']} s).",
        "",
        "| case | variant | cache | side | min | median | ratio vs baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["timing"]:
        per = row["per"]
        for side, stat in row["stats"].items():
            ratio = "baseline" if side == row["baseline"] else f"{row['ratios'][side]:.2f}×"
            lines.append(
                f"| {row['case']} | {row['variant']} | {row['cache']} | {side} | "
                f"{_ms(stat['min'], per)} | {_ms(stat['median'], per)} | {ratio} |"
            )
        for name, seconds in row["floor"].items():
            lines.append(
                f"| {row['case']} | {row['variant']} | {row['cache']} | floor: {name} | "
                f"{_ms(seconds, per)} | | |"
            )
    notes = dict.fromkeys(
        f"{row['case']}: {row['note']}." for row in report["timing"] if row.get("note")
    )
    if notes:
        lines += ["", *(f"Note, case {note}" for note in notes)]
    if report["memory"]:
        lines += [
            "",
            "| memory case | side | peak added | after load | after one row |",
            "|---|---|---|---|---|",
        ]
        for row in report["memory"]:
            for side, m in row["sides"].items():
                lines.append(
                    f"| {row['variant']} | {side} | {m['peak_added'] / 2**20:.1f} MiB | "
                    f"{m['after_load'] / 2**20:.1f} MiB | "
                    f"{m['after_one_row'] / 2**20:.1f} MiB |"
                )
    return "\n".join(lines)


HEAD = """# Benchmark results

Written by `python -m bench` (`make bench`) from `bench/results/latest.json`; do not edit
it by hand (`python -m bench --report-only` writes it again from the JSON files). Ratios
are tdview's time over the baseline's (tensordict's), the median of per-repetition
ratios; [docs/benchmarks.md](../docs/benchmarks.md) says how the cases are run and what
the floors mean."""


def _remote_table(remote: dict) -> str:
    """``python -m bench.remote``'s report: requests and bytes of a 1 GB ``.tdz`` over HTTP."""
    first, whole = remote["browse_first_page"], remote["browse_whole_tree"]
    sub, full = remote["subpath_load"], remote["full_load"]
    seconds, rates = full["seconds"], full["MB_per_s"]
    return "\n".join(
        [
            f"A {remote['archive_bytes'] / 1e9:.2f} GB `.tdz` of {remote['leaves']:,} leaves "
            f"({remote['entries']:,} entries) over loopback HTTP.",
            "",
            "| what | measured | bound |",
            "|---|---|---|",
            f"| root's first page of children | {first['round_trips']} round trips, "
            f"{first['requests']:,} requests, {first['seconds']} s | ≤ 3 round trips |",
            f"| browse the whole tree ({whole['nodes']:,} nodes) | {whole['requests']:,} "
            f"requests, {whole['bytes']:,} bytes, {whole['payload_bytes_read']} payload bytes "
            f"| ≤ {whole['bound']:,} bytes |",
            f"| `subpath=` load of {sub['leaves']} leaves | {sub['requests']} request, "
            f"{sub['bytes']:,} bytes for {sub['payload']:,} of payload "
            f"({sub['ratio_to_payload_plus_metadata']}× payload + metadata) | ≤ 1.05× |",
            f"| full load, {full['bytes'] / 1e9:.3f} GB in {full['requests']} reads | "
            f"{seconds['tdview']} s, {rates['tdview']:,} MB/s | ≥ 0.70× the speed of fsspec "
            f"`cat_ranges` ({seconds['fsspec_cat_ranges']} s): "
            f"{full['tdview_vs_fsspec_cat']}× |",
            f"| the same archive loaded locally | {seconds['local']} s, {rates['local']:,} MB/s "
            "| for scale |",
        ]
    )


def _diff_table(report: dict) -> str:
    from .diff_cases import render  # its own table: sides without a tensordict baseline

    return render(report)


def _check_table(report: dict) -> str:
    from .check_cases import render  # its own table: a read and zipfile as baselines

    return render(report)


# (title, file under bench/results/, how to render it)
EXTRAS = (
    (
        "Meta load of 1,000,000 leaves (`python -m bench --only 7 --memory-leaves 1000000`)",
        "memory-million.json",
        render_markdown,
    ),
    ("`tdview diff` (`python -m bench.diff_cases`)", "diff-latest.json", _diff_table),
    ("`tdview check` (`python -m bench.check_cases`)", "check-latest.json", _check_table),
    ("Remote checkpoints (`python -m bench.remote`)", "remote-latest.json", _remote_table),
    (
        "Loads to a CUDA device (`make test-gpu`: `python -m bench.gpu_cases`)",
        "gpu-latest.json",
        render_markdown,
    ),
)


def render_results(report: dict, results: Path) -> str:
    """All of ``bench/RESULTS.md``: the goals, the main table, then each other script's
    latest report found in ``results``."""
    parts = [HEAD, "## Goals", render_goals(report), "## Every case", render_markdown(report)]
    for title, name, render in EXTRAS:
        path = results / name
        if path.exists():
            parts += [
                f"## {title}",
                f"From `bench/results/{name}`.",
                render(json.loads(path.read_text())),
            ]
    return "\n\n".join(parts) + "\n"
