"""Large archives (a central directory of 64 KiB or more): the catalog that opens them
without making anything per entry must give the answers, and the refusals, of the
catalog that checks every name at open (see ``tdview/storage/_catalog.py``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tdview.errors import UnsafeCheckpointError
from tdview.storage import ArchiveStore, open_store
from tdview.storage._archive import _BULK
from tdview.storage._catalog import _SEARCHES, EagerCatalog, LazyCatalog
from tdview.storage._zip import parse_central_directory

from .test_storage_zipcraft import craft_zip

META = ("meta.json", b'{"_type": "x"}')


def many(n: int = 1500) -> list[tuple[str, bytes]]:
    """``n`` small entries in 30 folders: a central directory above 64 KiB."""
    return [META] + [
        (f"group{i % 30:02d}/leaf_{i:05d}.memmap", bytes([i % 251]) * 3) for i in range(n)
    ]


def write(tmp_path: Path, entries: list, name: str = "big.tdz") -> Path:
    path = tmp_path / name
    path.write_bytes(craft_zip(entries))
    return path


def refused(*needles: str):
    return pytest.raises(
        UnsafeCheckpointError, match="(?s)" + "".join(f"(?=.*{re.escape(n)})" for n in needles)
    )


def eager(path: Path) -> EagerCatalog:
    data = path.read_bytes()
    cd = parse_central_directory(data, len(data), str(path))
    assert cd is not None
    return EagerCatalog(str(path), cd.records(), cd.start, len(data))


def test_a_large_archive_opens_lazily_and_answers_like_the_eager_catalog(tmp_path: Path) -> None:
    path = write(tmp_path, many())
    with ArchiveStore(path) as store:
        assert isinstance(store._catalog, LazyCatalog)
        ref = eager(path)
        names = [
            "meta.json",
            "group03/leaf_00003.memmap",
            "group03/leaf_00004.memmap",
            "group03",
            "nope",
            "group03/nope.memmap",
            "group3/leaf_00003.memmap",
        ]
        for key in names * 2 + [n for n, _ in many()][: 2 * _SEARCHES]:  # both phases
            assert store.is_file(key) == (key in ref.files)
            assert store.is_dir(key) == ref.is_dir(key)
            if key in ref.files:
                assert store._catalog.file(key) == ref.files[key]
                assert store.read_bytes(key, 1 << 20) == dict(many())[key]
        assert store.list_dir("") == ref.children("")
        assert store.list_dir("group07") == ref.children("group07")
        assert store.keys() == ref.keys()
        assert store._catalog.next_start(0) == ref.next_start(0)


@pytest.mark.parametrize("after_build", [False, True])
def test_a_name_given_twice_is_refused_when_looked_up(tmp_path: Path, after_build: bool) -> None:
    entries = many()
    entries.insert(700, ("group05/leaf_00005.memmap", b"evil"))
    path = write(tmp_path, entries)
    with ArchiveStore(path) as store:
        assert isinstance(store._catalog, LazyCatalog)
        if after_build:
            store.list_dir("group06")  # builds the dictionaries
        assert store.is_file("group06/leaf_00006.memmap")
        with refused(str(path), "'group05/leaf_00005.memmap'", "twice"):
            store.is_file("group05/leaf_00005.memmap")
        with refused(str(path), "'group05/leaf_00005.memmap'", "twice"):
            store.read_bytes("group05/leaf_00005.memmap", 1 << 20)
        with refused(str(path), "'group05/leaf_00005.memmap'", "twice"):
            store.list_dir("group05")


@pytest.mark.parametrize("after_build", [False, True])
def test_a_file_named_like_a_directory_is_refused_when_looked_up(
    tmp_path: Path, after_build: bool
) -> None:
    path = write(tmp_path, [*many(), ("group05", b"x")])
    with ArchiveStore(path) as store:
        if after_build:
            store.keys()
        with refused(str(path), "'group05'", "both a file"):
            store.is_file("group05")
        with refused(str(path), "'group05'", "both a file"):
            store.list_dir("")
        # the entries below it have names of their own
        assert store.read_bytes("group05/leaf_00005.memmap", 10) == bytes([5]) * 3


@pytest.mark.parametrize(
    "name", ["../evil.memmap", "group01/../../x", "/abs", "a//b", "./a", "a/./b", ""]
)
def test_an_unsafe_name_in_a_large_archive_is_refused_at_open(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, [*many(), (name, b"x")])
    with pytest.raises(UnsafeCheckpointError, match=re.escape(str(path))):
        open_store(path)


def test_backslash_and_colon_names_stay_lazy(tmp_path: Path) -> None:
    """An archive never becomes paths: such names (keys "a:b", "a\\b" saved with
    robust_key=False) are plain and keep the large archive's lazy catalog."""
    odd = [("C:/x", b"c"), ("group01/a\\b.memmap", b"ab"), ("k:v.memmap", b"kv")]
    path = write(tmp_path, [*many(), *odd])
    with ArchiveStore(path) as store:
        assert isinstance(store._catalog, LazyCatalog)
        assert store.is_dir("C:") and store.list_dir("C:") == ["x"]
        for name, data in odd:
            assert store.read_bytes(name, 10) == data
        assert "a\\b.memmap" in store.list_dir("group01")


def test_many_lookups_switch_to_dictionaries(tmp_path: Path) -> None:
    path = write(tmp_path, many())
    with ArchiveStore(path) as store:
        catalog = store._catalog
        assert isinstance(catalog, LazyCatalog)
        for i in range(3 * _SEARCHES):
            assert store.is_file(f"group{i % 30:02d}/leaf_{i:05d}.memmap")
        assert catalog._rows is not None
        assert not store.is_file("group01/leaf_00000.memmap")


def test_explicit_directory_entries_take_the_eager_catalog(tmp_path: Path) -> None:
    path = write(tmp_path, [*many(), ("group01/", b"")])
    with ArchiveStore(path) as store:
        assert isinstance(store._catalog, EagerCatalog)
        assert store.is_dir("group01") and not store.is_file("group01")
        assert "leaf_00001.memmap" in store.list_dir("group01")


def _damage(data: bytearray, store_path: Path, key: str, how: str) -> None:
    """Spoil the local header of ``key`` in the archive bytes ``data``."""
    with ArchiveStore(store_path) as store:
        at = store._central(key).header_offset
    if how == "signature":
        data[at] ^= 0xFF
    elif how == "name":
        data[at + 30] ^= 0x01  # first byte of the local name
    else:  # an extra field that runs into the next entry
        data[at + 28 : at + 30] = (4000).to_bytes(2, "little")


@pytest.mark.parametrize("how", ["signature", "name", "extra"])
def test_local_headers_read_in_one_pass_agree_with_one_by_one(tmp_path: Path, how: str) -> None:
    """``prepare`` reads the local headers below a folder at once: the same payload
    offsets as reading them one by one, and a spoiled header is left to the one-by-one
    path, which refuses it with its own message."""
    path = write(tmp_path, many(3000))
    bad = "group07/leaf_00037.memmap"
    data = bytearray(path.read_bytes())
    _damage(data, path, bad, how)
    path.write_bytes(bytes(data))
    keys = [n for n, _ in many(3000)[1:]]
    with ArchiveStore(path) as one_by_one:
        expected, spans = {}, {}
        for key in keys:
            try:
                expected[key] = one_by_one.payload_offset(key)
                spans[key] = one_by_one.stored_span(key)
            except Exception as error:  # noqa: BLE001 - the message is compared below
                expected[key] = (type(error), str(error))
    assert isinstance(expected[bad], tuple)
    with ArchiveStore(path) as store:
        store._read_headers_below("group07", True)
        assert len(store._offsets) == 100 - 1  # the folder's entries, less the spoiled one
        assert "group08/leaf_00008.memmap" not in store._offsets  # below that folder only
        store._read_headers_below("", False)  # meta.json entries only
        assert set(store._offsets) - set(keys) == {"meta.json"}
        store._read_headers_below("", True)
        assert len(store._offsets) == len(keys)  # all leaves, less one, and meta.json
        for key in keys:
            if isinstance(expected[key], tuple):
                with pytest.raises(expected[key][0], match=re.escape(expected[key][1])):
                    store.payload_offset(key)
            else:
                assert store.payload_offset(key) == expected[key]
                assert store.stored_span(key) == spans[key]


def test_a_prepared_walk_reads_the_rest_of_its_headers_in_one_pass(tmp_path: Path) -> None:
    path = write(tmp_path, many(3000))
    group = [f"group05/leaf_{i:05d}.memmap" for i in range(5, 3000, 30)]
    with ArchiveStore(path) as store:
        store.prepare("group05", payloads=True)
        for key in group[: _BULK - 1]:
            store.payload_offset(key)
        assert len(store._offsets) == _BULK - 1  # a small walk reads only its own
        store.payload_offset(group[_BULK - 1])
        assert set(store._offsets) == set(group)  # then the rest of the folder at once


def test_a_folder_s_files_are_found_in_one_pass_with_its_refusals(tmp_path: Path) -> None:
    """Before the dictionaries exist, the files of a folder are found in one pass over
    the names below it: one search for all of them, a name given twice or also a
    directory refused as a search for it alone would refuse it."""
    entries = [
        *many(),
        ("group04/twice.memmap", b"1"),
        ("group04/twice.memmap", b"2"),
        ("group04/both", b"x"),
        ("group04/both/inner.memmap", b"y"),
    ]
    path = write(tmp_path, entries)
    with ArchiveStore(path) as store:
        catalog = store._catalog
        assert isinstance(catalog, LazyCatalog)
        searches = catalog._searches
        for i in range(4, 1500, 30):
            assert store.is_file(f"group04/leaf_{i:05d}.memmap")
        assert not store.is_file("group04/nope.memmap")
        assert catalog._searches == searches + 1 and catalog._rows is None
        with refused(str(path), "'group04/twice.memmap'", "twice"):
            store.is_file("group04/twice.memmap")
        with refused(str(path), "'group04/both'", "both a file"):
            store.is_file("group04/both")
        assert store.is_file("group04/both/inner.memmap")
        assert store.read_bytes("group04/leaf_00004.memmap", 10) == bytes([4]) * 3


def test_a_folder_with_many_names_below_it_is_searched_name_by_name(tmp_path: Path) -> None:
    entries = [META] + [(f"big/sub{i % 3}/leaf_{i:05d}.memmap", b"x") for i in range(1200)]
    entries += [("big/top.memmap", b"t")]
    path = write(tmp_path, entries)
    with ArchiveStore(path) as store:
        catalog = store._catalog
        assert isinstance(catalog, LazyCatalog)
        assert store.is_file("big/top.memmap") and not store.is_file("big/nope.memmap")
        assert catalog._folders["big"] is None  # too many names below: searched one by one
        assert store.is_file("big/sub1/leaf_00001.memmap")
        assert catalog._rows is None


def test_a_crowded_folder_whose_names_lie_apart_is_searched_name_by_name(tmp_path: Path) -> None:
    entries = [META]
    pad = "p" * 24  # a central directory above 64 KiB
    for i in range(300):
        entries += [
            (f"a/x{i:03d}{pad}.memmap", b"a"),
            (f"b/y{i:03d}{pad}.memmap", b"b"),
            (f"c/z{i:03d}{pad}.memmap", b"c"),
        ]
    path = write(tmp_path, entries)
    with ArchiveStore(path) as store:
        catalog = store._catalog
        assert isinstance(catalog, LazyCatalog)
        assert store.is_file(f"a/x299{pad}.memmap") and not store.is_file("a/nope.memmap")
        assert catalog._folders["a"] is None
        assert store.read_bytes(f"b/y007{pad}.memmap", 10) == b"b"


def test_names_are_found_by_prefix_at_every_word_boundary(tmp_path: Path) -> None:
    # names of 1 to 19 bytes compared 8 bytes at a time: every prefix length, cut inside
    # and at the end of a word, finds exactly the names that start with it
    stems = ["a" * k for k in range(1, 18)] + ["ab/cdefgh", "abcdefg/h", "é/ü.memmap"]
    names = ["meta.json"] + [stem + digit for stem in stems for digit in "012"]
    path = write(tmp_path, [META] + [(n, b"x") for n in names[1:]] + many()[1:])
    with ArchiveStore(path) as store:
        catalog = store._catalog
        assert isinstance(catalog, LazyCatalog)
        columns = catalog.columns
        every = columns.names()
        assert every[: len(names)] == names
        for name in names:
            raw = name.encode()
            for cut in range(1, len(raw) + 1):
                want = [
                    row for row, other in enumerate(every) if other.encode().startswith(raw[:cut])
                ]
                assert columns.rows_with_prefix(raw[:cut]).tolist() == want, raw[:cut]
            assert columns.rows_with_prefix(raw + b"\0").tolist() == [every.index(name)]
        assert not columns.rows_with_prefix(b"a" * columns.width).size


def test_a_name_far_longer_than_the_rest_takes_the_record_by_record_parse(tmp_path: Path) -> None:
    long_name = "group01/" + "x" * 4000 + ".memmap"
    path = write(tmp_path, [*many(), (long_name, b"long")])
    with ArchiveStore(path) as store:
        assert isinstance(store._catalog, EagerCatalog)  # rows of 4 KB for 1,500 names
        assert store.read_bytes(long_name, 10) == b"long"
        assert store.read_bytes("group03/leaf_00003.memmap", 10) == bytes([3]) * 3


@pytest.mark.parametrize("count", [1, 3])
def test_rows_of_very_long_names_take_memory_of_their_size(tmp_path: Path, count: int) -> None:
    """A few names of 65,500 bytes (a 131 KB archive): the masks of the rows are made
    per row, not per length up to the longest (4 GiB for such a name)."""
    import tracemalloc

    longs = [(f"d{i}/" + "n" * 65_500, bytes([i])) for i in range(count)]
    path = write(tmp_path, [META, *longs])
    tracemalloc.start()
    try:
        with ArchiveStore(path) as store:
            assert isinstance(store._catalog, LazyCatalog)
            for name, data in longs:
                assert store.read_bytes(name, 10) == data
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 65_500 * count, peak


# Names of one to three parts, some across an 8-byte word boundary, some given twice,
# some both a file and a directory: the lazy catalog must answer as the rules say.
_PARTS = st.sampled_from(
    ["a", "b", "ab", "abcdefg", "abcdefgh", "abcdefghi", "x.memmap", "é", "ü.memmap", "meta.json"]
)
_NAMES = st.lists(st.lists(_PARTS, min_size=1, max_size=3).map("/".join), min_size=1, max_size=12)


def _expected(names: list[str], key: str) -> set[object]:
    """What looking ``key`` up as a file may answer: refused as "twice" or "both" (either
    when both hold), else whether it is one."""
    reasons: set[object] = set()
    if names.count(key) > 1:
        reasons.add("twice")
    if key in names and any(name.startswith(key + "/") for name in names):
        reasons.add("both")
    return reasons or {key in names}


def _answer(call) -> object:
    try:
        return call()
    except UnsafeCheckpointError as error:
        return "twice" if "twice" in str(error) else "both"


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    names=_NAMES,
    where=st.sampled_from(["top", "folder", "crowded folder"]),
    build_first=st.booleans(),
)
@example(names=["a", "a", "b/c", "b"], where="top", build_first=False)
@example(names=["a", "a", "b/c", "b"], where="crowded folder", build_first=False)
@example(names=["a", "a", "b/c", "b"], where="folder", build_first=False)
def test_random_names_are_answered_as_the_rules_say(
    tmp_path: Path, names: list[str], where: str, build_first: bool
) -> None:
    # top-level names and those of a crowded folder are looked up one by one, those of
    # a folder with few names below it by listing the folder
    filler = [(f"r/zz{i:03d}.memmap", b"z") for i in range(300 if where == "crowded folder" else 0)]
    if where == "top":
        names = [name for name in names if name.partition("/")[0] != "meta.json"]
    else:
        names = [f"r/{name}" for name in names]
    entries = [*many(), *filler, *((name, b"v") for name in names)]
    path = write(tmp_path, entries, "random.tdz")
    names += [name for name, _ in filler]
    probes = sorted(
        {
            *names,
            *(name.rpartition("/")[0] for name in names),
            *(name + "x" for name in names),
            *(name[:-1] for name in names),
        }
    )
    probes = [key for key in probes if key and not key.endswith("/")]  # keys, not unsafe names
    with ArchiveStore(path) as store:
        catalog = store._catalog
        assert isinstance(catalog, LazyCatalog)
        if build_first:
            catalog._build()
        for key in probes:
            assert _answer(lambda key=key: store.is_file(key)) in _expected(names, key), key
            assert store.is_dir(key) == any(n.startswith(key + "/") for n in names), key
        for folder in sorted({name.rpartition("/")[0] for name in names} - {""}):
            below = [n[len(folder) + 1 :] for n in names if n.startswith(folder + "/")]
            children = sorted({n.partition("/")[0] for n in below})
            refused = set().union(*(_expected(names, f"{folder}/{c}") for c in children))
            refused -= {True, False}
            got = _answer(lambda folder=folder: store.list_dir(folder))
            assert got in refused if refused else got == children, folder


def test_rows_of_names_as_wide_as_the_longest_reach_past_the_end_of_the_directory(
    tmp_path: Path,
) -> None:
    # the rows are as wide as the longest name: the row of a short last name runs past
    # the end of the central directory and of the file (no archive comment)
    long_name = "group02/" + "y" * 100 + ".memmap"
    path = write(tmp_path, [META, (long_name, b"long"), *many()[1:], ("z", b"last")])
    with ArchiveStore(path) as store:
        assert isinstance(store._catalog, LazyCatalog)
        columns = store._catalog.columns
        assert columns.width > 100 and columns.names()[-1] == "z"
        assert store.read_bytes("z", 10) == b"last"
        assert store.read_bytes(long_name, 10) == b"long"
