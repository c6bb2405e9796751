"""The key codec against file names written by tensordict, and its escape rules."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict._utils_key_json import _encode_key_for_filesystem

from tdview.format import (
    CollectionRecord,
    LeafRecord,
    _keys,
    candidate_names,
    decode_name,
    encode_key,
    is_canonical_name,
    is_safe_legacy_key,
    parse_meta_json,
    parse_node,
)

KEYS = [
    "a b",
    "a/b",
    "%",
    "",
    ".",
    "..",
    "ключ",
    "emoji😀",
    "x.memmap",
    "meta.json",
    "shape",
    "_class",
    "tab\there",
    'q?*<>|:"\\',
    "%41",
    "C:x",
    ".hidden",
    "a.b",
    "~#&!'()+,;=@[]^`{}",
]
# a collection cannot be named "meta.json" (its directory would clash with the file)
COLLECTION_KEYS = [k for k in KEYS if k != "meta.json"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys") / "ckpt"
    td = TensorDict({k: torch.zeros(2) for k in KEYS}, batch_size=[2])
    td["coll"] = TensorDict(
        {k: TensorDict(z=torch.ones(2), batch_size=[2]) for k in COLLECTION_KEYS}, batch_size=[2]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td.memmap(root)
    return root


def _node(directory):
    where = str(directory / "meta.json")
    return parse_node(parse_meta_json((directory / "meta.json").read_bytes(), where), where)


def test_every_encoded_leaf_exists(written):
    node = _node(written)
    leaves = [e for e in node.entries if isinstance(e, LeafRecord)]
    # "shape" was overwritten by the node field (its key is lost), as in the reference
    assert [e.key for e in leaves] == [k for k in KEYS if k != "shape"]
    for entry in leaves:
        first = candidate_names(entry.key, robust=True, collection=False)[0]
        assert (written / f"{first}.memmap").is_file(), entry.key
        assert first == _encode_key_for_filesystem(entry.key)


def test_every_encoded_collection_exists(written):
    node = _node(written / "coll")
    colls = [e for e in node.entries if isinstance(e, CollectionRecord)]
    assert [e.key for e in colls] == [k for k in COLLECTION_KEYS if k != "shape"]
    for entry in colls:
        first = candidate_names(entry.key, robust=True, collection=True)[0]
        assert (written / "coll" / first / "meta.json").is_file(), entry.key


def test_every_file_name_decodes_to_its_key(written):
    leaf_keys = set()
    for name in os.listdir(written):
        if name.endswith(".memmap"):
            stem = name[: -len(".memmap")]
            assert is_canonical_name(stem)
            leaf_keys.add(decode_name(stem))
    assert leaf_keys == set(KEYS)
    dir_keys = {
        decode_name(n) for n in os.listdir(written / "coll") if (written / "coll" / n).is_dir()
    }
    assert dir_keys == set(COLLECTION_KEYS)


@pytest.mark.parametrize(
    "key, name",
    [
        ("a/b", "a%2Fb"),
        ("a b", "a%20b"),
        ("%", "%25"),
        ("%41", "%2541"),
        ("C:x", "C%3Ax"),
        ("tab\there", "tab%09here"),
        ('q?*<>|:"\\', "q%3F%2A%3C%3E%7C%3A%22%5C"),
        ("x.memmap", "x.memmap"),
        ("meta.json", "meta.json"),
        ("", "%"),
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("...", "..."),
        ("\x7f\x00", "%7F%00"),
        ("ключ", "ключ"),
    ],
)
def test_encode_examples(key, name):
    assert encode_key(key) == name == _encode_key_for_filesystem(key)
    assert decode_name(name) == key


def test_decode_leaves_invalid_escapes_literal():
    assert decode_name("50%") == "50%"
    assert decode_name("%zz") == "%zz"
    assert decode_name("%2") == "%2"
    assert decode_name("%2f") == "/"  # either case, like the generic decoder
    assert not is_canonical_name("%2f") and not is_canonical_name("a b")


def test_safe_legacy_keys():
    assert is_safe_legacy_key("a b", collection=True)
    assert is_safe_legacy_key("", collection=False)
    assert is_safe_legacy_key(".", collection=False)
    for key in ("", ".", ".."):
        assert not is_safe_legacy_key(key, collection=True)
    for key in ("a/b", "a\\b", "C:x", "ж:x", "x\0"):
        assert not is_safe_legacy_key(key, collection=False)
    assert is_safe_legacy_key("1:x", collection=True)  # not a drive letter


def test_candidate_names_order():
    assert candidate_names("a b", robust=True, collection=True) == ["a%20b", "a b"]
    assert candidate_names("plain", robust=True, collection=True) == ["plain"]
    assert candidate_names("", robust=True, collection=False) == ["%", ""]
    assert candidate_names("", robust=True, collection=True) == ["%"]
    assert candidate_names("..", robust=True, collection=True) == ["%2E%2E"]
    assert candidate_names("a/b", robust=True, collection=False) == ["a%2Fb"]
    assert candidate_names("a b", robust=False, collection=True) == ["a b"]
    assert candidate_names("a/b", robust=False, collection=True) == ["a/b"]


@pytest.mark.parametrize("key", ["", ".", "..", "../x", "a/../b", "/abs", "x\0", "a/"])
def test_raw_names_never_escape(key):
    assert candidate_names(key, robust=False, collection=True) == []


@pytest.mark.parametrize("key", ["\\x", "C:x", "a\\..\\..\\b"])
def test_backslash_and_drive_escape_on_windows_only(key, monkeypatch):
    # tensordict writes such raw names (robust_key=False): they are names except where
    # a backslash separates and a drive prefix escapes
    assert candidate_names(key, robust=False, collection=True) == [key]
    monkeypatch.setattr(_keys, "WINDOWS_PATHS", True)
    assert candidate_names(key, robust=False, collection=True) == []


def test_raw_leaf_names():
    assert candidate_names("", robust=False, collection=False) == [""]  # ".memmap"
    assert candidate_names("..", robust=False, collection=False) == [".."]  # "...memmap"
    assert candidate_names("../x", robust=False, collection=False) == []


@pytest.mark.parametrize("key", KEYS + ["\x00", "%%", "%2E", "a%20b"])
@pytest.mark.parametrize("collection", [True, False])
def test_robust_candidates_are_single_safe_components(key, collection):
    for name in candidate_names(key, robust=True, collection=collection):
        assert "/" not in name and "\\" not in name and "\0" not in name
        if collection:
            assert name not in ("", ".", "..")


def test_legacy_raw_directory_is_found_by_fallback(tmp_path):
    # a <= 0.13 checkpoint: collection directories are raw key names
    (tmp_path / "sub dir").mkdir()
    names = candidate_names("sub dir", robust=True, collection=True)
    found = next(n for n in names if (tmp_path / n).is_dir())
    assert found == "sub dir"
