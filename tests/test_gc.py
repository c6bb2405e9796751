"""The collector pause around a load: what a load built leaves in the oldest generation,
the counts reset, a caller's frozen objects and disabled collector left as they were."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import torch
from tensordict import TensorDict

import tdview
from tdview._gc import gc_paused


def _in_generation(obj: object, generation: int) -> bool:
    return any(found is obj for found in gc.get_objects(generation=generation))


def test_what_a_pause_built_is_promoted_to_the_oldest_generation() -> None:
    with gc_paused():
        assert not gc.isenabled()
        built = [[index] for index in range(5_000)]
    assert gc.isenabled()
    assert gc.get_count()[0] < 100  # no pass over the 5,000 lists is pending
    assert _in_generation(built[0], 2) and not _in_generation(built[0], 0)


def test_a_cycle_made_during_a_pause_is_still_collected() -> None:
    with gc_paused():
        cycle: list[object] = []
        cycle.append(cycle)
        marker = type("Marker", (), {})()
        cycle.append(marker)
    del cycle
    ref = weakref.ref(marker)
    del marker
    gc.collect()
    assert ref() is None


def test_objects_the_caller_froze_stay_frozen() -> None:
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with gc_paused():
            kept = [[index] for index in range(100)]
        assert gc.get_freeze_count() == frozen  # nothing of the caller's was unfrozen
        assert _in_generation(kept[0], 0) or _in_generation(kept[0], 1)
    finally:
        gc.unfreeze()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_loaded_tree_is_in_the_oldest_generation(tmp_path: Path) -> None:
    TensorDict(
        {f"m{index}": {"weight": torch.ones(2, 3)} for index in range(20)}, batch_size=[]
    ).memmap(tmp_path / "ckpt")
    loaded = tdview.load_memmap(tmp_path / "ckpt")
    assert _in_generation(loaded, 2)
    assert _in_generation(loaded["m7"], 2)
    assert torch.equal(loaded["m7", "weight"], torch.ones(2, 3))
