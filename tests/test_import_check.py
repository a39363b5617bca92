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


def test_a_file_that_never_finishes_importing_fails_and_the_next_is_checked(tmp_path):
    """cogdl's operators compile a C++ extension as they import; a compile killed earlier
    leaves torch's build lock behind, and the next import waits on it forever: the whole
    corpus run hung there."""
    stuck = tmp_path / "Stuck.py"
    stuck.write_text("import time\n\nwhile True:\n    time.sleep(0.05)\n")
    fine = tmp_path / "Fine.py"
    fine.write_text("class Fine:\n    pass\n")
    out = subprocess.run([sys.executable, "-I", str(SCRIPT), "--timeout", "3", str(stuck),
                          str(fine)], capture_output=True, text=True, timeout=120, check=False)
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(a["path"], a["ok"]) for a in answers] == [(str(stuck), False), (str(fine), True)]
    assert answers[0]["error"] == "no import after 3 s"


def test_a_file_that_parses_the_command_line_sees_a_fresh_interpreters(tmp_path):
    """PyTorch-GAN's models read ``opt = parser.parse_args()`` at module level; a fresh
    ``python -I -c "import NAME"`` has no arguments, so the defaults apply. The checker's own
    list of files is not the file's command line."""
    script = tmp_path / "Script.py"
    script.write_text("import argparse\n\nparser = argparse.ArgumentParser()\n"
                      "parser.add_argument('--latent_dim', type=int, default=100)\n"
                      "opt = parser.parse_args()\nassert opt.latent_dim == 100\n")
    out = subprocess.run([sys.executable, "-I", str(SCRIPT), str(script), str(script)],
                         capture_output=True, text=True, timeout=120, check=False)
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert [a["ok"] for a in answers] == [True, True], answers
