"""Sizes: one convention (decimal, three digits) in Python and in the widget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tdview._units import human_bytes

CASES = json.loads((Path(__file__).parent / "units_cases.json").read_text())["cases"]


@pytest.mark.parametrize(("count", "text"), CASES)
def test_sizes_as_the_widget_writes_them(count: int, text: str) -> None:
    assert human_bytes(count) == text


def test_unknown_size() -> None:
    assert human_bytes(None) == "?"
