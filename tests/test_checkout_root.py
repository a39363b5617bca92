"""A ``path`` source at a repository checkout whose root holds an ``__init__.py``.

The folder is indexed as a package (its modules are ``ACNet.builder``, ...), as for any folder
that holds an ``__init__.py``; but a cloned research repository runs its scripts in that folder
(ACNet: ``from builder import ConvBuilder`` in ``ACNet/base_model/resnet.py``), so its modules'
imports of their neighbours find them there, as the same repository given as a git source
does. A package folder that is no checkout (unpacked or installed) keeps its imports as
they are: ``safetensors/numpy.py`` is no ``numpy``.
"""

from __future__ import annotations

import subprocess
import sys

from helpers import git, git_env, path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor

NET = """\
import torch.nn as nn
from builder import Builder


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Builder().conv(3, 4)

    def forward(self, x):
        return self.body(x)
"""

BUILDER = """\
import torch.nn as nn


class Builder:
    def conv(self, cin, cout):
        return nn.Conv2d(cin, cout, 3, padding=1)
"""

ARRAY = """\
import numpy
import torch
import torch.nn as nn


class Table(nn.Module):
    def forward(self, x):
        return x + torch.from_numpy(numpy.ones(1, dtype="float32"))
"""


def repo(root):
    return write_tree(root, {
        "__init__.py": "",
        "builder.py": BUILDER,
        "numpy.py": "ones = None\n",
        "models/__init__.py": "",
        "models/net.py": NET,
        "models/table.py": ARRAY,
    })


def extract(tmp_path, folder, name):
    ex = BlockExtractor(path_config({"acnet": folder}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data")
    ex.index()
    out = tmp_path / "out"
    res = ex.extract_single_block(name, out)
    assert res.ok, res.error
    return (out / f"{name.rsplit(':', 1)[-1]}.py")


def test_a_checkouts_modules_find_their_neighbours_where_its_scripts_run(tmp_path,
                                                                         monkeypatch):
    git_env(tmp_path, monkeypatch)
    folder = repo(tmp_path / "ACNet")
    git("init", "-q", cwd=folder)
    git("add", "-A", cwd=folder)
    git("commit", "-q", "-m", "initial", cwd=folder)
    path = extract(tmp_path, folder, "ACNet.models.net:Net")
    code = path.read_text()
    assert "class Builder:" in code and "from builder import" not in code
    assert "taken from ACNet/" in code  # (the header says it is a guess)
    script = (f"import runpy, torch; ns = runpy.run_path({str(path)!r}); "
              "print(tuple(ns['Net']()(torch.zeros(1, 3, 8, 8)).shape))")
    run = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "(1, 4, 8, 8)"


def test_a_package_folder_that_is_no_checkout_keeps_its_imports(tmp_path):
    folder = repo(tmp_path / "ACNet")
    code = extract(tmp_path, folder, "ACNet.models.table:Table").read_text()
    assert "import numpy\n" in code and "ones = None" not in code
    code = extract(tmp_path, folder, "ACNet.models.net:Net").read_text()
    assert "from builder import Builder" in code and "class Builder" not in code
