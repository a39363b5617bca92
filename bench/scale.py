"""Scale runs, nnrag alone (the paper's tool cannot be pointed at these offline: it indexes only
its built-in timm + torchvision subset):

- transformers 5.23.0 sources (`pip download --no-deps transformers==5.23.0`, unpacked; the
  ``transformers`` package, 2,860 files);
- the LEMUR dataset's model files (`nn-dataset==2.1.2`, ``ab/nn/nn/``, 10,483 files).

For each: cold index with 1 and with 2 parser processes (fresh cache each run), re-index with
nothing changed, peak memory of the process tree, files, failures and blocks found.

Usage: python bench/scale.py [--corpora DIR] [--runs 3] (bench/run.py runs it as part of the
report).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from measure import check, median, mib, run_measured

CORPORA = {
    # name: (pip spec, unpacked directory name, indexed sub-directory, target seconds)
    "transformers": ("transformers==5.23.0", "transformers", "transformers", 30.0),
    "lemur": ("nn-dataset==2.1.2", "nn-dataset", "ab/nn/nn", 30.0),
}


def get_scale_corpora(dest: Path) -> Path:
    missing = [spec for spec, d, _, _ in CORPORA.values() if not (dest / d).is_dir()]
    if missing:
        script = ROOT.parent / "shared" / "bench" / "get_corpora.sh"
        if not script.is_file():
            script = Path("/work/shared/bench/get_corpora.sh")
        print(f"fetching {', '.join(missing)} into {dest} ...", file=sys.stderr)
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(["bash", str(script), str(dest.resolve()), *missing], check=True)
    return dest


def scale_config(corpora: Path, name: str) -> dict:
    _, d, sub, _ = CORPORA[name]
    return {name: {"path": str((corpora / d).resolve()), "paths": [sub], "priority": 1}}


def index_run(cfg: Path, cache: Path, workers: int | None = None) -> dict:
    cmd = [sys.executable, str(HERE / "nnrag_tool.py"), "index", "--config", str(cfg),
           "--cache", str(cache)]
    if workers:
        cmd += ["--workers", str(workers)]
    m = run_measured(cmd)
    data = check(m, f"nnrag index {cfg.name}")
    data.update(process_s=m.wall_s, peak_tree_pss=m.peak_tree_pss,
                peak_tree_rss=m.peak_tree_rss, max_rss=m.max_rss)
    return data


def run_scale(corpora: Path, work: Path, runs: int, log=print) -> dict:
    out: dict = {}
    for name, (spec, d, sub, target) in CORPORA.items():
        cfg = work / f"scale-{name}.json"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(json.dumps(scale_config(corpora, name), indent=2))
        res: dict = {"spec": spec, "indexed": f"{d}/{sub}", "target_cold_s": target,
                     "cold": {}, "runs": runs}
        last_cache = None
        for i in range(runs):
            for w in (1, 2):
                cache = work / f"scale-cache-{name}-w{w}"
                shutil.rmtree(cache, ignore_errors=True)
                r = index_run(cfg, cache, w)
                res["cold"].setdefault(str(w), []).append(r)
                log(f"  {name} cold, {w} worker(s), run {i + 1}: {r['seconds']:.1f} s, "
                    f"{r['files']} files, {r['blocks']} blocks, peak {mib(r['peak_tree_pss'])} MiB")
                last_cache = cache
        warm = [index_run(cfg, last_cache) for _ in range(runs)]
        res["warm"] = warm
        c1 = [r["seconds"] for r in res["cold"]["1"]]
        c2 = [r["seconds"] for r in res["cold"]["2"]]
        last = res["cold"]["2"][-1]
        res["summary"] = {
            "files": last["files"], "failed": last["failed"], "blocks": last["blocks"],
            "failures": last["failures"][:10],
            "cold_s_1_worker": median(c1), "cold_s_2_workers": median(c2),
            "speedup_2_over_1": median([a / b for a, b in zip(c1, c2)]),
            "cold_process_s": median([r["process_s"] for r in res["cold"]["2"]]),
            "warm_s": median([r["seconds"] for r in warm]),
            "peak_mib_cold": mib(max(r["peak_tree_pss"] for r in res["cold"]["2"])),
            "peak_mib_cold_1_worker": mib(max(r["peak_tree_pss"] for r in res["cold"]["1"])),
            "peak_mib_warm": mib(max(r["peak_tree_pss"] for r in warm)),
            "cold_meets_target": median(c2) <= target,
            "cold_over_target_s": max(0.0, median(c2) - target),
        }
        log(f"  {name}: cold {median(c2):.1f} s (2 workers), {median(c1):.1f} s (1 worker), "
            f"warm {res['summary']['warm_s'] * 1000:.0f} ms")
        shutil.rmtree(work / f"scale-cache-{name}-w1", ignore_errors=True)
        shutil.rmtree(work / f"scale-cache-{name}-w2", ignore_errors=True)
        out[name] = res
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, default=HERE / ".corpora")
    ap.add_argument("--work", type=Path, default=HERE / ".work")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    corpora = get_scale_corpora(args.corpora.resolve())
    res = run_scale(corpora, args.work.resolve(), args.runs,
                    log=lambda s: print(s, file=sys.stderr))
    print(json.dumps({k: v["summary"] for k, v in res.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
