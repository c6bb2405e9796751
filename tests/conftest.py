"""Fixtures shared by every test: the demo checkpoint, written once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tdview._demo import write_demo

# Small enough to write quickly, large enough to exercise paging and real files.
DEMO_ROWS = 1_000


@pytest.fixture(scope="session")
def demo_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo checkpoint as a directory and as a .tdz archive (read-only for tests)."""
    return write_demo(tmp_path_factory.mktemp("demo"), replay_rows=DEMO_ROWS)
