"""Shared helpers for the engine tests: fixture repositories, configs, git remotes, index dumps.

Imported by the test modules as ``helpers`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from nnrag_tui.engine.bindings import ModuleEntry, ModuleIndex
from nnrag_tui.engine.config import CorpusConfig, parse_config
from nnrag_tui.engine.facts import ModuleFacts
from nnrag_tui.engine.parse import parse_bytes

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


def fixture(name: str) -> Path:
    path = FIXTURES / name
    assert path.is_dir(), f"missing fixture folder {path}"
    return path


def copy_fixture(name: str, dest: Path) -> Path:
    """A private copy of a fixture repository that a test may modify."""
    out = dest / name
    shutil.copytree(fixture(name), out, ignore=shutil.ignore_patterns("__pycache__"))
    return out


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return root


# -- configuration -------------------------------------------------------------------------
def path_config(sources: dict[str, Path | str | dict], **top) -> CorpusConfig:
    """A config of ``path`` sources: ``{"name": dir}`` or ``{"name": {"path": dir, ...}}``."""
    repos = {}
    for i, (name, spec) in enumerate(sources.items()):
        if isinstance(spec, dict):
            repos[name] = {**spec, "path": str(spec["path"])}
        else:
            repos[name] = {"path": str(spec), "priority": i + 1}
    data = {"repositories": repos, **top} if top else repos
    return parse_config(data, origin="<test>")


def extract_tree(tmp_path: Path, files: dict[str, str | bytes], name: str = "Net"):
    """Writes ``files`` as one path source under ``tmp_path``, indexes it and extracts the
    block ``name``; the extraction, which must have succeeded."""
    from nnrag_tui.engine.extractor import BlockExtractor

    root = write_tree(tmp_path / "repo", files)
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        result = ex.extract_single_block(name)
    assert result.ok, result.error
    return result


def write_config(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


# -- parsing without the indexer -----------------------------------------------------------
def iter_py(root: Path) -> Iterator[str]:
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" not in p.parts:
            yield p.relative_to(root).as_posix()


def parse_tree(root: Path) -> list[ModuleFacts]:
    return [parse_bytes((root / rel).read_bytes(), rel) for rel in iter_py(root)]


def module_index(sources: dict[str, Path], priorities: dict[str, int] | None = None
                 ) -> ModuleIndex:
    """A ``ModuleIndex`` over fixture folders, each the import root of one source."""
    rows = []
    fid = 0
    for i, (name, root) in enumerate(sources.items()):
        prio = (priorities or {}).get(name, i + 1)
        for facts in parse_tree(root):
            assert facts.ok, f"{name}:{facts.relpath}: {facts.error}"
            fid += 1
            rows.append((name, prio, fid, facts))
    return ModuleIndex(rows)


def entry(index: ModuleIndex, module: str, source: str | None = None) -> ModuleEntry:
    cands = [e for e in index.entries.values()
             if e.module == module and (source is None or e.source == source)]
    assert len(cands) == 1, f"{module} ({source}): {len(cands)} entries"
    return cands[0]


# -- git -----------------------------------------------------------------------------------
def git_env(tmp_path: Path, monkeypatch) -> None:
    """An isolated git identity/config for the test (no user or system config)."""
    cfg = tmp_path / "gitconfig"
    cfg.write_text("[user]\n\tname = Test\n\temail = test@example.com\n"
                   "[init]\n\tdefaultBranch = main\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{k}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{k}_EMAIL", "test@example.com")


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_bare_repo(base: Path, files: dict[str, str | bytes] | Path) -> tuple[str, str]:
    """Commits ``files`` (a mapping or a folder to copy) to a new repository, clones it bare
    with partial-clone filters allowed and returns ``(file:// URL, commit sha)``.
    Call ``git_env`` first."""
    work = base / "work"
    bare = base / "remote.git"
    if isinstance(files, Path):
        shutil.copytree(files, work, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        work.mkdir(parents=True)
        write_tree(work, files)
    git("init", "-q", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "initial", cwd=work)
    sha = git("rev-parse", "HEAD", cwd=work)
    git("clone", "-q", "--bare", str(work), str(bare))
    git("config", "uploadpack.allowFilter", "true", cwd=bare)
    return bare.as_uri(), sha


# -- the index database --------------------------------------------------------------------
def dump_index(db_path: Path) -> dict[str, list[tuple]]:
    """Every row of files/symbols/imports/blocks (and sources), without ids and times, with
    file ids replaced by (source, relpath), sorted: two equal dumps mean equal indexes."""
    db = sqlite3.connect(str(db_path))
    try:
        def rows(q: str) -> list[tuple]:
            return sorted(tuple(r) for r in db.execute(q))

        key = "(SELECT s.name || ':' || f.relpath FROM files f JOIN sources s ON s.id=f.source_id"\
              " WHERE f.id=t.file_id)"
        return {
            "sources": rows("SELECT name, kind, origin, root, commit_sha, version, priority, error"
                            " FROM sources"),
            "files": rows("SELECT s.name, f.relpath, f.module, f.is_package, f.sha1, f.size,"
                          " f.mtime_ns, f.lines, f.all_names, f.error FROM files f"
                          " JOIN sources s ON s.id=f.source_id"),
            "symbols": rows(f"SELECT {key}, name, qualname, kind, line, end_line, col, end_col,"
                            " def_line, bases, keywords, decorators, methods, abstract_methods,"
                            " forward_raises, calls, doc, guard, parent FROM symbols t"),
            "imports": rows(f"SELECT {key}, bound, module, name, asname, level, target, line,"
                            " end_line, guard FROM imports t"),
            "blocks": rows(f"SELECT {key}, source, module, qualname, name, relpath, line,"
                           " end_line, category, rule, bases, doc, guard FROM blocks t"),
        }
    finally:
        db.close()


def block_keys(blocks: Iterable) -> set[str]:
    return {b.key for b in blocks}


def bump_mtime(path: Path, seconds: float = 10.0) -> None:
    st = path.stat()
    ns = st.st_mtime_ns + int(seconds * 1e9)
    os.utime(path, ns=(ns, ns))
