"""Validation benchmark (issue 4): extract and validate the blocks of
shared/bench/blocks_timm.txt and every timm block, through the sandbox.

Reports: median validation time per block and per sandboxed stage (import, instantiate,
forward), the total wall time of extract + validate for every timm block, the count at each
level (parsed, compiled, static-clean, imported, instantiated, forward ran), the failure
table by cause, and a cross-check that no block called validated fails to import in a fresh
interpreter. Writes bench/results/validate.json.

Extraction runs in the main thread while sandboxes validate the previous blocks in worker
threads (one sandbox each: a pre-warmed worker forking a child per block).

With --torchvision, every torchvision block is extracted and validated too (all six stages).

Usage: python bench/validate_bench.py [--corpora DIR] [--jobs N] [--only-list] [--torchvision]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.measure import cpu_speed  # noqa: E402
from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor, OutputNames
from nnrag_tui.engine.sandbox import Sandbox, SandboxLimits
from nnrag_tui.engine.taxonomy import format_failure_table
from nnrag_tui.engine.validate import LEVEL_ORDER, Validator, failure_table

LEVEL_LABELS = {"parsed": "parsed", "compiled": "compiled", "static_clean": "static-clean",
                "imported": "imported", "instantiated": "instantiated",
                "forward_ran": "forward ran"}


def corpora(arg: str | None) -> Path:
    if arg:
        dest = Path(arg).resolve()
    else:
        dest = HERE / ".corpora"
    if not (dest / "timm").is_dir() or not (dest / "torchvision").is_dir():
        script = ROOT.parent / "shared" / "bench" / "get_corpora.sh"
        subprocess.run(["bash", str(script), str(dest)], check=True)
    return dest


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else 0.0


def run(names: list[str], ex: BlockExtractor | None, sandboxes: list[Sandbox],
        outdir: Path, deepest: str, files: dict | None = None) -> dict:
    """Extracts in this thread (or takes ``files``, already extracted: name -> (key, code,
    class name, spec, path, call sites)), validates in one thread per sandbox; returns the figures."""
    outdir.mkdir(parents=True, exist_ok=True)
    generated: dict = {}
    work: queue.Queue = queue.Queue(maxsize=2 * len(sandboxes))
    results: dict[str, dict] = {}
    lock = threading.Lock()

    def validate_loop(sb: Sandbox) -> None:
        with Validator(sb, deepest=deepest) as v:
            while True:
                item = work.get()
                if item is None:
                    return
                name, key, code, gen_name, spec, path, call_sites = item
                t = time.perf_counter()
                rep = v.validate(code, gen_name, spec, call_sites=call_sites)
                wall = time.perf_counter() - t
                with lock:
                    results[name] = {"key": key, "path": path, "report": rep,
                                     "validate_s": wall}

    threads = [threading.Thread(target=validate_loop, args=(sb,)) for sb in sandboxes]
    for th in threads:
        th.start()
    extract_times, not_extracted = [], {}
    cpu0 = _cpu(sandboxes)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    written = OutputNames()  # same-named blocks get their own files, as in `nnrag extract`
    for name in names:
        if files is not None:
            if name in files:
                work.put((name, *files[name]))
            continue
        t = time.perf_counter()
        res = ex.extract_single_block(name, outdir, written)
        extract_times.append(time.perf_counter() - t)
        if not res.ok:
            not_extracted[name] = res.error
            continue
        g = res.generated
        # the corpus's own constructor calls, looked up (in the validating thread) only for
        # blocks that guessed arguments cannot build
        generated[name] = (res.block.key, g.code, g.name, g.spec, res.paths[0],
                           lambda res=res: ex.call_sites(res))
        work.put((name, *generated[name]))
    for _ in threads:
        work.put(None)
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    cpu1 = _cpu(sandboxes)
    cpu = {k: round(cpu1[k] - cpu0[k], 2) for k in cpu0}
    reports = [r["report"] for r in results.values()]
    stage_times: dict[str, list[float]] = {s: [] for s in (
        "parse", "compile", "static", "import", "instantiate", "forward")}
    for rep in reports:
        for s in rep.stages:
            if s.stage in stage_times and s.ok:
                stage_times[s.stage].append(s.seconds)
    sandboxed = [sum(s.seconds for s in rep.stages
                     if s.stage in ("import", "instantiate", "forward")) for rep in reports]
    levels = {lvl: sum(1 for rep in reports if rep.reached(lvl)) for lvl in LEVEL_ORDER[1:]}
    validated = [n for n, r in results.items() if r["report"].validated]
    return {
        "blocks": len(names),
        "extracted": len(results),
        "not_extracted": not_extracted,
        "validated": len(validated),
        "levels": levels,
        "failure_table": failure_table(reports, validated=False),
        "deeper_failure_table": failure_table(reports, validated=True),
        "all_causes": failure_table(reports),
        "validate_ms_median": 1000 * statistics.median([r["validate_s"]
                                                        for r in results.values()] or [0]),
        "validate_ms_p90": 1000 * pct([r["validate_s"] for r in results.values()], 0.9),
        "sandboxed_stages_ms_median": 1000 * statistics.median(sandboxed or [0]),
        "stage_ms_median": {s: 1000 * statistics.median(v) if v else None
                            for s, v in stage_times.items()},
        "stage_ms_p90": {s: 1000 * pct(v, 0.9) if v else None
                         for s, v in stage_times.items()},
        "extract_ms_median": 1000 * statistics.median(extract_times or [0]),
        "wall_s": wall,
        "cpu_s": cpu,
        "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "sandbox_restarts": sum(sb.restarts for sb in sandboxes),
        "reports": {n: {"key": r["key"], "path": r["path"], **_short(r["report"])}
                    for n, r in sorted(results.items())},
        "_generated": generated,
    }


def _cpu(sandboxes: list[Sandbox]) -> dict[str, float]:
    """CPU seconds so far: this process, and the workers with their reaped children."""
    ru = os.times()
    out = {"caller": ru.user + ru.system, "workers": 0.0}
    tick = os.sysconf("SC_CLK_TCK")
    for sb in sandboxes:
        pid = sb.worker_pid
        if pid is None:
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out["workers"] += sum(int(f) for f in fields[11:15]) / tick  # utime..cstime
    return out


def _short(rep) -> dict:
    d = {"validated": rep.validated, "level": rep.level, "cause": rep.cause,
         "cause_summary": rep.cause_summary,
         "stages": {s.stage: [s.ok, round(1000 * s.seconds, 2)] for s in rep.stages}}
    fwd = rep.stage("forward")
    if fwd is not None and fwd.ok:
        d["probe"] = fwd.detail.get("input")
        d["output"] = fwd.detail.get("output")
    inst = rep.stage("instantiate")
    if inst is not None and inst.ok:
        d["args"] = inst.detail.get("args")
    return d


def fresh_import_check(paths: list[str], sample: int) -> dict:
    """Imports every file in a fresh module namespace (bench/import_check.py: one interpreter
    that never saw a block, a fork per file, timm/torchvision blocked), and ``sample`` of them
    in a brand-new ``python -I`` each."""
    failures = {}
    for i in range(0, len(paths), 200):
        out = subprocess.run([sys.executable, "-I", str(HERE / "import_check.py"),
                              *paths[i:i + 200]], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            d = json.loads(line)
            if not d["ok"]:
                failures[d["path"]] = d["error"]
    rng = random.Random(0)
    picked = rng.sample(paths, min(sample, len(paths)))
    fresh_fail = {}
    for p in picked:
        code = ("import importlib.util, sys\n"
                "spec = importlib.util.spec_from_file_location('blk', sys.argv[1])\n"
                "m = importlib.util.module_from_spec(spec); sys.modules['blk'] = m\n"
                "spec.loader.exec_module(m)\n")
        out = subprocess.run([sys.executable, "-I", "-c", code, p], capture_output=True,
                             text=True, cwd=tempfile.gettempdir())
        if out.returncode != 0:
            fresh_fail[p] = out.stderr.strip().splitlines()[-1:] or [str(out.returncode)]
    return {"checked": len(paths), "import_failures": failures,
            "fresh_interpreters": len(picked), "fresh_failures": fresh_fail}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpora", default=None, help="directory with timm/ and torchvision/ "
                    "(default: bench/.corpora, fetched when missing)")
    ap.add_argument("--blocks", default=str(ROOT.parent / "shared" / "bench" /
                                            "blocks_timm.txt"))
    ap.add_argument("--out", default=str(HERE / "results" / "validate.json"))
    ap.add_argument("--jobs", type=int, default=2, help="sandboxes validating in parallel")
    ap.add_argument("--deepest", default="forward",
                    choices=("import", "instantiate", "forward"))
    ap.add_argument("--timeout", type=float, default=5.0,
                    help="wall-clock limit for instantiate and forward (s)")
    ap.add_argument("--import-timeout", type=float, default=20.0,
                    help="wall-clock limit for import (s)")
    ap.add_argument("--fresh-sample", type=int, default=20,
                    help="validated files also imported in a brand-new interpreter each")
    ap.add_argument("--only-list", action="store_true", help="skip the all-timm run")
    ap.add_argument("--torchvision", action="store_true",
                    help="also every torchvision block, extract + all six stages")
    args = ap.parse_args()
    corp = corpora(args.corpora)
    cfg = parse_config({
        "timm": {"path": str(corp / "timm"), "paths": ["timm"], "priority": 1},
        "torchvision": {"path": str(corp / "torchvision"), "paths": ["torchvision"],
                        "priority": 2},
    })
    limits = SandboxLimits(import_timeout=args.import_timeout,
                           instantiate_timeout=args.timeout, forward_timeout=args.timeout)
    speed = cpu_speed()  # the machine is shared: how fast it runs now (see bench/measure.py)
    report: dict = {"jobs": args.jobs, "deepest": args.deepest, "timeout_s": args.timeout,
                    "import_timeout_s": args.import_timeout, "corpora": str(corp),
                    "cpus": os.cpu_count(), "cpu_speed_loop_s": speed}
    sandboxes = [Sandbox(limits=limits, deny_imports=("timm", "torchvision"))
                 for _ in range(max(1, args.jobs))]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        starters = [threading.Thread(target=sb.start) for sb in sandboxes]
        for th in starters:
            th.start()
        ex = BlockExtractor(cfg, cache_dir=Path(tmp) / "cache", data_dir=Path(tmp) / "data")
        ex.index()
        ex.resolver()
        for th in starters:
            th.join()
        report["setup_s"] = time.perf_counter() - t
        report["sandbox"] = sandboxes[0].info
        names = [n.strip() for n in Path(args.blocks).read_text().splitlines() if n.strip()]
        report["list"] = run(names, ex, sandboxes, Path(tmp) / "list", args.deepest)
        report["list"].pop("_generated")
        if not args.only_list:
            # A: every timm block extracted and validated (stages 1-4, the validated bar) in
            # one timed run, from a cold resolver as the extraction bench does.
            keys = [b.key for b in ex.blocks(repo="timm")]
            ex._resolver = None
            t = time.perf_counter()
            ex.resolver()
            resolver_s = time.perf_counter() - t
            a = run(keys, ex, sandboxes, Path(tmp) / "all", "import")
            a["resolver_load_s"] = resolver_s
            a["wall_s_including_resolver_load"] = a["wall_s"] + resolver_s
            files = a.pop("_generated")
            report["all_timm"] = a
            # B: the deeper levels (instantiate, forward) of the same files, all six stages
            if args.deepest != "import":
                b = run(keys, None, sandboxes, Path(tmp) / "all", args.deepest, files=files)
                b.pop("_generated")
                report["all_timm_deep"] = b
        if args.torchvision:
            keys = [b.key for b in ex.blocks(repo="torchvision")]
            report["all_torchvision"] = run(keys, ex, sandboxes, Path(tmp) / "tv", args.deepest)
            report["all_torchvision"].pop("_generated")
        for sb in sandboxes:
            sb.close()
        for part in ("list", "all_timm", "all_torchvision"):
            if part in report:
                r = report[part]
                paths = [v["path"] for v in r["reports"].values() if v["validated"]]
                r["fresh_import"] = fresh_import_check(paths, args.fresh_sample)
        if "all_timm_deep" in report:  # the same files: the same verdicts at the bar
            a, b = report["all_timm"]["reports"], report["all_timm_deep"]["reports"]
            report["all_timm_deep"]["bar_disagreements"] = sorted(
                n for n in a if n in b and a[n]["validated"] != b[n]["validated"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print_summary(report)


TITLES = {"list": "blocks_timm.txt, extract + all six stages",
          "all_timm": "every timm block, extract + validate (stages 1-4) in one run",
          "all_timm_deep": "every timm block, all six stages on the files extracted above",
          "all_torchvision": "every torchvision block, extract + all six stages"}


def print_summary(report: dict) -> None:
    print(f"machine speed: a 5M-step Python loop takes {report['cpu_speed_loop_s']} s "
          "(bench/measure.py cpu_speed; higher = a busier host)")
    for part in ("list", "all_timm", "all_timm_deep", "all_torchvision"):
        if part not in report:
            continue
        r = report[part]
        print(f"## {part} ({TITLES[part]}): {r['blocks']} blocks, {r['extracted']} "
              f"extracted, {r['validated']} validated ({report['jobs']} sandboxes; limits: "
              f"import {report['import_timeout_s']:g} s, instantiate and forward "
              f"{report['timeout_s']:g} s)")
        sm = r["stage_ms_median"]
        stages = ", ".join(f"{k} {v:.1f}" for k, v in sm.items() if v is not None)
        print(f"per block, median: import+instantiate+forward "
              f"{r['sandboxed_stages_ms_median']:.1f} ms; stages ({stages}) ms; whole "
              f"validate() call {r['validate_ms_median']:.1f} ms (p90 "
              f"{r['validate_ms_p90']:.1f} ms)")
        wall = r.get("wall_s_including_resolver_load", r["wall_s"])
        what = "validate" if part == "all_timm_deep" else "extract + validate"
        print(f"{what} wall: {wall:.1f} s (extract median {r['extract_ms_median']:.1f} ms); "
              f"CPU: caller {r['cpu_s']['caller']:.1f} s, sandboxes {r['cpu_s']['workers']:.1f} "
              f"s; load average {r['load_average'][0]:g} -> {r['load_average'][1]:g}; "
              f"sandbox restarts {r['sandbox_restarts']}")
        levels = {k: v for k, v in r["levels"].items()
                  if part != "all_timm" or k not in ("instantiated", "forward_ran")}
        print("levels: " + ", ".join(f"{LEVEL_LABELS[k]} {v}" for k, v in levels.items()))
        if "bar_disagreements" in r:
            print(f"validated differently than in the timed run: {r['bar_disagreements']}")
        fi = r.get("fresh_import", {})
        if fi:
            print(f"validated files failing a fresh import: {len(fi['import_failures'])} of "
                  f"{fi['checked']} (fork-per-file check), {len(fi['fresh_failures'])} of "
                  f"{fi['fresh_interpreters']} (new interpreter each)")
        not_validated = r["extracted"] - r["validated"]
        print(f"failure table (not validated: {not_validated}):")
        print(format_failure_table(r["failure_table"], total=not_validated or None))
        if part != "all_timm":
            deeper = r["extracted"] - r["levels"]["forward_ran"] - not_validated
            print(f"deeper levels (validated, forward did not run: {deeper}):")
            print(format_failure_table(r["deeper_failure_table"], total=deeper or None))


if __name__ == "__main__":
    main()
