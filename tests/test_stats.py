"""Statistics (nnrag stats): counts per repository and category, extraction success and its
causes, validation pass rate with the Wilson interval (passed in, or from the registry), time
and lines per block, the index's cache hit rate."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import write_config, write_tree

from nnrag_tui.cli import main
from nnrag_tui.engine import stats
from nnrag_tui.engine.extractor import BlockExtractor

ALPHA = {
    "alpha/__init__.py": "",
    "alpha/layers.py": '''
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.qkv = nn.Linear(dim, dim * 3)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v


class ConvBlock(nn.Module):
    def __init__(self, c=3):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


class Broken(nn.Module):
    def forward(self, x):
        return undefined_helper(x)
''',
    "alpha/stale.py": '''
from torch import nn


class Stale(nn.Module):
    def forward(self, x):
        return x
''',
}
BETA = {
    "beta/__init__.py": "",
    "beta/norm.py": '''
from torch import nn


class ChannelNorm(nn.Module):
    def __init__(self, c=3):
        super().__init__()
        self.norm = nn.LayerNorm(c)

    def forward(self, x):
        return self.norm(x)


class AvgPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):
        return self.pool(x)
''',
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    write_tree(tmp_path / "a", ALPHA)
    write_tree(tmp_path / "b", BETA)
    return write_config(tmp_path / "cfg.json", {
        "alpha": {"path": str(tmp_path / "a"), "priority": 1},
        "beta": {"path": str(tmp_path / "b"), "priority": 2}})


@pytest.fixture
def ex(corpus: Path, tmp_path: Path):
    with BlockExtractor(corpus, cache_dir=tmp_path / "cache", data_dir=tmp_path / "data") as e:
        yield e


def test_wilson_interval_matches_the_papers_figures():
    lo, hi = stats.wilson_interval(941, 1289)  # the paper: 73.0%, 95% CI 70.5-75.4%
    assert (round(100 * lo, 1), round(100 * hi, 1)) == (70.5, 75.4)
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = stats.wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = stats.wilson_interval(10, 10)
    assert lo == pytest.approx(0.7225, abs=1e-4) and hi == 1.0
    r = stats.Rate(941, 1289)
    assert r.text() == "941/1289 (73.0%, 95% CI 70.5-75.4%)"
    assert r.as_dict() == {"k": 941, "n": 1289, "rate": 0.73, "ci95": [0.7051, 0.7535]}
    assert stats.Rate(0, 0).text() == "-" and stats.Rate(0, 0).as_dict()["rate"] is None


def test_summary_of_a_distribution():
    s = stats.summary([1, 2, 3, 4, 100])
    assert (s["n"], s["mean"], s["median"], s["p90"], s["min"], s["max"]) == (
        5, 22.0, 3.0, 100.0, 1.0, 100.0)
    assert stats.summary([]) is None


def test_counts_per_repository_and_category(ex):
    report = ex.index()
    rep = stats.collect(ex, index_report=report)
    blocks = ex.blocks()
    d = rep.as_dict()
    assert d["blocks"] == len(blocks) == 6
    want = Counter((b.source, b.category) for b in blocks)
    got = Counter({(r["name"], c): n for r in d["repositories"]
                   for c, n in r["categories"].items()})
    assert got == want
    assert [r["name"] for r in d["repositories"]] == ["alpha", "beta"]
    assert {r["name"]: r["files"] for r in d["repositories"]} == {"alpha": 3, "beta": 2}
    cats = {c["name"]: c for c in d["categories"]}
    assert sum(c["blocks"] for c in cats.values()) == 6
    for c in cats.values():
        assert c["by_repository"] == {r: n for (r, cat), n in want.items() if cat == c["name"]}
    assert d["upstream_lines_per_block"]["n"] == 6
    assert d["upstream_lines_per_block"]["max"] == max(b.lines for b in blocks)
    # a cold index: nothing was cached
    assert d["index"]["cache_hit_rate"] == 0.0 and d["index"]["parsed"] == 5
    assert "extraction" not in d and "validation" not in d


def test_a_warm_index_is_all_cache_hits(corpus: Path, tmp_path: Path):
    for expected in (0.0, 1.0):
        with BlockExtractor(corpus, cache_dir=tmp_path / "cache") as e:
            rep = stats.collect(e, index_report=e.index())
            assert rep.as_dict()["index"]["cache_hit_rate"] == expected


def test_extraction_run_success_causes_lines_and_time(ex, tmp_path: Path):
    ex.index()
    # a file edited after indexing cannot be extracted until it is indexed again
    stale = tmp_path / "a" / "alpha" / "stale.py"
    stale.write_text(stale.read_text() + "\n# edited\n")
    rep = stats.collect(ex, extract=True)
    d = rep.as_dict()["extraction"]
    assert d["rate"]["k"] == 5 and d["rate"]["n"] == 6
    assert d["complete"]["k"] == 4  # Broken extracts with an unresolved name
    assert d["causes"] == {"ResolutionError: source changed since indexing": 1,
                           "extracted with unresolved names": 1}
    assert d["unresolved_names"] == {"undefined_helper": 1}
    assert d["seconds_per_block"]["n"] == 6 and d["seconds_per_block"]["min"] >= 0
    assert d["lines_per_block"]["n"] == 5 and d["lines_per_block"]["min"] > 5
    by_repo = {r["name"]: r["extraction"] for r in rep.as_dict()["repositories"]}
    assert (by_repo["alpha"]["k"], by_repo["alpha"]["n"]) == (3, 4)
    assert (by_repo["beta"]["k"], by_repo["beta"]["n"]) == (2, 2)
    text = rep.text()
    assert "5/6 (83.3%, 95% CI" in text and "source changed since indexing" in text


def test_validation_results_passed_in(ex):
    ex.index()
    blocks = {b.name: b for b in ex.blocks()}

    class Report:  # the validator's duck type
        def __init__(self, ok, cause=None):
            self.validated, self.level, self.cause, self.seconds = (
                ok, "imported" if ok else "compiled", cause, 0.5)

    results = {
        blocks["SelfAttention"].key: Report(True),
        blocks["ConvBlock"].key: {"validated": True, "level": "forward_ran", "seconds": 1.5},
        f"alpha:{blocks['Broken'].key}": Report(False, "unresolved_name"),
        "AvgPool": Report(False, "native_op"),
    }
    rep = stats.collect(ex, validations=results)
    v = rep.as_dict()["validation"]
    assert (v["rate"]["k"], v["rate"]["n"]) == (2, 4)
    assert v["rate"]["ci95"] == [round(x, 4) for x in stats.wilson_interval(2, 4)]
    assert v["causes"] == {"unresolved_name": 1, "native_op": 1}
    assert v["seconds_per_block"]["total"] == 3.0
    by_cat = {c["name"]: c.get("validation") for c in rep.as_dict()["categories"]}
    assert by_cat[blocks["AvgPool"].category]["n"] >= 1
    by_repo = {r["name"]: r["validation"] for r in rep.as_dict()["repositories"]}
    assert (by_repo["alpha"]["k"], by_repo["alpha"]["n"]) == (2, 3)
    assert (by_repo["beta"]["k"], by_repo["beta"]["n"]) == (0, 1)
    md = rep.markdown()
    assert "### Validation failure causes" in md and "| native_op | 1 | 50.0% |" in md


class _Row:
    def __init__(self, name, key, repo, category, validated, level):
        self.name, self.key, self.repo, self.category = name, key, repo, category
        self.validated, self.level = validated, level


class _FakeRegistry:
    """The registry's duck type: ``list()`` rows, ``show(name).provenance``."""

    def __init__(self, rows, provenance):
        self.rows, self.prov = rows, provenance

    def list(self):
        return self.rows

    def show(self, name):
        class Saved:
            provenance = self.prov[name]
        return Saved()


def test_validation_results_from_the_registry_provenance(ex):
    ex.index()
    b = {x.name: x for x in ex.blocks()}
    def run(ok, cause, secs):
        return {"validation": {"validated": ok, "level": "imported", "runs": [
            {"validated": ok, "stages": [{"stage": "parse", "ok": True, "seconds": secs}],
             "report": {"validated": ok, "cause": cause, "seconds": secs}}]}}
    reg = _FakeRegistry(
        [_Row("SelfAttention", b["SelfAttention"].key, "alpha", b["SelfAttention"].category,
              True, "imported"),
         _Row("Broken", b["Broken"].key, "alpha", b["Broken"].category, False, "compiled"),
         _Row("Unvalidated", "x:Y", "alpha", "utility", None, None)],
        {"SelfAttention": run(True, None, 2.0), "Broken": run(False, "unresolved_name", 1.0),
         "Unvalidated": {}})
    rep = stats.collect(ex, registry=reg)
    v = rep.as_dict()["validation"]
    assert v["registry_blocks"] == 3
    assert (v["rate"]["k"], v["rate"]["n"]) == (1, 2)
    assert v["causes"] == {"unresolved_name": 1}
    assert v["seconds_per_block"]["mean"] == 1.5


def test_the_real_registry_is_read(ex, tmp_path: Path):
    registry = pytest.importorskip("nnrag_tui.engine.registry")
    ex.index()
    reg = registry.Registry(tmp_path / "data")
    res = ex.extract_single_block("SelfAttention")
    reg.save(res, {"validated": True, "level": "imported", "cause": None, "seconds": 0.25,
                   "stages": [{"stage": "import", "ok": True, "seconds": 0.25}]},
             sources=ex.store.source_roots())
    reg.save(ex.extract_single_block("ConvBlock"), sources=ex.store.source_roots())
    rep = stats.collect(ex, registry=reg)
    v = rep.as_dict()["validation"]
    assert v["registry_blocks"] == 2 and (v["rate"]["k"], v["rate"]["n"]) == (1, 1)


def test_stats_command(capsys, corpus: Path, tmp_path: Path):
    common = ["--config", str(corpus), "--cache-dir", str(tmp_path / "cache"), "--data-dir",
              str(tmp_path / "data")]
    code = main(["stats", "--json", "--extract", "--limit", "2", *common])
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)
    assert d["blocks"] == 6 and d["extraction"]["rate"]["n"] == 2
    assert any("first 2 of 6" in n for n in d["notes"])
    code = main(["stats", "--markdown", "--repo", "beta", *common])
    out, _ = capsys.readouterr()
    assert code == 0 and out.startswith("### Summary")
    assert "| blocks | 2 |" in out and "### Blocks per category" in out
    code = main(["stats", *common])
    out, _ = capsys.readouterr()
    assert code == 0 and "Blocks per repository" in out and "alpha" in out


# -- the statistics screen (optional TUI part; runs on a host app, no index access) ---------
def test_statistics_screen_draws_the_three_charts(ex):
    import asyncio

    from textual.app import App

    from nnrag_tui.tui.messages import Corpus
    from nnrag_tui.tui.screens.stats import BarChart, StatsScreen, bar

    assert bar(0.5, 4) == "██" and bar(1 / 32, 4) == "▏" and bar(0.0, 4) == ""
    ex.index()
    blocks, sources = tuple(ex.blocks()), tuple(ex.sources())

    class Outcome:
        def __init__(self, ok):
            self.validated, self.level, self.seconds = ok, "imported", 0.1
            self.cause = None if ok else "native_op"

    outcomes = {f"{b.source}|{b.key}": Outcome(b.source == "alpha") for b in blocks}

    class History:
        def get(self, bid):
            return outcomes.get(bid)

    class Host(App):
        def __init__(self):
            super().__init__()
            self.corpus, self.history, self.closed = Corpus(blocks, sources), History(), 0

        def show_screen(self, name):
            self.closed += 1

        def on_mount(self):
            self.push_screen(StatsScreen())

    async def scenario():
        app = Host()
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            charts = {c.id: c for c in app.screen.query(BarChart)}
            repos = charts["stats-repos"].rows
            assert [(r[0], r[2]) for r in repos] == [("alpha", "4 (66.7%)"),
                                                     ("beta", "2 (33.3%)")]
            assert repos[0][1] == 1.0 and repos[1][1] == 0.5
            assert sum(int(r[2].split()[0]) for r in charts["stats-categories"].rows) == 6
            assert charts["stats-pass"].border_subtitle.startswith("all: 4/6 (66.7%, 95% CI")
            summary = str(app.screen.query_one("#stats-summary").render())
            assert "6 blocks in 2 repositories" in summary and "native_op 2" in summary
            await pilot.press("escape")
            assert app.closed == 1

    asyncio.run(scenario())
