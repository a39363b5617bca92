"""bench/corpus_bench.py: which packages may stand in for missing ones while a repository's
blocks are compared with upstream's classes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus_bench import own_names  # noqa: E402


def test_a_package_copied_beside_a_script_is_the_repository_s_own(tmp_path):
    """MobileSAM's ``MobileSAMv2/`` (no ``__init__.py``) holds a changed copy of ultralytics
    that its modules import as ``ultralytics``; a stand-in for ultralytics made upstream import
    where the generated file, which inlines the copy, needs what the copy imports."""
    for rel in ("MobileSAMv2/ultralytics/__init__.py", "MobileSAMv2/ultralytics/nn/tasks.py",
                "MobileSAMv2/predict.py", "mobile_sam/__init__.py", "mobile_sam/yaml.py",
                "app/app.py", ".github/hook.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    names = own_names(tmp_path, ["mobile_sam.modeling:Sam"])
    assert {"ultralytics", "MobileSAMv2", "predict", "mobile_sam", "app"} <= names
    # inside a package, a module is reached through the package, never by its own name
    assert "yaml" not in names and "nn" not in names and "hook" not in names
