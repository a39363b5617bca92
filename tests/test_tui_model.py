"""The app's Textual-free parts: the validation history, the dependency graph, settings,
themes and the validation queue. No app runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.color import Color
from textual.theme import BUILTIN_THEMES
from tui_fixtures import write_deps_corpus

from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.facts import Block
from nnrag_tui.engine.validate import StageVerdict, ValidationReport, Validator
from nnrag_tui.tui.blockview import extract
from nnrag_tui.tui.history import (
    FAILED,
    IGNORED,
    NOT_RUN,
    VALIDATED,
    ValidationHistory,
    block_id,
    offending,
    offending_line,
    report_of,
)
from nnrag_tui.tui.settings import Settings, config_dir
from nnrag_tui.tui.themes import SHIPPED, load_themes
from nnrag_tui.tui.validation import ValidationQueue


def block(name: str, source: str = "repo") -> Block:
    return Block(source, "pkg.mod", name, "pkg/mod.py", 1, 3, "utility", "default")


def report(name: str, ok: bool, cause: str | None = None, **detail) -> ValidationReport:
    stages = (StageVerdict("parse", True, 0.001),
              StageVerdict("static", ok, 0.002, "" if ok else "line 3: undefined name 'x'",
                           {} if ok else {"undefined": [{"name": "x", "line": 3}]}))
    return ValidationReport(name, stages, ok, "static_clean" if ok else "compiled", cause,
                            None if ok else "undefined: x", dict(detail), 0.01)


CODE = "import torch\n\nclass A:\n    y = x\n"


# -- history ---------------------------------------------------------------------------------
def test_history_records_statuses_and_survives_a_restart(tmp_path: Path) -> None:
    h = ValidationHistory(tmp_path)
    a, b, c = block("A"), block("B"), block("C", "other")
    assert h.status(block_id(a)) == NOT_RUN
    h.record(a, report("A", True), CODE)
    h.record(b, report("B", False, "unresolved_name", where=[{"line": 4}]), CODE)
    h.record(c, report("C", False, "other"), CODE)
    h.set_ignored(block_id(c), True)
    assert [h.status(block_id(x)) for x in (a, b, c)] == [VALIDATED, FAILED, IGNORED]
    assert [o.name for o in h.failures()] == ["B"]
    assert [o.name for o in h.failures(ignored=True)] == ["C"]
    assert h.get(block_id(b)).offending == {"line": 4, "context": [
        [2, ""], [3, "class A:"], [4, "    y = x"]]}
    h.save()
    again = ValidationHistory(tmp_path)
    assert again.problem is None
    assert [again.status(block_id(x)) for x in (a, b, c)] == [VALIDATED, FAILED, IGNORED]
    assert again.get(block_id(a)).code_sha == h.get(block_id(a)).code_sha
    # a report read back is the engine's type again (what the registry records)
    r = report_of(again.get(block_id(b)))
    assert isinstance(r, ValidationReport) and not r.validated
    assert [s.stage for s in r.stages] == ["parse", "static"] and r.stages[1].ok is False


def test_a_damaged_history_is_reported_and_replaced(tmp_path: Path) -> None:
    (tmp_path / "validations.json").write_text("{not json")
    h = ValidationHistory(tmp_path)
    assert h.problem and "validations.json" in h.problem
    assert h.outcomes == {}
    (tmp_path / "validations.json").write_text(json.dumps({"outcomes": [{"id": 1}]}))
    assert "damaged" in ValidationHistory(tmp_path).problem


def test_offending_line_from_each_kind_of_failure() -> None:
    syntax = {"cause_detail": {"line": 7}}
    static = {"cause_detail": {"where": [{"name": "x", "line": 12}]}}
    frames = {"cause_detail": {"where": "forward, line 30"}, "stages": [
        {"stage": "forward", "ok": False, "detail": {"error": {"frames": [
            {"file": "/usr/lib/torch/nn.py", "line": 99},
            {"file": "/tmp/block/block.py", "line": 31},
            {"file": "/usr/lib/torch/functional.py", "line": 5}]}}}]}
    where_only = {"cause_detail": {"where": "forward, line 30"}}
    assert [offending_line(r) for r in (syntax, static, frames, where_only, {})] == [
        7, 12, 31, 30, None]
    assert offending({"cause_detail": {"line": 99}}, CODE) is None  # not in the file


def test_the_real_validator_report_round_trips(tmp_path: Path) -> None:
    # stages 1-3 of the engine's validator need no sandbox
    r = Validator(deepest="static").validate("class A:\n    def f(self):\n        return q\n")
    h = ValidationHistory(tmp_path)
    o = h.record(block("A"), r, "class A:\n    def f(self):\n        return q\n")
    assert o.cause == "unresolved_name" and o.offending["line"] == 3
    assert report_of(o).as_dict()["stages"] == r.as_dict()["stages"]


# -- the dependency graph ----------------------------------------------------------------------
def test_dependency_graph_of_a_block(tmp_path: Path) -> None:
    config = write_deps_corpus(tmp_path)
    with BlockExtractor(config, cache_dir=tmp_path / "c", data_dir=tmp_path / "d") as ex:
        ex.index()
        mixer = ex.find_block("Mixer")[0]
        view = extract(ex, mixer)
        assert view.ok and view.graph is not None
        g = view.graph
        kids = g.children(g.root)
        assert [(k.name, k.kind) for k in kids] == [
            ("Act", "class"), ("make_divisible", "function"), ("SCALE", "constant"),
            ("missing_offset", "unresolved"), ("externals", "externals")]
        md = kids[1]
        assert [(k.name, k.kind, k.how) for k in g.children(md)] == [
            ("_round", "function", "local")]
        snippet = g.source(md)
        assert snippet.where == "mix · mixpkg/util.py:8-9"
        assert snippet.chunks[0][0] == 8
        assert g.source(kids[3]).where.startswith("missing_offset is used here")
        assert g.source(kids[4]).text == "import math\nimport torch.nn as nn"
        # a block that cannot be extracted is a view with an error, not an exception
        ghost = Block("mix", "mixpkg.nowhere", "Ghost", "mixpkg/nowhere.py", 1, 2, "utility",
                      "default")
        bad = extract(ex, ghost)
        assert not bad.ok and "not indexed" in bad.error and bad.graph is None


# -- settings and themes -----------------------------------------------------------------------
def test_settings_load_save_and_problems(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NNRAG_CONFIG_DIR", str(tmp_path / "env"))
    assert config_dir() == tmp_path / "env"
    assert config_dir(tmp_path / "x") == tmp_path / "x"
    s = Settings.load()
    assert (s.theme, s.keymap, s.problem) == (None, {}, None)
    s.theme = "nnrag-light"
    s.keymap["validate"] = "w"
    assert s.save()
    again = Settings.load()
    assert (again.theme, again.keymap) == ("nnrag-light", {"validate": "w"})
    broken = tmp_path / "env" / "settings.json"
    broken.write_text("{oops")
    bad = Settings.load()
    assert bad.problem and "not valid JSON" in bad.problem
    bad.theme = "x"
    assert bad.save() is False and broken.read_text() == "{oops"  # left as it was
    broken.write_text(json.dumps({"theme": 3, "keymap": ["v"]}))
    odd = Settings.load()
    assert "'theme'" in odd.problem and "'keymap'" in odd.problem
    assert (odd.theme, odd.keymap) == (None, {})


def _contrast(a: Color, b: Color) -> float:
    def lum(c: Color) -> float:
        def ch(v: int) -> float:
            x = v / 255
            return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
        return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b)

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("name,dark", [("nnrag-dark", True), ("nnrag-light", False)])
def test_shipped_themes_are_readable(name: str, dark: bool) -> None:
    themes, problems = load_themes([SHIPPED])
    assert problems == []
    theme = {t.name: t for t in themes}[name]
    assert theme.dark is dark
    colors = theme.to_color_system().generate()
    for ground in ("background", "surface", "panel"):
        base = Color.parse(colors[ground])
        assert _contrast(base + Color.parse(colors["foreground"]), base) >= 7, ground
        for text in ("text-primary", "text-accent", "text-error", "text-success",
                     "text-warning", "text-secondary", "foreground-muted"):
            fg = base + Color.parse(colors[text])
            assert _contrast(fg, base) >= 4.5, (ground, text)


def test_user_themes_override_and_bad_ones_are_reported(tmp_path: Path) -> None:
    (tmp_path / "mine.json").write_text(json.dumps({"name": "nnrag-dark", "primary": "#ff0000",
                                                    "dark": True}))
    (tmp_path / "bad.json").write_text(json.dumps({"name": "bad", "primary": "not-a-colour"}))
    (tmp_path / "odd.json").write_text(json.dumps({"name": "odd", "primary": "#000",
                                                   "sparkle": True}))
    themes, problems = load_themes([SHIPPED, tmp_path])
    by_name = {t.name: t for t in themes}
    assert by_name["nnrag-dark"].primary == "#ff0000"
    assert "bad" not in by_name and "odd" not in by_name
    assert len(problems) == 2 and any("sparkle" in p for p in problems)
    assert not set(by_name) & set(BUILTIN_THEMES) - {"nnrag-dark"}


# -- the validation queue ----------------------------------------------------------------------
def test_validation_queue_keeps_order_and_each_block_once() -> None:
    q = ValidationQueue()
    a, b, c = block("A"), block("B"), block("C")
    assert [j.block.name for j in q.add([a, b, a])] == ["A", "B"]
    job = q.next()
    assert job.block.name == "A" and len(q) == 1
    assert [j.block.name for j in q.add([a, c])] == ["C"]  # A is running: not again
    assert [j.block.name for j in q.clear()] == ["B", "C"]
    q.done()
    assert q.next() is None and q.current is None
    assert [j.number for j in q.add([a])] == [4]
