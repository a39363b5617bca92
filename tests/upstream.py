"""The real upstream code the tests run on: the unpacked wheels of timm 1.0.31 and torchvision
0.29.1, the Must-show corpus (their sources only; neither is installed or imported here).

Each is taken from ``$NNRAG_TIMM_SRC`` / ``$NNRAG_TORCHVISION_SRC`` or ``bench/.corpora/NAME``
(``shared/bench/get_corpora.sh "$PWD/bench/.corpora"``) when that holds the right version, else
downloaded from PyPI (a few seconds); a test that needs one is skipped, saying why, when the
registry cannot be reached. ``conftest.py`` offers both as session fixtures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = {"timm": "1.0.31", "torchvision": "0.29.1"}


def _version_of(root: Path, project: str) -> str | None:
    version = root / project / "version.py"
    return version.read_text() if version.is_file() else None


def wheel_sources(project: str, tmp: Path) -> Path:
    """The folder holding ``PROJECT/`` (give it as a ``path`` source)."""
    version = VERSIONS[project]
    for cand in (os.environ.get(f"NNRAG_{project.upper()}_SRC"),
                 ROOT / "bench" / ".corpora" / project):
        if cand and version in (_version_of(Path(cand), project) or ""):
            return Path(cand)
    spec = f"{project}=={version}"
    dl = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec,
                         "-d", str(tmp / "dl")], capture_output=True, text=True, check=False)
    wheels = list((tmp / "dl").glob(f"{project}-*.whl"))
    if dl.returncode != 0 or not wheels:
        pytest.skip(f"cannot download {spec} from the package registry: {dl.stderr[-300:]}")
    with zipfile.ZipFile(wheels[0]) as z:
        z.extractall(tmp / project)
    return tmp / project
