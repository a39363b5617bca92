"""The cyclic garbage collector while a block is regenerated (engine.gcpolicy): it runs less
often, the engine's working state is freed by reference counting alone, and a program that
uses the engine as a library gets its own collector settings back."""

from __future__ import annotations

import gc
import threading

import pytest
from helpers import extract_tree, path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.gcpolicy import THRESHOLDS, fewer_collections

MINE = (1000, 20, 20)  # a program's own thresholds


@pytest.fixture(autouse=True)
def _collector_as_it_was():
    was, thresholds = gc.isenabled(), gc.get_threshold()
    gc.set_threshold(*MINE)
    yield
    gc.set_threshold(*thresholds)
    if was:
        gc.enable()


def test_thresholds_inside_and_the_programs_own_after_also_when_the_body_raises():
    with fewer_collections():
        assert gc.get_threshold() == THRESHOLDS
    assert gc.get_threshold() == MINE
    with pytest.raises(KeyError), fewer_collections():
        raise KeyError("x")
    assert gc.get_threshold() == MINE


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    with fewer_collections():
        pass
    assert not gc.isenabled()


def test_overlapping_uses_give_the_thresholds_back_only_when_the_last_ends():
    entered, release = threading.Event(), threading.Event()

    def other():
        with fewer_collections():
            entered.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with fewer_collections():
        t.start()
        assert entered.wait(10)
    assert gc.get_threshold() == THRESHOLDS  # the other thread's still runs
    release.set()
    t.join(10)
    assert gc.get_threshold() == MINE
    with fewer_collections():
        with fewer_collections():
            pass
        assert gc.get_threshold() == THRESHOLDS
    assert gc.get_threshold() == MINE


NET = {
    "pkg/__init__.py": "",
    "pkg/net.py": "from torch import nn\n\n\nclass Net(nn.Module):\n"
                  "    def forward(self, x):\n        return x\n",
}


def test_extraction_runs_with_fewer_collections_and_gives_the_thresholds_back(
        tmp_path, monkeypatch):
    from nnrag_tui.engine import resolve

    seen = []
    closure = resolve.Resolver.closure

    def recording(self, block):
        seen.append(gc.get_threshold())
        return closure(self, block)

    monkeypatch.setattr(resolve.Resolver, "closure", recording)
    extract_tree(tmp_path, NET)
    assert seen == [THRESHOLDS]
    assert gc.get_threshold() == MINE


def test_a_failed_extraction_gives_the_thresholds_back(tmp_path):
    root = write_tree(tmp_path / "repo", NET)
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        (root / "pkg" / "net.py").write_text("class Net(:\n", encoding="utf-8")
        result = ex.extract_single_block("Net")
    assert not result.ok and "changed since it was indexed" in result.error, result.error
    assert gc.get_threshold() == MINE
