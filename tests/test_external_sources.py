"""A source the configuration marks ``"external": true`` is imported, never inlined, as torch
is: mmdet's blocks import mmengine's ``Registry`` and ``BaseModule`` instead of carrying
mmengine's registries, configs and loggers whole (a median of 12,242 lines per mmdet file
before, 1,137 with mmengine external)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.errors import ConfigError
from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.validate import standalone_denylist

FRAME = {
    "frame/__init__.py": "",
    # the package re-exports what its modules define, as mmengine.registry does
    "frame/registry/__init__.py": "from .registry import Registry\n\n__all__ = ['Registry']\n",
    "frame/registry/registry.py": '''
        HOOKS = []


        class Registry:
            """A name -> class table."""

            def __init__(self, name):
                self.name = name
                self.table = {}
                HOOKS.append(name)

            def register(self, cls):
                self.table[cls.__name__] = cls
                return cls

            def build(self, key, *args):
                return self.table[key](*args)
        ''',
    "frame/model.py": '''
        import torch.nn as nn

        from frame.registry import Registry as _Registry


        def _scale(x):
            return x * 2


        class BaseModule(nn.Module):
            """The framework's base class."""

            def double(self, x):
                return _scale(x)

            def forward(self, x):
                return self.double(x)
        ''',
}

APP = {
    "app/__init__.py": "",
    "app/blocks.py": '''
        import torch.nn as nn

        from frame.model import BaseModule
        from frame.registry import Registry

        LAYERS = Registry("layer")


        @LAYERS.register
        class Relu(nn.Module):
            def forward(self, x):
                return x.clamp(min=0)


        class Block(BaseModule):
            """Doubles, then the registry's Relu."""

            def __init__(self):
                super().__init__()
                self.act = LAYERS.build("Relu")

            def forward(self, x):
                return self.act(self.double(x))
        ''',
}


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip())
    return root


@pytest.fixture()
def corpus(tmp_path):
    frame = _tree(tmp_path / "repos" / "frame", FRAME)
    app = _tree(tmp_path / "repos" / "app", APP)

    def extractor(external: bool) -> BlockExtractor:
        cfg = {"frame": {"path": str(frame), "priority": 1, "external": external},
               "app": {"path": str(app), "priority": 2}}
        tag = "ext" if external else "inline"
        ex = BlockExtractor(parse_config(cfg), cache_dir=tmp_path / f"cache-{tag}",
                            data_dir=tmp_path / f"data-{tag}")
        ex.index()
        return ex

    return extractor, frame


def test_an_external_source_s_definitions_are_imported_as_upstream_writes_them(corpus):
    extractor, _ = corpus
    with extractor(True) as ex:
        res = ex.extract_single_block("app.blocks:Block")
    assert res.ok, res.error
    code = res.generated.code
    # the statements of app/blocks.py, as written: not frame.registry.registry
    assert "\nfrom frame.model import BaseModule\n" in code
    assert "\nfrom frame.registry import Registry\n" in code
    assert "class Registry" not in code and "class BaseModule" not in code
    assert "def _scale" not in code
    # the block's own repository is still inlined: the registry it fills comes along
    assert 'LAYERS = Registry("layer")' in code and "class Relu" in code
    assert "# note: frame: external in the configuration, imported and never inlined; " \
           "the file needs it installed" in code
    deps = {d["name"]: d for d in res.generated.spec["dependencies"]}
    assert deps["BaseModule"]["kind"] == "external"
    assert deps["BaseModule"]["note"] == \
        "frame is external in the configuration: imported, never inlined"
    assert res.generated.imported_packages == {"torch", "frame"}


def test_without_the_mark_the_same_block_carries_the_framework(corpus):
    extractor, _ = corpus
    with extractor(False) as ex:
        res = ex.extract_single_block("app.blocks:Block")
    code = res.generated.code
    assert "class Registry" in code and "class BaseModule" in code and "def _scale" in code
    assert "from frame" not in code and "external in the configuration" not in code
    assert res.generated.imported_packages == {"torch"}


def test_the_file_runs_where_the_framework_is_installed(corpus, tmp_path):
    extractor, frame = corpus
    with extractor(True) as ex:
        res = ex.extract_single_block("app.blocks:Block")
    path = tmp_path / "Block.py"
    path.write_text(res.generated.code)
    probe = (f"import runpy, torch; ns = runpy.run_path({str(path)!r}); "
             "print(ns['Block']()(torch.tensor([-1.0, 3.0])).tolist())")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env | {"PYTHONPATH": str(frame)}, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0.0, 6.0]"
    # and says what is missing where it is not
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, timeout=120, check=False)
    assert "No module named 'frame'" in out.stderr


def test_an_external_source_s_own_block_is_copied_and_imports_the_rest(corpus):
    extractor, _ = corpus
    with extractor(True) as ex:
        res = ex.extract_single_block("frame.model:BaseModule")
    code = res.generated.code
    assert "class BaseModule(nn.Module):" in code
    # its own module's helper is imported from where it is defined, like torch's own blocks
    assert "\nfrom frame.model import _scale\n" in code
    # validating it may import its own package, as torch's blocks import torch
    assert standalone_denylist(res.block.module, res.generated.imported_packages) == ()
    assert standalone_denylist("app.blocks", res.generated.imported_packages) == ("app",)


@pytest.mark.parametrize("value", ["yes", 1, None, ["frame"]])
def test_external_must_be_true_or_false(value):
    with pytest.raises(ConfigError, match="repository 'frame': field 'external' must be "
                                          "true or false"):
        parse_config({"frame": {"path": "/x", "external": value}})


# -- a registry framework marked external --------------------------------------------------
# tests/fixtures/closure/registry_scope holds a small mmengine (scoperoot: a Registry that
# infers its scope from the creating module, and the root registries) and three packages
# with registries under its root, as mmdet's, mmocr's and mmpretrain's
SCOPED = Path(__file__).parent / "fixtures" / "closure" / "registry_scope" / "repo"

BRICKS = {
    "bricks/__init__.py": "from . import conv\nfrom .build import build_conv\n",
    # registers into the framework's root registry, as mmcv's bricks into mmengine's MODELS
    "bricks/conv.py": '''
        import torch.nn as nn

        from scoperoot.root import MODELS


        @MODELS.register_module()
        class Conv(nn.Conv2d):
            pass
        ''',
    "bricks/build.py": '''
        from scoperoot.root import MODELS


        def build_conv(cfg=None):
            cfg = cfg or dict(type="Conv", in_channels=1, out_channels=2, kernel_size=1)
            return MODELS.build(cfg)
        ''',
    "bricks/stem.py": '''
        import torch.nn as nn

        from bricks.build import build_conv


        class Stem(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = build_conv()

            def forward(self, x):
                return self.conv(x)
        ''',
}


def _scoped(tmp_path, external: bool, bricks: Path | None = None) -> BlockExtractor:
    cfg = {"root": {"path": str(SCOPED), "paths": ["scoperoot"], "external": external},
           "pkgs": {"path": str(SCOPED), "paths": ["scopedet", "scopeocr", "scopecls"],
                    "priority": 2}}
    if bricks is not None:
        cfg["bricks"] = {"path": str(bricks), "priority": 3}
    tag = f"{external}-{bricks is not None}"
    ex = BlockExtractor(parse_config(cfg), cache_dir=tmp_path / f"c-{tag}",
                        data_dir=tmp_path / f"d-{tag}")
    ex.index()
    return ex


def _run(path: Path, probe: str, *roots: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = f"import runpy, torch; ns = runpy.run_path({str(path)!r}); {probe}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env | {"PYTHONPATH": os.pathsep.join(map(str, roots))},
                          timeout=120, check=False)


def test_registrations_into_a_registry_made_by_an_imported_class_come_along(tmp_path):
    with _scoped(tmp_path, True) as ex:
        res = ex.extract_single_block("scopedet.layers.scale:Scale")
    code = res.generated.code
    assert "\nfrom scoperoot.registry import Registry\n" in code
    assert "\nfrom scoperoot.root import MODELS as ROOT_MODELS\n" in code
    assert "class Registry" not in code
    # the registry is the package's own, inlined, with its list emptied as the file inlines
    assert 'MODELS = Registry("model", parent=ROOT_MODELS, locations=[])' in code
    (tmp_path / "Scale.py").write_text(code)
    out = _run(tmp_path / "Scale.py", "print(ns['MODELS'].build(dict(type='Scale')).factor)",
               SCOPED)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.5"


def test_a_key_registered_by_a_module_the_block_never_imports_is_found(tmp_path):
    # scopeocr.head builds `Tail`, which scopeocr/heads/tail.py registers: the registry's
    # class is imported, yet the registry is recognised and the registration comes along
    with _scoped(tmp_path, True) as ex:
        res = ex.extract_single_block("scopeocr.head:Head")
    code = res.generated.code
    assert "class Tail(nn.Softsign):" in code and "class Registry" not in code
    (tmp_path / "Head.py").write_text(code)
    out = _run(tmp_path / "Head.py", "print(type(ns['Head']().body).__name__)", SCOPED)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Tail"


def test_two_registries_under_one_installed_parent_are_said_to_clash(tmp_path):
    with _scoped(tmp_path, True) as ex:
        res = ex.extract_single_block("scopeocr.net:Net")
    code = res.generated.code
    assert "# note: scopedet.registry:4, scopeocr.registry:4 create registries under the " \
           "installed `scoperoot.root.MODELS`, each taking its scope from the module " \
           "creating it: here all take this file's package, and importing the file fails" in code
    (tmp_path / "Net.py").write_text(code)
    out = _run(tmp_path / "Net.py", "ns['Net']()", SCOPED)
    assert "AssertionError: scope " in out.stderr  # as the note says
    # inlined, the same block has a registry tree of its own and builds
    with _scoped(tmp_path, False) as ex:
        res = ex.extract_single_block("scopeocr.net:Net")
    assert "create registries under the installed" not in res.generated.code
    (tmp_path / "Net.py").write_text(res.generated.code)
    out = _run(tmp_path / "Net.py", "ns['Net']()", tmp_path / "nowhere")
    assert out.returncode == 0, out.stderr


def test_a_registration_into_the_installed_registry_is_said_to_be_missing(tmp_path):
    bricks = _tree(tmp_path / "repos" / "bricks", BRICKS)
    with _scoped(tmp_path, True, bricks) as ex:
        res = ex.extract_single_block("bricks.stem:Stem")
    code = res.generated.code
    assert "class Conv" not in code
    assert ("# note: 'Conv' (a config's type) is registered into scoperoot's `MODELS` by "
            "bricks/conv.py:6, which upstream's import runs; scoperoot is external in the "
            "configuration, so that registration is not in this file and building 'Conv' "
            "fails: mark bricks external too, or scoperoot not") in code
    with _scoped(tmp_path, False, bricks) as ex:
        res = ex.extract_single_block("bricks.stem:Stem")
    assert "class Conv(nn.Conv2d):" in res.generated.code
    assert "is registered into" not in res.generated.code
