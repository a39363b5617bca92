"""Fixtures and helpers for the TUI tests (imported as ``tui_fixtures``; pytest puts ``tests/``
on ``sys.path``). A tiny corpus written into ``tmp_path``, an app that records its
notifications, and a way to run a pilot scenario without an async pytest plugin."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.worker import WorkerCancelled, WorkerFailed

from nnrag_tui.tui.app import NnragApp
from nnrag_tui.tui.screens.library import SEARCH_DELAY

SIZE = (120, 40)

ATTENTION = '''\
import torch.nn as nn


class FooAttention(nn.Module):
    """Attends to foo."""

    def forward(self, x):
        return x


class BarAttention(FooAttention):
    def forward(self, x):
        return x * 2
'''

CONV = '''\
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x):
        return self.conv(x)


def helper(x):
    return x
'''

LOSSES = '''\
from torch import nn


class FocalLoss(nn.Module):
    def forward(self, x, y):
        return (x - y).abs().mean()


class NotABlock:
    def forward(self, x):
        return x
'''

FIX_BLOCKS = {"FooAttention", "BarAttention", "ConvBlock", "FocalLoss"}

OTHER = '''\
import torch.nn as nn


class WindowPool(nn.Module):
    def forward(self, x):
        return x
'''


def write_package(root: Path, name: str, modules: dict[str, str]) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    for mod, text in modules.items():
        (pkg / f"{mod}.py").write_text(text)
    return root


def write_config(path: Path, repos: dict[str, dict]) -> Path:
    path.write_text(json.dumps(repos))
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A config with one local source ``fix`` holding four blocks."""
    src = write_package(tmp_path / "fix", "fixpkg",
                        {"attention": ATTENTION, "conv": CONV, "losses": LOSSES})
    return write_config(tmp_path / "config.json", {"fix": {"path": str(src)}})


@pytest.fixture
def two_corpora(tmp_path: Path) -> Path:
    """``fix`` (four blocks) and ``other`` (one block, WindowPool)."""
    fix = write_package(tmp_path / "fix", "fixpkg",
                        {"attention": ATTENTION, "conv": CONV, "losses": LOSSES})
    other = write_package(tmp_path / "other", "otherpkg", {"pool": OTHER})
    return write_config(tmp_path / "config.json",
                        {"fix": {"path": str(fix)}, "other": {"path": str(other)}})


class RecordingApp(NnragApp):
    """NnragApp that keeps every notification it raised, as (severity, title, message)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.notes: list[tuple[str, str, str]] = []

    def notify(self, message, *, title="", severity="information", timeout=None,
               markup=True) -> None:
        self.notes.append((severity, title, str(message)))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)


def make_app(config: Path | None, tmp_path: Path) -> RecordingApp:
    return RecordingApp(config, cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    """Runs an async pilot scenario (the project has no async pytest plugin)."""
    asyncio.run(scenario())


async def settle(app: NnragApp, pilot) -> None:
    """Waits for the index worker and for the messages it posted to be handled. A failed
    worker is the app's to report (as a notification), not the test's to raise."""
    try:
        await app.workers.wait_for_complete()
    except (WorkerFailed, WorkerCancelled):
        pass
    await pilot.pause()
    await pilot.pause()


async def settle_search(pilot) -> None:
    """Waits out the search debounce."""
    await pilot.pause(SEARCH_DELAY + 0.1)
    await pilot.pause()


def names(app: NnragApp) -> list[str]:
    return [b.name for b in app.library.results.blocks]
