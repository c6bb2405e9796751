"""Hostile and broken checkpoints: one test per refusal, plus laziness and read-only use.

Each test checks the exception type and that the message names the file or entry and
the offending value or numbers.
"""

from __future__ import annotations

import os
import re
import struct
import tracemalloc
import warnings
import zipfile
import zlib
from pathlib import Path

import pytest

from tdview.errors import (
    ArchiveError,
    LeafDataError,
    LimitExceededError,
    NotACheckpointError,
    UnsafeCheckpointError,
)
from tdview.storage import ArchiveStore, DirectoryStore, open_store

from .test_storage_zipcraft import (
    CENTRAL_CRC,
    CENTRAL_CSIZE,
    CENTRAL_FLAGS,
    CENTRAL_METHOD,
    CENTRAL_OFFSET,
    CENTRAL_USIZE,
    LOCAL_EXTRA_LEN,
    LOCAL_FLAGS,
    Raw,
    central_offset,
    craft_zip,
    local_offset,
    patch,
)

LIMIT = 1 << 20
META = ("meta.json", b'{"_type": "x"}')
A = ("a.memmap", bytes(range(200)))
B = ("b.memmap", b"b" * 300)


def write(tmp_path: Path, data: bytes, name: str = "x.tdz") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def base() -> bytes:
    return craft_zip([META, A, B])


def refused(exc_type, *needles: str):
    """``pytest.raises`` that also checks every needle appears in the message."""
    return pytest.raises(exc_type, match="(?s)" + "".join(f"(?=.*{re.escape(n)})" for n in needles))


# -- names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../evil.memmap", "'..' component"),
        ("nested/../../evil.memmap", "'..' component"),
        ("/abs.memmap", "absolute"),
        ("a/./b.memmap", "'.' component"),
        ("a//b.memmap", "empty"),
    ],
)
def test_unsafe_entry_name(tmp_path: Path, name: str, why: str) -> None:
    path = write(tmp_path, craft_zip([META, (name, b"x")]))
    with refused(UnsafeCheckpointError, str(path), repr(name), why):
        open_store(path)


def test_nul_in_entry_name(tmp_path: Path) -> None:
    data = craft_zip([META, ("aXb.memmap", b"x")])
    data = data.replace(b"aXb.memmap", b"a\x00b.memmap")  # in both headers
    path = write(tmp_path, data)
    with refused(UnsafeCheckpointError, str(path), "'a\\x00b.memmap'", "NUL"):
        open_store(path)


def test_duplicate_entry_name(tmp_path: Path) -> None:
    path = write(tmp_path, craft_zip([META, A, ("a.memmap", b"other")]))
    with refused(UnsafeCheckpointError, str(path), "'a.memmap'", "twice"):
        open_store(path)


def test_file_and_directory_with_one_name(tmp_path: Path) -> None:
    path = write(tmp_path, craft_zip([META, ("sub", b"x"), ("sub/b.memmap", b"y")]))
    with refused(UnsafeCheckpointError, str(path), "'sub'", "both a file"):
        open_store(path)


def test_zipfile_dir_entry_duplicates_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.zip"
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")
        zf.writestr("meta.json", b"{}")
        zf.writestr("sub/", b"")
        zf.writestr("sub/", b"")
    with refused(UnsafeCheckpointError, str(path), "'sub/'", "twice"):
        open_store(path)


# -- encrypted entries -------------------------------------------------------------------


def test_encrypted_entry_is_recorded_and_refused_on_read(tmp_path: Path) -> None:
    data = base()
    data = patch(data, local_offset(data, b"a.memmap") + LOCAL_FLAGS, "<H", 1)
    data = patch(data, central_offset(data, b"a.memmap") + CENTRAL_FLAGS, "<H", 1)
    path = write(tmp_path, data)
    with ArchiveStore(path) as store:
        assert store.entry("a.memmap").encrypted
        assert not store.entry("b.memmap").encrypted
        for call in (
            lambda: store.read_bytes("a.memmap", LIMIT),
            store.payload,
            store.decompress,
            store.raw_payload,
            store.verify,
        ):
            with refused(UnsafeCheckpointError, "encrypted archive entry 'a.memmap'", str(path)):
                call("a.memmap") if call.__name__ != "<lambda>" else call()
        assert store.read_bytes("b.memmap", LIMIT) == B[1]  # the rest stays readable


# -- layout ------------------------------------------------------------------------------


def test_overlapping_entries(tmp_path: Path) -> None:
    data = base()
    a_at = local_offset(data, b"a.memmap")
    data = patch(data, central_offset(data, b"b.memmap") + CENTRAL_OFFSET, "<I", a_at + 5)
    path = write(tmp_path, data)
    with refused(
        UnsafeCheckpointError,
        str(path),
        "'a.memmap'",
        "overlaps",
        f"offset {a_at + 5}",
        f"offset {a_at}",
    ):
        open_store(path)


def test_two_records_sharing_one_local_header(tmp_path: Path) -> None:
    data = base()
    a_at = local_offset(data, b"a.memmap")
    data = patch(data, central_offset(data, b"b.memmap") + CENTRAL_OFFSET, "<I", a_at)
    path = write(tmp_path, data)
    with refused(UnsafeCheckpointError, str(path), "overlaps", f"offset {a_at}"):
        open_store(path)


def test_overlap_found_when_local_header_is_read(tmp_path: Path) -> None:
    """A local extra field that pushes the payload into the next entry (lazy check)."""
    data = base()
    a_at = local_offset(data, b"a.memmap")
    b_at = local_offset(data, b"b.memmap")
    data = patch(data, a_at + LOCAL_EXTRA_LEN, "<H", 40)
    path = write(tmp_path, data)
    with ArchiveStore(path) as store:  # the open-time lower bound cannot see it
        payload = a_at + 30 + len(b"a.memmap") + 40
        with refused(
            UnsafeCheckpointError,
            "'a.memmap'",
            str(path),
            "overlaps",
            f"payload at offset {payload}",
            f"ends at offset {payload + 200}",
            f"offset {b_at}",
        ):
            store.payload_offset("a.memmap")
        assert store.read_bytes("b.memmap", LIMIT) == B[1]


def test_last_payload_runs_into_central_directory(tmp_path: Path) -> None:
    data = base()
    b_at = local_offset(data, b"b.memmap")
    data = patch(data, b_at + LOCAL_EXTRA_LEN, "<H", 10)
    path = write(tmp_path, data)
    with ArchiveStore(path) as store:
        with refused(ArchiveError, "'b.memmap'", str(path), "past the end", "central"):
            store.payload("b.memmap")


def test_entry_past_end_of_file(tmp_path: Path) -> None:
    data = base()
    data = patch(data, central_offset(data, b"b.memmap") + CENTRAL_CSIZE, "<I", 10**9)
    path = write(tmp_path, data)
    with refused(ArchiveError, str(path), "'b.memmap'", "1000000000", str(len(data))):
        open_store(path)


def test_header_offset_past_end_of_file(tmp_path: Path) -> None:
    data = base()
    data = patch(data, central_offset(data, b"b.memmap") + CENTRAL_OFFSET, "<I", 4 * 10**9)
    path = write(tmp_path, data)
    with refused(ArchiveError, str(path), "'b.memmap'", "4000000000"):
        open_store(path)


# -- truncated, not a zip, corrupt end records --------------------------------------------


def test_truncated_file_has_no_end_record(tmp_path: Path) -> None:
    data = base()
    path = write(tmp_path, data[: len(data) - 30])
    with refused(NotACheckpointError, str(path), "end-of-central-directory"):
        open_store(path)


@pytest.mark.parametrize("size", [0, 1, 21])
def test_short_file(tmp_path: Path, size: int) -> None:
    path = write(tmp_path, b"PK\x05\x06"[:size] + bytes(max(0, size - 4)))
    with refused(NotACheckpointError, str(path), f"{size} bytes"):
        open_store(path)


def test_not_a_zip(tmp_path: Path) -> None:
    path = write(tmp_path, b"hello, this is text\n" * 10, "notes.txt")
    with refused(NotACheckpointError, str(path), "not a memory-mapped tensordict archive"):
        open_store(path)


# a zip with "data/meta.json" holds a checkpoint: a folder of them (test_torchrl_archive.py)
@pytest.mark.parametrize("names", [["other.json"], ["data/other.json"], ["meta.json/"]])
def test_zip_without_top_level_meta(tmp_path: Path, names: list[str]) -> None:
    path = write(tmp_path, craft_zip([(n, b"") for n in names]))
    with refused(NotACheckpointError, str(path), "top-level meta.json"):
        open_store(path)


def test_missing_path_names_meta_json(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        open_store(tmp_path / "nothing")
    assert info.value.filename == str(tmp_path / "nothing" / "meta.json")


def test_bad_central_signature(tmp_path: Path) -> None:
    data = base()
    at = central_offset(data, b"a.memmap")
    path = write(tmp_path, patch(data, at, "<I", 0x12345678))
    with refused(ArchiveError, str(path), "0x12345678", f"offset {at}"):
        open_store(path)


def test_central_directory_bigger_than_file(tmp_path: Path) -> None:
    data = bytearray(base())
    struct.pack_into("<I", data, len(data) - 10, 10**6)  # EOCD central directory size
    path = write(tmp_path, bytes(data))
    with refused(ArchiveError, str(path), "1000000"):
        open_store(path)


def test_zip64_locator_to_nowhere(tmp_path: Path) -> None:
    data = bytearray(craft_zip([META, A], zip64=True))
    locator = len(data) - 22 - 20
    data[locator - 56 : locator - 52] = b"XXXX"  # break the zip64 end record
    path = write(tmp_path, bytes(data))
    with refused(ArchiveError, str(path), "zip64", f"offset {locator}"):
        open_store(path)


def test_multi_disk_archive(tmp_path: Path) -> None:
    data = bytearray(craft_zip([META, A], zip64=True))
    struct.pack_into("<I", data, len(data) - 22 - 4, 3)  # locator: total disks
    path = write(tmp_path, bytes(data))
    with refused(ArchiveError, str(path), "3 disks"):
        open_store(path)


def test_utf8_flag_with_invalid_utf8_name(tmp_path: Path) -> None:
    data = craft_zip([META, ("é.memmap", b"x")])
    data = data.replace("é".encode(), b"\xff\xfe")
    path = write(tmp_path, data)
    with refused(ArchiveError, str(path), "\\xff\\xfe.memmap", "UTF-8"):
        open_store(path)


def test_corrupt_zip64_extra(tmp_path: Path) -> None:
    data = craft_zip([META, A], zip64=True)
    at = central_offset(data, b"a.memmap")
    path = write(tmp_path, patch(data, at + 46 + len(b"a.memmap") + 2, "<H", 8))
    with refused(ArchiveError, str(path), "'a.memmap'", "zip64 extra", "8 bytes"):
        open_store(path)


# -- local headers -----------------------------------------------------------------------


def test_local_header_name_mismatch(tmp_path: Path) -> None:
    data = bytearray(base())
    at = local_offset(bytes(data), b"a.memmap")
    data[at + 30 : at + 30 + 8] = b"z.memmap"
    path = write(tmp_path, bytes(data))
    with ArchiveStore(path) as store:
        with refused(
            ArchiveError, "'a.memmap'", str(path), "b'z.memmap'", "b'a.memmap'", f"offset {at}"
        ):
            store.payload_offset("a.memmap")


def test_bad_local_signature(tmp_path: Path) -> None:
    data = base()
    at = local_offset(data, b"a.memmap")
    path = write(tmp_path, patch(data, at, "<I", 0xDEADBEEF))
    with ArchiveStore(path) as store:
        with refused(ArchiveError, "'a.memmap'", str(path), "0xdeadbeef", f"offset {at}"):
            store.read_bytes("a.memmap", LIMIT)


def test_local_headers_are_read_lazily(tmp_path: Path) -> None:
    """Every local signature but meta.json's is broken: open, list and entry still work."""
    entries = [META] + [(f"sub/k{i}.memmap", bytes([i]) * 10) for i in range(50)]
    data = bytearray(craft_zip(entries))
    for name, _ in entries[1:]:
        at = local_offset(bytes(data), name.encode())
        data[at : at + 4] = b"XXXX"
    path = write(tmp_path, bytes(data))
    with ArchiveStore(path) as store:
        assert store.list_dir("sub") == sorted(f"k{i}.memmap" for i in range(50))
        assert store.entry("sub/k3.memmap").size == 10
        assert store.read_bytes("meta.json", LIMIT) == META[1]
        with refused(ArchiveError, "'sub/k3.memmap'", "signature"):
            store.payload_offset("sub/k3.memmap")


# -- payload checks ----------------------------------------------------------------------


def test_crc_mismatch_on_read_bytes(tmp_path: Path) -> None:
    data = base()
    path = write(
        tmp_path, patch(data, central_offset(data, b"meta.json") + CENTRAL_CRC, "<I", 0x01020304)
    )
    with ArchiveStore(path) as store:
        with refused(
            LeafDataError, "'meta.json'", str(path), "0x01020304", f"{zlib.crc32(META[1]):#010x}"
        ):
            store.read_bytes("meta.json", LIMIT)
        assert bytes(store.payload("meta.json")) == META[1]  # no CRC on zero-copy views
        with refused(LeafDataError, "CRC-32"):
            store.verify("meta.json")


def test_stored_size_mismatch(tmp_path: Path) -> None:
    data = base()
    path = write(
        tmp_path, patch(data, central_offset(data, b"a.memmap") + CENTRAL_USIZE, "<I", 100)
    )
    with ArchiveStore(path) as store:
        for call in (store.payload, store.decompress):
            with refused(LeafDataError, "'a.memmap'", "200", "100"):
                call("a.memmap")


def _bomb(declared: int, real: int) -> bytes:
    """An archive whose deflate entry declares ``declared`` bytes and expands to ``real``."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 20)
    body = b"".join(comp.compress(chunk) for _ in range(real >> 20)) + comp.flush()
    return craft_zip([META, ("bomb.memmap", Raw(body, declared), 8)])


def test_deflate_bomb_is_capped(tmp_path: Path) -> None:
    path = write(tmp_path, _bomb(declared=1000, real=64 << 20))
    with ArchiveStore(path) as store:
        assert store.entry("bomb.memmap").size == 1000
        tracemalloc.start()
        try:
            with refused(LeafDataError, "'bomb.memmap'", str(path), "1000 bytes", "expands"):
                store.decompress("bomb.memmap")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20, peak  # not the 64 MiB the stream would expand to


def test_truncated_deflate_stream(tmp_path: Path) -> None:
    data = craft_zip([META, ("a.memmap", bytes(range(256)) * 40, 8)])
    cd = central_offset(data, b"a.memmap")
    csize = struct.unpack_from("<I", data, cd + CENTRAL_CSIZE)[0]
    path = write(tmp_path, patch(data, cd + CENTRAL_CSIZE, "<I", csize // 2))
    with ArchiveStore(path) as store:
        with refused(LeafDataError, "'a.memmap'", str(path), "truncated", "10240"):
            store.decompress("a.memmap")


def test_declared_size_larger_than_stream(tmp_path: Path) -> None:
    data = craft_zip([META, ("a.memmap", b"x" * 500, 8)])
    cd = central_offset(data, b"a.memmap")
    path = write(tmp_path, patch(data, cd + CENTRAL_USIZE, "<I", 501))
    with ArchiveStore(path) as store:
        with refused(LeafDataError, "'a.memmap'", "500 bytes", "501 bytes"):
            store.decompress("a.memmap")


def test_trailing_bytes_after_stream(tmp_path: Path) -> None:
    body = zlib.compress(b"x" * 500, wbits=-15) + b"xyz"
    data = craft_zip([META, ("a.memmap", Raw(body, 500, zlib.crc32(b"x" * 500)), 8), B])
    path = write(tmp_path, data)
    with ArchiveStore(path) as store:
        with refused(LeafDataError, "'a.memmap'", "3 stray bytes"):
            store.decompress("a.memmap")


@pytest.mark.parametrize("method", [8, 12, 14])
def test_corrupt_compressed_stream(tmp_path: Path, method: int) -> None:
    data = bytearray(craft_zip([META, ("a.memmap", bytes(range(256)) * 40, method)]))
    at = local_offset(bytes(data), b"a.memmap") + 30 + len(b"a.memmap")
    data[at + 4 : at + 40] = b"\xff" * 36
    path = write(tmp_path, bytes(data))
    with ArchiveStore(path) as store:
        with refused(LeafDataError, "'a.memmap'", str(path)):
            store.decompress("a.memmap")


def test_unknown_method(tmp_path: Path) -> None:
    data = base()
    path = write(
        tmp_path, patch(data, central_offset(data, b"a.memmap") + CENTRAL_METHOD, "<H", 99)
    )
    with ArchiveStore(path) as store:
        assert store.entry("a.memmap").compression == "unknown(99)"
        with refused(ArchiveError, "'a.memmap'", str(path), "method 99"):
            store.read_bytes("a.memmap", LIMIT)


def test_archive_read_limit(tmp_path: Path) -> None:
    path = write(tmp_path, base())
    with ArchiveStore(path) as store:
        with refused(LimitExceededError, f"{path}::b.memmap", "300 bytes", "299 bytes"):
            store.read_bytes("b.memmap", 299)


# -- directories -------------------------------------------------------------------------


@pytest.fixture
def ckdir(tmp_path: Path) -> Path:
    root = tmp_path / "ck"
    (root / "sub").mkdir(parents=True)
    (root / "meta.json").write_bytes(META[1])
    (root / "sub" / "b.memmap").write_bytes(B[1])
    (tmp_path / "secret.txt").write_text("outside")
    return root


def test_symlink_escaping_directory_root(ckdir: Path) -> None:
    (ckdir / "evil.memmap").symlink_to(ckdir.parent / "secret.txt")
    store = DirectoryStore(ckdir)
    assert "evil.memmap" in store.list_dir("")  # listing names is harmless
    for call in (store.is_file, store.entry, store.file_path, lambda k: store.read_bytes(k, 99)):
        with refused(
            UnsafeCheckpointError, "'evil.memmap'", str(ckdir.parent / "secret.txt"), "outside"
        ):
            call("evil.memmap")


def test_symlinked_directory_escaping_root(ckdir: Path) -> None:
    (ckdir / "out").symlink_to(ckdir.parent)
    store = DirectoryStore(ckdir)
    with refused(UnsafeCheckpointError, "'out/secret.txt'", "outside"):
        store.read_bytes("out/secret.txt", 99)
    with refused(UnsafeCheckpointError, "'out'", str(ckdir.parent)):
        store.list_dir("out")


def test_symlink_inside_root_is_followed(ckdir: Path) -> None:
    (ckdir / "alias.memmap").symlink_to(ckdir / "sub" / "b.memmap")
    store = DirectoryStore(ckdir)
    assert store.read_bytes("alias.memmap", LIMIT) == B[1]
    assert store.entry("alias.memmap").file == str((ckdir / "sub" / "b.memmap").resolve())


def test_dotdot_key_on_directory_store(ckdir: Path) -> None:
    store = DirectoryStore(ckdir)
    assert (ckdir / ".." / "secret.txt").exists()
    with refused(UnsafeCheckpointError, "'../secret.txt'", str(ckdir), "'..' component"):
        store.read_bytes("../secret.txt", 99)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_refused_without_blocking(ckdir: Path) -> None:
    os.mkfifo(ckdir / "pipe.memmap")
    store = DirectoryStore(ckdir)
    assert not store.is_file("pipe.memmap")
    with refused(UnsafeCheckpointError, str(ckdir / "pipe.memmap"), "not a regular file"):
        store.read_bytes("pipe.memmap", 99)


def test_directory_read_limit(ckdir: Path) -> None:
    store = DirectoryStore(ckdir)
    with refused(LimitExceededError, str(ckdir / "sub" / "b.memmap"), "300 bytes", "299"):
        store.read_bytes("sub/b.memmap", 299)


# -- read-only use -----------------------------------------------------------------------


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    paths = [root, *root.rglob("*")]
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_mode) for p in paths}


def _read_everything(store) -> None:
    todo = [""]
    while todo:
        key = todo.pop()
        for child in store.list_dir(key):
            sub = f"{key}/{child}" if key else child
            if store.is_dir(sub):
                todo.append(sub)
                continue
            store.entry(sub)
            store.read_bytes(sub, LIMIT)
            if store.kind == "archive":
                store.decompress(sub)
                store.verify(sub)


def test_read_only_files_are_left_untouched(tmp_path: Path) -> None:
    ck = tmp_path / "ro"
    (ck / "sub").mkdir(parents=True)
    (ck / "meta.json").write_bytes(META[1])
    (ck / "sub" / "b.memmap").write_bytes(B[1])
    archive = write(tmp_path, craft_zip([META, A, ("sub/b.memmap", B[1], 8)]), "ro.tdz")
    for p in (archive, ck / "meta.json", ck / "sub" / "b.memmap"):
        p.chmod(0o444)
    for d in (ck / "sub", ck, tmp_path):
        d.chmod(0o555)
    try:
        before = _snapshot(tmp_path)
        for path in (ck, archive):
            with open_store(path) as store:
                _read_everything(store)
                assert store.writable() == os.access(path, os.W_OK)
                if store.kind == "archive":
                    view = store.payload("a.memmap")
                    assert view.readonly
                    with pytest.raises(TypeError):
                        view[0] = 1
        assert _snapshot(tmp_path) == before
    finally:
        for d in (tmp_path, ck, ck / "sub"):
            d.chmod(0o755)


_OVERWRITE = r"""
import shutil, sys
from tdview.errors import ArchiveError
from tdview.storage import ArchiveStore
path, small = sys.argv[1], sys.argv[2]
store = ArchiveStore(path)
with open(path, "r+b") as f, open(small, "rb") as g:  # what `cp small path` does
    f.truncate(0)
    shutil.copyfileobj(g, f)
for read in (lambda: store.read_bytes("sub/meta.json", 1 << 20),
             lambda: store.payload("a.memmap"), lambda: store.decompress("a.memmap")):
    try:
        read()
    except ArchiveError as error:
        print("refused:", error)
"""


def test_an_archive_overwritten_in_place_is_refused_not_a_crash(tmp_path: Path) -> None:
    """A smaller file copied over an open archive (same inode): reading the mapping past
    the new end would kill the process with SIGBUS; each read checks the size first."""
    import subprocess
    import sys

    big = write(
        tmp_path,
        craft_zip([META, ("a.memmap", b"\1" * 50_000), ("sub/meta.json", b"{}")]),
        "big.tdz",
    )
    small = write(tmp_path, craft_zip([META]), "small.tdz")
    run = subprocess.run(
        [sys.executable, "-c", _OVERWRITE, str(big), str(small)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    lines = run.stdout.splitlines()
    assert len(lines) == 3, run.stdout
    size = small.stat().st_size
    assert all(
        f"{big} changed since it was opened: it is now {size} bytes" in line for line in lines
    )


@pytest.mark.parametrize("device", [None, "meta"])
@pytest.mark.parametrize("mode", [None, "r", "r+"])
def test_a_leaf_file_that_is_a_folder(tmp_path: Path, mode: str | None, device: str | None) -> None:
    """A leaf's ``.memmap`` swapped for a folder: a tdview error (still the
    ``IsADirectoryError`` it was) naming the leaf's key and its file, for a whole load and
    for the leaf alone."""
    import torch
    from tensordict import TensorDict

    import tdview
    from tdview.errors import LeafNotAFileError
    from tdview.index import Checkpoint

    root = tmp_path / "ckpt"
    TensorDict(a=torch.zeros(3), sub=TensorDict(x=torch.ones(4))).memmap(root)
    (root / "sub" / "x.memmap").unlink()
    (root / "sub" / "x.memmap").mkdir()
    where = re.escape(str(root / "sub" / "x.memmap"))
    with pytest.raises(LeafNotAFileError, match=f"leaf 'sub/x' of .*{where} is a directory"):
        tdview.load_memmap(root, mode=mode, device=device)
    with Checkpoint(root) as ckpt, pytest.raises(IsADirectoryError, match=f"'sub/x'.*{where}"):
        ckpt.load_leaf("sub/x", mode=mode)
