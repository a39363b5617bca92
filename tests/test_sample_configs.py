"""The configurations in sample_configs/, which the README offers to copy: each one loads with
no error and no warning about an unknown key, and names at least one repository."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from nnrag_tui.engine.config import load_config

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "sample_configs").glob("*.json"))


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_a_sample_config_loads_cleanly(path, caplog, recwarn):
    with caplog.at_level(logging.WARNING):
        cfg = load_config(path)
    assert cfg.sources, path
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert not [str(w.message) for w in recwarn], path
