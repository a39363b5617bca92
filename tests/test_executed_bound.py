"""bench/executed_bound.py's floor: of a file with a string registry, only what one default build
and forward run executes is counted; a registry entry that never runs is left out, and so is the
module-level statement that holds the registry. The forked child that measures it has a
memory cap (bench/forked.py)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from executed_bound import measure  # noqa: E402
from forked import run_forked  # noqa: E402

BLOCK = textwrap.dedent('''\
    import torch.nn as nn


    class Used(nn.Module):
        def forward(self, x):
            return x * 2


    class NeverRun(nn.Module):
        """Reachable through the registry, but not with the default name."""

        def forward(self, x):
            return x * 3

        def extra(self):
            return 0


    def helper(x):
        return x + 1


    def only_for_strings(name):
        return _REGISTRY[name]


    _REGISTRY = dict(used=Used, never=NeverRun)


    class Block(nn.Module):
        def __init__(self, kind=Used):
            super().__init__()
            self.inner = only_for_strings(kind) if isinstance(kind, str) else kind()

        def forward(self, x):
            return helper(self.inner(x))


    __all__ = ["Block"]
''')


def test_floor_keeps_what_ran_and_drops_the_rest(tmp_path):
    path = tmp_path / "Block.py"
    path.write_text(BLOCK)
    ans, status = run_forked(lambda: measure(str(path), "Block"), 60)
    assert status == "ok", status
    assert ans["reached"] == "forward"
    assert ans["lines"] == len(BLOCK.splitlines())
    # kept: Used (built, forward ran), helper (called), Block; never run: NeverRun and the
    # string path; the registry statement and __all__ are not definitions
    assert sorted(name for name, _ in ans["dropped"]) == ["NeverRun", "only_for_strings"]
    assert ans["kept"] == 3
    used, helper, block = 3, 2, 7
    assert ans["bound"] == 1 + (used + 2) + (helper + 2) + (block + 2) + 1


def test_a_block_that_cannot_be_built_reports_how_far_it_got(tmp_path):
    path = tmp_path / "Broken.py"
    path.write_text("import torch.nn as nn\n\n\nclass Broken(nn.Module):\n"
                    "    def __init__(self):\n        raise RuntimeError('no')\n")
    ans, status = run_forked(lambda: measure(str(path), "Broken"), 60)
    assert status == "ok", status
    assert ans["reached"] == "import"


def test_a_child_past_its_memory_cap_answers_with_the_error():
    # 3 GiB against a 1 GiB cap: should the cap fail, 3 GiB on this machine is harmless
    ans, status = run_forked(lambda: {"size": len(bytearray(3 << 30))}, 60, memory=1 << 30)
    assert status == "ok", status
    assert ans == {"error": "MemoryError: "}
