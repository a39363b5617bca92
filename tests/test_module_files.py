"""Code that finds files beside its module through ``__file__`` (whisper's ``mel_filters.npz``,
torch_geometric's ``propagate.jinja``): in a generated file ``__file__`` is that file, so the
header names those definitions, the files their string literals point at, and where to put them;
put there, the code works as upstream's does."""

from __future__ import annotations

import importlib.util
import shutil

import pytest
from helpers import path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor

pytest.importorskip("torch")

AUDIO = '''import os

import torch
from torch import nn


def scale_table():
    with open(os.path.join(os.path.dirname(__file__), "assets", "scales.txt")) as f:
        return [float(v) for v in f.read().split()]


def lib_dir():
    return os.path.dirname(os.path.abspath(__file__))


class Scaled(nn.Module):
    def __init__(self, dim=3):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.where = lib_dir()

    def forward(self, x):
        return self.fc(x) * torch.tensor(scale_table())


class Plain(nn.Module):
    def forward(self, x):
        return x * 2
'''


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    root = write_tree(tmp_path_factory.mktemp("repo"), {
        "mfpkg/__init__.py": "",
        "mfpkg/audio.py": AUDIO,
        "mfpkg/assets/scales.txt": "1.0 2.0 3.0\n",
        "mfpkg/assets/unrelated.bin": b"\0",
    })
    work = tmp_path_factory.mktemp("work")
    with BlockExtractor(path_config({"mf": root}), cache_dir=work / "cache",
                        data_dir=work / "data") as ex:
        ex.index()
        yield root, ex.extract_single_block("Scaled"), ex.extract_single_block("Plain")


def test_the_header_names_the_files_and_where_they_go(extracted):
    _, res, plain = extracted
    notes = [n for n in res.generated.notes if "__file__" in n]
    assert notes == [(
        "`__file__` is this file here, not the upstream module, so files looked up beside it "
        "are missing: `scale_table` (mfpkg/audio.py:7) reads mfpkg/assets/scales.txt (as "
        "assets/scales.txt); `lib_dir` (mfpkg/audio.py:12); copy them beside this file, at the "
        "path shown")]
    assert notes[0] in res.generated.code  # the header carries it
    assert "unrelated.bin" not in res.generated.code
    assert not [n for n in plain.generated.notes if "__file__" in n]


def test_put_where_the_header_says_the_file_works(extracted, tmp_path):
    root, res, _ = extracted
    path = tmp_path / "Scaled.py"
    path.write_text(res.generated.code)
    spec = importlib.util.spec_from_file_location("mf_scaled", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch
    block = mod.Scaled()
    with pytest.raises(FileNotFoundError):
        block(torch.ones(1, 3))
    (tmp_path / "assets").mkdir()
    shutil.copy(root / "mfpkg/assets/scales.txt", tmp_path / "assets/scales.txt")
    assert block(torch.zeros(1, 3)).shape == (1, 3)
    assert mod.scale_table() == [1.0, 2.0, 3.0]
