"""bench/package_bench.py: every block of a configuration extracted in one fresh process per
engine, its times reported per repository, and the files dumped to compare engines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "package_bench.py"


def _corpus(tmp_path: Path) -> Path:
    pkg = tmp_path / "src" / "tinypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(
        "import torch.nn as nn\n\n\n"
        "class Scale(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return 2 * x\n")
    (pkg / "net.py").write_text(
        "import torch.nn as nn\n\nfrom .layers import Scale\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.scale = Scale()\n\n"
        "    def forward(self, x):\n"
        "        return self.scale(x)\n")
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"tiny": {"path": str(tmp_path / "src"), "paths": ["tinypkg"]}}))
    return cfg


def test_two_engines_alternate_and_their_files_are_dumped(tmp_path):
    cfg = _corpus(tmp_path)
    out, dump = tmp_path / "report.json", tmp_path / "dump"
    r = subprocess.run([sys.executable, str(SCRIPT), "--config", str(cfg), "--engine",
                        str(ROOT), "--rounds", "1", "--dump", str(dump), "--out", str(out)],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert [(run["engine"], run["round"]) for run in report["runs"]] == [(0, 1), (1, 1)]
    for run in report["runs"]:
        assert run["failed"] == {}
        assert run["repos"]["tiny"]["blocks"] == 2
        assert run["repos"]["tiny"]["total_s"] > 0
    assert "tiny: 2 blocks" in r.stdout
    files = sorted(p.name for p in (dump / "0" / "tiny").iterdir())
    assert files == ["tinypkg.layers__Scale.py", "tinypkg.net__Net.py"]
    net = (dump / "0" / "tiny" / "tinypkg.net__Net.py").read_text()
    assert "class Scale(nn.Module):" in net and "class Net(nn.Module):" in net
    assert net == (dump / "1" / "tiny" / "tinypkg.net__Net.py").read_text()


def test_an_engine_that_is_no_checkout_is_refused(tmp_path):
    cfg = _corpus(tmp_path)
    r = subprocess.run([sys.executable, str(SCRIPT), "--config", str(cfg), "--engine",
                        str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode != 0
    assert "is not a checkout of nnrag" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_missing_configuration_is_said_so(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--config", str(tmp_path / "none.json")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode != 0
    assert "config file not found" in r.stderr and "Traceback" not in r.stderr
