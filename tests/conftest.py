"""Session fixtures shared across test modules: the upstream corpora (``upstream.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from upstream import wheel_sources


@pytest.fixture(scope="session")
def timm_source(tmp_path_factory) -> Path:
    """The folder holding timm 1.0.31's ``timm/`` package (sources only)."""
    return wheel_sources("timm", tmp_path_factory.mktemp("timm-wheel"))


@pytest.fixture(scope="session")
def torchvision_source(tmp_path_factory) -> Path:
    """The folder holding torchvision 0.29.1's ``torchvision/`` package (sources only)."""
    return wheel_sources("torchvision", tmp_path_factory.mktemp("torchvision-wheel"))
