"""Crash consistency of the index: ``nnrag index`` (the real CLI, with a process pool) is
SIGKILLed at random moments, at least 50 times, while the corpus keeps changing under it. After
every kill the index is a sound database and no process of the killed run survives it (parse
workers die with their parent and never keep the index lock). The run after the last kill
needs no repair, finishes the work, and its index equals an uninterrupted run's, row for row.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from helpers import dump_index
from reliability_helpers import (
    ROOT,
    check_database,
    cli_env,
    descendants,
    read_until,
    run_cli,
    sigkill,
    spawn_cli,
    timm_layers,
)

from nnrag_tui.engine.extractor import INDEX_FILE

KILLS = int(os.environ.get("NNRAG_RELIABILITY_KILLS", "50"))
BLOCK = "\n\nclass Added{n}(nn.Module):\n    def forward(self, x):\n        return x + {n}\n"


def make_corpus(dest: Path, timm_source: Path) -> Path:
    """A copy of real code: timm's layers (69 modules)."""
    shutil.copytree(timm_layers(timm_source), dest / "layers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if not (dest / "layers" / "__init__.py").exists():
        (dest / "layers" / "__init__.py").write_text("")
    return dest


class Churn:
    """Changes the corpus between runs, so that every run has parsing, deleting and
    rediscovering to do when it is killed."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = root
        self.rng = rng
        self.stash = root.parent / "stash"
        self.stash.mkdir()
        self.n = 0

    def step(self) -> None:
        files = sorted((self.root / "layers").glob("*.py"))
        for p in self.rng.sample(files, min(len(files), 12)):
            self.n += 1
            text = p.read_text()
            # blocks where the module has `nn` (most do), plain helpers elsewhere
            add = BLOCK.format(n=self.n) if "import torch.nn as nn" in text or \
                "from torch import nn" in text else f"\n\ndef added_{self.n}():\n    return 1\n"
            p.write_text(text + add)
        for p in self.rng.sample(files, 3):  # same bytes, new mtime
            os.utime(p, ns=(time.time_ns(), time.time_ns()))
        if self.rng.random() < 0.5:
            victim = self.rng.choice(files)
            if victim.name != "__init__.py":
                victim.rename(self.stash / victim.name)
        stashed = sorted(self.stash.glob("*.py"))
        if stashed and self.rng.random() < 0.5:
            back = self.rng.choice(stashed)
            back.rename(self.root / "layers" / back.name)


def test_sigkill_during_indexing_then_the_next_run_equals_an_uninterrupted_one(tmp_path,
                                                                              timm_source):
    corpus = make_corpus(tmp_path / "corpus", timm_source)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"corpus": {"path": str(corpus)}}))
    cache = tmp_path / "cache"
    env = cli_env()
    args = ["index", "--config", str(config), "--cache-dir", str(cache), "--workers", "2"]
    rng = random.Random(os.environ.get("NNRAG_KILL_SEED", "8"))
    churn = Churn(corpus, rng)
    kills = early = finished = 0
    t0 = time.monotonic()
    while kills < KILLS:
        assert time.monotonic() - t0 < 240, f"kill loop too slow ({kills} kills)"
        churn.step()
        proc = spawn_cli(args, env)
        if rng.random() < 0.15:  # during start-up: imports, opening, schema
            time.sleep(rng.uniform(0.0, 0.6))
            early += 1
            err = b""
        else:  # while indexing: listing, parsing in the pool, batch commits, discovery
            err = read_until(proc, b"preparing", 60)
            time.sleep(rng.uniform(0.0, 1.0))
        status, leftovers = sigkill(proc)
        err += proc.stderr.read() if proc.stderr else b""
        proc.stderr.close()
        assert not leftovers, f"processes outlived the killed indexer: {leftovers}"
        assert b"Traceback" not in err, err.decode()
        if status == 0:
            finished += 1
        else:
            assert status == -9, (status, err.decode())
            kills += 1
        if (cache / INDEX_FILE).exists():
            check_database(cache / INDEX_FILE)
    # the next run opens everything as it is, finishes, and waits for no one
    done = run_cli(args, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "waiting" not in done.stderr, done.stderr
    again = run_cli([*args, "--json"], env=env, timeout=180)
    assert json.loads(again.stdout)["parsed"] == 0  # nothing left undone
    fresh = tmp_path / "fresh"
    ref = run_cli(["index", "--config", str(config), "--cache-dir", str(fresh)], env=env,
                  timeout=180)
    assert ref.returncode == 0, ref.stderr
    assert dump_index(cache / INDEX_FILE) == dump_index(fresh / INDEX_FILE)
    print(f"\nindex kill test: {kills} SIGKILLs survived ({early} during start-up), "
          f"{finished} runs finished first, {churn.n} file edits, "
          f"{time.monotonic() - t0:.1f} s")


# A run killed in the narrowest window: every batch committed, blocks not yet rediscovered.
KILL_BEFORE_DISCOVERY = r'''
import os, signal, sys
from nnrag_tui.engine import indexer
from nnrag_tui.engine.extractor import BlockExtractor

def die(self):
    os.kill(os.getpid(), signal.SIGKILL)

indexer.Indexer.rediscover = die
with BlockExtractor(sys.argv[1], cache_dir=sys.argv[2], workers=1) as ex:
    ex.index()
'''


def test_killed_after_the_last_commit_before_discovery_rediscovers_next_time(tmp_path,
                                                                             timm_source):
    corpus = make_corpus(tmp_path / "corpus", timm_source)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"corpus": {"path": str(corpus)}}))
    cache = tmp_path / "cache"
    args = ["index", "--config", str(config), "--cache-dir", str(cache)]
    assert run_cli(args).returncode == 0
    target = corpus / "layers" / "mlp.py"
    if not target.exists():
        target = max((corpus / "layers").glob("*.py"))
    target.write_text(target.read_text() + BLOCK.format(n=1).replace("nn.Module", "object"))
    target.write_text(target.read_text() + "\n\nimport torch.nn as nn\n" + BLOCK.format(n=2))
    proc = subprocess.run([sys.executable, "-c", KILL_BEFORE_DISCOVERY, str(config),
                           str(cache)], env=cli_env(), cwd=ROOT, capture_output=True,
                          check=False, timeout=120)
    assert proc.returncode == -9, proc.stderr
    done = run_cli(args)
    assert done.returncode == 0, done.stderr
    fresh = tmp_path / "fresh"
    assert run_cli(["index", "--config", str(config), "--cache-dir", str(fresh)]).returncode == 0
    rows = dump_index(cache / INDEX_FILE)
    assert rows == dump_index(fresh / INDEX_FILE)
    assert any(r[4] == "Added2" for r in rows["blocks"])


# The TUI indexes in a worker thread, so its parse pool uses the forkserver: the workers are
# the forkserver's children and hold its lifeline, so neither notices the TUI dying by itself.
TUI_LIKE = r'''
import sys, threading
from nnrag_tui.engine.extractor import BlockExtractor

def run():
    with BlockExtractor(sys.argv[1], cache_dir=sys.argv[2], workers=2) as ex:
        ex.index(progress=lambda p: print(p.phase, flush=True))

t = threading.Thread(target=run)
t.start()
t.join()
'''


def test_sigkill_of_a_threaded_indexer_leaves_no_forkserver_workers(tmp_path):
    from nnrag_tui.engine.indexer import FORKSERVER_THRESHOLD

    pkg = tmp_path / "corpus" / "many"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for i in range(FORKSERVER_THRESHOLD + 100):
        (pkg / f"m{i:04d}.py").write_text("import torch.nn as nn\n" + BLOCK.format(n=i))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"many": {"path": str(pkg)}}))
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-c", TUI_LIKE, str(config), str(cache)],
                            env=cli_env(), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    for line in proc.stdout:
        if line.startswith(b"parse"):
            break
    else:
        raise AssertionError("the indexer never reached parsing")
    family = descendants(proc.pid)
    assert len(family) >= 3  # forkserver (+ resource tracker) and the workers
    status, leftovers = sigkill(proc)
    proc.stdout.close()
    assert status == -9
    assert not leftovers, f"outlived the killed indexer: {leftovers}"
    done = run_cli(["index", "--config", str(config), "--cache-dir", str(cache)], timeout=180)
    assert done.returncode == 0 and "waiting" not in done.stderr, done.stderr
