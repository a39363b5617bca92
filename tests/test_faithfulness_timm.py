"""Blocks regenerated from timm's sources behave exactly like timm's own classes: the same
constructor signature, module tree, state_dict and initial weights under the same seed, and the
same outputs in eval and train mode with the same weights (bench/differential.py; its bench,
bench/faithful_bench.py, runs every timm block).

timm 1.0.31's sources come from its PyPI wheel (``upstream.py``; never installed); torchvision, which
cannot be imported beside the CPU torch, and Pillow are replaced by stand-ins in the comparing
process (none of the compared blocks calls them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from nnrag_tui.engine.config import parse_config  # noqa: E402
from nnrag_tui.engine.extractor import BlockExtractor  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# stand-ins for what `import timm.models` imports but a test venv cannot: torchvision (never
# beside the CPU torch) and Pillow (timm.data's transforms; not a dependency of nnrag)
STUBS = ["--stub", "torchvision", "--stub", "PIL"]

# layers, attention, conv factories and norm+act with their string registries, whole networks
# (ResNet and RegNet built from the corpus's own call sites): each compared down to its outputs
DEEP = [
    "timm.layers.mlp:Mlp", "timm.layers.mlp:SwiGLU", "timm.models.vision_transformer:Block",
    "timm.layers.conv_bn_act:ConvNormAct", "timm.layers.squeeze_excite:SEModule",
    "timm.layers.eca:EcaModule", "timm.layers.cbam:CbamModule", "timm.layers.drop:DropPath",
    "timm.layers.patch_embed:PatchEmbed", "timm.layers.norm_act:BatchNormAct2d",
    "timm.layers.mixed_conv2d:MixedConv2d", "timm.layers.halo_attn:HaloAttn",
    "timm.layers.evo_norm:EvoNorm2dS2", "timm.layers.selective_kernel:SelectiveKernel",
    "timm.models.convnext:ConvNeXtBlock", "timm.models.swin_transformer_v2_cr:"
    "SwinTransformerV2CrStage", "timm.models._efficientnet_blocks:InvertedResidual",
    "timm.models.resnet:ResNet", "timm.models.regnet:RegNet",
]
# no probe input runs their forward (extra forward arguments, token layouts): compared down to
# the initial weights; LevitBlock's call sites pass a local float named like the drop_path
# function the file inlines
SHALLOW = ["timm.layers.cond_conv2d:CondConv2d", "timm.models.levit:LevitBlock"]
BLOCKS = DEEP + SHALLOW


@pytest.fixture(scope="module")
def compared(tmp_path_factory, timm_source):
    tmp = tmp_path_factory.mktemp("timmfaith")
    src = timm_source
    cfg = parse_config({"timm": {"path": str(src), "paths": ["timm"]}})
    jobs = []
    with BlockExtractor(cfg, cache_dir=tmp / "cache", data_dir=tmp / "data") as ex:
        ex.index()
        for key in BLOCKS:
            res = ex.extract_single_block(key, tmp / "out")
            assert res.ok, (key, res.error)
            jobs.append({"key": key, "file": str(tmp / "out" / f"{res.block.name}.py"),
                         "call_sites": ex.call_sites(res)})
    proc = subprocess.run(
        [sys.executable, "-I", str(ROOT / "bench" / "differential.py"), "--path", str(src),
         *STUBS, "--timeout", "120"],
        input="".join(json.dumps(j) + "\n" for j in jobs), capture_output=True, text=True,
        timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {r["key"]: r for r in map(json.loads, proc.stdout.splitlines())}


@pytest.mark.parametrize("key", BLOCKS)
def test_generated_block_behaves_like_timm(compared, key):
    r = compared[key]
    assert r["verdict"] == "same", r
    checks = {"signature", "repr", "state_dict", "init"} | ({"eval"} if key in DEEP else set())
    assert checks <= set(r["checked"]), r


@pytest.fixture(scope="module")
def timm_mlp(tmp_path_factory, timm_source):
    tmp = tmp_path_factory.mktemp("timmmlp")
    src = timm_source
    cfg = parse_config({"timm": {"path": str(src), "paths": ["timm"]}})
    with BlockExtractor(cfg, cache_dir=tmp / "cache", data_dir=tmp / "data") as ex:
        ex.index()
        return src, ex.extract_single_block("timm.layers.mlp:Mlp").generated.code


@pytest.mark.parametrize("old, new, caught_by", [
    ("act_layer: Type[nn.Module] = nn.GELU", "act_layer: Type[nn.Module] = nn.SiLU",
     "constructor signature"),
    ("        x = self.act(x)\n", "        x = self.act(x) * 1.001\n", "eval output"),
])
def test_a_changed_definition_is_caught(tmp_path, timm_mlp, old, new, caught_by):
    """The comparison can fail: an Mlp edited by one token is told apart from timm's."""
    src, code = timm_mlp
    edited = tmp_path / "Mlp.py"
    edited.write_text(code.replace(old, new, 1))
    assert edited.read_text() != code
    proc = subprocess.run(
        [sys.executable, "-I", str(ROOT / "bench" / "differential.py"), "--path", str(src),
         *STUBS],
        input=json.dumps({"key": "timm.layers.mlp:Mlp", "file": str(edited)}) + "\n",
        capture_output=True, text=True, timeout=300)
    r = json.loads(proc.stdout)
    assert r["verdict"] == "differs" and caught_by in r["reason"], r
