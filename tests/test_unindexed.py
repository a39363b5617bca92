"""A source indexed in part (``paths``) whose classes derive from classes elsewhere in the same
package: transformers indexed as ``transformers/models``, where every decoder layer derives
from ``transformers.modeling_layers.GradientCheckpointingLayer`` and every model from
``transformers.modeling_utils.PreTrainedModel``. Such a class is still a block; the modules it
reaches outside the paths stay imports, the file says it is not standalone, and validation
names that cause."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import fixture, git_env, make_bare_repo, path_config, write_tree

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed")
REPO = fixture("unindexed_bases")


def extractor(tmp_path, paths: list[str]) -> BlockExtractor:
    cfg = path_config({"pkgx": {"path": REPO, "paths": paths}})
    ex = BlockExtractor(cfg, cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")
    ex.index()
    return ex


def code_of(tmp_path, name: str, root, block: str) -> str:
    """The generated code of ``block`` from the package folder ``root``, indexed whole."""
    ex = BlockExtractor(path_config({name: root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data")
    ex.index()
    return ex.extract_single_block(block).generated.code


@pytest.fixture(scope="module")
def models_only(tmp_path_factory):
    return extractor(tmp_path_factory.mktemp("models"), ["pkgx/models"])


def test_a_base_outside_the_indexed_paths_still_makes_a_block(models_only):
    blocks = {b.key: b for b in models_only.blocks()}
    # through the re-export in pkgx/layers/__init__.py, neither file indexed
    assert "pkgx.models.net:ScaledBlock" in blocks
    assert blocks["pkgx.models.net:ScaledBlock"].bases == ("pkgx.layers.base.CheckpointLayer",)
    # a base outside the paths that is no module does not make one
    assert "pkgx.models.net:Described" not in blocks
    # the modules read for the bases give no blocks of their own
    assert not [k for k in blocks if k.startswith("pkgx.layers")]


def test_the_modules_outside_the_paths_stay_imports_and_the_header_says_so(models_only):
    res = models_only.extract_single_block("ScaledBlock")
    code = res.generated.code
    assert "from pkgx.layers import CheckpointLayer" in code
    assert "from pkgx.utils import SCALE" in code
    assert "class CheckpointLayer" not in code
    note = ("imports pkgx.layers, pkgx.utils: modules of pkgx outside the indexed paths, kept "
            "as imports, so the file needs pkgx installed")
    assert any(note in n for n in res.generated.notes)
    assert note in code  # in the header


def test_a_module_the_sources_do_not_have_is_not_called_outside_the_paths(tmp_path):
    """deit's ``from timm.models.efficientnet_blocks import SqueezeExcite`` against timm 1.x,
    which renamed that module: indexing more of the package would not help, so the header
    does not say it would."""
    code = extractor(tmp_path, []).extract_single_block("Legacy").generated.code
    assert "from pkgx.old_layers import OldNorm\n" in code
    assert ("# note: imports pkgx.old_layers, which the pkgx sources indexed here do not have "
            "(upstream was written against another version)") in code
    assert "outside the indexed paths" not in code


def test_a_compiled_module_of_the_package_is_named_as_such(tmp_path):
    """compressai's wheel has ``compressai/_CXX.cpython-311-x86_64-linux-gnu.so``: the header
    said its sources lacked ``compressai._CXX`` and that upstream was written against another
    version, when the module is there but has no source to copy."""
    root = write_tree(tmp_path / "src", {
        "pkgc/__init__.py": "",
        "pkgc/_ext.cpython-311-x86_64-linux-gnu.so": b"\x7fELF\x02\x01\x01",
        "pkgc/_kernels.pyi": "def gelu(x): ...\n",
        "pkgc/layers.py": (
            "import torch.nn as nn\n"
            "from pkgc._ext import fused_add\n"
            "from pkgc._kernels import gelu\n"
            "from pkgc.retired import legacy\n\n\n"
            "class Fused(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return legacy(gelu(fused_add(x, x)))\n"),
    })
    code = code_of(tmp_path, "pkgc", root, "Fused")
    assert "from pkgc._ext import fused_add\n" in code
    assert ("# note: imports pkgc._ext, pkgc._kernels: compiled extension modules of pkgc, "
            "which have no Python source to copy, kept as imports, so the file needs pkgc "
            "installed") in code
    # a module that is nowhere is still said to be from another version, and only it
    assert ("# note: imports pkgc.retired, which the pkgc sources indexed here do not have "
            "(upstream was written against another version)") in code


def test_a_submodule_a_source_tree_lacks_until_built_stays_an_import(tmp_path):
    """pytorch3d's ``from pytorch3d import _C``: its checkout has ``csrc/`` and no ``_C``,
    which building the package makes (its ``setup.py`` names ``pytorch3d._C``). The name was
    unresolved and the import dropped, so the file raised NameError where, with pytorch3d
    installed, upstream runs; the import stays as written now, and the header says the file
    needs the package. A name nothing declares is still unresolved (tests/
    test_unresolved_report.py: timm_3d's ``LayerNorm2d``, which its ``layers`` lacks)."""
    root = write_tree(tmp_path / "src", {
        "setup.py": ("from setuptools import setup\n"
                     "from torch.utils.cpp_extension import CppExtension\n\n"
                     "setup(name='pkgc', ext_modules=[CppExtension('pkgc._C', "
                     "['csrc/ext.cpp'])])\n"),
        "pkgc/__init__.py": "",
        "pkgc/helpers.py": "def scale(x):\n    return x\n",
        "pkgc/layers.py": (
            "import torch.nn as nn\n"
            "from pkgc import _C\n"
            "from pkgc.helpers import retired\n\n\n"
            "class Fused(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return retired(_C.fused_add(x, x))\n"),
    })
    code = code_of(tmp_path, "pkgc", root, "Fused")
    assert "from pkgc import _C\n" in code
    assert ("# note: imports pkgc._C: compiled extension modules that building pkgc makes "
            "(its setup.py names them), which have no Python source to copy, kept as imports, "
            "so the file needs pkgc installed") in code
    assert "# unresolved: retired (pkgc.layers:" in code and "_C (" not in code


def test_a_name_from_a_folder_without_init_is_not_called_outside_the_paths(tmp_path):
    """zetascale's ``zeta/ops`` has ``__Init__.py`` and no ``__init__.py``: a namespace
    package, so ``from zeta.ops import Decoder`` fails upstream too on a file system where
    case matters. The header said zeta.ops lay outside the indexed paths, which were the
    whole package."""
    root = write_tree(tmp_path / "src", {
        "pkgn/__init__.py": "",
        "pkgn/ops/__Init__.py": "from pkgn.ops.core import Decoder\n",
        "pkgn/ops/core.py": "class Decoder:\n    pass\n",
        "pkgn/ops/absmax.py": "def absmax(x):\n    return x.abs().max()\n",
        "pkgn/plain/scale.py": "def scale(x):\n    return x * 2\n",
        "pkgn/models.py": (
            "import torch.nn as nn\n"
            "import pkgn.plain\n"
            "from pkgn.ops import Decoder\n"
            "from pkgn.ops import absmax\n"
            "from pkgn.plain import Missing\n\n\n"
            "class Net(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return Decoder, Missing, pkgn.plain, absmax.absmax(x)\n"),
    })
    code = code_of(tmp_path, "pkgn", root, "Net")
    assert "from pkgn.ops import Decoder\n" in code
    assert "def absmax(x):" in code  # the submodule is there, and inlined
    assert ("# note: imports `Decoder` from pkgn.ops, a folder without `__init__.py` (a "
            "namespace package, which binds only its submodules); its `__Init__.py` is "
            "`__init__.py` only on a file system that ignores case: upstream's import fails "
            "the same way where case matters, kept as written") in code
    assert ("# note: imports `Missing` from pkgn.plain, a folder without `__init__.py` (a "
            "namespace package, which binds only its submodules): upstream's import fails "
            "the same way, kept as written") in code
    assert "outside the indexed paths" not in code


def test_a_module_its_package_puts_into_sys_modules_is_not_from_another_version(tmp_path):
    """flash-linear-attention's ``fla/modules/__init__.py`` aliases ``fla.modules.layernorm``
    to ``fla.modules.norm.layernorm`` through ``sys.modules`` as it runs, and its own
    ``feature_map.py`` imports the alias: no file defines it, and upstream was not written
    against another version."""
    root = write_tree(tmp_path / "src", {
        "pkga/__init__.py": "",
        "pkga/mods/__init__.py": (
            "import sys\nfrom importlib import import_module\n\n"
            "for _old, _new in {'norm_old': 'norm.impl'}.items():\n"
            "    sys.modules[f'{__name__}.{_old}'] = import_module(f'{__name__}.{_new}')\n"),
        "pkga/mods/norm/__init__.py": "",
        "pkga/mods/norm/impl.py": "def scale(x):\n    return x * 2\n",
        "pkga/mods/fmap.py": (
            "import torch.nn as nn\n"
            "from pkga.mods.norm_old import scale\n"
            "from pkga.gone import old\n\n\n"
            "class FeatureMap(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return old(scale(x))\n"),
    })
    code = code_of(tmp_path, "pkga", root, "FeatureMap")
    assert "from pkga.mods.norm_old import scale\n" in code
    assert ("# note: imports pkga.mods.norm_old, which no file of the pkga sources indexed "
            "here defines; pkga/mods/__init__.py puts modules into sys.modules as it runs, "
            "where it likely comes from: kept as written, so the file needs pkga "
            "installed") in code
    # pkga/__init__.py writes nothing there: pkga.gone is still another version's
    assert ("# note: imports pkga.gone, which the pkga sources indexed here do not have "
            "(upstream was written against another version)") in code


@needs_torch
def test_a_relative_import_kept_in_a_function_or_a_try_becomes_absolute(models_only, tmp_path):
    """diffusers' ``def enable_group_offload(...): from ..hooks import apply_group_offloading``
    with ``diffusers/models`` indexed: kept relative, it raised "attempted relative import
    with no known parent package" when called, and a ``try`` around one took its fallback."""
    code = models_only.extract_single_block("LazyScale").generated.code
    assert "        from pkgx.utils import SCALE  # deferred" in code
    assert "try:\n    from pkgx.utils import SCALE as _GAIN\nexcept ImportError:" in code
    assert "from .." not in code.split("# rewrites:")[1].split("\n\n", 1)[1]
    assert ("pkgx/models/lazy.py:9: relative import `from ..utils` -> `from pkgx.utils` "
            "(the file has no package)") in code
    assert ("# note: functions import pkgx.utils inside their bodies: modules of pkgx outside "
            "the indexed paths, so calling those functions needs pkgx installed") in code
    # where pkgx is installed the file computes what upstream does: x * SCALE * SCALE
    path = tmp_path / "LazyScale.py"
    path.write_text(code)
    script = (f"import runpy, torch; ns = runpy.run_path({str(path)!r}); "
              "print(ns['LazyScale']()(torch.ones(1)).item())")
    run = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "4.0"


def test_indexed_whole_the_same_block_is_standalone(tmp_path):
    ex = extractor(tmp_path, [])
    code = ex.extract_single_block("ScaledBlock").generated.code
    assert "class CheckpointLayer(nn.Module):" in code
    assert "SCALE = 2.0" in code
    assert "pkgx" not in code.split("# needs,")[-1].split("\n\n", 1)[1]  # no import of it
    assert "Identityish" not in code  # only what the block reaches


@needs_torch
def test_validation_names_a_file_that_is_not_standalone(models_only, tmp_path):
    from nnrag_tui.engine.sandbox import Sandbox
    from nnrag_tui.engine.validate import Validator, standalone_denylist

    g = models_only.extract_single_block("ScaledBlock").generated
    whole = extractor(tmp_path, []).extract_single_block("ScaledBlock").generated
    with Sandbox(deny_imports=standalone_denylist("pkgx.models.net")) as sb, Validator(sb) as v:
        report = v.validate(g.code, g.name, g.spec)
        assert not report.stage("import").ok
        assert report.cause == "not_standalone"
        assert report.cause_detail["module"] == "pkgx"
        assert "a package of the corpus that the file does not inline" in report.cause_summary
        assert v.validate(whole.code, whole.name, whole.spec).level == "forward_ran"


def upstream_repo(tmp_path, monkeypatch, extra: dict | None = None) -> str:
    """The fixture package as a git repository (work tree ``upstream/work``), cloned bare:
    its file:// URL."""
    git_env(tmp_path, monkeypatch)
    (tmp_path / "upstream").mkdir()
    files = {p.relative_to(REPO).as_posix(): p.read_bytes() for p in REPO.rglob("*.py")
             if "__pycache__" not in p.parts}
    return make_bare_repo(tmp_path / "upstream", files | (extra or {}))[0]


def test_a_sparse_clone_still_knows_the_modules_outside_its_paths(tmp_path, monkeypatch):
    """A ``url`` source is cloned sparse. With only its ``paths`` on disk, the package's other
    modules looked missing: a class whose base lives there was no block (a ``url`` source of
    ``transformers/models`` would have lost every model), and diffusers cloned as
    ``src/diffusers/models`` said 198 of its files needed another version of diffusers. The
    package's Python files now come along (never its data), so both work as for a local
    path."""
    url = upstream_repo(tmp_path, monkeypatch, {"pkgx/layers/weights.bin": b"\0" * 1024,
                                                "docs/guide.md": "# pkgx\n"})
    ex = BlockExtractor(parse_config({"pkgx": {"url": url, "paths": ["pkgx/models"]}}),
                        cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")
    with ex:
        ex.index()
        clone = Path(ex.store.source_roots()["pkgx"]["root"])
        assert not (clone / "pkgx" / "layers" / "weights.bin").exists()  # code only
        assert not (clone / "docs").exists()
        assert {b.key for b in ex.blocks()} >= {"pkgx.models.net:ScaledBlock"}
        code = ex.extract_single_block("ScaledBlock").generated.code
    assert ("imports pkgx.layers, pkgx.utils: modules of pkgx outside the indexed paths, kept "
            "as imports, so the file needs pkgx installed") in code
    assert "written against another version" not in code


def test_an_update_outside_the_paths_is_discovered_again(tmp_path, monkeypatch):
    """Only the base changed upstream, in a module the paths leave out: no indexed file
    changed, but which classes are blocks did."""
    url = upstream_repo(tmp_path, monkeypatch)
    cfg = parse_config({"pkgx": {"url": url, "paths": ["pkgx/models"]}})
    kw = {"cache_dir": tmp_path / "cache", "data_dir": tmp_path / "data"}
    with BlockExtractor(cfg, **kw) as ex:
        ex.index()
        assert "pkgx.models.net:ScaledBlock" in {b.key for b in ex.blocks()}
    work = tmp_path / "upstream" / "work"
    base = work / "pkgx" / "layers" / "base.py"
    base.write_text(base.read_text().replace("class CheckpointLayer(nn.Module):",
                                             "class CheckpointLayer:"))
    subprocess.run(["git", "commit", "-qam", "CheckpointLayer is no module"], cwd=work,
                   check=True)
    subprocess.run(["git", "push", "-q", str(tmp_path / "upstream" / "remote.git"),
                    "HEAD:master", "HEAD:main"], cwd=work, check=False, capture_output=True)
    with BlockExtractor(cfg, **kw) as ex:
        report = ex.index(policy="always")
        assert report.parsed == 0  # no indexed file changed
        assert "pkgx.models.net:ScaledBlock" not in {b.key for b in ex.blocks()}
