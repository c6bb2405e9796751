"""Issue 32's "room to look", kernel side: the height a user gives the view
(``TDView(..., height=)``, a synced trait checked on both sides), where a leaf's bytes
are said to be (an offset only inside an archive) and a pickled value's size at the
widget's first paint (children and details without totals)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import traitlets

from tdview import TDView
from tdview.index import Checkpoint
from tdview.protocol import Session, handle
from tdview.widget import MAX_HEIGHT, MIN_HEIGHT


def ask(session: Session, method: str, **params: object) -> dict:
    message = {"kind": "tdview:request", "v": 1, "id": 1, "method": method, "params": params}
    reply, _ = handle(session, message)
    assert reply is not None and reply["ok"], reply
    json.dumps(reply, allow_nan=False)
    return reply["result"]


def test_height_is_a_synced_trait_checked_in_bounds(demo_paths: dict[str, Path]) -> None:
    path = demo_paths["archive"]
    assert TDView(path).height is None  # the compact height
    view = TDView(path, height=600)
    assert view.height == 600 and view.trait_metadata("height", "sync") is True
    assert view.get_state("height") == {"height": 600}  # what the front end reads
    view.set_state({"height": MAX_HEIGHT})  # what the resize handle writes
    assert view.height == MAX_HEIGHT
    view.height = None
    assert view.get_state("height") == {"height": None}


@pytest.mark.parametrize("bad", [MIN_HEIGHT - 1, MAX_HEIGHT + 1, 0, -400, True])
def test_height_out_of_bounds_names_the_view_and_the_value(
    demo_paths: dict[str, Path], bad: object
) -> None:
    path = demo_paths["archive"]
    with pytest.raises(traitlets.TraitError) as error:
        TDView(path, height=bad)
    message = str(error.value)
    assert "demo_ckpt.tdz" in message and repr(bad) in message
    assert f"{MIN_HEIGHT} to {MAX_HEIGHT}" in message
    view = TDView(path, height=480)
    with pytest.raises(traitlets.TraitError):
        view.height = bad
    assert view.height == 480  # a refused height changes nothing


def test_height_refuses_a_fraction_of_a_pixel(demo_paths: dict[str, Path]) -> None:
    with pytest.raises(traitlets.TraitError, match="height"):
        TDView(demo_paths["archive"], height=500.5)


def test_a_directory_leaf_has_no_offset(demo_paths: dict[str, Path]) -> None:
    path = demo_paths["directory"]
    storage = ask(Session(Checkpoint(path), str(path)), "node", path=["replay", "reward"])[
        "storage"
    ]
    assert storage["offset"] is None  # a file of its own: "@ 0" would say nothing
    assert Path(storage["location"]).read_bytes()[:8]  # the file it names is the leaf's
    assert Path(storage["location"]).stat().st_size == storage["stored_bytes"]


def test_an_archive_leaf_has_the_offset_of_its_bytes(demo_paths: dict[str, Path]) -> None:
    path = demo_paths["archive"]
    storage = ask(Session(Checkpoint(path), str(path)), "node", path=["replay", "reward"])[
        "storage"
    ]
    name = storage["location"].split("::", 1)[1]
    with zipfile.ZipFile(path) as archive:
        expected = archive.read(name)
    with open(path, "rb") as file:
        file.seek(storage["offset"])
        assert file.read(storage["stored_bytes"]) == expected  # stored, at that offset


@pytest.mark.parametrize("kind", ["directory", "archive"])
def test_a_pickled_value_has_its_size_at_first_paint(
    demo_paths: dict[str, Path], kind: str
) -> None:
    path = demo_paths[kind]
    session = Session(Checkpoint(path), str(path))
    first = ask(session, "children", path=[], offset=0, limit=50, totals=False)
    tags = next(c for c in first["children"] if c["key"] == "tags")
    assert tags["pickled"] is True
    details = ask(session, "node", path=["tags"], totals=False)
    size = details["pickle"]["bytes"]
    if kind == "directory":
        size_on_disk = Path(details["storage"]["location"]).stat().st_size
    else:
        with zipfile.ZipFile(path) as archive:
            size_on_disk = archive.getinfo(details["storage"]["location"].split("::")[1]).file_size
    assert tags["bytes"] == details["bytes"] == size == size_on_disk
    # and still nothing with children was walked for it
    replay = next(c for c in first["children"] if c["key"] == "replay")
    assert replay["bytes"] is None
