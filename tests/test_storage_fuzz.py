"""Fuzzing the storage layer with hypothesis.

Mutated archives (flipped bytes, truncation, splices) must either open and read or
raise a tdview error: never another exception, never a hang. Random keys given to a
directory store must never resolve outside its root.

By default 200 examples run with a fixed seed, so the suite is reproducible. Set
``TDVIEW_FUZZ_EXAMPLES`` to run that many examples with a random seed instead.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tdview.errors import TDViewError, UnsafeCheckpointError
from tdview.storage import DirectoryStore, is_archive, open_store

from .test_storage_zipcraft import craft_zip, zip_dir

EXAMPLES = int(os.environ.get("TDVIEW_FUZZ_EXAMPLES", "200"))
RANDOM = "TDVIEW_FUZZ_EXAMPLES" in os.environ
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not RANDOM,
    suppress_health_check=[HealthCheck.too_slow],
)
ALLOWED = (TDViewError, FileNotFoundError)
LIMIT = 1 << 16

_ENTRIES = [
    ("meta.json", b'{"a": {"shape": [3]}, "_type": "TensorDict"}'),
    ("a.memmap", bytes(range(48))),
    ("nested/meta.json", b"{}", 8),
    ("nested/b.memmap", b"\x01\x02" * 40, 12),
    ("nested/c.memmap", b"c" * 64, 14),
    ("ключ.memmap", b"k" * 8, 8),
]


def _zipfile_archive() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, data, *_ in _ENTRIES:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        return zip_dir(root, explicit_dirs=True, deflate_meta=True, stream=True, comment=b"c")


BASES = [craft_zip(_ENTRIES), craft_zip(_ENTRIES, zip64=True, prepend=b"stub"), _zipfile_archive()]


@st.composite
def mutated(draw) -> bytes:
    """One of the base archives with 1 to 4 mutations, biased toward the end records."""
    data = bytearray(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        n = len(data)
        near_end = draw(st.booleans())
        pos = (
            n - 1 - draw(st.integers(0, min(n - 1, 300)))
            if near_end
            else draw(st.integers(0, n - 1))
        )
        op = draw(st.sampled_from(["set", "set", "truncate", "insert", "delete", "copy"]))
        if op == "set":
            data[pos] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=32))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 64))]
        else:
            src = draw(st.integers(0, n - 1))
            data[pos : pos + 32] = data[src : src + 32]
    return bytes(data)


def _attempt(call, *args) -> object:
    try:
        return call(*args)
    except ALLOWED:
        return None


def _exercise(store) -> None:
    """Touch every entry through every read path, tolerating tdview errors."""
    todo = [""]
    while todo:
        key = todo.pop()
        for child in _attempt(store.list_dir, key) or []:
            sub = f"{key}/{child}" if key else child
            if store.is_dir(sub):
                todo.append(sub)
                continue
            info = _attempt(store.entry, sub)
            _attempt(store.read_bytes, sub, LIMIT)
            _attempt(store.payload_offset, sub)
            _attempt(store.verify, sub)
            if info is not None and info.compression == "stored":
                _attempt(store.payload, sub)
            else:
                _attempt(store.decompress, sub, LIMIT)


@FUZZ
@given(data=mutated())
def test_mutated_archives_fail_cleanly(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.tdz"
        path.write_bytes(data)
        assert isinstance(is_archive(path), bool)
        store = _attempt(open_store, path)
        if store is not None:
            with store:
                _exercise(store)


def test_bases_are_valid() -> None:
    for data in BASES:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "f.tdz"
            path.write_bytes(data)
            with open_store(path) as store, zipfile.ZipFile(path) as zf:
                for name in store.keys():
                    assert store.read_bytes(name, LIMIT) == zf.read(name)


_KEY_PARTS = st.sampled_from(
    ["..", ".", "", "a", "sub", "x.memmap", "/", "\\", "C:", "\x00", "link", "ключ", "~", "%2E%2E"]
)


@FUZZ
@given(parts=st.lists(_KEY_PARTS, max_size=6), sep=st.sampled_from(["/", "", "\\"]))
def test_directory_keys_stay_inside(parts: list[str], sep: str) -> None:
    key = sep.join(parts)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ck"
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "x.memmap").write_bytes(b"x")
        (root / "link").symlink_to(Path(tmp))  # escapes the root
        store = DirectoryStore(root)
        real_root = os.path.realpath(root)
        try:
            real = store.file_path(key)
        except UnsafeCheckpointError:
            return
        assert real == real_root or real.startswith(real_root + os.sep)
        for call in (
            store.is_file,
            store.is_dir,
            store.entry,
            store.list_dir,
            lambda k: store.read_bytes(k, LIMIT),
        ):
            try:
                call(key)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                pass
