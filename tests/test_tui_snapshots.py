"""One screenshot per screen (pytest-textual-snapshot's ``snap_compare``; ``pytest
--snapshot-update`` accepts a changed one after a look at the report).

Deterministic: fixed terminal sizes, the corpus always at the same path (paths show in the
header and in the regenerated file's provenance header; a lock keeps two test sessions on one
machine from sharing it), scripted validation with fixed timings, no index duration in the
status line (shown from 1 s: a busy machine can take that long), no cursor blink, no toasts.
"""
from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_textual_snapshot import node_to_report_path
from snapshot_text import mismatch
from textual.widgets import Input
from tui_fixtures import (
    ATTENTION,
    CONV,
    LOSSES,
    FakeValidation,
    RecordingApp,
    settle,
    write_config,
    write_deps_corpus,
    write_package,
)

ROOT = Path("/tmp/nnrag-tui-snapshots")


@pytest.fixture(autouse=True)
def no_index_duration(monkeypatch) -> None:
    import nnrag_tui.tui.app

    monkeypatch.setattr(nnrag_tui.tui.app, "SHOW_SECONDS_FROM", float("inf"))


@pytest.fixture
def fixed_root() -> Iterator[Path]:
    ROOT.parent.mkdir(exist_ok=True)
    with open(ROOT.parent / "nnrag-tui-snapshots.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(ROOT, ignore_errors=True)
        ROOT.mkdir()
        try:
            yield ROOT
        finally:
            shutil.rmtree(ROOT, ignore_errors=True)


@pytest.fixture
def screen_matches(snap_compare, request):
    """``snap_compare``, failing with what differs (as text) where the screens differ."""

    def compare(app, **kwargs) -> None:
        if not snap_compare(app, **kwargs):
            pytest.fail(mismatch(node_to_report_path(request.node)), pytrace=False)

    return compare


def app_for(root: Path, which: str = "fix") -> RecordingApp:
    if which == "deps":
        config = write_deps_corpus(root)
    else:
        src = write_package(root / "fix", "fixpkg",
                            {"attention": ATTENTION, "conv": CONV, "losses": LOSSES})
        config = write_config(root / "config.json", {"fix": {"path": str(src)}})
    return RecordingApp(config, cache_dir=root / "cache", data_dir=root / "data",
                        settings_dir=root / "settings", validation=FakeValidation())


def prepared(*keys: str, after=None):
    """A ``run_before``: wait for the index and the preview, press ``keys`` (settling after
    each), run ``after(app)``, then make the screen still."""

    async def run_before(pilot) -> None:
        app = pilot.app
        await settle(app, pilot)
        for key in keys:
            await pilot.press(key)
            await settle(app, pilot)
        if after is not None:
            after(app)
            await settle(app, pilot)
        for inp in app.screen.query(Input):
            inp.cursor_blink = False
        app.clear_notifications()
        await pilot.pause()

    return run_before


def test_library_80x24(fixed_root: Path, screen_matches) -> None:
    screen_matches(app_for(fixed_root), terminal_size=(80, 24),
                   run_before=prepared("j"))


def test_library_dependencies_200x50(fixed_root: Path, screen_matches) -> None:
    def open_make_divisible(app) -> None:
        tree = app.library.query_one("#deps-tree")
        node = next(n for n in tree.root.children if n.data.name == "make_divisible")
        node.expand()
        tree.move_cursor(node)

    screen_matches(app_for(fixed_root, "deps"), terminal_size=(200, 50),
                   run_before=prepared("j", "d", after=open_make_divisible))


def test_validation_log_100x30(fixed_root: Path, screen_matches) -> None:
    screen_matches(app_for(fixed_root), terminal_size=(100, 30),
                   run_before=prepared("V", "l"))


def test_triage_100x30(fixed_root: Path, screen_matches) -> None:
    screen_matches(app_for(fixed_root), terminal_size=(100, 30),
                   run_before=prepared("V", "t", "down", "down"))


def test_registry_100x30(fixed_root: Path, screen_matches) -> None:
    screen_matches(app_for(fixed_root), terminal_size=(100, 30),
                   run_before=prepared("v", "s", "y", "g"))


def test_save_dialog_80x24(fixed_root: Path, screen_matches) -> None:
    screen_matches(app_for(fixed_root), terminal_size=(80, 24),
                   run_before=prepared("v", "s"))


def test_help_80x24(fixed_root: Path, screen_matches) -> None:
    screen_matches(app_for(fixed_root), terminal_size=(80, 24),
                   run_before=prepared("f1"))


def test_stats_100x30(fixed_root: Path, screen_matches) -> None:
    screen_matches(app_for(fixed_root), terminal_size=(100, 30),
                   run_before=prepared("V", "S"))
