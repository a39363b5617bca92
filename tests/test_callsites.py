"""Constructor arguments from the corpus's own calls (engine.callsites) and the validator's
second try with them when guessed arguments cannot build a block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import write_tree

from nnrag_tui.cli import main
from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor

needs_torch = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="torch is not installed")

NETS = '''from dataclasses import dataclass
from typing import Tuple, Type

import torch
from torch import nn


@dataclass
class StageCfg:
    stem: str  # nothing tells what to pass: the validator cannot build a StageCfg itself
    depths: Tuple[int, ...] = (1, 1)
    width: int = 8


class StagedNet(nn.Module):
    """Needs a config object: no parameter name tells what to pass."""

    def __init__(self, cfg: StageCfg, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, cfg.width, 3, padding=1)
        self.blocks = nn.Sequential(*[nn.Conv2d(cfg.width, cfg.width, 3, padding=1)
                                      for _ in range(sum(cfg.depths))])
        self.head = nn.Linear(cfg.width, num_classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


model_cfgs = dict(
    small=StageCfg("conv", depths=(1, 2), width=16),
    large=StageCfg("conv", depths=(3, 4, 6, 3), width=64),
)


class Basic(nn.Module):
    expansion = 1

    def __init__(self, chs: int):
        super().__init__()
        self.conv = nn.Conv2d(chs, chs, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


class LayeredNet(nn.Module):
    """Needs a block class with an ``expansion`` and two layer counts (the annotation
    brings ``Basic`` into the file, as timm's ResNet annotation does); the validator's own
    guesses give four counts."""

    def __init__(self, block: Type[Basic], layers, width: int = 8):
        super().__init__()
        if len(layers) != 2:
            raise ValueError("two stages: layers is (n1, n2)")
        self.stem = nn.Conv2d(3, width * block.expansion, 3, padding=1)
        self.body = nn.Sequential(*[block(width * block.expansion) for _ in range(sum(layers))])

    def forward(self, x):
        return self.body(self.stem(x))


def _create(variant, **kwargs):
    return LayeredNet(**kwargs)


def layered18(**kwargs):
    model_args = dict(block=Basic, layers=(2, 2))
    return _create("layered18", **dict(model_args, **kwargs))


def scale(x):
    return x * 2


class Scaled(nn.Module):
    def __init__(self, chs: int, scale_fn=scale):
        super().__init__()
        self.conv = nn.Conv2d(chs, chs, 1)
        self.scale_fn = scale_fn

    def forward(self, x):
        return self.scale_fn(self.conv(x))


def make_scaled(scale=1.0):
    return Scaled(8, scale_fn=scale)  # this `scale` is a float parameter, not the function


default_scaled = Scaled(16, scale_fn=scale)
'''

USERS = '''from torch import nn

from .nets import StagedNet, StageCfg


class Tiny(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.net = StagedNet(StageCfg("conv", depths=(1,), width=4), num_classes=width)

    def forward(self, x):
        return self.net(x)


from .nets import Scaled  # noqa: E402
from .other import scale  # noqa: E402  (another `scale` than the one nets.Scaled uses)


def build_scaled():
    return Scaled(4, scale_fn=scale)
'''

# a same-named class elsewhere: its call sites must never be taken for nets.StagedNet
OTHER = '''from torch import nn


class StagedNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()

    def forward(self, x):
        return x


def build():
    return StagedNet(cfg="something-else-entirely")


def scale(x):
    return -x
'''


# spikingjelly's shape: a block built only inside its network's constructor, from that
# constructor's own parameters and locals (qkformer's ``_Block(dims[0], num_heads[0],
# mlp_ratio, qka_type, False, spiking_neuron, kwargs)``)
STAGED = '''from typing import Any, Callable, Dict, Optional

from torch import nn


class Mixer(nn.Module):
    def __init__(self, dim: int, heads: int, mix_type: str,
                 neuron: Optional[Callable[..., nn.Module]], neuron_kwargs: Dict[str, Any]):
        super().__init__()
        if mix_type not in ("token", "channel"):
            raise ValueError(f"mix_type must be token or channel, not {mix_type!r}")
        if dim % heads:
            raise ValueError("dim must divide into heads")
        self.proj = nn.Linear(dim, dim)
        self.act = neuron(**neuron_kwargs)

    def forward(self, x):
        return self.act(self.proj(x))


class MixerNet(nn.Module):
    def __init__(self, width: int = 48, heads=(3, 6), mix_type: str = "token",
                 neuron=None, norm=None, **kwargs):
        super().__init__()
        dims = (width // 2, width)
        norm = norm or nn.LayerNorm  # rebound: what it holds is not its default
        self.stages = nn.ModuleList([Mixer(dims[0], heads[0], mix_type, neuron, kwargs),
                                     Mixer(dims[1], heads[1], mix_type, norm, kwargs)])

    def forward(self, x):
        return x
'''


@pytest.fixture
def ex(tmp_path: Path):
    repo = write_tree(tmp_path / "repo", {"cspkg/__init__.py": "",
                                          "cspkg/nets.py": NETS,
                                          "cspkg/users.py": USERS,
                                          "cspkg/other.py": OTHER,
                                          "cspkg/staged.py": STAGED})
    e = BlockExtractor(parse_config({"cspkg": {"path": str(repo)}}),
                       cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")
    e.index()
    yield e
    e.close()


def sets_for(ex, name: str) -> list[dict]:
    res = ex.extract_single_block(name)
    assert res.ok, res.error
    return ex.call_sites(res)


def test_direct_calls_resolved_through_imports_and_config_values(ex):
    sets = sets_for(ex, "cspkg.nets:StagedNet")
    kw = [s["kwargs"].get("cfg") for s in sets]
    # the call in users.py, found through its `from .nets import StagedNet`
    direct = next(s for s in sets if s["where"] == "cspkg/users.py:9")
    assert direct["args"] == ["StageCfg('conv', depths=(1,), width=4)"]
    assert direct["kwargs"] == {}  # num_classes=width: `width` is local to Tiny.__init__
    # values of the config class in the block's module
    assert "StageCfg('conv', depths=(1, 2), width=16)" in kw
    # the same-named class in other.py is somebody else's: its call never counts
    assert all("something-else" not in json.dumps(s) for s in sets)
    assert all(not s["where"].startswith("cspkg/other.py") for s in sets)


def test_dict_of_constructor_arguments_in_the_module(ex):
    sets = sets_for(ex, "cspkg.nets:LayeredNet")
    assert sets[0]["kwargs"] == {"block": "Basic", "layers": "(2, 2)"}
    assert sets[0]["where"].startswith("cspkg/nets.py:")


def test_expressions_that_need_local_names_are_left_out(ex):
    # `LayeredNet(**kwargs)` in _create passes nothing usable; no set comes from it
    sets = sets_for(ex, "cspkg.nets:LayeredNet")
    assert all("kwargs" not in v for s in sets for v in s["kwargs"].values())


def test_a_name_means_what_the_calling_scope_binds(ex):
    """An argument spelled like a name the file binds is kept only where it means that very
    definition: not where it is the caller's local (timm's ``LevitBlock(...,
    drop_path=drop_path)`` passes a float: the caller's default is what it passes), nor where
    the calling module binds it to something else."""
    sets = {s["where"]: s for s in sets_for(ex, "cspkg.nets:Scaled")}
    at_module_level = next(s for w, s in sets.items() if w.startswith("cspkg/nets.py")
                           and s["args"] == ["16"])
    assert at_module_level["kwargs"] == {"scale_fn": "scale"}
    local = next(s for w, s in sets.items() if s["args"] == ["8"])
    assert local["kwargs"] == {"scale_fn": "1.0"}  # make_scaled(scale=1.0)'s, not the function
    elsewhere = next(s for w, s in sets.items() if w.startswith("cspkg/users.py"))
    assert elsewhere["args"] == ["4"] and elsewhere["kwargs"] == {}


def test_a_callers_parameters_and_locals_are_read_as_they_are_with_its_defaults(ex):
    """A block built only in its network's constructor, from that constructor's parameters
    and locals: each name bound once is what it holds when the network runs with its
    defaults; a parameter the constructor rebinds is not its default, so it is left out,
    and the positional arguments after it go by keyword."""
    sets = {s["where"]: s for s in sets_for(ex, "cspkg.staged:Mixer")}
    first, second = (sets[w] for w in sorted(sets))
    assert first["args"] == ["(48 // 2, 48)[0]", "(3, 6)[0]", "'token'", "None", "{}"]
    assert first["kwargs"] == {}
    assert second["args"] == ["(48 // 2, 48)[1]", "(3, 6)[1]", "'token'"]
    assert second["kwargs"] == {"neuron_kwargs": "{}"}


@needs_torch
def test_validator_builds_a_block_from_its_callers_defaults(ex):
    """spikingjelly's qkformer ``_Block``: no name tells the string ``mix_type``; the
    network's call passes its own default, and the ``None`` it passes for the neuron is
    called: an ``nn.Identity`` stands in, as for a default ``None``."""
    from nnrag_tui.engine.sandbox import Sandbox
    from nnrag_tui.engine.validate import Validator

    res = ex.extract_single_block("cspkg.staged:Mixer")
    g = res.generated
    with Sandbox(deny_imports=("cspkg",)) as sb, Validator(sb) as v:
        report = v.validate(g.code, g.name, g.spec, call_sites=lambda: ex.call_sites(res))
    assert report.level == "forward_ran", report.as_dict()
    inst = report.stage("instantiate")
    assert inst.detail["args"] == {"dim": "(48 // 2, 48)[0]", "heads": "(3, 6)[0]",
                                   "mix_type": "'token'", "neuron": "nn.Identity",
                                   "neuron_kwargs": "{}"}
    assert inst.detail["call_site"].startswith("cspkg/staged.py:")


@needs_torch
def test_validator_builds_a_config_driven_net_from_call_sites(ex):
    from nnrag_tui.engine.sandbox import Sandbox
    from nnrag_tui.engine.validate import Validator

    res = ex.extract_single_block("cspkg.nets:StagedNet")
    g = res.generated
    asked = []

    def call_sites():
        asked.append(1)
        return ex.call_sites(res)

    with Sandbox(deny_imports=("cspkg",)) as sb, Validator(sb) as v:
        without = v.validate(g.code, g.name, g.spec)
        assert without.level == "imported" and without.cause == "needs_arguments"
        report = v.validate(g.code, g.name, g.spec, call_sites=call_sites)
        assert report.level == "forward_ran", report.as_dict()
        inst = report.stage("instantiate")
        assert inst.detail["call_site"].startswith("cspkg/")
        assert inst.detail["call_sites_tried"] >= 2
        # a guessed config (each field read guessed by its name) was tried first: it gives
        # ``cfg.depths`` a number, and ``sum(cfg.depths)`` refuses it
        assert "'int' object is not iterable" in inst.detail["guessed_arguments_error"]
        assert "as at cspkg/" in inst.diagnostics
        assert report.cause is None
        # a block that guessed arguments can build never asks for call sites
        basic = ex.extract_single_block("cspkg.nets:Basic").generated
        asked.clear()
        ok = v.validate(basic.code, basic.name, basic.spec, call_sites=call_sites)
        assert ok.level == "forward_ran" and not asked


@needs_torch
def test_extract_cli_reaches_forward_with_call_sites(tmp_path, capsys, ex):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"cspkg": {"path": str(tmp_path / "repo")}}))
    code = main(["extract", "--block", "cspkg.nets:LayeredNet", "--json", "--config", str(cfg),
                 "--cache-dir", str(tmp_path / "cache2")])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    v = doc["validation"]
    assert v["level"] == "forward_ran"
    inst = next(s for s in v["stages"] if s["stage"] == "instantiate")
    assert inst["detail"]["args"] == {"block": "Basic", "layers": "(2, 2)"}
