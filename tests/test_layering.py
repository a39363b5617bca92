"""The engine stays headless (no textual, no rich, no torch) and the TUI process never imports
torch: torch lives in the validation sandbox only. Each module is imported in a fresh
interpreter so nothing imported by another test hides a violation."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import nnrag_tui.engine

ENGINE_MODULES = sorted(
    f"nnrag_tui.engine.{m.name}" for m in pkgutil.iter_modules(nnrag_tui.engine.__path__)
    if not m.name.startswith("_") and m.name != "sandbox_worker"
)

PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


def _modules(module: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, module], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout))


def _top_modules(module: str) -> set[str]:
    return {m.split(".")[0] for m in _modules(module)}


def test_engine_modules_are_headless():
    assert len(ENGINE_MODULES) >= 10
    offenders = {}
    for module in ENGINE_MODULES:
        bad = _top_modules(module) & {"textual", "rich", "torch"}
        if bad:
            offenders[module] = sorted(bad)
    assert offenders == {}


def test_cli_and_tui_never_import_torch():
    for module in ("nnrag_tui.cli", "nnrag_tui.tui.app"):
        assert "torch" not in _top_modules(module), module


def test_the_app_starts_without_the_indexer_resolver_or_generator():
    """They load on first use (an index run, a preview): the app's first paint on a warm
    cache needs only the store, and importing them cost about a tenth of a second."""
    loaded = _modules("nnrag_tui.tui.app")
    heavy = {f"nnrag_tui.engine.{m}" for m in ("indexer", "resolve", "generate", "rewrite",
                                               "modsource", "parse", "sandbox", "validate")}
    assert loaded & heavy == set()
