"""Blocks regenerated from torchvision's sources behave exactly like torchvision's own classes
(bench/differential.py, as in test_faithfulness_timm; bench/faithful_bench.py --torchvision runs
every torchvision block).

torchvision 0.29.1 comes from PyPI as a wheel (sources only, never installed). Its sources import
beside the CPU torch once ``torchvision._meta_registrations``, which only registers the compiled
kernels of a wheel built for another torch, is an empty module (``differential.py --blank``);
none of the compared blocks calls those kernels. Pillow, which torchvision imports but nnrag does
not depend on, is a stand-in in the comparing process."""

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
STAND_INS = ["--blank", "torchvision._meta_registrations", "--stub", "PIL"]

# residual, inverted-residual and inception blocks, a transformer block, whole networks built
# from the validator's guesses (ResNet's block class from its Type[...] annotation, the
# quantizable blocks' arguments from the errors of their bases), blocks built from config
# classes, and a v2 transform returning a tensor subclass: each compared down to its outputs
BLOCKS = [
    "torchvision.models.resnet:BasicBlock", "torchvision.models.resnet:ResNet",
    "torchvision.models.convnext:CNBlock", "torchvision.models.vision_transformer:EncoderBlock",
    "torchvision.models.swin_transformer:PatchMerging",
    "torchvision.models.mobilenetv2:InvertedResidual",
    "torchvision.models.mobilenetv3:InvertedResidual", "torchvision.models.efficientnet:MBConv",
    "torchvision.models.googlenet:Inception", "torchvision.models.densenet:_DenseLayer",
    "torchvision.models.quantization.resnet:QuantizableBasicBlock",
    "torchvision.ops.misc:SqueezeExcitation", "torchvision.ops.misc:Conv2dNormActivation",
    "torchvision.transforms.v2._type_conversion:ToImage",
]


def _differential(src: Path, jobs: list[dict]) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-I", str(ROOT / "bench" / "differential.py"), "--path", str(src),
         *STAND_INS, "--timeout", "120"],
        input="".join(json.dumps(j) + "\n" for j in jobs), capture_output=True, text=True,
        timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module")
def extracted(tmp_path_factory, torchvision_source):
    tmp = tmp_path_factory.mktemp("tvfaith")
    src = torchvision_source
    cfg = parse_config({"torchvision": {"path": str(src), "paths": ["torchvision"]}})
    jobs = {}
    with BlockExtractor(cfg, cache_dir=tmp / "cache", data_dir=tmp / "data") as ex:
        ex.index()
        for key in BLOCKS:
            res = ex.extract_single_block(key, tmp / "out" / key.replace(":", "."))
            assert res.ok, (key, res.error)
            jobs[key] = {"key": key, "file": res.paths[0], "call_sites": ex.call_sites(res)}
    return src, jobs


@pytest.fixture(scope="module")
def compared(extracted):
    src, jobs = extracted
    return {r["key"]: r for r in _differential(src, list(jobs.values()))}


@pytest.mark.parametrize("key", BLOCKS)
def test_generated_block_behaves_like_torchvision(compared, key):
    r = compared[key]
    assert r["verdict"] == "same", r
    assert {"signature", "repr", "state_dict", "init", "eval"} <= set(r["checked"]), r


def test_a_changed_definition_is_caught(tmp_path, extracted):
    """The comparison can fail here too: a CNBlock whose layer scale is edited by one token is
    told apart from torchvision's."""
    src, jobs = extracted
    job = jobs["torchvision.models.convnext:CNBlock"]
    code = Path(job["file"]).read_text()
    old = "result = self.layer_scale * self.block(input)"
    assert old in code
    edited = tmp_path / "CNBlock.py"
    edited.write_text(code.replace(old, "result = 1.001 * self.layer_scale * self.block(input)"))
    [r] = _differential(src, [dict(job, file=str(edited))])
    assert r["verdict"] == "differs" and "eval output" in r["reason"], r
