"""`nnrag extract`: files written with --out, validation by default (--no-validate skips it),
--save promoting only the blocks that pass, the JSON report per block with its stage verdicts
and failure cause, exit codes, and names given in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import write_tree

from nnrag_tui.cli import main

needs_torch = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="torch is not installed")

LAYERS = '''import math

import torch
from torch import nn


def scale(x, k=2.0):
    return x * k * math.sqrt(1.0)


class Good(nn.Module):
    """Scales a linear projection."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return scale(self.lin(x))
'''

BROKEN = '''import torch
from torch import nn

import nnrag_no_such_package_xyz


class Broken(nn.Module):
    def forward(self, x):
        return nnrag_no_such_package_xyz.op(x)
'''


@pytest.fixture
def setup(tmp_path: Path):
    repo = write_tree(tmp_path / "repo", {"fixext/__init__.py": "",
                                          "fixext/layers.py": LAYERS,
                                          "fixext/broken.py": BROKEN})
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"fixext": {"path": str(repo)}}))
    common = ["--config", str(cfg), "--cache-dir", str(tmp_path / "cache"),
              "--data-dir", str(tmp_path / "data")]
    return tmp_path, common


def nnrag(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@needs_torch
def test_extract_validates_by_default_and_reports_each_block_in_order(capsys, setup):
    tmp, common = setup
    out_dir = tmp / "out"
    code, out, err = nnrag(capsys, "extract", "--blocks", "Broken", "Good", "--out",
                           str(out_dir), *common)
    assert code == 1, err  # extracted, but one block is not validated
    assert (out_dir / "Good.py").is_file() and (out_dir / "Good.spec.json").is_file()
    lines = out.splitlines()
    broken = next(i for i, ln in enumerate(lines) if ln.startswith("fixext.broken:Broken"))
    good = next(i for i, ln in enumerate(lines) if ln.startswith("fixext.layers:Good"))
    assert broken < good  # the order the names were given
    assert lines[broken + 1].startswith("  NOT validated")
    assert "missing_external" in lines[broken + 1]
    assert "nnrag_no_such_package_xyz" in lines[broken + 1]
    assert lines[good + 1].startswith("  validated, level forward_ran")
    assert lines[good + 1].endswith("2x16x8 -> 2x16x8")  # the probe that ran
    assert "2/2 extracted, 1 validated (1 ran forward)" in err


@needs_torch
def test_a_block_called_through_its_own_call_runs_with_its_parameters(capsys, tmp_path):
    # timm's JsdCrossEntropy has ``__call__(self, output, target)`` and no ``forward``: the
    # spec shows that signature, and validation calls it with both (a loss: a scalar out)
    from helpers import fixture

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"calls": {"path": str(fixture("discovery_call"))}}))
    code, out, err = nnrag(capsys, "extract", "--block", "OwnCall", "--out", str(tmp_path / "o"),
                           "--config", str(cfg), "--cache-dir", str(tmp_path / "cache"),
                           "--data-dir", str(tmp_path / "data"))
    assert code == 0, err
    assert out.splitlines()[1].startswith("  validated, level forward_ran")
    assert out.splitlines()[1].endswith("-> scalar")
    spec = json.loads((tmp_path / "o" / "OwnCall.spec.json").read_text())
    assert [p["name"] for p in spec["forward"]] == ["output", "target"]
    code, out, _ = nnrag(capsys, "extract", "--block", "OwnCall", "--json", "--config", str(cfg),
                         "--cache-dir", str(tmp_path / "cache"), "--data-dir",
                         str(tmp_path / "data"))
    forward = json.loads(out)["validation"]["stages"][-1]
    assert forward["stage"] == "forward" and forward["detail"]["args"] == 2
    assert forward["detail"]["output"] == [[]]


@needs_torch
def test_json_report_carries_the_stage_verdicts_and_cause(capsys, setup):
    _, common = setup
    code, out, _ = nnrag(capsys, "extract", "--blocks", "Good", "Broken", "--json", *common)
    assert code == 1
    docs = [json.loads(ln) for ln in out.splitlines()]
    assert [d["name"] for d in docs] == ["Good", "Broken"]
    good, broken = docs
    v = good["validation"]
    assert v["validated"] and v["level"] == "forward_ran" and v["cause"] is None
    assert [s["stage"] for s in v["stages"]] == ["parse", "compile", "static", "import",
                                                 "instantiate", "forward"]
    assert all(s["ok"] for s in v["stages"])
    b = broken["validation"]
    assert not b["validated"] and b["cause"] == "missing_external"
    assert {s["stage"]: s["ok"] for s in b["stages"]}["import"] is False
    assert "saved" not in good  # nothing is saved without --save


@needs_torch
def test_save_promotes_only_validated_blocks(capsys, setup):
    tmp, common = setup
    code, out, err = nnrag(capsys, "extract", "--blocks", "Good", "Broken", "--save", *common)
    assert code == 1
    assert "saved: Good v1" in out
    assert "not saved: not validated" in out
    assert "2/2 extracted, 1 validated (1 ran forward), 1 saved" in err
    code, listing, _ = nnrag(capsys, "registry", "list", "--json", *common)
    rows = json.loads(listing)
    assert [r["name"] for r in rows] == ["Good"]
    assert rows[0]["validated"] is True and rows[0]["level"] == "forward_ran"
    # saving the same block again creates nothing new
    code, out, _ = nnrag(capsys, "extract", "--block", "Good", "--save", "--json", *common)
    assert code == 0
    doc = json.loads(out)
    assert doc["saved"]["version"] == "v1" and doc["saved"]["created"] is False
    assert [p.name for p in (tmp / "data" / "blocks" / "Good").iterdir()
            if p.name.startswith("v")] == ["v1"]


def test_no_validate_only_extracts(capsys, setup):
    _, common = setup
    code, out, err = nnrag(capsys, "extract", "--blocks", "Good", "Broken", "--no-validate",
                           "--json", *common)
    assert code == 0, err  # both extracted; nothing was validated
    docs = [json.loads(ln) for ln in out.splitlines()]
    assert [d["ok"] for d in docs] == [True, True]
    assert all("validation" not in d for d in docs)


@pytest.mark.parametrize("argv,needle", [
    (["--block", "Good", "--save", "--no-validate"], "cannot be combined with --no-validate"),
    (["--block", "Good", "--timeout", "0"], "--timeout must be a positive number"),
    (["--block", "Good", "--jobs", "0"], "must be at least 1"),
    (["--block", "Good", "--stage", "sideways"], "invalid choice"),
])
def test_bad_options_are_one_line_and_exit_2(capsys, setup, argv, needle):
    tmp, common = setup
    try:
        code = main(["extract", *argv, *common])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert not (tmp / "data").exists()  # nothing was saved


@needs_torch
def test_an_unknown_name_is_exit_2_and_the_others_still_run(capsys, setup):
    _, common = setup
    code, out, err = nnrag(capsys, "extract", "--blocks", "NoSuchThing", "Good", *common)
    assert code == 2
    assert "no block named 'NoSuchThing'" in err
    assert "fixext.layers:Good" in out and "validated, level forward_ran" in out


@needs_torch
def test_stdout_keeps_the_code_alone_on_stdout(capsys, setup):
    _, common = setup
    code, out, err = nnrag(capsys, "extract", "--block", "Good", "--stdout", *common)
    assert code == 0
    compile(out, "Good.py", "exec")  # stdout is exactly the generated file
    assert "class Good(nn.Module)" in out
    assert "validated, level forward_ran" in err


def test_stage_static_needs_no_sandbox(capsys, setup, monkeypatch):
    from nnrag_tui.engine.validate_pool import ValidationPool

    started = []
    monkeypatch.setattr(ValidationPool, "start", lambda self: started.append(self))
    _, common = setup
    code, out, _ = nnrag(capsys, "extract", "--blocks", "Good", "Broken", "--stage", "static",
                         "--json", *common)
    assert code == 1  # "validated" needs the import stage, which was not run
    docs = [json.loads(ln) for ln in out.splitlines()]
    for d in docs:
        assert [s["stage"] for s in d["validation"]["stages"]] == ["parse", "compile", "static"]
        assert d["validation"]["sandbox"] == {}  # nothing ran in a sandbox
    assert not started  # and no sandbox worker was started (importing torch) for nothing


SAME_NAME = '''from torch import nn


class Good(nn.Module):
    """Another repository module's Good: same class name, different block."""

    def forward(self, x):
        return -x
'''


def test_same_named_blocks_in_one_run_never_overwrite_each_other(capsys, setup):
    tmp, common = setup
    (tmp / "repo" / "fixext" / "other.py").write_text(SAME_NAME)
    out_dir = tmp / "out"
    args = ["extract", "--blocks", "fixext.layers:Good", "fixext.other:Good",
            "fixext.layers:Good", "--out", str(out_dir), "--no-validate", "--json", *common]
    code, out, err = nnrag(capsys, *args)
    assert code == 0, err
    docs = [json.loads(ln) for ln in out.splitlines()]
    files = [Path(d["files"][0]).name for d in docs]
    # the first keeps its name, the other block gets its module's; asked again: same file
    assert files == ["Good.py", "Good__other.py", "Good.py"]
    assert "return -x" in (out_dir / "Good__other.py").read_text()
    assert "scale(self.lin(x))" in (out_dir / "Good.py").read_text()
    assert (out_dir / "Good__other.spec.json").is_file()
    assert "written as Good__other.py: Good.py holds fixext.layers:Good" in docs[1]["notes"][0]
    # a later run starts afresh: its own first Good is written as Good.py again
    code, out, _ = nnrag(capsys, "extract", "--block", "fixext.other:Good", "--out",
                         str(out_dir), "--no-validate", "--json", *common)
    assert code == 0 and json.loads(out)["files"][0].endswith("/Good.py")
    assert "return -x" in (out_dir / "Good.py").read_text()


def test_api_extract_multiple_blocks_names_files_apart(tmp_path, setup):
    from nnrag_tui.engine.config import parse_config
    from nnrag_tui.engine.extractor import BlockExtractor

    tmp, _ = setup
    (tmp / "repo" / "fixext" / "other.py").write_text(SAME_NAME)
    cfg = parse_config({"fixext": {"path": str(tmp / "repo")}})
    with BlockExtractor(cfg, cache_dir=tmp / "c2", data_dir=tmp / "d2") as ex:
        ex.index()
        res = ex.extract_multiple_blocks(["fixext.other:Good", "fixext.layers:Good"],
                                         tmp / "api")
    assert [Path(r.paths[0]).name for r in res] == ["Good.py", "Good__layers.py"]


def test_an_out_folder_that_cannot_be_written_is_refused_before_any_work(capsys, setup):
    tmp, common = setup
    (tmp / "notes.txt").write_text("kept")
    for out in (tmp / "notes.txt", tmp / "notes.txt" / "sub"):
        code, _, err = nnrag(capsys, "extract", "--block", "Good", "--no-validate",
                             "--out", str(out), *common)
        assert code == 2
        assert f"cannot write to --out {out}: {tmp / 'notes.txt'} is a file, not a folder" in err
        assert "Traceback" not in err
    assert (tmp / "notes.txt").read_text() == "kept"
    assert not (tmp / "cache").exists()  # refused before the index was even opened


def test_api_a_file_that_cannot_be_written_is_a_failed_result(tmp_path, setup):
    from nnrag_tui.engine.config import parse_config
    from nnrag_tui.engine.extractor import BlockExtractor

    tmp, _ = setup
    (tmp / "blocker").write_text("")
    cfg = parse_config({"fixext": {"path": str(tmp / "repo")}})
    with BlockExtractor(cfg, cache_dir=tmp / "c2", data_dir=tmp / "d2") as ex:
        ex.index()
        res = ex.extract_single_block("Good", tmp / "blocker" / "out")
    assert not res.ok
    assert res.error.startswith(f"cannot write {tmp / 'blocker' / 'out'}")
