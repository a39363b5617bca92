"""Blocks regenerated from the installed torch's own torch/nn/modules (torch kept external)
behave exactly like the real torch.nn classes: same constructor arguments, same state_dict,
same outputs."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from nnrag_tui.engine.config import parse_config  # noqa: E402
from nnrag_tui.engine.extractor import BlockExtractor  # noqa: E402

SITE = str(Path(torch.__file__).resolve().parent.parent)

CASES = [
    # name, constructor args, kwargs, inputs
    ("Linear", (8, 5), {}, lambda: (torch.randn(3, 8),)),
    ("Conv2d", (3, 6, 3), {"padding": 1, "stride": 2}, lambda: (torch.randn(2, 3, 9, 9),)),
    ("BatchNorm2d", (6,), {}, lambda: (torch.randn(4, 6, 5, 5),)),
    ("LayerNorm", ([7],), {}, lambda: (torch.randn(2, 3, 7),)),
    ("GroupNorm", (2, 6), {}, lambda: (torch.randn(2, 6, 4, 4),)),
    ("MultiheadAttention", (16, 4), {"batch_first": True},
     lambda: (torch.randn(2, 5, 16), torch.randn(2, 5, 16), torch.randn(2, 5, 16))),
    ("TransformerEncoderLayer", (16, 4), {"dim_feedforward": 32, "batch_first": True},
     lambda: (torch.randn(2, 5, 16),)),
    ("LSTM", (6, 10), {"num_layers": 2, "batch_first": True}, lambda: (torch.randn(3, 4, 6),)),
    ("GRU", (6, 10), {}, lambda: (torch.randn(4, 3, 6),)),
    ("Transformer", (), {"d_model": 16, "nhead": 4, "num_encoder_layers": 1,
                         "num_decoder_layers": 1, "dim_feedforward": 32},
     lambda: (torch.randn(5, 2, 16), torch.randn(4, 2, 16))),
    ("Embedding", (20, 6), {}, lambda: (torch.tensor([[1, 2, 3], [4, 5, 19]]),)),
    ("MaxPool2d", (2,), {}, lambda: (torch.randn(2, 3, 8, 8),)),
    ("GELU", (), {"approximate": "tanh"}, lambda: (torch.randn(4, 4),)),
    ("Sequential", (), {}, lambda: (torch.randn(2, 3),)),
]


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torchcorpus")
    cfg = parse_config({"torch": {"path": SITE, "paths": ["torch/nn/modules"]}})
    out = tmp / "blocks"
    with BlockExtractor(cfg, cache_dir=tmp / "cache", data_dir=tmp / "data") as ex:
        ex.index()
        results = {}
        for name, *_ in CASES:
            res = ex.extract_single_block(f"torch.nn.modules.{_module_of(name)}:{name}", out)
            results[name] = res
    return results


def _module_of(name: str) -> str:
    return getattr(torch.nn, name).__module__.rsplit(".", 1)[-1]


def _load(path: str, modname: str):
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("name,args,kwargs,inputs", CASES, ids=[c[0] for c in CASES])
def test_regenerated_torch_block_matches_torch(extracted, name, args, kwargs, inputs):
    res = extracted[name]
    assert res.ok, res.error
    code = res.generated.code
    # torch stays an import: the class itself is the only definition inlined (a guard such as
    # ``if TYPE_CHECKING:`` may come along), and it comes from the class's own file
    tree = ast.parse(code)
    assert [n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))] == [name]
    assert {d.relpath for d in res.generated.definitions} == {res.block.relpath}
    assert "import torch" in code or "from torch" in code
    mod = _load(res.paths[0], f"regen_{name}")
    gen_cls = getattr(mod, name)
    ref_cls = getattr(torch.nn, name)
    assert gen_cls is not ref_cls
    torch.manual_seed(0)
    if name == "Sequential":
        ref = ref_cls(torch.nn.Linear(3, 4), torch.nn.ReLU())
        gen = gen_cls(torch.nn.Linear(3, 4), torch.nn.ReLU())
    else:
        ref = ref_cls(*args, **kwargs)
        gen = gen_cls(*args, **kwargs)
    missing = gen.load_state_dict(ref.state_dict())
    assert not missing.missing_keys and not missing.unexpected_keys
    ref.eval()
    gen.eval()
    x = inputs()
    with torch.no_grad():
        assert _same(ref(*x), gen(*x))
    ref.train()
    gen.train()
    torch.manual_seed(1)
    out_ref = ref(*x)
    torch.manual_seed(1)
    out_gen = gen(*x)
    assert _same(out_ref, out_gen)
