"""Warm extraction over whole packages: every block of a configuration, in one process.

timm's blocks take milliseconds each (bench/extract_bench.py). A block of a large, entangled
package (tensordict's ``TensorDictModule``, deepspeed's MoE layers, mmpretrain's backbones over
mmengine) reaches thousands of definitions, and each closure of the package asks again about
the same statements; there the time per block is what a user waits for in the app's preview.

For each engine (a checkout with ``nnrag_tui``; this one by default, more with ``--engine DIR``
to compare, e.g. a ``git worktree`` of an older commit), one fresh process indexes the
configuration into its own cache, then extracts every block in turn and records the time of
each; the runs of the engines alternate, ``--rounds`` times, so that a busy host slows them
alike. Printed per engine and repository: blocks, median, p90 and total seconds, the slowest
blocks, and the peak memory of the process (kernel's ``ru_maxrss``). ``--dump DIR`` writes the
files of each engine's first round (``DIR/<engine #>/``: each block's code, and the list of
files that go beside it where there are any), to check that they are the same.

Usage: python bench/package_bench.py --config CONFIG.json [--repo NAME ...]
           [--engine DIR ...] [--rounds 2] [--dump DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from measure import check, cpu_speed, emit, pct, run_measured


def worker(engine: str, config: str, repos: list[str], dump: str | None) -> None:
    """In a fresh process: index, then extract every block with ``engine``'s nnrag_tui."""
    sys.path.insert(0, engine)
    from nnrag_tui.engine.config import load_config
    from nnrag_tui.engine.extractor import BlockExtractor

    with tempfile.TemporaryDirectory() as tmp:
        ex = BlockExtractor(load_config(Path(config)), cache_dir=Path(tmp) / "cache",
                            data_dir=Path(tmp) / "data")
        ex.index()
        t = time.perf_counter()
        ex.resolver()
        load_s = time.perf_counter() - t
        times: dict[str, dict[str, float]] = {}
        failed: dict[str, str] = {}
        for b in ex.blocks():
            if repos and b.source not in repos:
                continue
            t = time.perf_counter()
            try:
                r = ex.extract_single_block(b.key, repo=b.source)
            except Exception as exc:  # noqa: BLE001  (reported per block, the run goes on)
                failed[f"{b.source}:{b.key}"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            times.setdefault(b.source, {})[b.key] = time.perf_counter() - t
            if dump and r.generated is not None:
                out = Path(dump) / b.source
                out.mkdir(parents=True, exist_ok=True)
                stem = b.key.replace(":", "__")
                (out / (stem + ".py")).write_text(r.generated.code)
                if r.generated.spec.get("files"):  # what goes beside it
                    (out / (stem + ".files.json")).write_text(
                        json.dumps(r.generated.spec["files"], indent=1) + "\n")
        emit({"resolver_load_s": load_s, "times": times, "failed": failed})


def summary(times: dict[str, float]) -> dict:
    xs = list(times.values())
    slow = sorted(times.items(), key=lambda kv: -kv[1])[:3]
    return {"blocks": len(xs), "median_s": round(statistics.median(xs), 4),
            "p90_s": round(pct(xs, 0.9), 4), "total_s": round(sum(xs), 2),
            "slowest": [[k, round(s, 2)] for k, s in slow]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="a corpus configuration (JSON)")
    ap.add_argument("--repo", action="append", default=[], help="only this repository")
    ap.add_argument("--engine", action="append", default=[],
                    help="one more checkout to measure (its nnrag_tui), alternately")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dump", help="write each engine's files of its first round here")
    ap.add_argument("--out", help="write the report here (JSON)")
    ap.add_argument("--worker", nargs=2, metavar=("ENGINE", "DUMP"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    config = str(Path(args.config).resolve())
    if args.worker:
        engine, dump = args.worker
        worker(engine, config, args.repo, dump or None)
        return
    sys.path.insert(0, str(ROOT))
    from nnrag_tui.engine.config import load_config
    from nnrag_tui.engine.errors import ConfigError
    try:
        load_config(Path(config))
    except ConfigError as exc:
        sys.exit(f"package_bench: {exc}")
    engines = [str(ROOT), *(str(Path(e).resolve()) for e in args.engine)]
    for e in engines:
        if not (Path(e) / "nnrag_tui" / "engine" / "extractor.py").is_file():
            sys.exit(f"package_bench: {e} is not a checkout of nnrag (no nnrag_tui/engine)")
    report: dict = {"config": config, "cpu_speed_loop_s": cpu_speed(), "engines": engines,
                    "runs": []}
    for rnd in range(args.rounds):
        for i, e in enumerate(engines):
            dump = str(Path(args.dump) / str(i)) if args.dump and rnd == 0 else ""
            cmd = [sys.executable, __file__, "--config", config, "--worker", e, dump,
                   *(x for r in args.repo for x in ("--repo", r))]
            m = run_measured(cmd)
            data = check(m, f"{e} round {rnd + 1}")
            run = {"engine": i, "round": rnd + 1, "wall_s": round(m.wall_s, 1),
                   "peak_rss_mib": round(m.max_rss / 2**20),
                   "resolver_load_s": round(data["resolver_load_s"], 2),
                   "failed": data["failed"],
                   "repos": {r: summary(t) for r, t in sorted(data["times"].items())}}
            report["runs"].append(run)
            print(f"engine {i} ({e}) round {rnd + 1}: wall {run['wall_s']} s, peak "
                  f"{run['peak_rss_mib']} MiB, {len(run['failed'])} failed", flush=True)
            for r, s in run["repos"].items():
                print(f"  {r}: {s['blocks']} blocks, median {s['median_s'] * 1000:.1f} ms, "
                      f"p90 {s['p90_s'] * 1000:.1f} ms, total {s['total_s']} s; slowest "
                      + ", ".join(f"{k} {v} s" for k, v in s["slowest"]), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
