"""Runs one phase of the paper's tool (`nn-rag` 2.2.4) and prints one JSON object.

Runs inside the tool's own virtual environment (bench/.work/nnrag-paper), never imports nnrag.
Started by bench/paper_tool.py with HOME pointing at a scratch directory, so the tool's cache
(`~/.cache/nn-rag`) is private to the benchmark.

Phases:
  clone                    clone the configured repositories (timm, torchvision) into the cache
  index --mode M           ``BlockExtractor(index_mode=M).warm_index_once()`` (missing|force);
                           ``--marker REL TEXT`` says whether the indexed source of REL has TEXT
  extract --names F --out D
                           extract + validate every name of F with the library API, one process,
                           timing the validator calls apart from the rest
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path


def _files_per_repo(db: Path) -> dict:
    if not db.exists():
        return {}
    con = sqlite3.connect(str(db))
    try:
        return dict(con.execute("SELECT repo, COUNT(DISTINCT relpath) FROM files GROUP BY repo"))
    finally:
        con.close()


def phase_clone() -> dict:
    from ab.rag import BlockExtractor

    t0 = time.perf_counter()
    ex = BlockExtractor(index_mode="skip")
    ok = ex._ensure_all_repos_cached()
    secs = time.perf_counter() - t0
    repos = {name: str(ex.repo_cache.get_cached_repo(name) or "")
             for name in ex.repo_cache.repos}
    return {"ok": ok and all(repos.values()), "seconds": secs, "repos": repos}


def phase_index(mode: str, marker: list[str] | None) -> dict:
    from ab.rag import BlockExtractor

    t0 = time.perf_counter()
    ex = BlockExtractor(index_mode=mode)
    t1 = time.perf_counter()
    ok = ex.warm_index_once()
    t2 = time.perf_counter()
    modules: dict[str, int] = {}
    for key in ex.import_graph.modules:
        repo = key.split(":", 1)[0]
        modules[repo] = modules.get(repo, 0) + 1
    out = {"ok": ok, "seconds": t2 - t1, "construct_s": t1 - t0, "modules": modules,
           "symbols": len(ex.import_graph.symbol_table), "failed_files": len(ex.failed_files),
           "db_files": _files_per_repo(ex.index.db_path)}
    if marker:
        rel, text = marker
        mods = [m for m in ex.import_graph.modules.values()
                if m.path == str(Path(rel).with_suffix(""))]
        out["marker_seen"] = any(text in (m.source_code or "") for m in mods)
    return out


def phase_extract(names_file: Path, out: Path) -> dict:
    from ab.rag.utils import path_resolver

    generated = out / "generated"
    generated.mkdir(parents=True, exist_ok=True)
    # The tool writes its files into its own site-packages; send them to our directory instead.
    # This changes the output location only, not what the tool does.
    path_resolver.get_generated_packages_dir = lambda: generated

    from ab.rag import BlockExtractor

    names = [n.strip() for n in names_file.read_text().splitlines()
             if n.strip() and not n.startswith("#")]
    ex = BlockExtractor(index_mode="missing", project_dir=out)
    t0 = time.perf_counter()
    ex.warm_index_once()
    warm_s = time.perf_counter() - t0

    spent = {"validate": 0.0}

    def timed(fn):
        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent["validate"] += time.perf_counter() - t
        return wrapper

    ex._validate_and_move_block = timed(ex._validate_and_move_block)
    ex.validate_block = timed(ex.validate_block)

    blocks = []
    for name in names:
        spent["validate"] = 0.0
        t = time.perf_counter()
        res = ex.extract_single_block(name)
        total = time.perf_counter() - t
        val = res.get("validation") or {}
        valid = bool(val.get("valid") or val.get("status") == "valid")
        path = None
        for cand in (out / "blocks" / f"{name}.py", generated / f"{name}.py"):
            if cand.exists():
                path = str(cand)
                break
        blocks.append({"name": name, "success": bool(res.get("success")), "valid": valid,
                       "reason": res.get("reason") or val.get("error"),
                       "total_s": total, "validate_s": spent["validate"],
                       "extract_s": total - spent["validate"], "file": path})
    return {"warm_s": warm_s, "blocks": blocks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=("clone", "index", "extract"))
    ap.add_argument("--mode", default="missing")
    ap.add_argument("--marker", nargs=2, metavar=("RELPATH", "TEXT"))
    ap.add_argument("--names", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.phase == "clone":
        res = phase_clone()
    elif args.phase == "index":
        res = phase_index(args.mode, args.marker)
    else:
        res = phase_extract(args.names, args.out)
    sys.stdout.flush()
    print("BENCH-JSON " + json.dumps(res))


if __name__ == "__main__":
    main()
