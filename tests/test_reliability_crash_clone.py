"""Crash consistency of the clone cache: ``nnrag index`` on a ``file://`` git source is
SIGKILLed at random moments, at least 50 times, while the remote keeps moving and the sparse
paths change (so kills land in fresh clones, fetches, checkouts, marker writes and indexing).
After every kill the cached clone is either absent, marked incomplete, or a clean checkout of
what its marker says; the run after the last kill needs no repair and ends with the same clone
and the same index as an uninterrupted run into a fresh cache.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers import dump_index, git, git_env, make_bare_repo
from reliability_helpers import (
    check_database,
    cli_env,
    read_until,
    run_cli,
    sigkill,
    spawn_cli,
    timm_layers,
)

from nnrag_tui.engine.extractor import INDEX_FILE
from nnrag_tui.engine.gitcache import MARKER

KILLS = int(os.environ.get("NNRAG_RELIABILITY_KILLS", "50"))


@pytest.fixture
def remote(tmp_path, monkeypatch, timm_source):
    """A bare repository holding a copy of real code, and the work tree that pushes to it."""
    git_env(tmp_path, monkeypatch)
    src = tmp_path / "seed"
    shutil.copytree(timm_layers(timm_source), src / "layers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (src / "layers" / "__init__.py").touch()
    (src / "docs").mkdir()
    (src / "docs" / "notes.py").write_text("NOTE = 1\n")
    url, _ = make_bare_repo(tmp_path / "remote", src)
    work = tmp_path / "remote" / "work"
    git("remote", "add", "origin", str(tmp_path / "remote" / "remote.git"), cwd=work)
    return url, work


def check_clone(dest: Path) -> str:
    """The cached clone after a kill: 'absent', 'incomplete' (marked so: the next run clones
    again), or 'complete' and then its work tree is exactly its commit."""
    marker = dest / ".git" / MARKER
    if not dest.exists():
        return "absent"
    try:
        complete = json.loads(marker.read_text()).get("complete") is True
    except (OSError, ValueError):
        complete = False
    if not complete:
        return "incomplete"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=dest,
                            capture_output=True, text=True, check=True).stdout
    assert status == "", f"a clone marked complete differs from its commit:\n{status}"
    return "complete"


def test_sigkill_during_cloning_and_fetching_then_the_next_run_equals_a_fresh_one(tmp_path,
                                                                                  remote):
    url, work = remote
    cache = tmp_path / "cache"
    dest = cache / "repos" / "corpus"
    configs = {
        "narrow": {"corpus": {"url": url, "paths": ["layers"]}},
        "wide": {"corpus": {"url": url, "paths": ["layers", "docs"]}},
    }
    config = tmp_path / "config.json"
    env = cli_env()
    rng = random.Random(os.environ.get("NNRAG_KILL_SEED", "8"))
    kills = finished = pushes = 0
    states: dict[str, int] = {}
    files = sorted((work / "layers").glob("*.py"))
    t0 = time.monotonic()
    while kills < KILLS:
        assert time.monotonic() - t0 < 240, f"kill loop too slow ({kills} kills)"
        if rng.random() < 0.7:  # the remote moves: the next run fetches
            for p in rng.sample(files, 4):
                p.write_text(p.read_text() + f"\n\ndef pushed_{pushes}():\n    return {pushes}\n")
            git("commit", "-qam", f"change {pushes}", cwd=work)
            git("push", "-q", "origin", "HEAD:main", cwd=work)
            pushes += 1
        # a different sparse set: the next run clones afresh into a temporary directory
        which = "wide" if rng.random() < 0.25 else "narrow"
        config.write_text(json.dumps(configs[which]))
        proc = spawn_cli(["index", "--config", str(config), "--cache-dir", str(cache),
                          "--policy", "always", "--workers", "2"], env)
        err = read_until(proc, b"preparing", 60)
        time.sleep(rng.uniform(0.0, 0.25 if rng.random() < 0.5 else 0.6))  # git, then index
        status, leftovers = sigkill(proc)
        err += proc.stderr.read()
        proc.stderr.close()
        assert not leftovers, f"processes outlived the killed run: {leftovers}"
        assert b"Traceback" not in err, err.decode()
        if status == 0:
            finished += 1
        else:
            assert status == -9, (status, err.decode())
            kills += 1
        state = check_clone(dest)
        states[state] = states.get(state, 0) + 1
        if (cache / INDEX_FILE).exists():
            check_database(cache / INDEX_FILE)
    config.write_text(json.dumps(configs["narrow"]))
    args = ["index", "--config", str(config), "--policy", "always"]
    done = run_cli([*args, "--cache-dir", str(cache)], env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "waiting" not in done.stderr, done.stderr
    assert check_clone(dest) == "complete"
    assert not list(dest.parent.glob(".corpus.tmp-*")), "temporary clones left behind"
    fresh = tmp_path / "fresh"
    ref = run_cli([*args, "--cache-dir", str(fresh)], env=env, timeout=180)
    assert ref.returncode == 0, ref.stderr
    head = git("rev-parse", "HEAD", cwd=work)
    assert git("rev-parse", "HEAD", cwd=dest) == head
    assert git("rev-parse", "HEAD", cwd=fresh / "repos" / "corpus") == head
    ours, theirs = dump_index(cache / INDEX_FILE), dump_index(fresh / INDEX_FILE)
    # two checkouts differ only in where they are and when their files were written
    ours["sources"] = [tuple(str(v).replace(str(cache), str(fresh)) if isinstance(v, str) else v
                             for v in row) for row in ours["sources"]]
    for rows in (ours, theirs):
        rows["files"] = [r[:6] + r[7:] for r in rows["files"]]  # without mtime_ns
    assert ours == theirs
    print(f"\nclone kill test: {kills} SIGKILLs survived, {finished} runs finished first, "
          f"{pushes} pushes; clone after a kill: {states}; {time.monotonic() - t0:.1f} s")
