"""Indexer + FileIndexStore: incremental re-indexing, reproducible cold runs, schema rebuilds and
failed files recorded as data."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers import (block_keys, bump_mtime, copy_fixture, dump_index, git, git_env, path_config,
                     write_tree)

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import INDEX_FILE, BlockExtractor
from nnrag_tui.engine.indexer import POOL_THRESHOLD, Cancelled
from nnrag_tui.engine.store import SCHEMA_VERSION, FileIndexStore


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A private copy of the discovery fixture: a package ``zoo`` of 11 files."""
    return copy_fixture("discovery", tmp_path) / "zoo"


def run(src: Path, cache: Path, **kw):
    with BlockExtractor(path_config({"zoo": src}), cache_dir=cache, **kw) as ex:
        report = ex.index()
        return report, block_keys(ex.blocks())


def n_files(src: Path) -> int:
    return len(list(src.rglob("*.py")))


def test_first_run_parses_everything_second_run_nothing(repo, tmp_path):
    cache = tmp_path / "cache"
    first, blocks1 = run(repo, cache)
    n = n_files(repo)
    assert (first.files, first.parsed, first.cached, first.failed) == (n, n, 0, 0)
    assert first.blocks == len(blocks1) > 20
    second, blocks2 = run(repo, cache)
    assert (second.files, second.parsed, second.cached, second.removed) == (n, 0, n, 0)
    assert blocks2 == blocks1 and second.blocks == first.blocks


def test_content_change_reparses_exactly_one_file(repo, tmp_path):
    cache = tmp_path / "cache"
    _, before = run(repo, cache)
    path = repo / "same_a.py"
    path.write_text(path.read_text().replace("class Head(", "class Head2("))
    report, after = run(repo, cache)
    assert (report.parsed, report.cached) == (1, n_files(repo) - 1)
    assert after == (before - {"zoo.same_a:Head"}) | {"zoo.same_a:Head2"}


def test_same_size_change_is_noticed(repo, tmp_path):
    cache = tmp_path / "cache"
    run(repo, cache)
    path = repo / "same_b.py"
    text = path.read_text()
    path.write_text(text.replace("return -x", "return +x"))
    assert path.stat().st_size == len(text)
    bump_mtime(path)  # an editor save: same size, new mtime
    report, _ = run(repo, cache)
    assert report.parsed == 1


def test_mtime_only_change_parses_nothing(repo, tmp_path):
    cache = tmp_path / "cache"
    run(repo, cache)
    bump_mtime(repo / "chain.py")
    bump_mtime(repo / "nested.py")
    report, _ = run(repo, cache)
    assert (report.parsed, report.cached) == (0, n_files(repo))
    # the new mtime is stored: the next run takes the fast path without reading the files
    db = sqlite3.connect(str(cache / INDEX_FILE))
    stored = dict(db.execute("SELECT relpath, mtime_ns FROM files"))
    db.close()
    assert stored["zoo/chain.py"] == (repo / "chain.py").stat().st_mtime_ns


def test_deleted_file_is_removed_with_its_blocks(repo, tmp_path):
    cache = tmp_path / "cache"
    _, before = run(repo, cache)
    assert "zoo.nested:Outer.Inner" in before
    (repo / "nested.py").unlink()
    report, after = run(repo, cache)
    assert (report.removed, report.parsed, report.files) == (1, 0, n_files(repo))
    assert after == before - {"zoo.nested:Outer", "zoo.nested:Outer.Inner"}
    counts = dump_index(cache / INDEX_FILE)
    assert not [r for r in counts["files"] if r[1] == "zoo/nested.py"]
    assert not [r for r in counts["symbols"] if r[0] == "zoo:zoo/nested.py"]


def test_added_file_is_picked_up(repo, tmp_path):
    cache = tmp_path / "cache"
    _, before = run(repo, cache)
    (repo / "extra.py").write_text(
        "from .chain import Base\n\n\nclass ExtraNorm(Base):\n    pass\n")
    report, after = run(repo, cache)
    assert (report.parsed, report.cached) == (1, n_files(repo) - 1)
    assert after == before | {"zoo.extra:ExtraNorm"}


def test_change_in_a_base_class_file_updates_blocks_elsewhere(repo, tmp_path):
    cache = tmp_path / "cache"
    _, before = run(repo, cache)
    assert "zoo.chain:FromOtherModule" in before
    # ViaAlias stops being a module: the class that inherits it in chain.py goes too
    path = repo / "torch_styles.py"
    path.write_text(path.read_text().replace("class ViaAlias(nn.Module)", "class ViaAlias"))
    report, after = run(repo, cache)
    assert report.parsed == 1
    assert "zoo.chain:FromOtherModule" not in after and "zoo.torch_styles:ViaAlias" not in after


def many_files(root: Path, n: int) -> Path:
    """A package big enough for the process pool, with cross-module inheritance."""
    files = {"big/__init__.py": "", "big/base.py":
             "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    def forward(self, x):\n"
             "        return x\n"}
    for i in range(n):
        files[f"big/m{i:03d}.py"] = (
            f"from .base import Base\nfrom . import m{(i + 1) % n:03d}\n\n\n"
            f"class Conv{i}(Base):\n    pass\n\n\nclass Attention{i}(Base):\n"
            f"    def forward(self, x):\n        return x.softmax(-1)\n")
    write_tree(root, files)
    return root / "big"


def test_two_cold_runs_give_identical_indexes(tmp_path):
    src = many_files(tmp_path / "src", 3 * POOL_THRESHOLD)
    cfg = path_config({"big": src, "zoo": copy_fixture("discovery", tmp_path) / "zoo"})
    dumps = []
    for i, workers in enumerate((2, 2, 1)):  # twice through the pool, once in-process
        cache = tmp_path / f"cache{i}"
        with BlockExtractor(cfg, cache_dir=cache, workers=workers) as ex:
            report = ex.index()
        assert report.parsed == report.files == 3 * POOL_THRESHOLD + 2 + 11
        dumps.append(dump_index(cache / INDEX_FILE))
    assert len(dumps[0]["blocks"]) == 1 + 2 * 3 * POOL_THRESHOLD + 29
    for table in ("files", "symbols", "imports", "blocks", "sources"):
        assert dumps[0][table] == dumps[1][table], table
        assert dumps[0][table] == dumps[2][table], table


def test_schema_version_change_rebuilds(repo, tmp_path):
    cache = tmp_path / "cache"
    run(repo, cache)
    before = dump_index(cache / INDEX_FILE)
    db = sqlite3.connect(str(cache / INDEX_FILE))
    db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION - 1),))
    db.execute("CREATE TABLE leftover_from_old_version (x)")
    db.commit()
    db.close()
    report, _ = run(repo, cache)
    assert report.parsed == n_files(repo)  # nothing trusted from the old layout
    assert dump_index(cache / INDEX_FILE) == before
    db = sqlite3.connect(str(cache / INDEX_FILE))
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert "leftover_from_old_version" not in tables


def test_store_opens_in_wal_mode(tmp_path):
    store = FileIndexStore(tmp_path / "x.sqlite3")
    try:
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        store.close()


def test_failed_files_are_recorded_and_never_stop_the_run(repo, tmp_path):
    write_tree(repo, {
        "broken_syntax.py": "class Broken(:\n    pass\n",
        "latin.py": b"NAME = 'caf\xe9'\n",
        "binary.py": b"\x00\x01\x02",
        "huge.py": "x = 1\n" * 200_000,  # 1.2 MB > the 1 MB limit below
    })
    cfg = path_config({"zoo": repo}, fetch={"max_file_mb": 1})
    with BlockExtractor(cfg, cache_dir=tmp_path / "cache") as ex:
        report = ex.index()
        blocks = block_keys(ex.blocks())
    reasons = {path: reason for _, path, reason in report.failures}
    assert report.failed == 4
    assert reasons["zoo/broken_syntax.py"].startswith("syntax error at line 1")
    assert reasons["zoo/latin.py"].startswith("undecodable")
    assert "NUL" in reasons["zoo/binary.py"]
    assert reasons["zoo/huge.py"].startswith("too large")
    assert report.files == n_files(repo)
    assert "zoo.chain:GrandChild" in blocks  # the rest was indexed
    # failed files are not parsed again while unchanged, and still reported
    with BlockExtractor(cfg, cache_dir=tmp_path / "cache") as ex:
        again = ex.index()
    assert (again.parsed, again.failed) == (0, 4)
    # fixing one re-parses just that file
    (repo / "broken_syntax.py").write_text("class Fixed:\n    pass\n")
    with BlockExtractor(cfg, cache_dir=tmp_path / "cache") as ex:
        fixed = ex.index()
    assert (fixed.parsed, fixed.failed) == (1, 3)


def test_source_dropped_from_config_leaves_the_index(repo, tmp_path):
    cache = tmp_path / "cache"
    other = copy_fixture("reexport", tmp_path) / "pkg"
    with BlockExtractor(path_config({"zoo": repo, "other": other}), cache_dir=cache) as ex:
        ex.index()
        assert {b.source for b in ex.blocks()} == {"zoo", "other"}
    report, _ = run(repo, cache)
    assert report.parsed == 0
    rows = dump_index(cache / INDEX_FILE)
    assert {r[0] for r in rows["sources"]} == {"zoo"}
    assert {r[0] for r in rows["files"]} == {"zoo"}
    assert {r[1] for r in rows["blocks"]} == {"zoo"}


def test_cancel_keeps_the_work_done_and_a_consistent_index(tmp_path, monkeypatch):
    import nnrag_tui.engine.indexer as indexer

    monkeypatch.setattr(indexer, "COMMIT_EVERY", 4)  # commit in small batches
    n = 2 * POOL_THRESHOLD
    src = many_files(tmp_path / "src", n)
    cfg = path_config({"big": src})
    cache = tmp_path / "cache"
    with BlockExtractor(cfg, cache_dir=cache, workers=1) as ex:
        ex.index()
    for p in sorted(src.glob("m*.py")):
        p.write_text(p.read_text() + "\n\nclass Added(Base):\n    pass\n")
    with BlockExtractor(cfg, cache_dir=cache, workers=1) as ex:
        seen = []

        def cancel():
            done = [p.done for p in seen if p.phase == "parse"]
            return bool(done) and done[-1] >= 8

        with pytest.raises(Cancelled):
            ex.index(progress=seen.append, cancel=cancel)
    partial = dump_index(cache / INDEX_FILE)
    # the files parsed before the cancel are kept ...
    added = {r[0] for r in partial["blocks"] if r[4] == "Added"}
    assert 0 < len(added) < n
    # ... and the blocks agree with the files now in the index (discovery ran again)
    with BlockExtractor(cfg, cache_dir=cache, workers=1) as ex:
        ex.store  # noqa: B018  (open without indexing)
        before = dump_index(cache / INDEX_FILE)
        indexer.Indexer(ex.config, ex.store, None).rediscover()
    assert dump_index(cache / INDEX_FILE)["blocks"] == before["blocks"]
    # the next run parses only what is left, and ends equal to an uninterrupted run
    with BlockExtractor(cfg, cache_dir=cache, workers=1) as ex:
        report = ex.index()
    assert report.parsed == n - len(added)
    with BlockExtractor(cfg, cache_dir=tmp_path / "fresh", workers=1) as ex:
        ex.index()
    fresh = dump_index(tmp_path / "fresh" / INDEX_FILE)
    assert dump_index(cache / INDEX_FILE)["blocks"] == fresh["blocks"]


def test_nnrag_cache_dir_is_honoured(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("NNRAG_CACHE_DIR", str(tmp_path / "envcache"))
    with BlockExtractor(path_config({"zoo": repo})) as ex:
        report = ex.index()
        assert ex.cache_dir == (tmp_path / "envcache").resolve()
    assert report.blocks > 0
    assert (tmp_path / "envcache" / INDEX_FILE).is_file()
    # an explicit cache dir beats the environment
    with BlockExtractor(path_config({"zoo": repo}), cache_dir=tmp_path / "explicit") as ex:
        ex.index()
    assert (tmp_path / "explicit" / INDEX_FILE).is_file()


def test_path_source_that_is_a_package_keeps_its_name(repo, tmp_path):
    # `path: .../zoo` (a package): modules are named zoo.*, relative imports work
    _, blocks = run(repo, tmp_path / "cache")
    assert all(k.startswith("zoo.") for k in blocks)
    # `path: .../discovery` (a plain folder holding the package): the same modules
    with BlockExtractor(path_config({"zoo": repo.parent}), cache_dir=tmp_path / "c2") as ex:
        ex.index()
        assert block_keys(ex.blocks()) == blocks


def test_a_path_source_is_at_a_commit_only_where_git_tracks_it(repo, tmp_path, monkeypatch):
    """A checkout's own package is at its HEAD; sources unpacked into a git-ignored folder of
    that checkout are at no commit of it, and the generated header says "unversioned"."""
    git_env(tmp_path, monkeypatch)
    project = tmp_path / "project"
    (project / "vendor").mkdir(parents=True)
    (project / ".gitignore").write_text("vendor/\n")
    tracked = project / "zoo"
    repo.rename(tracked)
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "zoo", cwd=project)
    head = git("rev-parse", "HEAD", cwd=project)
    copy_fixture("discovery", project / "vendor")
    config = path_config({"mine": tracked, "unpacked": project / "vendor" / "discovery" / "zoo"})
    with BlockExtractor(config, cache_dir=tmp_path / "cache") as ex:
        ex.index()
        commits = {s["name"]: s["commit"] for s in ex.sources()}
        assert commits == {"mine": head, "unpacked": None}
        block = next(b for b in ex.blocks(repo="unpacked"))
        res, _ = ex.extract_block(block)
        assert "# source: unpacked " in res.generated.code
        assert "@ unversioned" in res.generated.code and head not in res.generated.code


def test_editing_symbol_patterns_or_priority_rediscovers_without_parsing(repo, tmp_path):
    cache = tmp_path / "cache"
    _, everything = run(repo, cache)
    scoped = path_config({"zoo": {"path": repo, "symbols": ["*Attention*", "*Pool*"]}})
    with BlockExtractor(scoped, cache_dir=cache) as ex:
        report = ex.index()
        assert report.parsed == 0
        assert block_keys(ex.blocks()) == {"zoo.categories:FooAttention",
                                           "zoo.categories:BarPool2d"}
    report, back = run(repo, cache)
    assert report.parsed == 0 and back == everything


ONE_MODULE = ("import torch\n\n\nclass Ensemble(torch.nn.Module):\n"
              "    def forward(self, x):\n        return x\n")


@pytest.mark.parametrize("top_level", [True, False], ids=["top_level.txt", "RECORD only"])
def test_a_distribution_of_one_module_file_is_indexed(top_level, tmp_path, monkeypatch):
    """TabM installs one file, ``tabm.py``, and no package folder: a ``dist`` source of it
    said "has no Python packages". Its module is indexed, whether the wheel lists it in
    ``top_level.txt`` or only in ``RECORD``."""
    site = tmp_path / "site"
    info = "onemod-0.3.dist-info"
    files = {"onemod.py": ONE_MODULE,
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: onemod\nVersion: 0.3\n",
             # (a script the wheel installs beside the interpreter is no module of it)
             f"{info}/RECORD": (f"onemod.py,,\n../../bin/onemod-cli.py,,\n"
                                f"{info}/METADATA,,\n{info}/RECORD,,\n")}
    if top_level:
        files[f"{info}/top_level.txt"] = "onemod\n"
    write_tree(site, files)
    monkeypatch.syspath_prepend(str(site))
    cfg = parse_config({"onemod": {"dist": "onemod"}})
    with BlockExtractor(cfg, cache_dir=tmp_path / "cache") as ex:
        report = ex.index()
        assert (report.files, report.failed) == (1, 0)
        assert block_keys(ex.blocks()) == {"onemod:Ensemble"}
