"""A block whose registries any module of its repository may fill has every module of the
repository looked at, once per registry. Each file is read once per resolver: deepspeed's
``InferenceEngine`` read its 751 files 42,317 times (158 MiB) before."""

from __future__ import annotations

import collections
import pathlib

from helpers import path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor

REGISTRIES = ("MODELS", "LOSSES", "HEADS")


def _repo() -> dict[str, str]:
    # the package imports every part, so upstream's import of ``regpkg.net`` fills them all
    files = {"regpkg/__init__.py": "from . import part0, part1, part2, part3, part4, part5\n",
             "regpkg/registry.py": ""}
    for reg in REGISTRIES:
        files["regpkg/registry.py"] += (
            f"{reg} = {{}}\n\n\n"
            f"def register_{reg.lower()}(cls):\n"
            f"    {reg}[cls.__name__] = cls\n"
            f"    return cls\n\n\n")
    for i in range(6):
        reg = REGISTRIES[i % 3]
        files[f"regpkg/part{i}.py"] = (
            "from torch import nn\n\n"
            f"from .registry import register_{reg.lower()}\n\n\n"
            f"@register_{reg.lower()}\n"
            f"class Part{i}(nn.Module):\n"
            "    def forward(self, x):\n"
            f"        return x + {i}\n")
    files["regpkg/net.py"] = (
        "from torch import nn\n\n"
        "from .registry import HEADS, LOSSES, MODELS\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, model='Part0', loss='Part1', head='Part2'):\n"
        "        super().__init__()\n"
        "        self.parts = nn.ModuleList([MODELS[model](), LOSSES[loss](), HEADS[head]()])\n\n"
        "    def forward(self, x):\n"
        "        for part in self.parts:\n"
        "            x = part(x)\n"
        "        return x\n")
    return files


def test_each_file_is_read_once_however_many_registries_look_through_it(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "repo", _repo())
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "c",
                        data_dir=tmp_path / "d") as ex:
        ex.index()
        reads: collections.Counter[str] = collections.Counter()
        real = pathlib.Path.read_bytes

        def counted(self):
            reads[self.name] += 1
            return real(self)

        monkeypatch.setattr(pathlib.Path, "read_bytes", counted)
        result = ex.extract_single_block("Net")
    assert result.ok, result.error
    code = result.generated.code
    assert all(f"class Part{i}(" in code for i in range(6))  # every filler inlined
    assert {f"part{i}.py" for i in range(6)} <= set(reads)
    assert max(reads.values()) == 1, reads
