"""The command line: `nnrag index|blocks|sources`, their JSON, filters and error handling, plus
one end-to-end run that clones a local bare git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from helpers import ROOT, fixture, git_env, make_bare_repo, write_config

from nnrag_tui.cli import main


def nnrag(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_module(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m nnrag_tui ...` in a fresh interpreter, as a user would run it."""
    return subprocess.run([sys.executable, "-m", "nnrag_tui", *argv], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120, check=False)


@pytest.fixture
def zoo_config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "repo_config.json", {
        "zoo": {"path": str(fixture("discovery") / "zoo"), "priority": 1},
        "reexport": {"path": str(fixture("reexport") / "pkg"), "priority": 2},
    })


@pytest.fixture
def cache(tmp_path: Path) -> str:
    return str(tmp_path / "cache")


def test_index_json_is_one_object_with_the_counts(capsys, zoo_config, cache):
    code, out, err = nnrag(capsys, "index", "--config", str(zoo_config), "--cache-dir", cache,
                           "--json")
    assert code == 0
    report = json.loads(out)
    assert isinstance(report, dict)
    n = len(list((fixture("discovery") / "zoo").glob("*.py"))) + len(
        list((fixture("reexport") / "pkg").rglob("*.py")))
    assert {k: report[k] for k in ("files", "parsed", "cached", "failed")} == {
        "files": n, "parsed": n, "cached": 0, "failed": 0}
    assert report["blocks"] == 29 + 6
    assert isinstance(report["seconds"], float) and report["seconds"] >= 0
    assert "zoo" in err  # progress goes to stderr, never into the JSON
    code, out, _ = nnrag(capsys, "index", "--config", str(zoo_config), "--cache-dir", cache,
                         "--json")
    again = json.loads(out)
    assert (again["parsed"], again["cached"], again["blocks"]) == (0, n, report["blocks"])


def test_index_human_summary(capsys, zoo_config, cache):
    code, out, _ = nnrag(capsys, "index", "--config", str(zoo_config), "--cache-dir", cache)
    assert code == 0
    assert "35 blocks" in out.splitlines()[0]


def blocks_json(capsys, config, cache, *extra) -> list[dict]:
    code, out, _ = nnrag(capsys, "blocks", "--config", str(config), "--cache-dir", cache,
                         "--json", *extra)
    assert code == 0
    return json.loads(out)


def test_blocks_json_fields(capsys, zoo_config, cache):
    rows = blocks_json(capsys, zoo_config, cache)  # indexes on first use
    assert len(rows) == 35
    focal = next(r for r in rows if r["name"] == "FocalLoss")
    assert {k: focal[k] for k in ("name", "qualname", "category", "repo", "path", "line")} == {
        "name": "FocalLoss", "qualname": "zoo.categories.FocalLoss", "category": "loss",
        "repo": "zoo", "path": "zoo/categories.py", "line": 31}
    src = (fixture("discovery") / focal["path"]).read_text().splitlines()
    assert src[focal["line"] - 1].startswith("class FocalLoss(")
    inner = next(r for r in rows if r["name"] == "Inner")
    assert inner["qualname"] == "zoo.nested.Outer.Inner"


def test_blocks_filters(capsys, zoo_config, cache):
    nnrag(capsys, "index", "--config", str(zoo_config), "--cache-dir", cache)
    pooling = blocks_json(capsys, zoo_config, cache, "--category", "pooling")
    assert {r["name"] for r in pooling} == {"BarPool2d", "Shrink"}
    assert {r["category"] for r in pooling} == {"pooling"}
    reexport = blocks_json(capsys, zoo_config, cache, "--repo", "reexport")
    assert {r["name"] for r in reexport} == {"Mlp", "GluMlp", "LayerNorm2d", "Hidden", "GELU",
                                             "Block"}
    assert {r["repo"] for r in reexport} == {"reexport"}
    attention = blocks_json(capsys, zoo_config, cache, "--match", "*Attention*")
    assert [r["name"] for r in attention] == ["FooAttention"]
    chain = blocks_json(capsys, zoo_config, cache, "--match", "zoo.chain.*")
    assert {r["name"] for r in chain} == {"Base", "Derived", "GrandChild", "FromOtherModule",
                                          "MixedIn"}
    both = blocks_json(capsys, zoo_config, cache, "--match", "Block", "--category",
                       "transformer_block")
    assert {(r["repo"], r["qualname"]) for r in both} == {
        ("zoo", "zoo.categories.Block"), ("reexport", "pkg.models.vit.Block")}
    assert blocks_json(capsys, zoo_config, cache, "--repo", "nope") == []


def test_blocks_plain_listing(capsys, zoo_config, cache):
    code, out, err = nnrag(capsys, "blocks", "--config", str(zoo_config), "--cache-dir", cache,
                           "--category", "loss")
    assert code == 0
    assert out.split() == ["FocalLoss", "loss", "zoo", "zoo/categories.py:31"]
    assert "1 blocks" in err


@pytest.mark.parametrize("content,needle", [
    ('{\n  "r": {\n    "url": "https://x/r.git",\n  }\n}\n', "line 4"),
    ('{"r": {"url": "https://x/r.git", "priority": -1}}', "'priority'"),
    ('{"r": {"url": "ext::sh -c id"}}', "remote helper"),
    ('{"r": {"url": "https://x/r.git", "path": "/x"}}', "exactly one of"),
    ('["not", "an", "object"]', "top level"),
])
@pytest.mark.parametrize("command", ["index", "blocks", "sources"])
def test_bad_config_one_line_exit_2(capsys, tmp_path, cache, command, content, needle):
    cfg = tmp_path / "bad.json"
    cfg.write_text(content)
    code, out, err = nnrag(capsys, command, "--config", str(cfg), "--cache-dir", cache)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nnrag: error: ")
    assert needle in lines[0] and "Traceback" not in err


def test_bad_config_in_a_fresh_process_has_no_traceback(tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text('{"r": {"url": 5}}')
    proc = run_module("index", "--config", str(cfg), "--cache-dir", str(tmp_path / "c"))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"nnrag: error: {cfg}: repository 'r': field 'url' must be a non-empty string"]


def test_missing_config_file(capsys, tmp_path, cache):
    code, _, err = nnrag(capsys, "index", "--config", str(tmp_path / "nope.json"),
                         "--cache-dir", cache)
    assert code == 2
    assert err.strip() == f"nnrag: error: config file not found: {tmp_path / 'nope.json'}"


def test_unknown_key_is_a_warning_and_the_run_goes_on(capsys, tmp_path, cache):
    cfg = write_config(tmp_path / "c.json", {
        "zoo": {"path": str(fixture("discovery") / "zoo"), "branch": "main"}})
    code, out, err = nnrag(capsys, "index", "--config", str(cfg), "--cache-dir", cache, "--json")
    assert code == 0 and json.loads(out)["blocks"] == 29
    assert "nnrag: warning: " in err and "'branch'" in err


def test_nonexistent_path_source_is_a_clear_error(capsys, tmp_path, cache):
    ghost = tmp_path / "no" / "such" / "dir"
    cfg = write_config(tmp_path / "c.json", {"ghost": {"path": str(ghost)}})
    for command in ("index", "blocks"):
        code, out, err = nnrag(capsys, command, "--config", str(cfg), "--cache-dir", cache)
        assert code == 2, command
        assert f"nnrag: error: ghost: path does not exist: {ghost}" in err.splitlines()
        assert "Traceback" not in err
    code, out, _ = nnrag(capsys, "sources", "--config", str(cfg), "--cache-dir", cache, "--json")
    (row,) = json.loads(out)
    assert row["name"] == "ghost" and "path does not exist" in row["error"]


def test_sources_says_which_source_is_external(capsys, tmp_path, cache):
    cfg = write_config(tmp_path / "c.json", {
        "zoo": {"path": str(fixture("discovery") / "zoo"), "external": True}})
    code, out, _ = nnrag(capsys, "sources", "--config", str(cfg), "--cache-dir", cache)
    assert code == 0 and out.rstrip().endswith("(external: other blocks import it)")
    code, out, _ = nnrag(capsys, "sources", "--config", str(cfg), "--cache-dir", cache, "--json")
    assert [r["external"] for r in json.loads(out)] == [True]
    bad = write_config(tmp_path / "bad.json", {
        "zoo": {"path": str(fixture("discovery") / "zoo"), "external": "yes"}})
    code, _, err = nnrag(capsys, "sources", "--config", str(bad), "--cache-dir", cache)
    assert code == 2 and "field 'external' must be true or false" in err
    assert "Traceback" not in err


def test_one_bad_source_does_not_stop_the_others(capsys, tmp_path, cache):
    cfg = write_config(tmp_path / "c.json", {
        "ghost": {"path": str(tmp_path / "missing")},
        "zoo": {"path": str(fixture("discovery") / "zoo")}})
    code, out, err = nnrag(capsys, "index", "--config", str(cfg), "--cache-dir", cache, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["blocks"] == 29
    assert [s["name"] for s in report["sources"] if s.get("error")] == ["ghost"]
    assert "nnrag: error: ghost: path does not exist" in err


def test_cache_dir_from_environment(capsys, tmp_path, monkeypatch, zoo_config):
    monkeypatch.setenv("NNRAG_CACHE_DIR", str(tmp_path / "envcache"))
    code, _, _ = nnrag(capsys, "index", "--config", str(zoo_config))
    assert code == 0
    assert (tmp_path / "envcache" / "index.sqlite3").is_file()


@pytest.mark.skipif(not any(d.metadata["Name"] == "torch" for d in metadata.distributions()),
                    reason="torch is not installed")
def test_default_corpus_is_the_installed_torch(capsys, cache):
    code, out, _ = nnrag(capsys, "index", "--cache-dir", cache, "--json")
    assert code == 0
    report = json.loads(out)
    torch = next(s for s in report["sources"] if s["name"] == "torch")
    assert torch["failed"] == 0 and torch["files"] > 20
    rows = blocks_json_default(capsys, cache)
    names = {r["name"] for r in rows if r["repo"] == "torch"}
    assert len(names) >= 100
    assert {"Conv2d", "MultiheadAttention", "LayerNorm", "MaxPool2d", "CrossEntropyLoss",
            "TransformerEncoderLayer"} <= names
    assert "Module" not in names and "ModuleList" not in names
    cats = {r["name"]: r["category"] for r in rows if r["repo"] == "torch"}
    assert (cats["Conv2d"], cats["MaxPool2d"], cats["CrossEntropyLoss"]) == (
        "convolution", "pooling", "loss")


def blocks_json_default(capsys, cache) -> list[dict]:
    code, out, _ = nnrag(capsys, "blocks", "--cache-dir", cache, "--json")
    assert code == 0
    return json.loads(out)


# -- end to end: a local bare repository cloned by file:// URL ----------------------------
def test_end_to_end_clone_sparse_and_index(tmp_path, monkeypatch):
    git_env(tmp_path, monkeypatch)
    work = tmp_path / "upstream"
    work.mkdir()
    files = {f"pkg/{p.relative_to(fixture('reexport') / 'pkg').as_posix()}": p.read_text()
             for p in (fixture("reexport") / "pkg").rglob("*.py")}
    files.update({
        "docs/conf.py": "class NotIndexed:\n    pass\n",
        "weights/model.bin": b"\0" * 4096,
        "README.md": "upstream\n",
    })
    url, sha = make_bare_repo(work, files)
    cfg = write_config(tmp_path / "repo_config.json", {
        "owner/repo": {"url": url, "priority": 1, "paths": ["pkg"],
                       "description": "a local upstream"}})
    cache = tmp_path / "cache"
    env = {**os.environ, "NNRAG_CACHE_DIR": str(cache)}

    proc = run_module("index", "--config", str(cfg), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    n = sum(1 for k in files if k.startswith("pkg/"))
    assert (report["files"], report["parsed"], report["failed"]) == (n, n, 0)
    assert report["sources"][0]["commit"] == sha

    clone = cache / "repos" / "owner_repo"
    assert (clone / "pkg" / "models" / "vit.py").is_file()
    assert not (clone / "docs").exists() and not (clone / "weights").exists()  # sparse

    proc = run_module("blocks", "--config", str(cfg), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {r["name"] for r in rows} == {"Mlp", "GluMlp", "LayerNorm2d", "Hidden", "GELU",
                                         "Block"}
    assert {r["repo"] for r in rows} == {"owner/repo"}
    assert all(r["path"].startswith("pkg/") for r in rows)

    proc = run_module("sources", "--config", str(cfg), "--json", env=env)
    (src,) = json.loads(proc.stdout)
    assert (src["name"], src["kind"], src["origin"], src["commit"]) == (
        "owner/repo", "url", url, sha)
    assert src["files"] == n and src["blocks"] == 6 and not src["error"]

    # offline re-run: nothing fetched, nothing parsed
    proc = run_module("index", "--config", str(cfg), "--json", "--policy", "never", env=env)
    again = json.loads(proc.stdout)
    assert (again["parsed"], again["cached"], again["blocks"]) == (0, n, 6)


def test_options_before_the_command_are_honoured(capsys, zoo_config, cache):
    code, out, _ = nnrag(capsys, "--config", str(zoo_config), "--cache-dir", cache, "--json",
                         "index")
    assert code == 0
    assert json.loads(out)["blocks"] == 35  # the zoo config, not the built-in default corpus
    assert (Path(cache) / "index.sqlite3").is_file()
