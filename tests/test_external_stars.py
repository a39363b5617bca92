"""Names that reach a block through a chain of star imports ending outside the corpus.

fastai's modules begin with ``from .imports import *``, and ``fastai/imports.py`` has ``from
fastcore.all import *``: ``PrePostInitMeta``, ``delegates`` and ``defaults`` are bound by no
fastai file. They were reported unresolved and 42 of fastai's 48 files raised NameError. Such a
name is now imported by name from the external star import the chain reaches (a guess the
header states), and a module-level attribute store on such an object (``defaults.activation =
nn.ReLU`` in fastai/layers.py, read by ``act_cls=defaults.activation``) comes along."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from helpers import path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed")

EXTERNAL = {
    "extlib/__init__.py": "",
    # no __all__: its star import binds everything public
    "extlib/all.py": ("from types import SimpleNamespace\n\n"
                      "defaults = SimpleNamespace()\n\n\n"
                      "def double(x):\n    return 2 * x\n"),
}
CORPUS = {
    "pkgf/__init__.py": "",
    "pkgf/imports.py": "import torch\nfrom extlib.all import *\n",
    "pkgf/core.py": "from .imports import *\n\n\nclass Base(torch.nn.Module):\n    pass\n",
    "pkgf/layers.py": (
        "from torch import nn\n"
        "from .core import *\n\n"
        "torch.backends.cudnn.benchmark = False\n"
        "defaults.scale = 3.0\n\n\n"
        "class Scaled(Base):\n"
        "    def __init__(self, scale=defaults.scale):\n"
        "        super().__init__()\n"
        "        self.scale = scale\n\n"
        "    def forward(self, x):\n"
        "        return double(x) * self.scale\n\n"
        # pykan's fit: a global the method binds itself, read after it
        "    def fit(self, x):\n"
        "        global last_loss\n"
        "        last_loss = float(self(x).sum())\n"
        "        return last_loss\n"),
}


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stars")
    write_tree(tmp / "ext", EXTERNAL)
    root = write_tree(tmp / "src", CORPUS)
    ex = BlockExtractor(path_config({"pkgf": root}), cache_dir=tmp / "cache",
                        data_dir=tmp / "data")
    ex.index()
    res = ex.extract_single_block("Scaled")
    return tmp, res


def test_a_name_from_an_external_star_down_a_chain_is_imported_by_name(scaled):
    _, res = scaled
    code = res.generated.code
    assert "from extlib.all import defaults, double\n" in code
    assert "# unresolved" not in code
    assert ("# note: `defaults`, `double`: no corpus module binds them, assumed from `from "
            "extlib.all import *` (in pkgf.imports, which the star imports of pkgf.layers "
            "reach)") in code
    how = {d["name"]: d["how"] for d in res.generated.spec["dependencies"]}
    assert how["double"] == how["defaults"] == "heuristic"


def test_an_attribute_store_on_that_object_comes_along_but_not_one_on_a_module(scaled):
    code = scaled[1].generated.code
    assert "\ndefaults.scale = 3.0\n" in code
    assert code.index("defaults.scale = 3.0") < code.index("class Scaled")
    assert "cudnn" not in code  # process configuration, not part of the block


@needs_torch
def test_the_file_computes_what_upstream_does(scaled):
    tmp, res = scaled
    path = tmp / "Scaled.py"
    path.write_text(res.generated.code)
    script = ("import runpy, sys, torch; ns = runpy.run_path(sys.argv[1]); "
              "print(ns['Scaled']()(torch.ones(1)).item())")
    upstream = ("import sys, torch; from pkgf.layers import Scaled; "
                "print(Scaled()(torch.ones(1)).item())")
    env = {**os.environ, "PYTHONPATH": str(tmp / "ext")}
    run = subprocess.run([sys.executable, "-c", script, str(path)], env=env, timeout=120,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    env["PYTHONPATH"] += os.pathsep + str(tmp / "src")
    up = subprocess.run([sys.executable, "-c", upstream], env=env, timeout=120,
                        capture_output=True, text=True, check=False)
    assert up.returncode == 0, up.stderr
    assert run.stdout.strip() == up.stdout.strip() == "6.0"


def test_a_global_the_block_binds_itself_is_no_guess(scaled):
    """pykan's ``fit`` declares ``global train_loss, reg_`` and assigns them: the statement
    binds the names itself, so they are no names to import from ``from sympy import *``
    (``from sympy import reg_`` failed on import)."""
    code = scaled[1].generated.code
    assert "last_loss" not in code.split("class Scaled")[0]
    assert "        global last_loss\n        last_loss = float(self(x).sum())\n" in code
