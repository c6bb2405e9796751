"""The format layer against checkpoints written by tensordict's own writers.

Every ``meta.json`` of each checkpoint is parsed with :func:`tdview.format.parse_node`
and the records are compared with the tensordict that was saved (keys, dtypes,
shapes, batch sizes, names, kinds), and with the key order of tensordict's loader.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import (
    LazyStackedTensorDict,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    set_lazy_legacy,
    tensorclass,
)
from tensordict.tensorclass import NonTensorDataBase

from tdview.format import (
    DTYPES,
    CollectionRecord,
    IndexTensor,
    LazyStackNode,
    LeafRecord,
    NonTensorDataNode,
    NonTensorStackNode,
    SubTensorDictNode,
    TensorclassNode,
    TensorDictNode,
    ViewNode,
    candidate_names,
    parse_json_types,
    parse_meta_json,
    parse_node,
    scan_pickle,
    to_torch_index,
    torch_dtype,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning"
)


@tensorclass
class Point:
    """A tensorclass with tensor, nested and non-tensor fields."""

    pos: torch.Tensor
    label: str
    count: int
    inner: TensorDict
    extra: object = None


class MyTD(TensorDict):
    """A user subclass of TensorDict."""


# ---------------------------------------------------------------- helpers


def read_node(directory: Path):
    where = str(directory / "meta.json")
    return parse_node(parse_meta_json((directory / "meta.json").read_bytes(), where), where)


def child_dir(directory: Path, key: str) -> Path:
    for name in candidate_names(key, robust=True, collection=True):
        if (directory / name).is_dir():
            return directory / name
    raise AssertionError(f"no directory for {key!r} in {directory}")


def all_meta_files(root: Path) -> list[Path]:
    return sorted(root.rglob("meta.json"))


def same_json(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def check_tree(obj, directory: Path) -> None:
    """Assert that the node in ``directory`` describes ``obj``, recursively."""
    node = read_node(directory)
    if isinstance(obj, NonTensorStack):
        assert isinstance(node, NonTensorStackNode)
        if node.pickled:
            assert (directory / "pickle.pkl").is_file()
        else:
            assert node.data == obj.tolist()
        return
    if isinstance(obj, LazyStackedTensorDict):
        assert isinstance(node, LazyStackNode)
        assert node.stack_dim == obj.stack_dim
        for i, member in enumerate(obj.tensordicts):
            check_tree(member, directory / str(i))
        assert not (directory / str(len(obj.tensordicts))).exists()
        return
    if isinstance(obj, NonTensorDataBase):
        assert isinstance(node, NonTensorDataNode)
        assert node.class_name == type(obj).__name__
        if node.data_present:
            assert same_json(node.data, obj.data)
        else:
            assert (directory / "other.pickle").is_file()
        return
    if not isinstance(obj, TensorDict):  # a tensorclass
        assert isinstance(node, TensorclassNode)
        assert node.class_ref.name == type(obj).__name__
        check_tree(obj._tensordict, directory / "_tensordict")
        return
    assert isinstance(node, TensorDictNode)
    assert node.batch_size == tuple(obj.batch_size)
    assert node.names == (tuple(obj.names) if obj._has_names() else None)
    assert node.device == "cpu"
    assert [e.key for e in node.entries] == list(obj.keys())
    for entry in node.entries:
        value = obj.get(entry.key)
        if isinstance(entry, LeafRecord):
            assert isinstance(value, torch.Tensor)
            assert entry.dtype.name == str(value.dtype)
            assert entry.dtype.itemsize == value.dtype.itemsize
            assert entry.is_nested == value.is_nested
            if value.is_nested:
                assert entry.shape == tuple(value._nested_tensor_size().shape)
            else:
                assert entry.shape == tuple(value.shape)
                assert entry.nbytes == value.numel() * value.dtype.itemsize
        else:
            assert isinstance(entry, CollectionRecord)
            assert entry.type_hint == type(value).__name__
            check_tree(value, child_dir(directory, entry.key))


def check_reference_order(directory: Path) -> None:
    """The leaves-then-collections order matches tensordict's loader."""
    node = read_node(directory)
    loaded = TensorDict.load_memmap(directory, allow_pickle=True)
    assert [e.key for e in node.load_order] == list(loaded.keys())


# ---------------------------------------------------------------- real checkpoints


def test_plain_nested_with_names(tmp_path):
    td = TensorDict(
        obs=torch.randn(2, 3, 4),
        step=torch.arange(6).view(2, 3),
        nested=TensorDict(
            reward=torch.zeros(2, 3, 1),
            deeper=TensorDict(flag=torch.ones(2, 3, dtype=torch.bool), batch_size=[2, 3]),
            batch_size=[2, 3],
        ),
        empty_level=TensorDict(batch_size=[2, 3]),
        batch_size=[2, 3],
        names=["batch", "time"],
    )
    td.memmap(tmp_path / "ckpt")
    check_tree(td, tmp_path / "ckpt")
    check_reference_order(tmp_path / "ckpt")
    root = read_node(tmp_path / "ckpt")
    assert root.format_version == 1 and root.class_id == "tensordict:TensorDict"
    assert root.builtin and not root.is_subclass and root.class_name == "TensorDict"
    assert not root.legacy_no_collection_records
    assert [e.key for e in root.load_order] == ["obs", "step", "nested", "empty_level"]


def test_partial_names(tmp_path):
    td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3], names=["x", None])
    td.memmap(tmp_path / "c")
    assert read_node(tmp_path / "c").names == ("x", None)


def _tensor_of(dtype: torch.dtype) -> torch.Tensor:
    return torch.arange(2 * 3 * dtype.itemsize, dtype=torch.uint8).view(2, -1).view(dtype)


WRITABLE = [
    info.torch_name for info in DTYPES.values() if info.kind not in ("quantized", "subbyte")
]


@pytest.mark.parametrize("name", WRITABLE)
def test_every_writable_dtype(tmp_path, name):
    dtype = getattr(torch, name)
    td = TensorDict(x=_tensor_of(dtype), batch_size=[2])
    td.memmap(tmp_path / "c")
    check_tree(td, tmp_path / "c")
    leaf = read_node(tmp_path / "c").entries[0]
    assert leaf.dtype.loadable
    assert torch_dtype(leaf.dtype) is dtype
    assert (tmp_path / "c" / "x.memmap").stat().st_size == leaf.nbytes
    if leaf.dtype.in_reference:
        assert TensorDict.load_memmap(tmp_path / "c")["x"].dtype is dtype
    else:  # the reference writes these dtypes but cannot read them back
        with pytest.raises(KeyError):
            TensorDict.load_memmap(tmp_path / "c")


def test_dtype_table_is_torch(tmp_path):
    names = {str(v) for v in vars(torch).values() if isinstance(v, torch.dtype)}
    assert names == set(DTYPES)
    for info in DTYPES.values():
        assert torch_dtype(info).itemsize == info.itemsize
    assert not DTYPES["torch.qint8"].loadable and DTYPES["torch.qint8"].in_reference
    assert DTYPES["torch.float8_e5m2"].loadable and not DTYPES["torch.float8_e5m2"].in_reference


def test_zero_dim_and_zero_element_leaves(tmp_path):
    td = TensorDict(s=torch.tensor(3.5), e=torch.zeros(0, 5), f=torch.zeros(3, 0, dtype=torch.int8))
    td.memmap(tmp_path / "c")
    check_tree(td, tmp_path / "c")
    node = read_node(tmp_path / "c")
    by_key = {e.key: e for e in node.entries}
    assert by_key["s"].shape == () and by_key["s"].numel == 1 and by_key["s"].nbytes == 4
    assert by_key["e"].numel == 0 and not (tmp_path / "c" / "e.memmap").exists()
    assert by_key["f"].nbytes == 0


def test_nested_tensor_leaf(tmp_path):
    nt = torch.nested.nested_tensor([torch.zeros(2, 3), torch.ones(1, 4)], layout=torch.strided)
    td = TensorDict(nt=nt)
    td.memmap(tmp_path / "c")
    check_tree(td, tmp_path / "c")
    leaf = read_node(tmp_path / "c").entries[0]
    assert leaf.is_nested and leaf.shape == (2, 2)
    assert leaf.numel is None and leaf.nbytes is None and leaf.sizes_nbytes == 32
    assert (tmp_path / "c" / "nt.shape.memmap").stat().st_size == 32


def test_tensorclass_with_non_tensor_fields(tmp_path):
    tc = Point(
        pos=torch.zeros(2, 3),
        label="hello",
        count=7,
        inner=TensorDict(v=torch.ones(2), batch_size=[2]),
        extra={1, 2},
        batch_size=[2],
    )
    tc.memmap(tmp_path / "tc")
    check_tree(tc, tmp_path / "tc")
    node = read_node(tmp_path / "tc")
    assert node.non_tensor == {} and not node.builtin and node.format_version == 0
    assert node.class_ref.qualname == "Point" and node.class_id is None
    assert node.type_name == str(Point)
    # the set went to other.pickle of the NonTensorData child
    extra = tmp_path / "tc" / "_tensordict" / "extra"
    info = scan_pickle((extra / "other.pickle").read_bytes(), str(extra / "other.pickle"))
    assert info.protocol >= 2 and info.end == info.size
    # every meta.json of the tree parses
    for path in all_meta_files(tmp_path / "tc"):
        read_node(path.parent)


def test_non_tensor_data_values(tmp_path):
    td = TensorDict(
        s=NonTensorData("text"),
        i=NonTensorData(5),
        nan=NonTensorData(float("nan")),
        d=NonTensorData({"lr": 0.1, "big": 2**70}),
        m=MetaData({"k": [1, 2]}),
        ms=MetaData[str]("typed"),
        st=NonTensorData({1, 2}),
    )
    td.memmap(tmp_path / "c")
    check_tree(td, tmp_path / "c")
    check_reference_order(tmp_path / "c")
    nodes = {k: read_node(tmp_path / "c" / k) for k in td.keys()}
    assert nodes["ms"].class_name == "MetaData[str]" and nodes["ms"].builtin
    assert nodes["m"].class_name == "MetaData"
    assert nodes["d"].data["big"] == 2**70
    assert not nodes["st"].data_present and nodes["st"].metadata is None
    assert nodes["st"].non_tensor == {"_metadata": None, "_is_non_tensor": True}
    info = scan_pickle((tmp_path / "c" / "st" / "other.pickle").read_bytes(), "st/other.pickle")
    assert info.is_plain_data  # a set pickles without globals in protocol 4


def test_non_tensor_stacks(tmp_path):
    td = TensorDict(
        js=NonTensorStack(*[NonTensorStack("a", "b", "c") for _ in range(2)]),
        pk=NonTensorStack({1}, {2}),
        batch_size=[],
    )
    td.memmap(tmp_path / "c")
    check_tree(td, tmp_path / "c")
    js = read_node(tmp_path / "c" / "js")
    assert js.data == [["a", "b", "c"], ["a", "b", "c"]] and not js.pickled
    assert js.device is None and js.stack_dim == 0 and not js.members_lazy
    pk = read_node(tmp_path / "c" / "pk")
    assert pk.pickled and pk.data is None and not pk.members_lazy
    scan_pickle((tmp_path / "c" / "pk" / "pickle.pkl").read_bytes(), "pk/pickle.pkl")


def test_heterogeneous_lazy_stack(tmp_path):
    ls = LazyStackedTensorDict(
        TensorDict(a=torch.zeros(2)),
        TensorDict(b=torch.ones(2, 3), sub=TensorDict(c=torch.zeros(1))),
        stack_dim=0,
    )
    ls.memmap(tmp_path / "ls")
    check_tree(ls, tmp_path / "ls")
    node = read_node(tmp_path / "ls")
    assert node.stack_dim_name is None and node.class_id == "tensordict:LazyStackedTensorDict"


def test_legacy_views(tmp_path):
    source = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3])
    with set_lazy_legacy(True):
        source.permute(1, 0).memmap(tmp_path / "perm")
        source.transpose(0, 1).memmap(tmp_path / "tr")
        source.unsqueeze(0).memmap(tmp_path / "unsq")
        TensorDict(a=torch.zeros(1, 3), batch_size=[1, 3]).squeeze(0).memmap(tmp_path / "sq")
        source.view(-1).memmap(tmp_path / "view")
    perm = read_node(tmp_path / "perm")
    assert isinstance(perm, ViewNode) and perm.class_name == "_PermutedTensorDict"
    assert perm.custom_op == "permute" and perm.custom_op_kwargs == {"dims": (1, 0)}
    assert perm.batch_size == (3, 2) and perm.device == "cpu"
    view = read_node(tmp_path / "view")
    assert view.custom_op_kwargs == {"size": (6,)} and view.inv_op_kwargs == {"size": (2, 3)}
    for name in ("tr", "unsq", "sq"):
        node = read_node(tmp_path / name)
        assert isinstance(node, ViewNode), name
        if name != "sq":
            check_tree(source, tmp_path / name / "_source")
    assert read_node(tmp_path / "sq").custom_op == "squeeze"


def test_sub_tensordict(tmp_path):
    td = TensorDict(a=torch.arange(12.0).view(4, 3), batch_size=[4, 3])
    idx = (slice(0, 3, 2), torch.tensor([0, 2]))
    td._get_sub_tensordict(idx).memmap(tmp_path / "sub")
    node = read_node(tmp_path / "sub")
    assert isinstance(node, SubTensorDictNode)
    assert node.index[0] == slice(0, 3, 2)
    assert isinstance(node.index[1], IndexTensor) and node.index[1].shape == (2,)
    rebuilt = to_torch_index(node.index)
    assert torch.equal(td["a"][rebuilt], td["a"][idx])
    check_tree(td, tmp_path / "sub" / "_source")


def test_user_tensordict_subclass(tmp_path):
    MyTD(a=torch.zeros(2), batch_size=[2]).memmap(tmp_path / "c")
    node = read_node(tmp_path / "c")
    assert isinstance(node, TensorDictNode) and node.is_subclass
    assert node.class_ref.module == MyTD.__module__ and node.class_name == "MyTD"


def test_colliding_keys(tmp_path):
    keys = ["shape", "device", "_type", "_class", "_names", "_format_version", "ok"]
    td = TensorDict({k: torch.zeros(2) for k in keys}, batch_size=[2], names=["n"])
    td.memmap(tmp_path / "c")
    node = read_node(tmp_path / "c")
    assert [e.key for e in node.entries] == ["_class", "_names", "_format_version", "ok"]
    assert node.format_version == 0 and node.class_id is None and node.names is None
    assert node.builtin and node.batch_size == (2,)
    check_reference_order(tmp_path / "c")


def test_json_types_from_pytree(tmp_path):
    td = TensorDict.from_pytree({"a": torch.zeros(2), "b": (torch.ones(1), torch.ones(1))})
    td.memmap(tmp_path / "c")
    found = sorted((tmp_path / "c").rglob("json_types.json"))
    assert found, "from_pytree should write json_types.json"
    for path in found:
        jt = parse_json_types(path.read_bytes(), str(path))
        pickled = (path.parent / "other.pickle").read_bytes()
        assert jt.matches(pickled)
        types = jt.types_if_matches(pickled)
        assert types and set(types.values()) <= {"dict", "OrderedDict", "list", "tuple"}
        assert jt.types_if_matches(pickled + b"x") is None
    for path in all_meta_files(tmp_path / "c"):
        read_node(path.parent)


def test_every_meta_json_of_a_big_tree_parses(tmp_path):
    td = TensorDict(
        a=torch.zeros(3),
        tc=Point(
            pos=torch.zeros(3, 3),
            label="x",
            count=1,
            inner=TensorDict(batch_size=[3]),
            batch_size=[3],
        ),
        ls=LazyStackedTensorDict(*[TensorDict(x=torch.zeros(2)) for _ in range(3)], stack_dim=0),
        s=NonTensorData("s"),
        batch_size=[3],
    )
    td.memmap(tmp_path / "c")
    kinds = {}
    for path in all_meta_files(tmp_path / "c"):
        node = read_node(path.parent)
        kinds[str(path.parent.relative_to(tmp_path / "c"))] = node.kind
    assert kinds["."] == "tensordict" and kinds["tc"] == "tensorclass"
    assert kinds["ls"] == "lazy_stack" and kinds["ls/0"] == "tensordict"
    assert kinds["s"] == "non_tensor_data"
    check_tree(td, tmp_path / "c")


# ---------------------------------------------------------------- older layouts (hand-written)


def test_v03_tensordict_without_collection_records():
    meta = {
        "obs": {"device": "cpu", "shape": [2], "dtype": "torch.float32"},
        "shape": [2],
        "device": "cpu",
        "_type": "<class 'tensordict.tensordict.TensorDict'>",
    }
    node = parse_node(meta, "old/meta.json")
    assert isinstance(node, TensorDictNode) and node.builtin
    assert node.legacy_no_collection_records and node.format_version == 0
    assert node.entries[0].is_nested is False and node.entries[0].device == "cpu"


def test_v03_tensorclass_and_non_tensor_data():
    tc = parse_node({"_type": "<class 'mymod.Point'>", "label": "x", "n": 3}, "m")
    assert isinstance(tc, TensorclassNode) and tc.non_tensor == {"label": "x", "n": 3}
    assert tc.class_ref.module == "mymod"
    ntd = parse_node({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": 1}, "m")
    assert isinstance(ntd, NonTensorDataNode) and ntd.data_present and ntd.data == 1
    bare = parse_node({"_type": "<class 'tensordict.tensorclass.NonTensorData'>"}, "m")
    assert not bare.data_present and bare.metadata is None


def test_v04_non_tensor_stack_and_v03_lazy_stack():
    nts = parse_node(
        {
            "_type": "<class 'tensordict.tensorclass.NonTensorStack'>",
            "stack_dim": 0,
            "device": "cpu",
            "data": [1, 2],
        },
        "m",
    )
    assert isinstance(nts, NonTensorStackNode) and nts.device == "cpu" and nts.data == [1, 2]
    lazy = parse_node(
        {"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "stack_dim": 1}, "m"
    )
    assert lazy.members_lazy and lazy.stack_dim == 1
    ls = parse_node(
        {"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 0}, "m"
    )
    assert isinstance(ls, LazyStackNode) and ls.format_version == 0


def test_untagged_legacy_index():
    meta = {
        "_type": "<class 'tensordict._td._SubTensorDict'>",
        "index": [["slice", {"start": 0, "stop": 2, "step": None}], 1, ["ellipsis"], None, True],
    }
    node = parse_node(meta, "m")
    assert node.index == (slice(0, 2, None), 1, Ellipsis, None, True)
    tagged = parse_node(
        {**meta, "index": ["list", [0, ["range", {"start": 0, "stop": 4, "step": 2}]]]}, "m"
    )
    assert tagged.index == [0, range(0, 4, 2)]
    assert parse_node({**meta, "index": []}, "m").index == ()
    assert parse_node({**meta, "index": 3}, "m").index == 3


def test_persistent_tensordict_and_params_read_as_tensordict():
    for type_name, class_id in [
        ("<class 'tensordict.persistent.PersistentTensorDict'>", "tensordict:PersistentTensorDict"),
        ("<class 'tensordict.nn.params.TensorDictParams'>", "tensordict:TensorDictParams"),
    ]:
        meta = {
            "a": {"device": "cpu", "shape": [1], "dtype": "torch.int64"},
            "shape": [1],
            "device": "cpu",
            "_type": type_name,
            "_format_version": 1,
            "_class": class_id,
        }
        node = parse_node(meta, "m")
        assert isinstance(node, TensorDictNode) and node.builtin and not node.is_subclass


def test_orjson_style_and_bom():
    raw = (
        '\ufeff{"x":{"device":"cpu","shape":[1],"dtype":"torch.float32","is_nested":false},'
        '"shape":[],"device":"None","_type":"<class \'tensordict._td.TensorDict\'>","ключ":null}'
    )
    meta = parse_meta_json(raw.encode("utf-8"), "m")
    node = parse_node(meta, "m")
    assert node.device is None and node.ignored_keys == ("ключ",)


def test_old_tensordict_subclass_without_class_field():
    meta = {"shape": [2], "device": "cpu", "_type": "<class 'pkg.MyTD'>"}
    node = parse_node(meta, "m")
    assert isinstance(node, TensorDictNode) and node.is_subclass


def test_unknown_class_with_class_id_and_stack_dim_is_a_lazy_stack():
    meta = {
        "_type": "<class '__main__.MyStack'>",
        "_class": "__main__:MyStack",
        "_format_version": 1,
        "stack_dim": 0,
        "stack_dim_name": "s",
    }
    node = parse_node(meta, "m")
    assert isinstance(node, LazyStackNode) and not node.builtin and node.stack_dim_name == "s"


def test_format_layer_does_not_import_torch():
    code = "import sys, tdview.format; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_json_numbers_and_tokens():
    meta = parse_meta_json(
        b'{"a": NaN, "b": Infinity, "c": -Infinity, "d": 1180591620717411303424}', "m"
    )
    assert math.isnan(meta["a"]) and meta["b"] == math.inf and meta["c"] == -math.inf
    assert meta["d"] == 2**70
    assert json.loads('{"a": 1, "a": 2}') == parse_meta_json(b'{"a": 1, "a": 2}', "m")


def test_reference_agrees_on_a_full_tree(tmp_path):
    td = TensorDict(
        z=TensorDict(q=torch.zeros(1)),
        a=torch.zeros(1),
        s=NonTensorData("x"),
        b=torch.ones(1),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td.memmap(tmp_path / "c")
    check_reference_order(tmp_path / "c")


@pytest.mark.parametrize(
    "module",
    [
        "_classes",
        "_dtypes",
        "_json",
        "_json_types",
        "_keys",
        "_kinds",
        "_pickle_scan",
        "_subtd_index",
    ],
)
def test_docstring_examples(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"tdview.format.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize(
    "names, shape, expected",
    [
        (["a", "b"], [2, 3], ("a", "b")),
        ([None, None], [2, 3], None),  # all-None names are no names
        (["a", None], [5], None),  # wrong length but as many None as dims: dropped
        ([None, "b", None], [1, 2, 3], (None, "b", None)),
        ("not a list", [2], None),
    ],
)
def test_names_like_the_reference(names, shape, expected):
    meta = {"shape": shape, "device": "cpu", "_type": TD_TYPE, "_names": names}
    node = parse_node(meta, "m")
    assert node.names == expected
    if names == "not a list":
        assert node.ignored_keys == ("_names",)


TD_TYPE = "<class 'tensordict._td.TensorDict'>"


def test_reference_names_agree(tmp_path):
    for i, (names, shape) in enumerate([([None, None], [2, 3]), ([None, "b", None], [1, 2, 3])]):
        meta = {"shape": shape, "device": "cpu", "_type": TD_TYPE, "_names": names}
        (tmp_path / str(i)).mkdir()
        (tmp_path / str(i) / "meta.json").write_text(json.dumps(meta))
        loaded = TensorDict.load_memmap(tmp_path / str(i))
        expected = tuple(loaded.names) if loaded._has_names() else None
        assert parse_node(meta, "m").names == expected


def test_meta_json_reads_the_same_without_orjson() -> None:
    """orjson is a speed-up: where it cannot be imported, json alone reads every
    document, as json.loads does (a fresh interpreter that refuses to import it)."""
    from tdview.format import _json

    assert _json._fast_loads is not None  # a dependency: here, the fast path is taken
    code = (
        "import sys, json\n"
        "sys.modules['orjson'] = None  # import orjson now raises ImportError\n"
        "from tdview.format import _json, parse_meta_json\n"
        "assert _json._fast_loads is None\n"
        'doc = b\'{"a": NaN, "n": 123456789012345678901234, "s": [1, 2.5, "x"]}\'\n'
        "got = parse_meta_json(doc, 'm.json')\n"
        "assert repr(got) == repr(json.loads(doc)), got\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
