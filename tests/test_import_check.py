"""bench/import_check.py, which the extraction benchmarks read line by line: a generated file
that prints when it imports (ultralytics greets with a settings notice) must not break the
report, and a file that fails to import is reported as failing, with its error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "import_check.py"


def test_what_a_file_prints_on_import_stays_out_of_the_report(tmp_path):
    chatty = tmp_path / "Chatty.py"
    chatty.write_text('import os\nprint("Creating new settings file")\n'
                      'os.write(1, b"written to fd 1\\n")\n\n\nclass Chatty:\n    pass\n')
    broken = tmp_path / "Broken.py"
    broken.write_text("import not_a_package_anywhere\n")
    out = subprocess.run([sys.executable, "-I", str(SCRIPT), str(chatty), str(broken)],
                         capture_output=True, text=True, timeout=120, check=False)
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(a["path"], a["ok"]) for a in answers] == [(str(chatty), True), (str(broken), False)]
    assert "not_a_package_anywhere" in answers[1]["error"]
    assert "Creating new settings file" in out.stderr
