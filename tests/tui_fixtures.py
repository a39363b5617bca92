"""Fixtures and helpers for the TUI tests (imported as ``tui_fixtures``; pytest puts ``tests/``
on ``sys.path``). Tiny corpora written into ``tmp_path``, an app that records its
notifications and validates with a scripted validator (no sandbox, no torch), and a way to run
a pilot scenario without an async pytest plugin."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.worker import WorkerCancelled, WorkerFailed, WorkerState

from nnrag_tui.engine.validate import LEVELS, STAGES, StageVerdict, ValidationReport
from nnrag_tui.tui.app import NnragApp
from nnrag_tui.tui.screens.library import EXTRACT_DELAY

SIZE = (100, 30)

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

# A block with a dependency of every kind: a helper function and a constant from another
# module, a class re-exported by a package, an external import, an unresolved name.
MIXER = '''\
import math

import torch.nn as nn

from .acts import Act
from .util import SCALE, make_divisible


class Mixer(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.dim = make_divisible(dim * SCALE)
        self.act = Act()

    def forward(self, x):
        return self.act(x) * math.sqrt(self.dim) + missing_offset
'''

UTIL = '''\
SCALE = 2


def _round(v):
    return int(v + 0.5)


def make_divisible(v, divisor=8):
    return max(divisor, _round(v / divisor) * divisor)
'''

ACTS_INIT = "from .gelu import Act\n"

GELU = '''\
import torch.nn as nn


class Act(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x)
'''

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


def write_deps_corpus(root: Path) -> Path:
    """``mix``: the Mixer block and its dependencies (config file returned)."""
    write_package(root / "mix", "mixpkg", {"mixer": MIXER, "util": UTIL})
    acts = root / "mix" / "mixpkg" / "acts"
    acts.mkdir(parents=True, exist_ok=True)
    (acts / "__init__.py").write_text(ACTS_INIT)
    (acts / "gelu.py").write_text(GELU)
    return write_config(root / "config.json", {"mix": {"path": str(root / "mix")}})


@pytest.fixture
def deps_corpus(tmp_path: Path) -> Path:
    return write_deps_corpus(tmp_path)


@pytest.fixture
def two_corpora(tmp_path: Path) -> Path:
    """``fix`` (four blocks) and ``other`` (one block, WindowPool)."""
    fix = write_package(tmp_path / "fix", "fixpkg",
                        {"attention": ATTENTION, "conv": CONV, "losses": LOSSES})
    other = write_package(tmp_path / "other", "otherpkg", {"pool": OTHER})
    return write_config(tmp_path / "config.json",
                        {"fix": {"path": str(fix)}, "other": {"path": str(other)}})


class FakeValidation:
    """A scripted validator: ``outcomes`` maps a block name to how it fails ("static" or
    "import"); every other block passes all six stages. Fixed timings, so screenshots are
    stable. ``gate``, when set, holds each validation until the test releases it."""

    def __init__(self, outcomes: dict[str, str] | None = None) -> None:
        self.outcomes = dict(outcomes or {"FocalLoss": "import", "ConvBlock": "static"})
        self.calls: list[str] = []
        self.gate: threading.Event | None = None
        self.closed = False

    def validate(self, code, name, spec, *, block, on_stage, on_note, call_sites=None,
                 files=None, imported=frozenset({"torch"})):
        self.calls.append(block.name)
        if self.gate is not None:
            self.gate.wait(10)
        fail = self.outcomes.get(block.name)
        lines = code.splitlines()
        line = next((i for i, t in enumerate(lines, 1) if t.startswith("class ")), 1)
        verdicts = []
        cause = summary = None
        detail: dict = {}
        for k, stage in enumerate(STAGES):
            seconds = 0.001 * (k + 1)
            if stage == fail:
                if stage == "static":
                    cause, summary = "unresolved_name", f"undefined: helper (line {line})"
                    detail = {"names": ["helper"],
                              "where": [{"name": "helper", "line": line, "scope": name}]}
                    diag = f"line {line}: undefined name 'helper' in {name}"
                else:
                    cause = "missing_external"
                    summary = "missing package: einops (pip install einops)"
                    detail = {"stage": stage, "module": "einops"}
                    diag = "ModuleNotFoundError: No module named 'einops' (line 1, in <module>)"
                verdicts.append(StageVerdict(stage, False, seconds, diag,
                                             {"cause": cause, "cause_detail": detail}))
                on_stage(verdicts[-1])
                if stage != "static":
                    break
                continue
            verdicts.append(StageVerdict(stage, True, seconds, ""))
            on_stage(verdicts[-1])
        ok = {v.stage for v in verdicts if v.ok}
        level = "none"
        for stage in STAGES:
            if stage not in ok:
                break
            level = LEVELS[stage]
        validated = {"parse", "compile", "static", "import"} <= ok
        return ValidationReport(name, tuple(verdicts), validated, level, cause, summary,
                                detail, 0.021)

    def close(self) -> None:
        self.closed = True


class RecordingApp(NnragApp):
    """NnragApp that keeps every notification it raised, as (severity, title, message)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.notes: list[tuple[str, str, str]] = []

    def notify(self, message, *, title="", severity="information", timeout=None,
               markup=True) -> None:
        self.notes.append((severity, title, str(message)))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)


def make_app(config: Path | None, tmp_path: Path, validation=None, **kwargs) -> RecordingApp:
    """The app over ``config`` with its cache, data and settings under ``tmp_path``."""
    kwargs.setdefault("settings_dir", tmp_path / "settings")
    return RecordingApp(config, cache_dir=tmp_path / "cache", data_dir=tmp_path / "data",
                        validation=validation if validation is not None else FakeValidation(),
                        **kwargs)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    """Runs an async pilot scenario (the project has no async pytest plugin)."""
    asyncio.run(scenario())


SETTLE_ROUNDS = 20


async def settle(app: NnragApp, pilot) -> None:
    """Waits for the workers and for the messages they posted to be handled, again while a
    message starts another worker (the highlighted block's extraction after the index, the
    next validation). A failed worker is the app's to report (as a notification), not the
    test's to raise. An app still busy after ``SETTLE_ROUNDS`` rounds fails the test, saying
    with what: a screenshot or an assertion taken then would fail for no reason it shows."""
    busy: list[str] = []
    for _ in range(SETTLE_ROUNDS):
        try:
            await app.workers.wait_for_complete()
        except (WorkerFailed, WorkerCancelled):
            pass
        await pilot.pause()
        if app.library._extract_timer is not None:
            await pilot.pause(EXTRACT_DELAY + 0.02)
            busy = ["the library's extraction timer"]
            continue
        busy = [w.description or w.name for w in app.workers
                if w.state in (WorkerState.PENDING, WorkerState.RUNNING)]
        if not busy:
            return
    raise AssertionError(f"the app did not settle in {SETTLE_ROUNDS} rounds: "
                         f"{', '.join(busy)} still pending")


async def settle_search(pilot) -> None:
    """Waits out the search debounce (as set now: a test may lengthen it)."""
    from nnrag_tui.tui.screens import library

    await pilot.pause(library.SEARCH_DELAY + 0.1)
    await pilot.pause()


def names(app: NnragApp) -> list[str]:
    return [b.name for b in app.library.results.blocks]
