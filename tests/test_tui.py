"""The terminal app, driven through Textual's pilot over a tiny corpus in ``tmp_path``."""
# ruff: noqa: F811  (pytest fixtures imported from tui_fixtures are parameters by design)

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from textual.widgets import Input, Static
from tui_fixtures import (  # noqa: F401  (corpus, two_corpora: fixtures)
    FIX_BLOCKS,
    OTHER,
    SIZE,
    corpus,
    make_app,
    names,
    run,
    settle,
    settle_search,
    two_corpora,
)

from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.progress import Cancelled, Progress
from nnrag_tui.tui.app import EXIT_ERROR, NnragApp, all_binding_ids, run_app
from nnrag_tui.tui.screens.dialogs import ConfirmScreen, PromptScreen
from nnrag_tui.tui.screens.help import HelpScreen
from nnrag_tui.tui.screens.library import LibraryScreen
from nnrag_tui.tui.screens.registry import RegistryScreen
from nnrag_tui.tui.screens.stats import StatsScreen
from nnrag_tui.tui.screens.triage import TriageScreen
from nnrag_tui.tui.widgets.categories import CategoryList
from nnrag_tui.tui.widgets.results import ResultsTable
from nnrag_tui.tui.widgets.sources import SourcesTree
from nnrag_tui.tui.widgets.validation_log import ValidationLog

ROOT = Path(__file__).resolve().parents[1]


def test_results_categories_and_clicks(corpus: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert set(names(app)) == FIX_BLOCKS
            assert not app.indexing
            status = app.library.status.text
            assert status.startswith("4 blocks · 4 files: 4 parsed")
            sources = app.library.query_one(SourcesTree)
            assert [r["name"] for r in sources.rows] == ["fix"]
            assert sources.rows[0]["blocks"] == 4
            assert not [n for n in app.notes if n[0] == "error"]
            # a click on a row moves the cursor there (row 0 is the header)
            table = app.library.results
            await pilot.click(ResultsTable, offset=(3, 1 + 3))
            await settle(app, pilot)
            assert table.cursor_row == 2
            assert app.library.preview.block == table.blocks[2]
            # categories: counts, and the highlighted one filters
            categories = app.library.query_one(CategoryList)
            prompt = str(categories.get_option("attention").prompt)
            assert prompt.split()[-1] == "2"
            categories.focus()
            await pilot.press("down")  # "all" -> "attention"
            await pilot.pause()
            assert set(names(app)) == {"FooAttention", "BarAttention"}
            categories.select_category("loss")
            await pilot.pause()
            assert names(app) == ["FocalLoss"]
            # the category filter and the search combine; counts follow the search
            await pilot.press("slash", *"conv", "enter")
            assert names(app) == []
            assert "No blocks match" in app.library.results.empty_text
            assert str(categories.get_option("convolution").prompt).split()[-1] == "1"
            assert str(categories.get_option("attention").prompt).split()[-1] == "0"
            categories.select_category(None)
            await pilot.pause()
            assert names(app) == ["ConvBlock"]

    run(scenario)


def test_search_narrows_the_results_once_typing_settles(corpus: Path, tmp_path: Path,
                                                         monkeypatch) -> None:
    # a debounce longer than a busy CI host's pause between two simulated keystrokes
    monkeypatch.setattr("nnrag_tui.tui.screens.library.SEARCH_DELAY", 1.0)

    async def scenario() -> None:
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("slash")
            assert isinstance(app.focused, Input)
            await pilot.press(*"focal")
            assert len(names(app)) == 4  # not refiltered on every keystroke
            await settle_search(pilot)
            assert names(app) == ["FocalLoss"]
            # letters in order: f-c-l matches FocalLoss and nothing else
            app.library.query_one("#search", Input).value = ""
            await pilot.press(*"fcl")
            await settle_search(pilot)
            assert names(app) == ["FocalLoss"]
            # a qualified path; enter filters at once and goes to the results
            app.library.query_one("#search", Input).value = ""
            await pilot.press(*"fixpkg.conv", "enter")
            assert names(app) == ["ConvBlock"]
            assert isinstance(app.focused, ResultsTable)
            # "/" selects the old query, so typing replaces it; j there is just a letter;
            # down goes to the results, escape too (with the filter applied)
            await pilot.press("slash", "j")
            assert app.library.query_one("#search", Input).value == "j"
            await pilot.press("down")
            assert isinstance(app.focused, ResultsTable)
            await pilot.press("slash", *"attention", "escape")
            assert isinstance(app.focused, ResultsTable)
            assert set(names(app)) == {"FooAttention", "BarAttention"}

    run(scenario)


def test_repositories_filter_and_an_unavailable_one_is_reported(two_corpora: Path,
                                                                  tmp_path: Path) -> None:
    repos = json.loads(two_corpora.read_text())
    repos["gone"] = {"path": str(tmp_path / "nowhere")}
    two_corpora.write_text(json.dumps(repos))

    async def scenario() -> None:
        app = make_app(two_corpora, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert set(names(app)) == FIX_BLOCKS | {"WindowPool"}
            warnings = [n for n in app.notes if n[0] == "warning"]
            assert warnings and warnings[0][1] == "gone: not indexed"
            sources = app.library.query_one(SourcesTree)
            rows = {r["name"]: r for r in sources.rows}
            assert rows["gone"].get("error")
            gone = sources.root.children[3]
            assert gone.data.text == "gone"
            label = sources.render_label(gone, sources.rich_style, sources.rich_style).plain
            assert label.startswith("▶ gone ✗")
            sources.focus()
            await pilot.press("down", "down")  # all -> fix -> other
            await pilot.pause()
            assert names(app) == ["WindowPool"]
            await pilot.press("up")
            await pilot.pause()
            assert set(names(app)) == FIX_BLOCKS

    run(scenario)


def test_highlighted_row_shows_its_regenerated_file_and_upstream(corpus: Path,
                                                                   tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            table = app.library.results
            preview = app.library.preview
            order = names(app)
            assert preview.block == table.blocks[0]
            target = order.index("FooAttention")
            for _ in range(target):
                await pilot.press("j")
            await settle(app, pilot)
            assert table.cursor_block.name == "FooAttention"
            assert preview.block.name == "FooAttention"
            # the regenerated file: provenance header on top, the class, __all__
            code = preview.source_text
            assert code.startswith("# Generated by nnrag")
            assert "# block: fixpkg.attention:FooAttention (attention)" in code
            assert "import torch.nn as nn\n" in code and code.rstrip().endswith(
                '__all__ = ["FooAttention"]')
            shown = str(app.library.query_one("#preview-code", Static).content).splitlines()
            assert shown[0] == " 1 │ # Generated by nnrag 0.1.0: the block `FooAttention` and " \
                               "every definition it"
            assert "regenerated" in preview.border_title
            assert "definition" in preview.border_subtitle
            # u: the upstream definition with its real line numbers
            await pilot.press("u")
            assert preview.source_text.splitlines() == [
                "class FooAttention(nn.Module):",
                '    """Attends to foo."""',
                "",
                "    def forward(self, x):",
                "        return x",
            ]
            shown = str(app.library.query_one("#preview-code", Static).content)
            assert shown.splitlines()[0] == "4 │ class FooAttention(nn.Module):"
            assert "fixpkg/attention.py:4-8" in preview.border_subtitle
            # c copies what is on show
            await pilot.press("c")
            assert app.clipboard == preview.source_text
            await pilot.press("u")
            assert preview.source_text.startswith("# Generated by nnrag")
            await pilot.press("k")
            await settle(app, pilot)
            assert preview.block == table.blocks[target - 1]
            assert preview.source_text.startswith("# Generated by nnrag")
            # enter moves into the source, escape comes back to the results
            await pilot.press("enter")
            assert app.focused.id == "preview-scroll"
            await pilot.press("escape")
            assert isinstance(app.focused, ResultsTable)

    run(scenario)


def test_reindex_picks_up_new_and_changed_files(corpus: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            table = app.library.results
            table.move_cursor(names(app).index("FocalLoss"))
            await settle(app, pilot)
            (tmp_path / "fix" / "fixpkg" / "pool.py").write_text(OTHER)
            losses = tmp_path / "fix" / "fixpkg" / "losses.py"
            # two lines above the class: its lines move, its key stays
            losses.write_text("# a comment\n# another\n" + losses.read_text().replace(
                "abs().mean()", "pow(2).mean()"))
            await pilot.press("r")
            await settle(app, pilot)
            assert set(names(app)) == FIX_BLOCKS | {"WindowPool"}
            assert "2 parsed" in app.library.status.text
            assert table.cursor_block.name == "FocalLoss"
            assert table.cursor_block.line == 6
            assert "pow(2).mean()" in app.library.preview.source_text  # regenerated again
            assert "# a comment" not in app.library.preview.source_text

    run(scenario)


def test_a_second_start_reads_the_cached_index(corpus: Path, tmp_path: Path) -> None:
    with BlockExtractor(corpus, cache_dir=tmp_path / "cache", data_dir=tmp_path / "data") as ex:
        ex.index()  # what a first session leaves behind

    async def second() -> None:
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert set(names(app)) == FIX_BLOCKS
            assert "0 parsed, 4 unchanged" in app.library.status.text

    run(second)


def test_index_then_cancel_then_index_again(corpus: Path, tmp_path: Path) -> None:
    started = threading.Event()

    def slow_index(policy="missing", progress=None, cancel=None, on_wait=None):
        for done in range(1, 10_000):
            progress(Progress("parse", "fix", done, 10_000, f"file{done}.py"))
            started.set()
            if cancel():
                raise Cancelled("indexing cancelled")
            threading.Event().wait(0.001)
        raise AssertionError("never cancelled")

    async def scenario() -> None:
        app = make_app(corpus, tmp_path)
        real_index = app.extractor.index
        app.extractor.index = slow_index
        async with app.run_test(size=SIZE) as pilot:
            while not started.is_set():
                await pilot.pause(0.01)
            await pilot.pause(0.1)
            assert app.indexing
            assert "parsed" in app.library.status.text and "/10,000 files" in \
                app.library.status.text
            await pilot.press("escape")
            for _ in range(200):
                if not app.indexing:
                    break
                await pilot.pause(0.01)
            assert not app.indexing
            assert "cancelled" in app.library.status.text.lower()
            assert names(app) == []  # nothing was ever indexed
            assert app.is_running
            # r indexes again, to the end this time: the blocks and their source come
            app.extractor.index = real_index
            await pilot.press("r")
            await settle(app, pilot)
            assert set(names(app)) == FIX_BLOCKS
            assert app.index_complete
            assert app.library.preview.source_text.startswith("# Generated by nnrag")

    run(scenario)


def test_progress_messages_are_throttled(corpus: Path, tmp_path: Path) -> None:
    posted: list[Progress] = []
    from nnrag_tui.tui.app import _Throttle

    throttle = _Throttle(posted.append)
    for done in range(1, 5001):
        throttle(Progress("parse", "fix", done, 5000, f"f{done}.py"))
    assert len(posted) < 20  # a tight loop takes well under a second
    assert posted[0].done == 1 and posted[-1].done == 5000  # first and last always


def test_engine_error_is_a_notification_not_a_crash(corpus: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        (tmp_path / "cache").write_text("a file where the cache directory should be")
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            errors = [n for n in app.notes if n[0] == "error"]
            assert errors and errors[0][1] == "Indexing failed"
            assert "cache" in errors[0][2] or "index" in errors[0][2]
            assert app.is_running and not app.indexing
            assert app.library.status.text.startswith("Indexing failed")
            await pilot.press("r")  # still usable; fails the same way, again politely
            await settle(app, pilot)
            assert len([n for n in app.notes if n[0] == "error"]) == 2

    run(scenario)


def test_bad_config_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    assert run_app(config=tmp_path / "missing.json", cache_dir=tmp_path / "c") == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nnrag: error: config file not found")

    bad = tmp_path / "bad.json"
    bad.write_text('{"fix": {"path": 3}}')
    assert run_app(config=bad, cache_dir=tmp_path / "c") == EXIT_ERROR
    assert "'path' must be a non-empty string" in capsys.readouterr().err


def test_cli_without_command_rejects_a_bad_config(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "nnrag_tui", "--config",
                           str(tmp_path / "missing.json"), "--cache-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("nnrag: error: config file not found")
    assert proc.stdout == ""


def test_help_lists_the_keys(corpus: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            text = app.screen.text
            for words in ("Quit", "Re-index", "Search", "Next", "Previous", "Copy", "Help",
                          "Validate", "Save", "Triage", "Registry", "Upstream", "  validate",
                          "  results.mark"):
                assert words in text, words
            settings = str(app.screen.query_one("#help-settings", Static).content)
            assert str(tmp_path / "settings" / "settings.json") in settings
            table = str(app.screen.query_one("#help-table", Static).content)
            assert "lines are the class's own lines upstream" in table
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, LibraryScreen)
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)

    run(scenario)


def test_every_binding_has_an_id_and_a_tooltip() -> None:
    ids = []
    for owner in (NnragApp, LibraryScreen, ResultsTable, HelpScreen, TriageScreen,
                  RegistryScreen, StatsScreen, ConfirmScreen, PromptScreen, ValidationLog):
        for b in owner.BINDINGS:
            assert b.id and b.tooltip, (owner.__name__, b.key)
            ids.append(b.id)
    assert len(ids) == len(set(ids))
    assert set(ids) == all_binding_ids()
    keys = {k for b in NnragApp.BINDINGS + LibraryScreen.BINDINGS for k in b.key.split(",")}
    assert {"q", "slash", "r", "escape", "j", "k", "f1", "question_mark", "v", "s", "t",
            "g"} <= keys


def test_results_table_handles_20k_rows(tmp_path: Path) -> None:
    from nnrag_tui.engine.facts import Block
    from nnrag_tui.tui.messages import Corpus

    blocks = tuple(Block("big", f"big.m{i % 300}", f"Block{i}", "big/m.py", 1, 5,
                         "utility", "default") for i in range(20_000))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"big": {"path": str(tmp_path)}}))

    async def scenario() -> None:
        app = make_app(config, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            app.library.load_corpus(Corpus(blocks, (), {}))
            await pilot.pause()
            table = app.library.results
            assert table.row_count == 20_000
            table.focus()
            await pilot.press("end")
            await pilot.pause()
            assert table.cursor_block.name == "Block19999"
            last_line = table.render_line(table.scrollable_content_region.height - 1).text
            assert last_line.lstrip().startswith("Block19999")
            await pilot.press("slash", *"block1999", "enter")
            found = names(app)
            assert found[0] == "Block1999"  # exact name first, then the prefixes
            assert set(found[1:11]) == {f"Block1999{d}" for d in range(10)}
            assert "Block10999" in found[11:]  # letters in order, ranked after

    run(scenario)


NO_TORCH = textwrap.dedent("""
    import asyncio, sys
    from nnrag_tui.tui.app import NnragApp

    async def main():
        config = sys.argv[1] or None
        app = NnragApp(config, cache_dir=sys.argv[2], data_dir=sys.argv[2])
        async with app.run_test(size=(120, 40)) as pilot:
            async def settle():
                for _ in range(3):
                    try:
                        await app.workers.wait_for_complete()
                    except Exception:
                        pass
                    await pilot.pause(0.2)
            await settle()
            assert app.library.results.row_count >= 4, app.library.status.text
            await pilot.press("j", "j", "slash", "a", "enter")
            await settle()
            assert app.library.preview.source_text.startswith("# Generated")
            if sys.argv[3] == "validate":  # the real sandbox: torch in its own process
                await pilot.press("v")
                await settle()
                bid = next(iter(app.history.outcomes))
                outcome = app.history.outcomes[bid]
                assert outcome.validated, outcome.report
        app.close_engine()

    asyncio.run(main())
    print("torch" in sys.modules, any(m.startswith("torch.") for m in sys.modules))
""")


def _torch_distribution() -> bool:
    from importlib import metadata

    try:
        metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("which", ["fixture", "default"])
def test_the_app_never_imports_torch(which: str, corpus: Path, tmp_path: Path) -> None:
    """Runs the app in a fresh interpreter. On the fixture corpus it also validates a block in
    the real sandbox (torch is imported there, in another process). The built-in corpus
    (torch's own nn/modules, 28 files) goes through the engine's process pool, which a
    Textual app used to break."""
    torch = _torch_distribution()
    if which == "default" and not torch:
        pytest.skip("the built-in corpus needs the torch distribution installed")
    config = str(corpus) if which == "fixture" else ""
    validate = "validate" if which == "fixture" and torch else "no"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NNRAG_CONFIG_DIR=str(tmp_path / "settings"))
    proc = subprocess.run([sys.executable, "-c", NO_TORCH, config, str(tmp_path / "c"),
                           validate], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("module", ["nnrag_tui.tui.app", "nnrag_tui.cli"])
def test_importing_the_front_ends_does_not_import_torch(module: str) -> None:
    code = f"import sys, {module}; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=False)
    assert proc.stdout.strip() == "False", proc.stderr


def test_validation_log_keeps_the_newest_line_in_view(corpus: Path, tmp_path: Path) -> None:
    """Lines written while the log's tab is hidden are in view when it opens; scrolling up
    stops the following (new lines do not pull the view away), the end resumes it."""
    from nnrag_tui.tui.widgets.validation_log import LogEntry

    async def scenario() -> None:
        app = make_app(corpus, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            log = app.library.log_pane
            for i in range(60):  # the preview tab is showing: the log is hidden
                log.write(LogEntry("note", f"line {i}"))
            await pilot.press("l")
            await settle(app, pilot)
            assert log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y
            log.focus()
            await pilot.press("up", "up", "up")
            await settle(app, pilot)
            held = log.scroll_y
            assert held < log.max_scroll_y
            log.write(LogEntry("note", "line 60"))
            await settle(app, pilot)
            assert log.scroll_y == held
            await pilot.press("end")
            log.write(LogEntry("note", "line 61"))
            await settle(app, pilot)
            assert log.scroll_y == log.max_scroll_y
            assert log.lines[-1] == "line 61"

    run(scenario)
