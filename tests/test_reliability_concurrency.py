"""Several nnrag processes on one cache at once: two ``nnrag index`` runs (the second waits
for the first and says so), processes started in the same instant on an empty cache, and an
index running (in threads, as the TUI runs it) while ``nnrag extract`` works, both ways round.
No corruption, no lost results, no "database is locked", no traceback.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from helpers import dump_index
from reliability_helpers import (
    check_database,
    cli_env,
    finish,
    read_until,
    run_cli,
    spawn_cli,
)

from nnrag_tui.engine.extractor import INDEX_FILE, BlockExtractor

WAITING = "nnrag: waiting for another nnrag process that is indexing this cache"


def clean(err: str) -> None:
    assert "Traceback" not in err, err
    assert "locked" not in err, err


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, timm_source) -> Path:
    """Real code big enough that indexing takes a few seconds: timm's layers and models."""
    root = tmp_path_factory.mktemp("concurrency") / "corpus"
    for sub in ("layers", "models"):
        shutil.copytree(timm_source / "timm" / sub, root / "timm" / sub,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (root / "timm" / "__init__.py").write_text("")
    return root


def write_config(tmp: Path, corpus: Path) -> Path:
    cfg = tmp / "config.json"
    cfg.write_text(json.dumps({"timm": {"path": str(corpus / "timm")}}))
    return cfg


def churn(corpus: Path, tag: str, sub: str = "models") -> int:
    """Edits every file of one sub-package (the other stays as it was)."""
    files = sorted((corpus / "timm" / sub).glob("*.py"))
    for p in files:
        p.write_text(p.read_text() + f"\n# {tag}\n")
    return len(files)


def test_two_index_processes_on_one_cache(tmp_path, corpus):
    cfg = write_config(tmp_path, corpus)
    cache = tmp_path / "cache"
    env = cli_env()
    args = ["index", "--json", "--config", str(cfg), "--cache-dir", str(cache)]
    first = spawn_cli(args, env, stdout=True)
    head = read_until(first, b"preparing", 60)
    second = spawn_cli(args, env, stdout=True)
    out2, err2 = second.communicate(timeout=240)
    out1, rest = first.communicate(timeout=240)
    err1 = (head + rest).decode()
    err2 = err2.decode()
    assert (first.returncode, second.returncode) == (0, 0), (err1, err2)
    clean(err1)
    clean(err2)
    assert WAITING in err2
    a, b = json.loads(out1), json.loads(out2)
    assert a["parsed"] == a["files"] > 100 and b["parsed"] == 0  # the work was done once
    assert a["blocks"] == b["blocks"] > 0
    check_database(cache / INDEX_FILE)
    fresh = tmp_path / "fresh"
    ref = run_cli(["index", "--config", str(cfg), "--cache-dir", str(fresh)], timeout=240)
    assert ref.returncode == 0, ref.stderr
    assert dump_index(cache / INDEX_FILE) == dump_index(fresh / INDEX_FILE)


def test_processes_started_together_on_an_empty_cache(tmp_path, corpus):
    """Creating the database (WAL mode, schema) races with readers that take no lock."""
    cfg = write_config(tmp_path, corpus)
    cache = tmp_path / "cache"
    env = cli_env()
    common = ["--config", str(cfg), "--cache-dir", str(cache)]
    procs = [spawn_cli(cmd + common, env) for cmd in (
        ["sources", "--json"], ["index"], ["blocks", "--match", "Mlp"], ["sources"],
        ["index", "--workers", "1"])]
    errs = [finish(p, timeout=240) for p in procs]
    for p, err in zip(procs, errs):
        assert p.returncode == 0, err
        clean(err)
    assert sum(WAITING in e for e in errs) >= 1  # three indexers, one lock
    check_database(cache / INDEX_FILE)


def reference_extraction(tmp: Path, cfg: Path, cache: Path, names: list[str]
                         ) -> dict[str, bytes]:
    """Extracted alone, with nothing else running."""
    out = tmp / "ref-out"
    proc = run_cli(["extract", "--no-validate", "--blocks", *names, "--out", str(out),
                    "--config", str(cfg),
                    "--cache-dir", str(cache)], timeout=240)
    assert proc.returncode == 0, proc.stderr
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def layer_blocks(cfg: Path, cache: Path, n: int) -> list[str]:
    with BlockExtractor(str(cfg), cache_dir=cache) as ex:
        ex.index()
        keys = [b.key for b in ex.blocks() if ".layers." in b.key]
    assert len(keys) >= n
    return keys[:: max(1, len(keys) // n)][:n]


def test_tui_style_index_while_cli_extracts(tmp_path, corpus):
    """The pytest process plays the TUI (indexing in a worker thread); the CLI extracts."""
    cfg = write_config(tmp_path, corpus)
    cache = tmp_path / "cache"
    names = layer_blocks(cfg, cache, 24)
    expected = reference_extraction(tmp_path, cfg, cache, names)
    env = cli_env()
    extract = ["extract", "--no-validate", "--blocks", *names, "--config", str(cfg),
               "--cache-dir", str(cache)]

    # 1. indexing first: the extraction waits for it, then extracts everything
    churn(corpus, "round 1")
    waits: list[float] = []
    result: dict = {}
    started = threading.Event()

    def on_progress(p) -> None:
        if p.phase == "parse":
            result.setdefault("parsing_since", time.time())
        started.set()

    def tui_index() -> None:
        result.pop("parsing_since", None)
        with BlockExtractor(str(cfg), cache_dir=cache) as ex:
            result["report"] = ex.index(progress=on_progress,
                                        on_wait=lambda: waits.append(time.monotonic()))

    worker = threading.Thread(target=tui_index)
    worker.start()
    assert started.wait(60)
    out1 = tmp_path / "out1"
    cli = run_cli([*extract, "--out", str(out1)], env=env, timeout=240)
    worker.join(240)
    assert cli.returncode == 0, cli.stderr
    clean(cli.stderr)
    assert WAITING in cli.stderr
    assert result["report"].parsed >= 100
    assert {p.name: p.read_bytes() for p in sorted(out1.iterdir())} == expected

    # 2. extraction first: the TUI indexes (writes) while the CLI reads and extracts. Whether
    # they overlap is a race (the extraction takes about a second): each attempt must give
    # the right files, and one of at most three must have overlapped.
    import select

    overlapped = False
    for attempt in range(3):
        out2 = tmp_path / f"out2-{attempt}"
        proc = spawn_cli([*extract, "--out", str(out2)], env)
        deadline = time.monotonic() + 120
        while not (out2.is_dir() and any(out2.iterdir())) and time.monotonic() < deadline:
            select.select([], [], [], 0.05)
        assert out2.is_dir(), "the extraction never started"
        churn(corpus, f"round 2.{attempt}")  # after the CLI's own index step: work to write
        worker = threading.Thread(target=tui_index)
        worker.start()
        err = finish(proc, timeout=240)
        worker.join(240)
        assert proc.returncode == 0, err
        clean(err)
        assert {p.name: p.read_bytes() for p in sorted(out2.iterdir())} == expected
        assert result["report"].parsed >= 100
        # files were still being extracted after the index began writing
        if max(p.stat().st_mtime for p in out2.iterdir()) > result["parsing_since"]:
            overlapped = True
            break
    assert overlapped, "the extraction finished before the index began writing, 3 times"
    check_database(cache / INDEX_FILE)
    fresh = tmp_path / "fresh"
    assert run_cli(["index", "--config", str(cfg), "--cache-dir", str(fresh)],
                   timeout=240).returncode == 0
    assert dump_index(cache / INDEX_FILE) == dump_index(fresh / INDEX_FILE)
