"""Several repositories at once: every definition comes from where the using module's own
imports lead, never from another repository that merely has the same name."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor

LAYERS = '''
import torch.nn as nn

SCALE = {scale}


def helper(x):
    return x * SCALE


class Mlp(nn.Module):
    """Mlp of {repo}."""

    def forward(self, x):
        return helper(x) + {offset}
'''

BLOCKS = '''
import torch.nn as nn

from .layers import Mlp
from {pkg} import layers as L


class Block(nn.Module):
    """Block of {repo}."""

    def __init__(self):
        super().__init__()
        self.mlp = Mlp()
        self.other = L.Mlp()

    def forward(self, x):
        return self.mlp(x) + self.other(x)
'''


def _repo(root: Path, repo: str, pkg: str, scale: int, offset: int) -> Path:
    d = root / repo / pkg
    d.mkdir(parents=True)
    (d / "__init__.py").write_text("")
    (d / "layers.py").write_text(textwrap.dedent(LAYERS.format(scale=scale, offset=offset,
                                                               repo=repo)))
    (d / "blocks.py").write_text(textwrap.dedent(BLOCKS.format(pkg=pkg, repo=repo)))
    return root / repo


@pytest.fixture()
def five_repos(tmp_path):
    # Five repositories; three of them are forks that share the package name `shared`, two
    # have packages of their own. Every one defines `Mlp`, `helper`, `SCALE` and `Block`.
    specs = [("alpha", "shared", 2, 1, 3), ("beta", "shared", 3, 10, 1),
             ("gamma", "shared", 5, 100, 2), ("delta", "deltapkg", 7, 1000, 4),
             ("epsilon", "epspkg", 11, 10000, 5)]
    cfg = {}
    for repo, pkg, scale, offset, prio in specs:
        cfg[repo] = {"path": str(_repo(tmp_path / "repos", repo, pkg, scale, offset)),
                     "priority": prio}
    ex = BlockExtractor(parse_config(cfg), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data")
    ex.index()
    yield ex, {s[0]: s for s in specs}
    ex.close()


def test_each_block_takes_its_dependencies_from_its_own_repository(five_repos, tmp_path):
    torch = pytest.importorskip("torch")
    ex, specs = five_repos
    blocks = [b for b in ex.blocks() if b.name == "Block"]
    assert sorted(b.source for b in blocks) == sorted(specs)
    for b in blocks:
        res = ex.extract_single_block(b.key, repo=b.source)
        assert res.ok, res.error
        code = res.generated.code
        repo, pkg, scale, offset, _ = specs[b.source]
        # every inlined definition comes from the block's own repository
        assert {d.source for d in res.generated.definitions} == {b.source}
        assert f"Mlp of {repo}." in code and f"Block of {repo}." in code
        assert f"SCALE = {scale}\n" in code
        for other in specs:
            if other != repo:
                assert f"of {other}." not in code
        # and it behaves like that repository's code
        ns: dict = {}
        exec(compile(code, f"<{repo}>", "exec"), ns)
        x = torch.ones(2)
        out = ns["Block"]()(x)
        assert torch.equal(out, 2 * (x * scale + offset))


def test_bare_name_picks_by_priority_and_says_so(five_repos):
    ex, specs = five_repos
    res = ex.extract_single_block("Block")
    assert res.ok
    assert res.block.source == "beta"  # priority 1
    assert any("5 blocks are named 'Block'" in n and "took" in n for n in res.notes)
    report = res.report()
    assert report["repo"] == "beta" and report["notes"]
    json.dumps(report)


def test_explicit_selector_picks_one(five_repos):
    ex, _ = five_repos
    res = ex.extract_single_block("deltapkg.blocks:Block")
    assert res.ok and res.block.source == "delta"
    assert "Mlp of delta." in res.generated.code


def test_forks_share_the_selector_and_the_repository_picks_among_them(five_repos):
    """alpha, beta and gamma all have ``shared.blocks:Block``: the selector alone takes beta
    (priority 1) and names the others with their repositories; ``repo`` takes any one."""
    ex, _ = five_repos
    res = ex.extract_single_block("shared.blocks:Block")
    assert res.ok and res.block.source == "beta"
    note = next(n for n in res.notes if "blocks are named" in n)
    assert "shared.blocks:Block (alpha)" in note and "shared.blocks:Block (gamma)" in note
    for repo in ("alpha", "gamma"):
        res = ex.extract_single_block("shared.blocks:Block", repo=repo)
        assert res.ok and res.block.source == repo and not res.notes
        assert f"Mlp of {repo}." in res.generated.code and "Mlp of beta." not in \
            res.generated.code
    assert [r.block.source for r in ex.extract_multiple_blocks(["Block"], repo="gamma")] == \
        ["gamma"]
    missing = ex.extract_single_block("shared.blocks:Block", repo="delta")
    assert not missing.ok and "no block named 'shared.blocks:Block' of repository 'delta'" in \
        missing.error
    unknown = ex.extract_single_block("Block", repo="zeta")
    assert not unknown.ok and "no repository named 'zeta'" in unknown.error


# OpenMMLab's shape across repositories: mmdet's CTResNetNeck builds
# ``ConvModule(..., conv_cfg=dict(type='DCNv2'))``, which mmcv/ops/modulated_deform_conv.py
# registers; mmdet's own package imports mmcv.ops elsewhere (necks/dyhead.py), which runs that,
# and neither the block's module nor the mmcv modules it needs import it
BRICKS = {
    "brk/__init__.py": "from .activation import build_act\n",
    "brk/registry.py": '''
        class Registry:
            def __init__(self):
                self._modules = {}

            def register_module(self, name=None):
                def wrap(cls):
                    self._modules[name or cls.__name__] = cls
                    return cls
                return wrap

            def build(self, cfg):
                args = dict(cfg)
                return self._modules[args.pop("type")](**args)


        MODELS = Registry()
        ''',
    "brk/activation.py": '''
        from .registry import MODELS


        def build_act(cfg):
            return MODELS.build(cfg)
        ''',
    "brk/extra.py": '''
        import torch
        import torch.nn as nn

        from .registry import MODELS


        @MODELS.register_module(name="Swish")
        class SwishOfBricks(nn.Module):
            def forward(self, x):
                return x * torch.sigmoid(x)
        ''',
}
NECKS = {
    "neckpkg/__init__.py": "from . import necks\n",
    "neckpkg/necks/__init__.py": "from .simple import Neck\nfrom .fancy import Unused\n",
    "neckpkg/necks/simple.py": '''
        import torch.nn as nn

        from brk.activation import build_act


        class Neck(nn.Module):
            def __init__(self, act_cfg=dict(type="Swish")):
                super().__init__()
                self.act = build_act(act_cfg)

            def forward(self, x):
                return self.act(x)
        ''',
    "neckpkg/necks/fancy.py": '''
        import brk.extra


        class Unused:
            pass
        ''',
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _over_bricks(tmp_path: Path, name: str, files: dict[str, str], block: str):
    """``block`` extracted from the repository ``files``, configured first, beside BRICKS."""
    cfg = {"bricks": {"path": str(_write(tmp_path / "bricks", BRICKS)), "priority": 2},
           name: {"path": str(_write(tmp_path / name, files)), "priority": 1}}
    with BlockExtractor(parse_config(cfg), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        return ex.extract_single_block(block)


def test_a_registration_another_repository_runs_as_upstream_imports_comes_along(tmp_path):
    torch = pytest.importorskip("torch")
    res = _over_bricks(tmp_path, "necks", NECKS, "neckpkg.necks.simple:Neck")
    assert res.ok, res.error
    code = res.generated.code
    assert '@MODELS.register_module(name="Swish")\nclass SwishOfBricks(nn.Module):' in code
    assert any("'Swish' (a config's type) is registered by brk/extra.py" in n
               and "neckpkg.necks.simple -> neckpkg.necks -> neckpkg.necks.fancy -> brk.extra"
               in n for n in res.notes), res.notes
    ns: dict = {"__name__": "neck_file"}
    exec(compile(code, "<Neck>", "exec"), ns)  # noqa: S102  (the generated file)
    x = torch.randn(3)
    assert torch.allclose(ns["Neck"]()(x), x * torch.sigmoid(x))


# mmdet 2.x's builder: one registry under several names, a loss registered through an alias
ALIASED = {
    "det/__init__.py": "",
    "det/models/__init__.py": "from .builder import LOSSES, build_loss\nfrom .losses import *\n"
                              "from .heads import *\n",
    "det/models/builder.py": '''
        from brk.registry import Registry

        MODELS = Registry()
        HEADS = MODELS
        LOSSES = MODELS


        def build_loss(cfg):
            return LOSSES.build(cfg)
        ''',
    "det/models/losses/__init__.py": "from .l1 import L1Loss\n",
    "det/models/losses/l1.py": '''
        import torch.nn as nn

        from ..builder import LOSSES


        @LOSSES.register_module()
        class L1Loss(nn.L1Loss):
            pass
        ''',
    "det/models/heads/__init__.py": "from .head import Head\n",
    "det/models/heads/head.py": '''
        import torch.nn as nn

        from ..builder import HEADS, build_loss


        @HEADS.register_module()
        class Head(nn.Module):
            def __init__(self, loss=dict(type="L1Loss")):
                super().__init__()
                self.loss = build_loss(loss)

            def forward(self, x, y):
                return self.loss(x, y)
        ''',
}


def test_a_registration_through_another_name_of_the_registry_comes_along(tmp_path):
    torch = pytest.importorskip("torch")
    res = _over_bricks(tmp_path, "det", ALIASED, "det.models.heads.head:Head")
    code = res.generated.code
    assert "@LOSSES.register_module()\nclass L1Loss(nn.L1Loss):" in code
    assert "\nLOSSES = MODELS\n" in code
    ns: dict = {"__name__": "head_file"}
    exec(compile(code, "<Head>", "exec"), ns)  # noqa: S102  (the generated file)
    assert ns["Head"]()(torch.zeros(2), torch.ones(2)).item() == 1.0


# mmaction 0.x's TimeSformer: the layer sequence it builds (a registration found in the first
# round) builds its attention through a second registry, which only then enters the closure;
# the attention's registration, looked at before, is found again
LATE = {
    "late/__init__.py": "from . import attn, seq\n",
    "late/regs.py": "from brk.registry import Registry\n\nMODELS = Registry()\nATTN = Registry()\n",
    "late/seq.py": '''
        import torch.nn as nn

        from .regs import ATTN, MODELS


        @MODELS.register_module()
        class Seq(nn.Module):
            def __init__(self, attn=dict(type="Double")):
                super().__init__()
                self.attn = ATTN.build(attn)

            def forward(self, x):
                return self.attn(x)
        ''',
    "late/attn.py": '''
        import torch.nn as nn

        from .regs import ATTN


        @ATTN.register_module()
        class Double(nn.Module):
            def forward(self, x):
                return x * 2
        ''',
    "late/net.py": '''
        import torch.nn as nn

        from late.regs import MODELS


        class Net(nn.Module):
            def __init__(self, cfg=dict(type="Seq", attn=dict(type="Double"))):
                super().__init__()
                self.body = MODELS.build(cfg)

            def forward(self, x):
                return self.body(x)
        ''',
}


def test_a_registry_reached_late_still_finds_its_registrations(tmp_path):
    torch = pytest.importorskip("torch")
    res = _over_bricks(tmp_path, "late", LATE, "late.net:Net")
    code = res.generated.code
    assert "@ATTN.register_module()\nclass Double(nn.Module):" in code
    ns: dict = {"__name__": "net_file"}
    exec(compile(code, "<Net>", "exec"), ns)  # noqa: S102  (the generated file)
    assert ns["Net"]()(torch.ones(2)).tolist() == [2.0, 2.0]
