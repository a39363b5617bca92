"""Index benchmark (a benchmark that prints figures, not a test).

Indexes timm 1.0.31 + torchvision 0.29.1 sources, given as `path` sources, in-process through
``BlockExtractor.index()`` and reports:

- cold index: median of N runs, each in a fresh cache directory (target <= 3.5 s on 2 cores);
- re-index with nothing changed: median of N runs on a warm cache (target <= 0.15 s);
- after appending a comment to one file (of a private copy of the corpus, never the shared one):
  how many files were parsed again (target: exactly 1) and the time;
- files / failed / blocks per source, and whether all cold runs built identical indexes.

Prints a Markdown table and writes JSON to bench/results/index.json.

Usage: python bench/index_bench.py [--corpora DIR] [--runs 5] [--out FILE]
(the corpora are fetched with shared/bench/get_corpora.sh into DIR when missing; default
bench/.corpora, which is git-ignored).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from nnrag_tui.engine.config import CorpusConfig, parse_config
from nnrag_tui.engine.extractor import INDEX_FILE, BlockExtractor
from nnrag_tui.engine.facts import IndexReport

CORPORA = ("timm", "torchvision")
CHANGED_FILE = "timm/layers/mlp.py"  # relative to the timm corpus directory
TARGETS = {"cold_s": 3.5, "nochange_s": 0.15, "reparsed_after_change": 1}


def get_corpora(dest: Path) -> Path:
    if all((dest / name / name).is_dir() for name in CORPORA):
        return dest
    script = ROOT.parent / "shared" / "bench" / "get_corpora.sh"
    if not script.is_file():
        script = Path("/work/shared/bench/get_corpora.sh")
    print(f"fetching the corpora into {dest} ...", file=sys.stderr)
    subprocess.run(["bash", str(script), str(dest)], check=True)
    return dest


def corpus_config(corpora: Path) -> CorpusConfig:
    return parse_config(
        {name: {"path": str(corpora / name / name), "priority": 1} for name in CORPORA},
        origin="<index bench>",
    )


def index_once(cfg: CorpusConfig, cache: Path, workers: int | None) -> tuple[float, IndexReport]:
    """Wall time of one in-process ``BlockExtractor.index()`` (store opened and closed)."""
    t0 = time.perf_counter()
    with BlockExtractor(cfg, cache_dir=cache, workers=workers) as ex:
        report = ex.index()
    return time.perf_counter() - t0, report


def index_digest(db_path: Path) -> str:
    """SHA-1 over every row of files/symbols/imports/blocks, without ids and times."""
    db = sqlite3.connect(str(db_path))
    key = ("(SELECT s.name || ':' || f.relpath FROM files f JOIN sources s ON s.id=f.source_id"
           " WHERE f.id=t.file_id)")
    queries = [
        ("SELECT s.name, f.relpath, f.module, f.is_package, f.sha1, f.size, f.mtime_ns,"
         " f.lines, f.all_names, f.error FROM files f JOIN sources s ON s.id=f.source_id"),
        (f"SELECT {key}, name, qualname, kind, line, end_line, col, end_col, def_line, bases,"
         " keywords, decorators, methods, abstract_methods, forward_raises, calls, doc, guard,"
         " parent FROM symbols t"),
        (f"SELECT {key}, bound, module, name, asname, level, target, line, end_line, guard"
         " FROM imports t"),
        (f"SELECT {key}, source, module, qualname, name, relpath, line, end_line, category,"
         " rule, bases, doc, guard FROM blocks t"),
    ]
    h = hashlib.sha1()
    try:
        for q in queries:
            for row in sorted(map(repr, db.execute(q))):
                h.update(row.encode())
            h.update(b"\0")
    finally:
        db.close()
    return h.hexdigest()


def per_source(cfg: CorpusConfig, cache: Path) -> list[dict]:
    with BlockExtractor(cfg, cache_dir=cache) as ex:
        return [{"name": s["name"], "files": s["files"], "failed": s["failed"],
                 "blocks": s["blocks"]} for s in ex.sources()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, default=HERE / ".corpora",
                    help="directory holding timm/ and torchvision/ (default bench/.corpora)")
    ap.add_argument("--runs", type=int, default=5, help="runs per median (default 5)")
    ap.add_argument("--workers", type=int, default=None, help="parser processes (default: cores)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "index.json")
    args = ap.parse_args(argv)

    corpora = get_corpora(args.corpora.expanduser().resolve())
    cfg = corpus_config(corpora)
    scratch = Path(tempfile.mkdtemp(prefix="nnrag-index-bench-"))
    try:
        # 1. cold: every run in a fresh cache directory
        cold, digests = [], set()
        report: IndexReport | None = None
        for i in range(args.runs):
            cache = scratch / f"cold{i}"
            secs, report = index_once(cfg, cache, args.workers)
            cold.append(secs)
            digests.add(index_digest(cache / INDEX_FILE))
            print(f"cold run {i + 1}: {secs:.3f} s, {report.parsed} parsed, "
                  f"{report.blocks} blocks", file=sys.stderr)
        assert report is not None
        sources = per_source(cfg, scratch / "cold0")

        # 2. nothing changed, warm cache
        nochange, parsed_nochange = [], []
        for _ in range(args.runs):
            secs, rep = index_once(cfg, scratch / "cold0", args.workers)
            nochange.append(secs)
            parsed_nochange.append(rep.parsed)

        # 3. one file changed, in a private copy of the corpus
        copy = scratch / "corpora"
        for name in CORPORA:
            shutil.copytree(corpora / name / name, copy / name / name, symlinks=True)
        copy_cfg = corpus_config(copy)
        index_once(copy_cfg, scratch / "changed", args.workers)
        changed, reparsed = [], []
        target = copy / "timm" / CHANGED_FILE
        for i in range(args.runs):
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(f"\n# nnrag index bench: change {i + 1}\n")
            secs, rep = index_once(copy_cfg, scratch / "changed", args.workers)
            changed.append(secs)
            reparsed.append(rep.parsed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    med = statistics.median
    result = {
        "corpora": {name: str(corpora / name / name) for name in CORPORA},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "runs": args.runs,
        "files": report.files,
        "failed": report.failed,
        "blocks": report.blocks,
        "sources": sources,
        "cold_s": {"median": round(med(cold), 3), "min": round(min(cold), 3),
                   "max": round(max(cold), 3), "all": [round(s, 3) for s in cold]},
        "cold_runs_identical": len(digests) == 1,
        "nochange_s": {"median": round(med(nochange), 4), "all": [round(s, 4) for s in nochange],
                       "parsed": parsed_nochange},
        "one_file_changed": {"file": f"timm/{CHANGED_FILE}", "parsed": reparsed,
                             "median_s": round(med(changed), 4),
                             "all": [round(s, 4) for s in changed]},
        "targets": TARGETS,
    }
    result["meets_targets"] = (
        result["cold_s"]["median"] <= TARGETS["cold_s"]
        and result["nochange_s"]["median"] <= TARGETS["nochange_s"]
        and all(n == TARGETS["reparsed_after_change"] for n in reparsed)
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")

    print(f"\n## Index benchmark ({args.runs} runs each, {os.cpu_count()} CPUs)\n")
    print("| measure | figure | target |")
    print("|---|---|---|")
    print(f"| cold index, timm + torchvision ({report.files} files), median | "
          f"{med(cold):.2f} s | <= {TARGETS['cold_s']} s |")
    print(f"| re-index, nothing changed, median | {med(nochange) * 1000:.0f} ms | "
          f"<= {TARGETS['nochange_s'] * 1000:.0f} ms |")
    print(f"| re-index after changing one file, median | {med(changed) * 1000:.0f} ms | |")
    print(f"| files parsed again after changing one file | {sorted(set(reparsed))} | "
          f"exactly 1 |")
    print(f"| cold runs with identical index contents | "
          f"{'all ' + str(args.runs) if len(digests) == 1 else f'{len(digests)} variants'} | "
          f"all |")
    print("\n| source | files | failed | blocks |")
    print("|---|---|---|---|")
    for s in sources:
        print(f"| {s['name']} | {s['files']} | {s['failed']} | {s['blocks']} |")
    print(f"\nwrote {args.out}")
    return 0 if result["meets_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
