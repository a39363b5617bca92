"""The registry of saved blocks: save/list/show/remove/export on real extractions, versions and
idempotent saves, provenance (SWHIDs checked against git), requirement pins, name sanitization,
the `nnrag registry` commands and concurrent savers. The SIGKILL storm during saves, driven by
this module's saver, is in test_reliability_crash_registry.py."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from helpers import ROOT, write_tree

from nnrag_tui.cli import main
from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.errors import NnragError
from nnrag_tui.engine.extractor import BlockExtractor, Extraction
from nnrag_tui.engine.generate import generate
from nnrag_tui.engine.registry import (
    BLOCKS_DIR,
    MANIFEST,
    PROVENANCE,
    REQUIREMENTS,
    SPEC,
    STAGING,
    Registry,
    RegistryError,
)

HELPERS = '''"""Helpers."""
import math


def scale(x, k=2.0):
    return x * k * math.sqrt(1.0)
'''

BLOCKS = '''import torch
from torch import nn

from .helpers import scale


class TinyBlock(nn.Module):
    """A tiny block."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return scale(self.lin(x))
'''


def make_repo(root: Path, helpers: str = HELPERS) -> Path:
    return write_tree(root, {"fixpkg/__init__.py": "", "fixpkg/helpers.py": helpers,
                             "fixpkg/blocks.py": BLOCKS})


@pytest.fixture
def corpus(tmp_path: Path):
    """An extractor over a fixture package ``fix`` (a block plus a helper in another module)."""
    repo = make_repo(tmp_path / "fix")
    ex = BlockExtractor(parse_config({"fix": {"path": str(repo)}}),
                        cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")
    ex.index()
    yield ex, repo
    ex.close()


def extract(ex, name: str = "TinyBlock"):
    res = ex.extract_single_block(name)
    assert res.ok, res.error
    return res


def save(reg: Registry, ex, res, validation=None, **kw):
    return reg.save(res, validation, sources=ex.store.source_roots(), **kw)


@dataclasses.dataclass
class Stage:
    stage: str
    ok: bool
    seconds: float


@dataclasses.dataclass
class Report:
    """Shaped like the validator's report (duck typing is all the registry relies on)."""

    validated: bool
    level: str
    stages: list

    def as_dict(self) -> dict:
        return {"validated": self.validated, "level": self.level,
                "stages": [dataclasses.asdict(s) for s in self.stages]}


def report(level: str) -> Report:
    order = ["parse", "compile", "static", "import", "instantiate", "forward"]
    n = order.index(level) + 1
    stages = [Stage(s, i < n, 0.01) for i, s in enumerate(order)]
    return Report(n >= 4, level, stages)


# -- save / list / show / remove / export ----------------------------------------------------
def test_save_list_show_round_trip(corpus):
    ex, repo = corpus
    res = extract(ex)
    reg = Registry(ex.data_dir)
    assert reg.list() == []
    saved = save(reg, ex, res, report("forward"))
    assert (saved.name, saved.version, saved.created) == ("TinyBlock", "v1", True)
    assert saved.path == ex.data_dir / BLOCKS_DIR / "TinyBlock" / "v1"
    assert sorted(p.name for p in saved.path.iterdir()) == sorted(
        ["TinyBlock.py", SPEC, PROVENANCE, REQUIREMENTS, MANIFEST])
    assert saved.file.read_text() == res.generated.code

    [row] = Registry(ex.data_dir).list()  # a fresh instance sees it
    assert (row.name, row.latest, row.versions, row.key, row.category, row.repo) == (
        "TinyBlock", "v1", ("v1",), "fixpkg.blocks:TinyBlock", res.block.category, "fix")
    assert (row.validated, row.level) == (True, "forward")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", row.saved_at)

    shown = reg.show("TinyBlock")
    assert shown.spec == res.generated.spec
    prov = shown.provenance
    assert prov["tool"]["name"] == "nnrag" and prov["tool"]["version"]
    assert prov["block"]["key"] == "fixpkg.blocks:TinyBlock"
    assert prov["block"]["lines"] == [res.block.line, res.block.end_line]
    assert prov["sources"] == [{"name": "fix", "url": None, "origin": str(repo), "commit": None,
                                "kind": "path", "version": None}]
    spans = {d["path"]: (d["lines"], d["names"]) for d in prov["definitions"]}
    assert spans == {"fixpkg/helpers.py": ([5, 6], ["scale"]),
                     "fixpkg/blocks.py": ([7, 15], ["TinyBlock"])}
    val = prov["validation"]
    assert (val["validated"], val["level"]) == (True, "forward")
    assert set(val["levels"]) == {"parse", "compile", "static", "import", "instantiate",
                                  "forward"}
    assert val["runs"][0]["report"]["level"] == "forward"
    assert reg.verify("TinyBlock") == []
    assert reg.code("TinyBlock", "v1") == res.generated.code


def test_identical_save_is_a_no_op_and_changed_code_is_v2(corpus):
    ex, repo = corpus
    reg = Registry(ex.data_dir)
    first = save(reg, ex, extract(ex))
    before = {p: p.stat().st_mtime_ns for p in first.path.rglob("*")}
    again = save(reg, ex, extract(ex))
    assert (again.name, again.version, again.created, again.updated) == (
        "TinyBlock", "v1", False, False)
    assert {p: p.stat().st_mtime_ns for p in first.path.rglob("*")} == before
    assert [r.versions for r in reg.list()] == [("v1",)]

    (repo / "fixpkg/helpers.py").write_text(HELPERS.replace("k=2.0", "k=3.0"))
    ex.index()
    changed = save(reg, ex, extract(ex))
    assert (changed.version, changed.created) == ("v2", True)
    assert "k=3.0" in changed.file.read_text() and "k=2.0" in reg.code("TinyBlock", "v1")
    [row] = reg.list()
    assert (row.latest, row.versions) == ("v2", ("v1", "v2"))
    assert reg.show("TinyBlock").version == "v2"
    # the old code again is still v1, not a third copy
    (repo / "fixpkg/helpers.py").write_text(HELPERS)
    ex.index()
    assert save(reg, ex, extract(ex)).version == "v1"
    assert reg.list()[0].versions == ("v1", "v2")


def test_a_new_validation_run_is_recorded_on_the_existing_version(corpus):
    ex, _ = corpus
    reg = Registry(ex.data_dir)
    res = extract(ex)
    save(reg, ex, res)
    assert reg.list()[0].validated is None
    up = save(reg, ex, res, report("import"))
    assert (up.version, up.created, up.updated) == ("v1", False, True)
    assert (reg.list()[0].validated, reg.list()[0].level) == (True, "import")
    same = save(reg, ex, res, report("import"))
    assert same.updated is False
    deeper = save(reg, ex, res, report("forward"))
    assert deeper.updated
    val = reg.show("TinyBlock").provenance["validation"]
    assert [r["level"] for r in val["runs"]] == ["import", "forward"]
    assert val["levels"]["import"] <= val["levels"]["forward"]
    assert reg.verify("TinyBlock") == []


def test_same_class_name_from_another_repository_is_saved_apart(tmp_path):
    a = make_repo(tmp_path / "a")
    b = make_repo(tmp_path / "b", HELPERS.replace("k=2.0", "k=5.0"))
    cfg = parse_config({"one": {"path": str(a), "priority": 1},
                        "two": {"path": str(b), "priority": 2}})
    with BlockExtractor(cfg, cache_dir=tmp_path / "cache", data_dir=tmp_path / "d") as ex:
        ex.index()
        reg = Registry(ex.data_dir)
        first = save(reg, ex, extract(ex, "TinyBlock"))  # "one" wins on priority
        two = next(b for b in ex.blocks(match="TinyBlock") if b.source == "two")
        gen = generate(ex.resolver().closure(two), ex.store.source_roots())
        second = save(reg, ex, Extraction("TinyBlock", two, gen))
    assert (first.name, second.name) == ("TinyBlock", "TinyBlock_two")
    assert "k=5.0" in second.file.read_text() and "k=2.0" in first.file.read_text()
    assert {r.name: r.repo for r in reg.list()} == {"TinyBlock": "one", "TinyBlock_two": "two"}


def test_remove_a_version_then_the_block(corpus):
    ex, repo = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    (repo / "fixpkg/helpers.py").write_text(HELPERS + "\nX = 1\n")
    ex.index()
    save(reg, ex, extract(ex))
    (repo / "fixpkg/helpers.py").write_text(HELPERS.replace("2.0", "4.0"))
    ex.index()
    assert save(reg, ex, extract(ex)).version == "v3"
    assert reg.remove("TinyBlock", "v3") == ["v3"]
    assert reg.list()[0].versions == ("v1", "v2")
    # numbers are never reused: the next change is v4, not a second, different v3
    (repo / "fixpkg/helpers.py").write_text(HELPERS.replace("2.0", "6.0"))
    ex.index()
    assert save(reg, ex, extract(ex)).version == "v4"
    with pytest.raises(RegistryError, match="has no version v3"):
        reg.show("TinyBlock", "v3")
    assert reg.remove("TinyBlock") == ["v1", "v2", "v4"]
    assert reg.list() == []
    assert not (ex.data_dir / BLOCKS_DIR / "TinyBlock").exists()
    with pytest.raises(RegistryError, match="no saved block named 'TinyBlock'"):
        reg.remove("TinyBlock")


def test_export_copies_and_refuses_to_overwrite(corpus, tmp_path):
    ex, _ = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    out = tmp_path / "out" / "nested"
    written = reg.export("TinyBlock", out)
    assert sorted(p.name for p in written) == sorted([
        "TinyBlock.py", "TinyBlock.spec.json", "TinyBlock.provenance.json",
        "TinyBlock.required_repos.json"])
    shown = reg.show("TinyBlock")
    assert (out / "TinyBlock.py").read_bytes() == shown.code_path.read_bytes()
    assert json.loads((out / "TinyBlock.provenance.json").read_text()) == shown.provenance
    (out / "TinyBlock.spec.json").write_text("mine")
    with pytest.raises(RegistryError, match="refusing to overwrite .*TinyBlock.py"):
        reg.export("TinyBlock", out)
    assert (out / "TinyBlock.spec.json").read_text() == "mine"
    reg.export("TinyBlock", out, force=True)
    assert json.loads((out / "TinyBlock.spec.json").read_text()) == shown.spec
    assert sorted(os.listdir(out)) == sorted(p.name for p in written)  # no temp files left


def test_exported_file_imports_on_its_own(corpus, tmp_path):
    ex, _ = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    out = tmp_path / "exp"
    reg.export("TinyBlock", out)
    # parse + compile only: torch stays out of the test process (the validator runs it)
    code = (out / "TinyBlock.py").read_text()
    compile(code, "TinyBlock.py", "exec")
    assert "def scale" in code and "class TinyBlock" in code


# -- provenance ------------------------------------------------------------------------------
def test_swhid_equals_git_hash_object_of_the_source_file(corpus):
    ex, repo = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    prov = reg.show("TinyBlock").provenance
    assert len(prov["definitions"]) == 2
    for d in prov["definitions"]:
        path = repo / d["path"]
        blob = subprocess.run(["git", "hash-object", str(path)], check=True,
                              capture_output=True, text=True).stdout.strip()
        assert d["swhid"] == f"swh:1:cnt:{blob}"
        assert d["swhid_qualified"] == f"swh:1:cnt:{blob};lines={d['lines'][0]}-{d['lines'][1]}"
        sha1 = subprocess.run(["sha1sum", str(path)], check=True, capture_output=True,
                              text=True).stdout.split()[0]
        assert d["sha1"] == sha1
    code_blob = subprocess.run(["git", "hash-object", str(reg.show("TinyBlock").code_path)],
                               check=True, capture_output=True, text=True).stdout.strip()
    assert prov["code"]["swhid"] == f"swh:1:cnt:{code_blob}"


def test_a_source_file_changed_since_indexing_gets_no_swhid(corpus):
    ex, repo = corpus
    res = extract(ex)
    (repo / "fixpkg/helpers.py").write_text(HELPERS + "# edited after indexing\n")
    reg = Registry(ex.data_dir)
    save(reg, ex, res)
    defs = {d["path"]: d for d in reg.show("TinyBlock").provenance["definitions"]}
    assert defs["fixpkg/helpers.py"]["swhid"] is None
    assert "changed since it was indexed" in defs["fixpkg/helpers.py"]["note"]
    assert defs["fixpkg/blocks.py"]["swhid"].startswith("swh:1:cnt:")


def test_required_repos_pins_torch_to_the_installed_version(corpus):
    try:
        installed = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    ex, repo = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    req = reg.show("TinyBlock").requirements
    pin = f"torch=={installed.split('+')[0]}"
    assert req["requirements"] == [pin]
    torch = next(i for i in req["imports"] if i["module"] == "torch")
    assert torch["kind"] == "distribution"
    assert torch["distributions"] == [{"name": "torch", "version": installed,
                                       "requirement": pin}]
    assert torch["imports"] == ["from torch import nn"]
    assert req["stdlib"] == ["math"] and req["unknown"] == []
    assert req["sources"] == [{"name": "fix", "url": None, "origin": str(repo), "commit": None,
                               "version": None}]


def test_unknown_imports_are_listed_as_unknown():
    from nnrag_tui.engine.provenance import build_requirements

    req = build_requirements("import os\nimport surely_not_installed_pkg.sub as s\n"
                             "try:\n    from yaml import safe_load\nexcept ImportError:\n"
                             "    pass\n", [])
    assert req["stdlib"] == ["os"]
    try:  # PyYAML may or may not be installed here: either way it is accounted for
        pyyaml = metadata.version("PyYAML")
    except metadata.PackageNotFoundError:
        assert req["unknown"] == ["surely_not_installed_pkg", "yaml"]
    else:
        assert req["unknown"] == ["surely_not_installed_pkg"]
        assert f"PyYAML=={pyyaml}" in req["requirements"]


# -- names -----------------------------------------------------------------------------------
BAD_NAMES = ["../evil", "/abs", "a/b", "..", ".", ".staging", "a\0b", "a\\b", "", "x" * 101]


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_bad_names_are_rejected_not_mangled(corpus, tmp_path, bad):
    ex, _ = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    victim = ex.data_dir / "evil"
    victim.mkdir()
    snapshot = sorted(str(p) for p in tmp_path.rglob("*"))
    for call in (lambda: reg.show(bad), lambda: reg.remove(bad),
                 lambda: reg.export(bad, tmp_path / "x"), lambda: reg.verify(bad),
                 lambda: save(reg, ex, extract(ex), name=bad)):
        with pytest.raises(RegistryError, match="invalid block name"):
            call()
    assert sorted(str(p) for p in tmp_path.rglob("*")) == snapshot
    assert [r.name for r in reg.list()] == ["TinyBlock"]


def test_bad_version_and_unextracted_block(corpus):
    ex, _ = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    with pytest.raises(RegistryError, match="invalid version '../v1'"):
        reg.show("TinyBlock", "../v1")
    assert reg.show("TinyBlock", 1).version == reg.show("TinyBlock", "v1").version == "v1"
    failed = ex.extract_single_block("NoSuchBlock")
    with pytest.raises(NnragError, match="cannot save 'NoSuchBlock': no block named"):
        reg.save(failed)


# -- robustness ------------------------------------------------------------------------------
def test_leftovers_of_an_interrupted_save_are_ignored_then_cleaned(corpus):
    ex, _ = corpus
    reg = Registry(ex.data_dir)
    save(reg, ex, extract(ex))
    root = ex.data_dir / BLOCKS_DIR
    half = root / STAGING / "TinyBlock.v2.dead"
    half.mkdir(parents=True)
    (half / "TinyBlock.py").write_text("class Half(")
    (root / "Empty").mkdir()  # a name folder made just before the kill
    (root / "TinyBlock" / "v7").mkdir()  # not built by us: no manifest
    assert [r.versions for r in reg.list()] == [("v1",)]
    Registry(ex.data_dir)  # opening cleans what no writer is using
    assert os.listdir(root / STAGING) == [] and not (root / "Empty").exists()


def test_a_read_only_registry_still_lists(corpus, monkeypatch):
    ex, _ = corpus
    save(Registry(ex.data_dir), ex, extract(ex))
    assert Registry(ex.data_dir / "nowhere").list() == []
    assert not (ex.data_dir / "nowhere").exists()  # reading creates nothing

    def no_lock(self, blocking=True):  # what a lock file that cannot be created gives
        raise RegistryError(f"cannot write the registry at {self.root}: Permission denied")
    monkeypatch.setattr(Registry, "_lock", no_lock)
    reg = Registry(ex.data_dir)
    assert [r.name for r in reg.list()] == ["TinyBlock"]
    assert reg.show("TinyBlock").version == "v1"
    with pytest.raises(RegistryError, match="cannot write the registry"):
        reg.remove("TinyBlock")


# -- command line ----------------------------------------------------------------------------
def nnrag(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_round_trip(corpus, capsys, tmp_path):
    ex, _ = corpus
    data = str(ex.data_dir)
    code, out, err = nnrag(capsys, "registry", "list", "--data-dir", data)
    assert code == 0 and out == "" and "no saved blocks" in err
    save(Registry(data), ex, extract(ex), report("instantiate"))

    code, out, _ = nnrag(capsys, "--data-dir", data, "registry", "list", "--json")
    assert code == 0
    [row] = json.loads(out)
    assert (row["name"], row["latest"], row["level"], row["validated"]) == (
        "TinyBlock", "v1", "instantiate", True)
    code, out, err = nnrag(capsys, "registry", "list", "--data-dir", data)
    assert code == 0 and out.splitlines()[1].split()[:3] == ["TinyBlock", "v1", "1"]
    assert "validated (instantiate)" in out and "1 saved block" in err

    code, out, _ = nnrag(capsys, "registry", "show", "TinyBlock", "--data-dir", data, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["version"] == "v1"
    assert shown["provenance"]["definitions"][0]["swhid"].startswith("swh:1:cnt:")
    assert Path(shown["files"]["code"]).is_file()
    code, out, _ = nnrag(capsys, "registry", "show", "TinyBlock", "--data-dir", data)
    assert code == 0 and "fixpkg/helpers.py:5-6 scale  swh:1:cnt:" in out
    code, out, _ = nnrag(capsys, "registry", "show", "TinyBlock", "--code", "--data-dir", data)
    assert code == 0 and out == extract(ex).generated.code

    dest = tmp_path / "exported"
    code, out, _ = nnrag(capsys, "registry", "export", "TinyBlock", str(dest), "--data-dir", data)
    assert code == 0 and len(out.splitlines()) == 4 and (dest / "TinyBlock.py").is_file()
    code, out, err = nnrag(capsys, "registry", "export", "TinyBlock", str(dest),
                           "--data-dir", data)
    assert code == 2 and out == ""
    assert err.startswith("nnrag: error: refusing to overwrite") and "--force" in err
    code, out, _ = nnrag(capsys, "registry", "export", "TinyBlock", str(dest), "--force",
                         "--json", "--data-dir", data)
    assert code == 0 and len(json.loads(out)["files"]) == 4

    for argv in (("show", "Nope"), ("remove", "Nope"), ("export", "Nope", str(dest))):
        code, out, err = nnrag(capsys, "registry", *argv, "--data-dir", data)
        assert (code, out, err) == (2, "", "nnrag: error: no saved block named 'Nope'\n")
    code, _, err = nnrag(capsys, "registry", "show", "../evil", "--data-dir", data)
    assert code == 2 and err.startswith("nnrag: error: invalid block name '../evil'")
    assert len(err.splitlines()) == 1
    code, _, err = nnrag(capsys, "registry", "show", "TinyBlock", "--version", "v9",
                         "--data-dir", data)
    assert code == 2 and "has no version v9 (saved: v1)" in err

    code, out, _ = nnrag(capsys, "registry", "remove", "TinyBlock", "--json", "--data-dir", data)
    assert code == 0 and json.loads(out) == {"name": "TinyBlock", "removed": ["v1"]}
    code, out, _ = nnrag(capsys, "registry", "list", "--json", "--data-dir", data)
    assert json.loads(out) == []


def test_cli_in_a_fresh_process_uses_nnrag_data_dir(corpus):
    ex, _ = corpus
    save(Registry(ex.data_dir), ex, extract(ex))
    env = {**os.environ, "NNRAG_DATA_DIR": str(ex.data_dir)}
    run = subprocess.run([sys.executable, "-m", "nnrag_tui", "registry", "list", "--json"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
                         check=False)
    assert run.returncode == 0 and [r["name"] for r in json.loads(run.stdout)] == ["TinyBlock"]
    run = subprocess.run([sys.executable, "-m", "nnrag_tui", "registry", "remove", "X"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
                         check=False)
    assert (run.returncode, run.stderr) == (2, "nnrag: error: no saved block named 'X'\n")


# -- processes: concurrent savers and SIGKILL -------------------------------------------------
SAVER = r'''
import dataclasses, pickle, sys

from nnrag_tui.engine.provenance import build_requirements
from nnrag_tui.engine.registry import Registry

data_dir, blob, progress, start, stop, names = sys.argv[1:7]
start, stop, names = int(start), int(stop), int(names)
extraction, sources = pickle.loads(open(blob, "rb").read())


class Report:
    validated, level, stages = True, "import", []

    def as_dict(self):
        return {"validated": True, "level": "import"}


try:
    with open(progress) as fh:
        done = {int(line) for line in fh.read().splitlines(keepends=True) if line.endswith("\n")}
except FileNotFoundError:
    done = set()
reg = Registry(data_dir)
build_requirements("import os\n", [])  # warm the distribution map: kills land in saves
print("ready", flush=True)
for i in range(start, stop):
    if i in done:
        continue
    gen = dataclasses.replace(extraction.generated,
                              code=extraction.generated.code + f"# variant {i}\n")
    ext = dataclasses.replace(extraction, generated=gen)
    name = f"Blk{i % names}"
    reg.save(ext, sources=sources, name=name)
    if i % 5 == 0:  # and record a validation run on it: an in-place provenance update
        reg.save(ext, Report(), sources=sources, name=name)
    with open(progress, "a") as fh:
        fh.write(f"{i}\n")
'''


@pytest.fixture
def saver(corpus, tmp_path):
    ex, _ = corpus
    blob = tmp_path / "extraction.pickle"
    blob.write_bytes(pickle.dumps((extract(ex), ex.store.source_roots())))
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def start(data_dir: Path, progress: Path, lo: int, hi: int, names: int):
        return subprocess.Popen(
            [sys.executable, str(script), str(data_dir), str(blob), str(progress), str(lo),
             str(hi), str(names)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)
    return start


def variant_of(code: str) -> int:
    m = re.search(r"# variant (\d+)\n\Z", code)
    assert m, code[-200:]
    return int(m.group(1))


def check_complete_on_disk(data_dir: Path) -> dict[str, list[int]]:
    """Without the Registry (so without its cleanup): every version folder is complete."""
    found: dict[str, list[int]] = {}
    root = data_dir / BLOCKS_DIR
    if not root.is_dir():
        return found
    for name_dir in root.iterdir():
        if name_dir.name.startswith("."):
            continue
        for vdir in name_dir.iterdir():
            if not re.fullmatch(r"v\d+", vdir.name):
                continue
            manifest = json.loads((vdir / MANIFEST).read_text())
            assert set(manifest["files"]) == {f"{name_dir.name}.py", SPEC, PROVENANCE,
                                              REQUIREMENTS}
            ast.parse((vdir / manifest["code"]).read_text())
            for f in (SPEC, PROVENANCE, REQUIREMENTS):
                json.loads((vdir / f).read_text())
            found.setdefault(name_dir.name, []).append(int(vdir.name[1:]))
    return {k: sorted(v) for k, v in found.items()}


def check_registry(data_dir: Path) -> dict[str, list[int]]:
    reg = Registry(data_dir)
    listed = {}
    for row in reg.list():
        for v in row.versions:
            assert reg.verify(row.name, v) == [], (row.name, v)
            shown = reg.show(row.name, v)
            ast.parse(shown.code_path.read_text())
        listed[row.name] = [int(v[1:]) for v in row.versions]
    return listed


def test_two_processes_saving_at_once_corrupt_nothing(saver, tmp_path):
    data = tmp_path / "shared"
    # both save variants 20..39, each has 20 of its own; every variant ends up exactly once
    a = saver(data, tmp_path / "a.progress", 0, 40, 1)
    b = saver(data, tmp_path / "b.progress", 20, 60, 1)
    for p in (a, b):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    reg = Registry(data)
    [row] = reg.list()
    assert row.versions == tuple(f"v{i}" for i in range(1, 61))
    variants = sorted(variant_of(reg.code("Blk0", v)) for v in row.versions)
    assert variants == list(range(60))
    assert all(reg.verify("Blk0", v) == [] for v in row.versions)
