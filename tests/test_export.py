"""Cross-repository export (nnrag export NAME --into DIR) into a fixture project, and the spec
dataset (nnrag export-specs --jsonl FILE), which must carry no upstream code."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import write_config, write_tree

from nnrag_tui.cli import main
from nnrag_tui.engine import export
from nnrag_tui.engine.extractor import BlockExtractor

HELPERS = '''
import torch
from torch import nn


def make_divisible(v, divisor=8):
    return max(divisor, int(v + divisor / 2) // divisor * divisor)


class Shared(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.tanh(self.proj(x))
'''

BLOCKS = '''
from torch import nn

from .helpers import Shared, make_divisible


class BlockA(nn.Module):
    """A shared projection, then a linear layer to a width
    that is a multiple of eight.

    The second paragraph of this docstring is upstream prose that a dataset must not carry
    unless the user asks for docstring summaries explicitly.
    """

    def __init__(self, dim=8, expand=3):
        super().__init__()
        self.shared = Shared(dim)
        self.out = nn.Linear(dim, make_divisible(dim * expand))

    def forward(self, x):
        return self.out(self.shared(x))


class BlockB(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.shared = Shared(dim)
        self.scale = 2.0

    def forward(self, x):
        return self.shared(x) * self.scale
'''

# the target project: an identical make_divisible (other docstring and comments) and a
# Shared that differs in one literal (so it must not be reused)
UTIL = '''
"""Utilities of the target project."""


def make_divisible(v, divisor=8):
    """Rounds to a multiple of ``divisor``."""
    # the same code as upstream
    return max(divisor, int(v + divisor / 2) // divisor * divisor)
'''

OTHER = '''
import torch
from torch import nn


class Shared(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        return torch.tanh(self.proj(x))
'''


@pytest.fixture
def ex(tmp_path: Path):
    src = write_tree(tmp_path / "src", {"lib/__init__.py": "", "lib/helpers.py": HELPERS,
                                        "lib/blocks.py": BLOCKS})
    cfg = write_config(tmp_path / "cfg.json", {"lib": {"path": str(src)}})
    with BlockExtractor(cfg, cache_dir=tmp_path / "cache", data_dir=tmp_path / "data") as e:
        e.index()
        yield e


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj", {"app/__init__.py": "", "app/util.py": UTIL,
                                          "app/other.py": OTHER, "app/nn/__init__.py": ""})


def export_name(ex, name: str, into: Path, **kw) -> export.ExportPlan:
    res = ex.extract_single_block(name)
    assert res.ok, res.error
    return export.export_block(res.generated.code, res.generated.name, into, **kw)


def test_export_adapts_imports_and_reuses_identical_definitions(ex, project: Path):
    plan = export_name(ex, "BlockA", project / "app" / "nn")
    assert plan.target.package == "app.nn" and plan.module == "app.nn.block_a"
    assert [(f.path.name, f.action) for f in plan.files] == [("block_a.py", "create")]
    # make_divisible is already in app.util, structurally identical: imported, not copied
    assert [(r.name, r.module, r.import_line) for r in plan.reused] == [
        ("make_divisible", "app.util", "from ..util import make_divisible")]
    # app.other.Shared differs in one literal: not reused
    assert plan.written == ["Shared", "BlockA"]
    code = (project / "app" / "nn" / "block_a.py").read_text()
    assert "from ..util import make_divisible" in code
    assert "def make_divisible" not in code and "class Shared" in code
    ast.parse(code)


def test_a_second_export_reuses_the_shared_dependency(ex, project: Path):
    export_name(ex, "BlockA", project / "app" / "nn")
    plan = export_name(ex, "BlockB", project / "app" / "nn")
    assert [(r.name, r.module, r.import_line) for r in plan.reused] == [
        ("Shared", "app.nn.block_a", "from .block_a import Shared")]
    assert plan.written == ["BlockB"]
    code = (project / "app" / "nn" / "block_b.py").read_text()
    assert "class Shared" not in code and "from .block_a import Shared" in code


def test_the_exported_blocks_import_and_run_in_the_target_project(ex, project: Path):
    export_name(ex, "BlockA", project / "app" / "nn")
    export_name(ex, "BlockB", project / "app" / "nn")
    script = textwrap.dedent("""
        import torch
        from app.nn.block_a import BlockA
        from app.nn.block_b import BlockB
        from app.nn import block_a, block_b
        assert block_b.Shared is block_a.Shared
        x = torch.randn(2, 8)
        print(tuple(BlockA()(x).shape), tuple(BlockB()(x).shape))
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True,
                       text=True, timeout=120, check=False,
                       env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 24) (2, 8)"


def test_module_level_code_the_file_has_comes_along(tmp_path: Path):
    """A generated file's registry fillers (an item store, a loop) and the flag its deferred
    code's runner reads act on what the block reads, though no name of the block leads to
    them: the exported module keeps them, and behaves as the file does (golden cases
    ``deferred_code`` and ``registry``)."""
    closure = Path(__file__).resolve().parent / "fixtures" / "closure"
    pkg = tmp_path / "proj" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for case, block, module in (("deferred_code", "Net", "net"), ("registry", "Net", "reg_net")):
        code = (closure / case / "expected" / f"{block}.py").read_text()
        plan = export.export_block(code, block, pkg, module=module)
        text = plan.code
        assert "\n_vocab_ran = False\n" in text or case != "deferred_code"
        assert '\n_ACTS["tanh"] = torch.tanh\n' in text or case != "registry"
    script = textwrap.dedent("""
        from mypkg.net import Net
        from mypkg import reg_net
        net = Net()
        assert net.step("save") == 2 and net.vocab() == (2, 1), (net.step("save"), net.vocab())
        assert reg_net.get_act("minus") is reg_net.neg
        assert reg_net.get_act("tanh").__name__ == "tanh"
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path / "proj",
                       capture_output=True, text=True, timeout=120, check=False,
                       env={"PYTHONPATH": str(tmp_path / "proj"), "PATH": "/usr/bin:/bin"})
    assert r.stdout.strip() == "ok", r.stderr


def test_nothing_is_overwritten_without_force(ex, project: Path, capsys, tmp_path: Path):
    into = project / "app" / "nn"
    export_name(ex, "BlockB", into)
    again = export_name(ex, "BlockB", into)
    assert [f.action for f in again.files] == ["unchanged"]
    dest = into / "block_b.py"
    dest.write_text("# my own edits\n")
    with pytest.raises(export.ExportError, match="refusing to overwrite"):
        export_name(ex, "BlockB", into)
    assert dest.read_text() == "# my own edits\n"
    cfg = ["--config", str(tmp_path / "cfg.json"), "--cache-dir", str(tmp_path / "cache")]
    code = main(["export", "BlockB", "--into", str(into), *cfg])
    out, err = capsys.readouterr()
    assert code == 2 and "refused" in out and "use --force" in err
    assert dest.read_text() == "# my own edits\n"
    code = main(["export", "BlockB", "--into", str(into), "--force", *cfg])
    out, _ = capsys.readouterr()
    assert code == 0 and "overwriting" in out
    assert "class BlockB" in dest.read_text()


def test_dry_run_shows_the_plan_and_writes_nothing(ex, project: Path, capsys,
                                                   tmp_path: Path):
    into = project / "app" / "nn"
    before = sorted(p.name for p in into.iterdir())
    code = main(["export", "BlockA", "--into", str(into), "--dry-run", "--json", "--config",
                 str(tmp_path / "cfg.json"), "--cache-dir", str(tmp_path / "cache")])
    out, _ = capsys.readouterr()
    assert code == 0
    d = json.loads(out)
    assert d["dry_run"] is True
    assert d["files"] == [{"path": str(into / "block_a.py"), "action": "create",
                           "reason": ""}]
    assert d["reused"][0]["import"] == "from ..util import make_divisible"
    assert sorted(p.name for p in into.iterdir()) == before
    code = main(["export", "BlockA", "--into", str(into), "--dry-run", "--config",
                 str(tmp_path / "cfg.json"), "--cache-dir", str(tmp_path / "cache")])
    out, _ = capsys.readouterr()
    assert "would write: " in out and "reused: make_divisible from app.util" in out


def test_a_block_already_in_the_package_is_not_written_again(ex, project: Path):
    into = project / "app" / "nn"
    export_name(ex, "BlockA", into)
    plan = export_name(ex, "BlockA", into, module="copy_of_a")
    assert plan.already_present is not None
    assert plan.already_present.module == "app.nn.block_a" and plan.files == []
    assert not (into / "copy_of_a.py").exists()


def test_a_plain_folder_gets_top_level_imports(ex, tmp_path: Path):
    into = tmp_path / "scripts"
    into.mkdir()
    export_name(ex, "BlockA", into)
    plan = export_name(ex, "BlockB", into)
    assert plan.target.package is None
    assert [r.import_line for r in plan.reused] == ["from block_a import Shared"]


def test_a_new_folder_inside_a_package_becomes_a_subpackage(ex, project: Path):
    plan = export_name(ex, "BlockB", project / "app" / "blocks")
    assert plan.target.package == "app.blocks"
    assert [(f.path.name, f.action) for f in plan.files] == [("__init__.py", "create"),
                                                            ("block_b.py", "create")]
    assert (project / "app" / "blocks" / "__init__.py").is_file()


def test_relative_imports_and_module_names():
    assert export._relative("a.b.new", "a.b.old") == ".old"
    assert export._relative("a.b.new", "a.util") == "..util"
    assert export._relative("a.b.new", "a.b") == "."
    assert export._relative("a.b.new", "a.c.d.e") == "..c.d.e"
    assert export.module_stem("ConvNormAct") == "conv_norm_act"
    assert export.module_stem("MLPBlock") == "mlp_block"
    assert export.module_stem("Lambda") == "lambda_"


# -- the spec dataset ------------------------------------------------------------------------
def _body_lines(ex, block) -> list[str]:
    root = Path(ex.store.source_roots()[block.source]["root"])
    lines = (root / block.relpath).read_text().splitlines()[block.line - 1:block.end_line]
    # every line of the class body with some substance (8+ characters once stripped):
    # shorter ones such as ")" or "dim," occur in any JSON by chance
    return [ln.strip() for ln in lines[1:] if len(ln.strip()) >= 8]


def test_spec_records_carry_no_upstream_code(ex, tmp_path: Path, capsys):
    out = tmp_path / "specs.jsonl"
    code = main(["export-specs", "--jsonl", str(out), "--config", str(tmp_path / "cfg.json"),
                 "--cache-dir", str(tmp_path / "cache"), "--data-dir", str(tmp_path / "data")])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    blocks = {b.key: b for b in ex.blocks()}
    assert sorted(r["key"] for r in records) == sorted(blocks)
    for r in records:
        spec = r["spec"]
        assert r["extracted"] is True and spec["name"] == r["name"]
        assert "summary" not in spec
        raw = json.dumps(r)
        body = _body_lines(ex, blocks[r["key"]])
        assert body, r["key"]
        leaked = [ln for ln in body if ln in raw]
        assert leaked == [], f"{r['key']} record contains upstream lines: {leaked}"
    a = next(r for r in records if r["name"] == "BlockA")["spec"]
    assert [p["name"] for p in a["constructor"]] == ["dim", "expand"]
    assert [p.get("default") for p in a["constructor"]] == ["8", "3"]
    assert [p["name"] for p in a["forward"]] == ["x"]
    assert {d["name"] for d in a["dependencies"]} >= {"Shared", "make_divisible"}


def test_summaries_only_when_asked_and_the_leak_check_sees_them(ex, tmp_path: Path):
    recs = list(export.spec_records(ex, match="BlockA", summaries=True))
    assert len(recs) == 1
    summary = recs[0]["spec"]["summary"]
    assert summary.startswith("A shared projection")
    block = ex.blocks(match="BlockA")[0]
    raw = json.dumps(recs[0])
    assert any(ln in raw for ln in _body_lines(ex, block))  # the check would catch it


def test_export_specs_refuses_to_overwrite_and_writes_to_stdout(ex, tmp_path: Path, capsys):
    out = tmp_path / "specs.jsonl"
    out.write_text("keep\n")
    cfg = ["--config", str(tmp_path / "cfg.json"), "--cache-dir", str(tmp_path / "cache")]
    code = main(["export-specs", "--jsonl", str(out), *cfg])
    _, err = capsys.readouterr()
    assert code == 2 and "use --force" in err and out.read_text() == "keep\n"
    # a file where a folder of the path should be: one line, no traceback
    code = main(["export-specs", "--jsonl", str(out / "specs.jsonl"), *cfg])
    _, err = capsys.readouterr()
    assert code == 2 and f"cannot write {out / 'specs.jsonl'}: {out} is a file" in err
    assert "Traceback" not in err and out.read_text() == "keep\n"
    code = main(["export-specs", "--jsonl", "-", "--match", "BlockB", *cfg])
    o, _ = capsys.readouterr()
    assert code == 0
    rec = json.loads(o)
    assert rec["name"] == "BlockB" and rec["repo"] == "lib" and rec["category"]
