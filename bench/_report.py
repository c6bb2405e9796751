"""The benchmark table, as Markdown (printed, and pasted into the README)."""

from __future__ import annotations


def _ms(seconds: float, per: int) -> str:
    value = seconds / per
    return f"{value * 1e6:.1f} µs" if per > 1 else f"{value * 1e3:.1f} ms"


def render_markdown(report: dict) -> str:
    facts = report["machine"]
    lines = [
        f"Machine: {facts['cpu']}, {facts['cores']} cores; Python {facts['python']}, "
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
