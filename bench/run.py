"""One command for the whole benchmark: nnrag beside the paper's tool (`nn-rag` 2.2.4 from PyPI)
on the same corpus, the scale runs and the terminal app; writes
``bench/results/<date>-report.md`` and ``<date>-report.json``.

    python -m bench [--corpora DIR] [--runs 3]          (or: python bench/run.py ...)

What it does:
1. Prepares the corpora from the package registry when missing (timm 1.0.31 and torchvision
   0.29.1 sources in ``--corpora``; transformers 5.23.0 and nn-dataset 2.1.2 in
   ``--scale-corpora``; both default to bench/.corpora) and the paper tool's own virtual
   environment (bench/paper_tool.py).
2. Side by side on the paper tool's own subset (timm/models, timm/layers, torchvision/models,
   torchvision/ops; nnrag gets path sources restricted to the same directories): cold index,
   re-index with nothing changed, re-index after one file changed, extraction and validation of
   the 100 blocks of shared/bench/blocks_timm.txt, the quality of the files produced. Every
   measure runs ``--runs`` times, alternating the tools, each run in a fresh process whose whole
   process tree is watched for memory; ratios are paired run by run and their median reported.
3. Scale runs, nnrag alone (bench/scale.py), and the TUI (bench/tui_bench.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from index_bench import get_corpora
from measure import check, machine, median, mib, pct, run_measured
from nnrag_tool import SUBSET, subset_config
from paper_tool import VERSION as PAPER_VERSION
from paper_tool import PaperTool
from quality import Upstream, code_lines, quality
from scale import get_scale_corpora, run_scale

CHANGED = ("timm", "timm/layers/mlp.py")  # the file appended to in the one-file-changed runs
TARGETS = {"cold_index_ratio": 10.0, "extract_ratio": 8.0}
NNRAG = "nnrag"
NNRAG_IMPORT = "nnrag (validation to import)"
PAPER = f"nn-rag {PAPER_VERSION}"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


# -- nnrag runs ------------------------------------------------------------------------------
class Nnrag:
    def __init__(self, work: Path, corpora: Path) -> None:
        self.work = work
        self.config = work / "nnrag-subset.json"
        self.config.write_text(json.dumps(subset_config(corpora), indent=2))

    def _run(self, *args: str, config: Path | None = None) -> tuple:
        m = run_measured([sys.executable, str(HERE / "nnrag_tool.py"), *args,
                          "--config", str(config or self.config)])
        return m, check(m, f"nnrag {args[0]}")

    def index(self, cache: Path, *extra: str, config: Path | None = None) -> tuple:
        return self._run("index", "--cache", str(cache), *extra, config=config)

    def extract(self, cache: Path, names: Path, out: Path, deepest: str = "forward") -> tuple:
        shutil.rmtree(out, ignore_errors=True)
        return self._run("extract", "--cache", str(cache), "--names", str(names), "--out",
                         str(out), "--validate", "--deepest", deepest)

    def cli_batch(self, cache: Path, names: Path, out: Path) -> tuple:
        shutil.rmtree(out, ignore_errors=True)
        m = run_measured([sys.executable, "-m", "nnrag_tui", "extract", "--from-file",
                          str(names), "--out", str(out), "--config", str(self.config),
                          "--cache-dir", str(cache), "--data-dir", str(cache / "data"),
                          "--json"], cwd=str(ROOT))
        if m.returncode != 0:
            raise RuntimeError(f"nnrag extract --from-file failed:\n{m.stderr[-3000:]}")
        return m, {"produced": len(list(out.glob("*.py")))}


# -- helpers ---------------------------------------------------------------------------------
def _proc(m) -> dict:
    return {"process_s": m.wall_s, "cpu_s": m.cpu_s, "peak_tree_pss": m.peak_tree_pss,
            "peak_tree_rss": m.peak_tree_rss, "max_rss": m.max_rss}


def _ratios(paper: list[float], ours: list[float]) -> list[float]:
    return [p / o for p, o in zip(paper, ours) if o]


def _stats(xs: list[float]) -> dict:
    return {"median": median(xs), "min": min(xs, default=None), "max": max(xs, default=None),
            "all": xs}


def _digest(files: list[str]) -> str:
    h = hashlib.sha1()
    for f in sorted(files):
        h.update(Path(f).name.encode())
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def _block_summary(run: dict) -> dict:
    b = run["blocks"]
    ext = [x["extract_s"] for x in b]
    val = [x["validate_s"] for x in b if x.get("validate_s") is not None]
    return {"produced": sum(1 for x in b if x.get("file")),
            "valid": sum(1 for x in b if x.get("valid")),
            "extract_ms_median": 1000 * median(ext), "extract_ms_p90": 1000 * pct(ext, 0.9),
            "extract_s_total": sum(ext),
            "validate_ms_median": 1000 * median(val) if val else None,
            "validate_ms_p90": 1000 * pct(val, 0.9) if val else None,
            "validate_s_total": sum(val) if val else None,
            "warm_s": run.get("warm_s")}


# -- the side-by-side ------------------------------------------------------------------------
def side_by_side(args, corpora: Path, work: Path) -> dict:
    R = args.runs
    names_file = args.blocks
    names = [n.strip() for n in names_file.read_text().splitlines()
             if n.strip() and not n.startswith("#")]
    paper = PaperTool(work, corpora)
    versions = paper.setup()
    nn = Nnrag(work, corpora)
    res: dict = {"runs": R, "blocks_file": str(names_file), "blocks": len(names),
                 "paper_tool": {"version": versions, "venv": str(paper.venv)},
                 "subset": SUBSET, "load": {}}

    # clone (paper tool only; nnrag reads the directories where they are)
    home = work / "paper-home"
    shutil.rmtree(home, ignore_errors=True)
    m, data = paper.clone(home)
    res["paper_clone"] = {"seconds": data["seconds"], **_proc(m)}
    log(f"{PAPER}: cloned timm + torchvision from local bare repositories in "
        f"{data['seconds']:.1f} s")

    # 1. cold index
    res["load"]["cold"] = load()
    cold = {NNRAG: [], PAPER: []}
    after = []  # nnrag again right after each nn-rag run: its pair is the mean of both sides

    def nn_cold() -> dict:
        cache = work / "nnrag-cold"
        shutil.rmtree(cache, ignore_errors=True)
        m, d = nn.index(cache, "--digest")
        return {**d, **_proc(m)}

    for i in range(R):
        cold[NNRAG].append(nn_cold())
        paper.drop_index(home)
        m, p = paper.index(home, "missing")
        cold[PAPER].append({**p, **_proc(m)})
        after.append(nn_cold())
        d = cold[NNRAG][-1]
        log(f"cold index run {i + 1}/{R}: nnrag {d['seconds']:.2f} s / {after[-1]['seconds']:.2f} s "
            f"({d['files']} files), {PAPER} {p['seconds']:.1f} s "
            f"({sum(p['modules'].values())} modules, {p['failed_files']} failed) [load {load()}]")
    res["cold_nnrag_after"] = after
    res["cold"] = cold

    # 2. warm: nothing changed (nnrag: index + resolver load; paper: hydrate from SQLite)
    res["load"]["warm"] = load()
    warm = {NNRAG: [], PAPER: []}
    for i in range(R):
        m, d = nn.index(work / "nnrag-cold", "--resolver")
        warm[NNRAG].append({**d, **_proc(m)})
        m, p = paper.index(home, "missing")
        warm[PAPER].append({**p, **_proc(m)})
    log(f"warm: nnrag {median([w['seconds'] for w in warm[NNRAG]]) * 1000:.0f} ms "
        f"(+ resolver {median([w['resolver_s'] for w in warm[NNRAG]]):.2f} s), "
        f"{PAPER} {median([w['seconds'] for w in warm[PAPER]]):.2f} s")
    res["warm"] = warm

    # 3. one file changed (private copies: nnrag a copy of the corpora, the paper tool its own
    #    checkout in a second HOME)
    res["load"]["changed"] = load()
    copy = work / "nnrag-corpora-copy"
    shutil.rmtree(copy, ignore_errors=True)
    for name, subs in SUBSET.items():
        for sub in subs:
            shutil.copytree(corpora / name / sub, copy / name / sub)
    copy_cfg = work / "nnrag-subset-copy.json"
    copy_cfg.write_text(json.dumps(subset_config(copy), indent=2))
    ccache = work / "nnrag-changed"
    shutil.rmtree(ccache, ignore_errors=True)
    nn.index(ccache, config=copy_cfg)
    chome = work / "paper-home-changed"
    paper.copy_home(home, chome)  # its clones and the index of the last cold run
    changed = {NNRAG: [], PAPER: [], PAPER + " (default mode)": []}
    for i in range(R):
        marker = f"# bench: change {i + 1} {time.time()}"
        for target in (copy / CHANGED[0] / CHANGED[1],
                       paper.checkout(chome, CHANGED[0]) / CHANGED[1]):
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(f"\n{marker}\n")
        m, d = nn.index(ccache, config=copy_cfg)
        changed[NNRAG].append({**d, **_proc(m)})
        m, p = paper.index(chome, "missing", marker=(CHANGED[1], marker))
        changed[PAPER + " (default mode)"].append({**p, **_proc(m)})
        m, p = paper.index(chome, "force", marker=(CHANGED[1], marker))
        changed[PAPER].append({**p, **_proc(m)})
        log(f"one file changed run {i + 1}/{R}: nnrag {d['seconds'] * 1000:.0f} ms "
            f"({d['parsed']} parsed), {PAPER} force {p['seconds']:.1f} s "
            f"(saw change: {p.get('marker_seen')}), default mode saw change: "
            f"{changed[PAPER + ' (default mode)'][-1].get('marker_seen')}")
    res["changed"] = changed

    # 4. extraction + validation of the listed blocks, each run a fresh process from a warm
    #    cache: the process wall is the 100-block extract+validate wall time
    res["load"]["extract"] = load()
    ext = {NNRAG: [], NNRAG_IMPORT: [], PAPER: []}
    outs = {NNRAG: [], PAPER: []}
    for i in range(R):
        out = work / f"out-nnrag-{i}"
        m, d = nn.extract(work / "nnrag-cold", names_file, out)
        ext[NNRAG].append({**d, **_proc(m)})
        outs[NNRAG].append([b["file"] for b in d["blocks"] if b.get("file")])
        m, d2 = nn.extract(work / "nnrag-cold", names_file, work / "out-nnrag-import",
                           deepest="import")
        ext[NNRAG_IMPORT].append({**d2, **_proc(m)})
        out = work / f"out-paper-{i}"
        m, p = paper.extract(home, names_file, out)
        ext[PAPER].append({**p, **_proc(m)})
        outs[PAPER].append([b["file"] for b in p["blocks"] if b.get("file")])
        sn, sp = _block_summary(d), _block_summary(p)
        log(f"extract run {i + 1}/{R}: nnrag {sn['extract_ms_median']:.1f} ms/block "
            f"(validate {sn['validate_ms_median'] or 0:.0f} ms), {PAPER} "
            f"{sp['extract_ms_median']:.0f} ms/block (validate "
            f"{sp['validate_ms_median'] or 0:.0f} ms); wall {ext[NNRAG][-1]['process_s']:.1f} s"
            f" (to import: {ext[NNRAG_IMPORT][-1]['process_s']:.1f} s) vs "
            f"{ext[PAPER][-1]['process_s']:.1f} s")
    res["extract"] = {tool: [{**{k: v for k, v in r.items() if k != "blocks"},
                              "summary": _block_summary(r), "blocks": r["blocks"]}
                             for r in runs] for tool, runs in ext.items()}
    res["outputs_identical_across_runs"] = {tool: len({_digest(f) for f in o}) == 1
                                            for tool, o in outs.items()}

    # 5. quality of the files of the first run, one measure for both tools
    log("quality figures ...")
    upstream = Upstream([corpora / "timm" / "timm", corpora / "torchvision" / "torchvision"])
    res["quality"] = {tool: quality(o[0], upstream) for tool, o in outs.items()}
    clean = {tool: {Path(f).stem for f in o[0]} - set(res["quality"][tool]["import_failures"])
             - set(res["quality"][tool]["undefined"]) for tool, o in outs.items()}
    both = clean[NNRAG] & clean[PAPER]
    lines_both = {}
    for tool, o in outs.items():
        texts = [Path(f).read_text() for f in o[0] if Path(f).stem in both]
        ls = [len(t.splitlines()) for t in texts]
        cl = [code_lines(t) for t in texts]
        lines_both[tool] = {"blocks": len(ls), "median": median(ls), "max": max(ls, default=None),
                            "code_median": median(cl), "code_max": max(cl, default=None)}
    res["lines_where_both_clean"] = lines_both

    # 6. the command lines, once each (a cross-check of the API runs)
    log("CLI batch runs ...")
    m, d = nn.cli_batch(work / "nnrag-cold", names_file, work / "cli-nnrag")
    res["cli"] = {NNRAG: {**d, **_proc(m), "command": "nnrag extract --from-file LIST --out DIR"}}
    m, p = paper.cli_batch(home, names, work / "cli-paper")
    res["cli"][PAPER] = {**p, **_proc(m), "command": "python -m ab.rag --blocks NAMES..."}
    return res


def headline(res: dict) -> dict:
    """Medians and paired ratios, plus the verdict on every target."""
    R = res["runs"]
    cold_n = [(a["seconds"] + b["seconds"]) / 2
              for a, b in zip(res["cold"][NNRAG], res["cold_nnrag_after"])]
    cpu_n = [(a["cpu_s"] + b["cpu_s"]) / 2
             for a, b in zip(res["cold"][NNRAG], res["cold_nnrag_after"])]
    cpu_p = [r["cpu_s"] for r in res["cold"][PAPER]]
    cold_p = [r["seconds"] for r in res["cold"][PAPER]]
    warm_n = [r["seconds"] for r in res["warm"][NNRAG]]
    ready_n = [r["seconds"] + r["resolver_s"] for r in res["warm"][NNRAG]]
    warm_p = [r["seconds"] for r in res["warm"][PAPER]]
    ch_n = [r["seconds"] for r in res["changed"][NNRAG]]
    ch_p = [r["seconds"] for r in res["changed"][PAPER]]
    sn = [r["summary"] for r in res["extract"][NNRAG]]
    sp = [r["summary"] for r in res["extract"][PAPER]]
    ext_n = [s["extract_ms_median"] for s in sn]
    ext_p = [s["extract_ms_median"] for s in sp]
    p90_n = [s["extract_ms_p90"] for s in sn]
    p90_p = [s["extract_ms_p90"] for s in sp]
    wall_n = [r["process_s"] for r in res["extract"][NNRAG]]
    wall_i = [r["process_s"] for r in res["extract"][NNRAG_IMPORT]]
    val_i = [r["summary"]["validate_ms_median"] for r in res["extract"][NNRAG_IMPORT]
             if r["summary"]["validate_ms_median"] is not None]
    wall_p = [r["process_s"] for r in res["extract"][PAPER]]
    val_n = [s["validate_ms_median"] for s in sn if s["validate_ms_median"] is not None]
    val_p = [s["validate_ms_median"] for s in sp if s["validate_ms_median"] is not None]
    h = {
        "runs": R,
        "cold_index_s": {NNRAG: median(cold_n), PAPER: median(cold_p),
                         "ratio": median(_ratios(cold_p, cold_n)),
                         "ratios": _ratios(cold_p, cold_n)},
        "cold_index_cpu_s": {NNRAG: median(cpu_n), PAPER: median(cpu_p),
                             "ratio": median(_ratios(cpu_p, cpu_n))},
        "cold_index_process_s": {
            NNRAG: median([r["process_s"] for r in res["cold"][NNRAG]]),
            PAPER: median([r["process_s"] for r in res["cold"][PAPER]])},
        "warm_reindex_s": {NNRAG: median(warm_n), PAPER: median(warm_p),
                           "ratio": median(_ratios(warm_p, warm_n))},
        "warm_ready_to_extract_s": {NNRAG: median(ready_n), PAPER: median(warm_p),
                                    "ratio": median(_ratios(warm_p, ready_n))},
        "changed_reindex_s": {NNRAG: median(ch_n), PAPER: median(ch_p),
                              "ratio": median(_ratios(ch_p, ch_n)),
                              "nnrag_parsed": [r["parsed"] for r in res["changed"][NNRAG]],
                              "paper_force_saw_change": [r.get("marker_seen") for r in
                                                         res["changed"][PAPER]],
                              "paper_default_saw_change": [
                                  r.get("marker_seen")
                                  for r in res["changed"][PAPER + " (default mode)"]],
                              "paper_default_s": median([
                                  r["seconds"]
                                  for r in res["changed"][PAPER + " (default mode)"]])},
        "extract_ms_median": {NNRAG: median(ext_n), PAPER: median(ext_p),
                              "ratio": median(_ratios(ext_p, ext_n)),
                              "ratios": _ratios(ext_p, ext_n)},
        "extract_ms_p90": {NNRAG: median(p90_n), PAPER: median(p90_p),
                           "ratio": median(_ratios(p90_p, p90_n))},
        "validate_ms_median": {NNRAG: median(val_n) if val_n else None,
                               NNRAG_IMPORT: median(val_i) if val_i else None,
                               PAPER: median(val_p) if val_p else None},
        "validator": res["extract"][NNRAG][0].get("validator"),
        "validator_startup_s": res["extract"][NNRAG][0].get("validator_startup_s"),
        "wall_100_s": {NNRAG: median(wall_n), PAPER: median(wall_p),
                       "ratio": median(_ratios(wall_p, wall_n))},
        "wall_100_import_s": {NNRAG: median(wall_i), PAPER: median(wall_p),
                              "ratio": median(_ratios(wall_p, wall_i))},
        "peak_mib_index": {NNRAG: mib(max(r["peak_tree_pss"] for r in res["cold"][NNRAG])),
                           PAPER: mib(max(r["peak_tree_pss"] for r in res["cold"][PAPER]))},
        "peak_mib_extract": {
            NNRAG: mib(max(r["peak_tree_pss"] for r in res["extract"][NNRAG])),
            NNRAG_IMPORT: mib(max(r["peak_tree_pss"] for r in res["extract"][NNRAG_IMPORT])),
            PAPER: mib(max(r["peak_tree_pss"] for r in res["extract"][PAPER]))},
        "valid": {NNRAG: sn[0]["valid"], PAPER: sp[0]["valid"]},
        "forward_ran": {NNRAG: sum(1 for b in res["extract"][NNRAG][0]["blocks"]
                                   if b.get("level") == "forward_ran")},
        "files_indexed": {NNRAG: [r["files"] - r["failed"] for r in res["cold"][NNRAG]],
                          PAPER: [sum(r["modules"].values()) for r in res["cold"][PAPER]]},
        "cold_index_identical": {NNRAG: len({r["digest"] for r in
                                             res["cold"][NNRAG] + res["cold_nnrag_after"]}) == 1},
    }
    q = res["quality"]
    qn, qp = q[NNRAG], q[PAPER]
    share = {t: (q[t]["definitions_identical"] / q[t]["definitions"]) if q[t]["definitions"]
             else 0.0 for t in q}
    h["quality"] = {
        "imported": {NNRAG: qn["imported"], PAPER: qp["imported"],
                     "ahead": qn["imported"] > qp["imported"]},
        "files_with_undefined_names": {NNRAG: qn["files_with_undefined_names"],
                                       PAPER: qp["files_with_undefined_names"],
                                       "ahead": qn["files_with_undefined_names"]
                                       < qp["files_with_undefined_names"]},
        "definitions_identical_share": {NNRAG: share[NNRAG], PAPER: share[PAPER],
                                        "ahead": share[NNRAG] > share[PAPER]},
        "decorators_stripped": {NNRAG: qn["definitions_decorators_stripped"],
                                PAPER: qp["definitions_decorators_stripped"],
                                "ahead": qn["definitions_decorators_stripped"]
                                <= qp["definitions_decorators_stripped"]},
        "lines_median": {NNRAG: qn["lines_median"], PAPER: qp["lines_median"],
                         "ahead": (qn["lines_median"] or 0) <= (qp["lines_median"] or 0)},
        "lines_max": {NNRAG: qn["lines_max"], PAPER: qp["lines_max"],
                      "ahead": (qn["lines_max"] or 0) <= (qp["lines_max"] or 0)},
    }
    h["targets"] = {
        "cold_index_ratio": {"target": TARGETS["cold_index_ratio"],
                             "value": h["cold_index_s"]["ratio"],
                             "met": h["cold_index_s"]["ratio"] >= TARGETS["cold_index_ratio"]},
        "extract_ratio": {"target": TARGETS["extract_ratio"],
                          "value": h["extract_ms_median"]["ratio"],
                          "met": h["extract_ms_median"]["ratio"] >= TARGETS["extract_ratio"]},
        "quality_all_ahead": {"met": all(v["ahead"] for v in h["quality"].values()),
                              "behind": [k for k, v in h["quality"].items() if not v["ahead"]]},
    }
    return h


# -- the report ------------------------------------------------------------------------------
def _f(x, unit="", nd=2) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if x.is_integer() and nd == 2:
            return f"{int(x):,}{unit}"
        if round(x, 1) == x and nd == 2:
            return f"{x:,.1f}{unit}"
        return f"{x:,.{nd}f}{unit}"
    return f"{x:,}{unit}"


def _ms(s) -> str:
    return "n/a" if s is None else (f"{s * 1000:,.0f} ms" if s < 10 else f"{s:,.1f} s")


def _x(r) -> str:
    return "n/a" if r is None else f"{r:,.1f}×"


def markdown(rep: dict) -> str:
    m = rep["machine"]
    L = [f"# nnrag benchmark: beside `nn-rag` {PAPER_VERSION}, and at scale — {rep['date']}", ""]
    L.append(f"Machine: {m['cpus']} cores ({m['cpu_model']}), {m['memory_gib']} GiB, "
             f"Python {m['python']}, torch {m['torch']}, {m['platform']}; load average "
             f"{m['load_average_at_start'][0]:.1f} at the start (the machine was shared).")
    L.append(f"Command: `{rep['command']}` ({rep['elapsed_min']:.0f} min).")
    mf = rep.get("merged_from_earlier")
    if mf:
        origins = mf.get("origins") or {p: mf.get("command") for p in mf["parts"]}
        L.append("Parts kept from an earlier run of the same day: " + "; ".join(
            f"{p} (`{origins[p]}`)" for p in mf["parts"]) + ".")
    L.append("")
    sbs = rep.get("side_by_side")
    if sbs:
        h = rep["headline"]
        t = h["targets"]
        R = h["runs"]
        c0 = sbs["cold"][NNRAG][0]
        L += ["## Headline", ""]
        L.append(f"- **cold index {_x(h['cold_index_s']['ratio'])} faster** than `nn-rag` "
                 f"{PAPER_VERSION} on its own subset (target ≥ {t['cold_index_ratio']['target']:.0f}×: "
                 + ("met" if t["cold_index_ratio"]["met"] else
                    f"missed by {t['cold_index_ratio']['target'] - t['cold_index_ratio']['value']:.1f}×")
                 + ")")
        L.append(f"- **extraction {_x(h['extract_ms_median']['ratio'])} faster** per block, median "
                 f"(target ≥ {t['extract_ratio']['target']:.0f}×: "
                 + ("met" if t["extract_ratio"]["met"] else
                    f"missed by {t['extract_ratio']['target'] - t['extract_ratio']['value']:.1f}×")
                 + f"); p90 {_x(h['extract_ms_p90']['ratio'])}")
        L.append(f"- 100 blocks extracted and validated to import, whole process: "
                 f"{_f(h['wall_100_import_s'][NNRAG], ' s', 1)} vs "
                 f"{_f(h['wall_100_import_s'][PAPER], ' s', 1)} "
                 f"({_x(h['wall_100_import_s']['ratio'])}); with nnrag's full validation "
                 f"(instantiate + forward, which `nn-rag` does not do) "
                 f"{_f(h['wall_100_s'][NNRAG], ' s', 1)} ({_x(h['wall_100_s']['ratio'])})")
        qa = t["quality_all_ahead"]
        L.append("- quality figures: " + ("all ahead" if qa["met"] else
                                          "behind on " + ", ".join(qa["behind"])))
        sc = rep.get("scale", {})
        for name in ("transformers", "lemur"):
            if name in sc:
                s = sc[name]["summary"]
                L.append(f"- {name} cold index {s['cold_s_2_workers']:.1f} s (target ≤ "
                         f"{sc[name]['target_cold_s']:.0f} s: " +
                         ("met" if s["cold_meets_target"] else
                          f"missed by {s['cold_over_target_s']:.1f} s") + ")")
        L.append("")
        L += [f"## Side by side (timm 1.0.31 + torchvision 0.29.1, the paper tool's subset; "
              f"median of {R} runs, ratios paired run by run)", ""]
        L.append(f"Both tools index `timm/models`, `timm/layers`, `torchvision/models`, "
                 f"`torchvision/ops` ({c0['files']} files for nnrag). Blocks: "
                 f"`{Path(sbs['blocks_file']).name}` ({sbs['blocks']} names).")
        L.append("")
        L.append(f"| measure | nnrag | nn-rag {PAPER_VERSION} | nn-rag / nnrag |")
        L.append("|---|---|---|---|")
        L.append(f"| cold index (in-process) | {_ms(h['cold_index_s'][NNRAG])} | "
                 f"{_ms(h['cold_index_s'][PAPER])} | {_x(h['cold_index_s']['ratio'])} |")
        L.append(f"| cold index, whole process: wall / CPU time | "
                 f"{_ms(h['cold_index_process_s'][NNRAG])} / {_ms(h['cold_index_cpu_s'][NNRAG])} | "
                 f"{_ms(h['cold_index_process_s'][PAPER])} / {_ms(h['cold_index_cpu_s'][PAPER])} | "
                 f"CPU {_x(h['cold_index_cpu_s']['ratio'])} |")
        L.append(f"| clone before indexing | none (reads directories in place) | "
                 f"{_ms(sbs['paper_clone']['seconds'])} (local bare repos) | |")
        fi = h["files_indexed"]
        same = "identical index every run" if h["cold_index_identical"][NNRAG] else \
            "index contents differ between runs"
        L.append(f"| files indexed per cold run (of {c0['files']}) | "
                 f"{', '.join(map(str, fi[NNRAG]))} ({same}) | "
                 f"{', '.join(map(str, fi[PAPER]))} | |")
        L.append(f"| re-index, nothing changed | {_ms(h['warm_reindex_s'][NNRAG])} | "
                 f"{_ms(h['warm_reindex_s'][PAPER])} (hydrate) | "
                 f"{_x(h['warm_reindex_s']['ratio'])} |")
        L.append(f"| warm start, ready to extract | {_ms(h['warm_ready_to_extract_s'][NNRAG])} "
                 f"(index + resolver) | {_ms(h['warm_ready_to_extract_s'][PAPER])} | "
                 f"{_x(h['warm_ready_to_extract_s']['ratio'])} |")
        ch = h["changed_reindex_s"]
        seen_default = any(ch["paper_default_saw_change"])
        L.append(f"| re-index after one file changed | {_ms(ch[NNRAG])} "
                 f"({'/'.join(map(str, sorted(set(ch['nnrag_parsed']))))} file parsed) | "
                 f"{_ms(ch[PAPER])} (`index_mode=force`; default mode "
                 f"{'sees' if seen_default else 'does not see'} the change) | {_x(ch['ratio'])} |")
        L.append(f"| extraction per block, median | {_f(h['extract_ms_median'][NNRAG], ' ms', 1)} | "
                 f"{_f(h['extract_ms_median'][PAPER], ' ms', 1)} | "
                 f"{_x(h['extract_ms_median']['ratio'])} |")
        L.append(f"| extraction per block, p90 | {_f(h['extract_ms_p90'][NNRAG], ' ms', 1)} | "
                 f"{_f(h['extract_ms_p90'][PAPER], ' ms', 1)} | {_x(h['extract_ms_p90']['ratio'])} |")
        vn, vi = h["validate_ms_median"][NNRAG], h["validate_ms_median"][NNRAG_IMPORT]
        vp = h["validate_ms_median"][PAPER]
        if vn is None:
            L.append(f"| validation per block, median | not available ({h['validator']}) | "
                     f"{_f(vp, ' ms', 1)} | |")
        else:
            L.append(f"| validation per block to the paper's bar (parse, compile, import), median "
                     f"| {_f(vi, ' ms', 1)} (sandboxed interpreter; + undefined-name check) | "
                     f"{_f(vp, ' ms', 1)} (`exec` inside its own process) | "
                     f"{_x(vp / vi if vi else None)} |")
            L.append(f"| validation per block, full (+ instantiate, forward), median | "
                     f"{_f(vn, ' ms', 1)} (sandbox start-up "
                     f"{_f(h['validator_startup_s'], ' s', 1)}, once) | not offered | |")
        L.append(f"| blocks validated (own validator) | {h['valid'][NNRAG]}/{sbs['blocks']} "
                 f"({h['forward_ran'][NNRAG]} ran forward) | "
                 f"{h['valid'][PAPER]}/{sbs['blocks']} | |")
        if vn is not None:
            L.append(f"| 100 blocks extract + validate to import, whole process | "
                     f"{_f(h['wall_100_import_s'][NNRAG], ' s', 1)} | "
                     f"{_f(h['wall_100_import_s'][PAPER], ' s', 1)} | "
                     f"{_x(h['wall_100_import_s']['ratio'])} |")
        L.append(f"| 100 blocks extract + validate{' (full)' if vn is not None else ''}, whole "
                 f"process | {_f(h['wall_100_s'][NNRAG], ' s', 1)} | "
                 f"{_f(h['wall_100_s'][PAPER], ' s', 1)} | {_x(h['wall_100_s']['ratio'])} |")
        L.append(f"| peak memory, cold index (process tree) | {_f(h['peak_mib_index'][NNRAG], ' MiB', 0)} | "
                 f"{_f(h['peak_mib_index'][PAPER], ' MiB', 0)} | |")
        L.append(f"| peak memory, extract + validate (process tree) | "
                 f"{_f(h['peak_mib_extract'][NNRAG_IMPORT], ' MiB', 0)} to import, "
                 f"{_f(h['peak_mib_extract'][NNRAG], ' MiB', 0)} with forward (whole "
                 f"architectures run in the sandbox) | "
                 f"{_f(h['peak_mib_extract'][PAPER], ' MiB', 0)} | |")
        L.append("")
        q = sbs["quality"]
        n = sbs["blocks"]
        L += ["### Quality of the files produced (one measure for both tools)", ""]
        L.append(f"| figure | nnrag | nn-rag {PAPER_VERSION} | ahead? |")
        L.append("|---|---|---|---|")
        hq = h["quality"]
        L.append(f"| files produced | {q[NNRAG]['files']}/{n} | {q[PAPER]['files']}/{n} | |")
        L.append(f"| import in a fresh process (timm/torchvision blocked) | "
                 f"{q[NNRAG]['imported']}/{n} | {q[PAPER]['imported']}/{n} | "
                 f"{'yes' if hq['imported']['ahead'] else 'no'} |")
        L.append(f"| files with undefined names (pyflakes, methods included) | "
                 f"{q[NNRAG]['files_with_undefined_names']} | "
                 f"{q[PAPER]['files_with_undefined_names']} | "
                 f"{'yes' if hq['files_with_undefined_names']['ahead'] else 'no'} |")
        share = hq["definitions_identical_share"]
        L.append(f"| definitions identical to upstream (decorators included) | "
                 f"{q[NNRAG]['definitions_identical']}/{q[NNRAG]['definitions']} "
                 f"({share[NNRAG]:.1%}) | {q[PAPER]['definitions_identical']}/"
                 f"{q[PAPER]['definitions']} ({share[PAPER]:.1%}) | "
                 f"{'yes' if hq['definitions_identical_share']['ahead'] else 'no'} |")
        L.append(f"| definitions whose decorators were stripped | "
                 f"{q[NNRAG]['definitions_decorators_stripped']} | "
                 f"{q[PAPER]['definitions_decorators_stripped']} | "
                 f"{'yes' if hq['decorators_stripped']['ahead'] else 'no'} |")
        L.append(f"| lines per file, median / max | {_f(q[NNRAG]['lines_median'])} / "
                 f"{_f(q[NNRAG]['lines_max'])} | {_f(q[PAPER]['lines_median'])} / "
                 f"{_f(q[PAPER]['lines_max'])} | "
                 f"{'yes' if hq['lines_median']['ahead'] and hq['lines_max']['ahead'] else 'no'} |")
        L.append(f"| code lines per file (no blanks, no comments), median / max | "
                 f"{_f(q[NNRAG]['code_lines_median'])} / {_f(q[NNRAG]['code_lines_max'])} | "
                 f"{_f(q[PAPER]['code_lines_median'])} / {_f(q[PAPER]['code_lines_max'])} | |")
        lb = sbs["lines_where_both_clean"]
        L.append(f"| lines (code lines) per file, median / max, over the {lb[NNRAG]['blocks']} "
                 f"blocks both tools produce clean (import, no undefined name) | "
                 f"{_f(lb[NNRAG]['median'])} ({_f(lb[NNRAG]['code_median'])}) / "
                 f"{_f(lb[NNRAG]['max'])} ({_f(lb[NNRAG]['code_max'])}) | "
                 f"{_f(lb[PAPER]['median'])} ({_f(lb[PAPER]['code_median'])}) / "
                 f"{_f(lb[PAPER]['max'])} ({_f(lb[PAPER]['code_max'])}) | |")
        same = sbs["outputs_identical_across_runs"]
        L.append(f"| same files in every run | {'yes' if same[NNRAG] else 'no'} | "
                 f"{'yes' if same[PAPER] else 'no'} | |")
        L.append("")
        cli = sbs["cli"]
        L.append(f"Command lines, once each from a warm cache: `{cli[NNRAG]['command']}` "
                 f"{cli[NNRAG]['process_s']:.1f} s ({cli[NNRAG]['produced']} files, no "
                 f"validation); `{cli[PAPER]['command']}` {cli[PAPER]['process_s']:.1f} s "
                 f"({cli[PAPER]['produced']} files, {cli[PAPER]['valid']} passed its validator).")
        L.append("")
    sc = rep.get("scale")
    if sc:
        L += ["## Scale (nnrag alone)", ""]
        L.append("| corpus | files | failed | blocks | cold, 2 processes | cold, 1 process | "
                 "1 → 2 processes | re-index, nothing changed | peak memory, cold | target |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for name, r in sc.items():
            s = r["summary"]
            tgt = (f"≤ {r['target_cold_s']:.0f} s: " + ("met" if s["cold_meets_target"] else
                                                      f"missed by {s['cold_over_target_s']:.1f} s"))
            L.append(f"| {name} ({r['spec']}, `{r['indexed']}`) | {s['files']:,} | "
                     f"{s['failed']} | {s['blocks']:,} | {s['cold_s_2_workers']:.1f} s | "
                     f"{s['cold_s_1_worker']:.1f} s | {s['speedup_2_over_1']:.2f}× faster | "
                     f"{_ms(s['warm_s'])} | {s['peak_mib_cold']:.0f} MiB | {tgt} |")
        L.append("")
    tui = rep.get("tui")
    if tui:
        L += ["## Terminal app", ""]
        if not tui.get("available"):
            L.append(f"Not available: {tui.get('reason') or tui.get('error')}.")
        else:
            kb, ki = tui["key_ms_while_indexing"], tui["key_ms_idle"]
            L.append("| measure | figure |")
            L.append("|---|---|")
            pt = tui.get("paint")
            if pt:
                L.append(f"| first paint, launch → first frame, {pt['corpus']} (median of "
                         f"{len(pt['runs'])}) | {_ms(pt['first_paint_s'])} (importing the app "
                         f"{_ms(pt['import_s'])}) |")
                L.append(f"| launch → first frame listing the blocks | "
                         f"{_ms(pt['blocks_paint_s'])} |")
            else:
                L.append(f"| first paint, from launching the process, empty cache | "
                         f"{_ms(tui['first_paint_s'])} (importing the app "
                         f"{_ms(tui['import_s'])}) |")
            L.append(f"| key → frame showing it, while a cold index of {tui['corpus']} runs "
                     f"(median / p90 / max of {kb['n']}) | {_f(kb['median'], ' ms', 0)} / "
                     f"{_f(kb['p90'], ' ms', 0)} / {_f(kb['max'], ' ms', 0)} |")
            L.append(f"| the same, index finished (median / p90 of {ki['n']}) | "
                     f"{_f(ki['median'], ' ms', 0)} / {_f(ki['p90'], ' ms', 0)} |")
            L.append(f"| keys lost | {tui['keys_lost_while_indexing'] + tui['keys_lost_idle']} |")
            L.append(f"| torch imported by the TUI process | "
                     f"{'yes' if tui['torch_imported'] else 'no'} |")
            L.append(f"| peak memory, process tree | {_f(tui['peak_mib'], ' MiB', 0)} |")
        L.append("")
    L += ["## How it was measured", ""]
    L += [
        f"- `nn-rag` {PAPER_VERSION} runs from PyPI in its own virtual environment with the CPU "
        "torch 2.13.0, `HOME` set to a scratch directory (its cache is `~/.cache/nn-rag`), cloning "
        "with its own `git clone --depth=1 --filter=blob:none` from local bare repositories of "
        "the same unpacked sources (`url.<base>.insteadOf`). Its wheel has no repo_config.json, "
        "so it indexes its fallback subset; nnrag is given path sources restricted to the same "
        "four directories.",
        "- Cold index: nnrag `BlockExtractor.index()` in a fresh cache; `nn-rag` "
        "`warm_index_once()` with its clones present and `index.db` deleted (clone time "
        "reported apart, not counted). Re-index with nothing changed: nnrag `index()` on the "
        "warm cache; `nn-rag` `warm_index_once()` with its index present (it re-reads nothing "
        "from disk, it loads its SQLite rows). Ready to extract adds nnrag's resolver load.",
        "- One file changed: a comment appended to `timm/layers/mlp.py` in a private copy. "
        "`nn-rag`'s default `index_mode=missing` never re-reads a repository it has indexed, so "
        "the row shows `index_mode=force`, which re-reads every file and re-parses the changed "
        "one.",
        "- Extraction: one fresh process per run from a warm cache, every block of the list "
        "extracted and validated in turn through each tool's library API; per-block extraction "
        "time excludes validation (`nn-rag`'s validator calls are timed and subtracted). The "
        "process wall time is the 100-block extract + validate figure. `nn-rag`'s output "
        "directory is redirected from its site-packages to a scratch directory "
        "(`path_resolver.get_generated_packages_dir`), nothing else is changed.",
        "- Peak memory: proportional set sizes (PSS) of the process and all its descendants, "
        "summed, sampled every 100 ms from /proc (PSS counts pages shared after a fork once; the "
        "JSON also has the RSS sum and the largest single process).",
        "- Quality: bench/quality.py on the files of the first extraction run of each tool: "
        "bench/import_check.py (a forked fresh module namespace per file, torch warm, timm and "
        "torchvision blocked), pyflakes undefined names, and every module-level definition "
        "compared with the upstream definitions of the same name.",
    ]
    if rep.get("notes"):
        L += [""] + [f"- {n}" for n in rep["notes"]]
    L.append("")
    return "\n".join(L)


def notes(rep: dict) -> list[str]:
    """What the figures say about missed targets and caveats, in words."""
    out = []
    m = rep["machine"]
    loads = [v for v in (rep.get("side_by_side", {}).get("load") or {}).values()]
    top = max([m["load_average_at_start"][0], *loads]) if m["load_average_at_start"] else 0
    if top > m["cpus"]:
        out.append(f"The machine was shared with other test runs (1-minute load up to {top:.1f} "
                   f"on {m['cpus']} cores during the side-by-side runs): absolute times are "
                   "inflated; the ratios pair the two tools run by run, so both saw the same "
                   "conditions.")
    h = rep.get("headline")
    if h:
        t = h["targets"]
        for key, what in (("cold_index_ratio", "cold index"), ("extract_ratio", "extraction")):
            if not t[key]["met"]:
                out.append(f"Target missed: {what} {t[key]['value']:.1f}× faster, "
                           f"{t[key]['target'] - t[key]['value']:.1f}× short of "
                           f"{t[key]['target']:.0f}× (paired ratios: "
                           + ", ".join(f"{r:.1f}×" for r in h[
                               'cold_index_s' if key == 'cold_index_ratio'
                               else 'extract_ms_median']['ratios']) + ").")
        q = h["quality"]
        sbs = rep["side_by_side"]
        if not (q["lines_median"]["ahead"] and q["lines_max"]["ahead"]):
            lb = sbs["lines_where_both_clean"]
            out.append(
                f"Target missed: lines per file. nnrag's files are longer (median "
                f"{q['lines_median'][NNRAG]:g} vs {q['lines_median'][PAPER]:g}, max "
                f"{q['lines_max'][NNRAG]:,} vs {q['lines_max'][PAPER]:,}) because they carry the "
                "whole dependency closure and a provenance header, while many of nn-rag's files "
                f"are short because dependencies are missing ({q['files_with_undefined_names'][PAPER]} "
                f"of its files have undefined names, {sbs['blocks'] - q['imported'][PAPER]} do not "
                f"import). Over the {lb[NNRAG]['blocks']} blocks both tools produce clean, the "
                f"medians are {lb[NNRAG]['median']:g} vs {lb[PAPER]['median']:g} lines "
                f"({lb[NNRAG]['code_median']:g} vs {lb[PAPER]['code_median']:g} code lines).")
        fails = sbs["quality"][NNRAG]["import_failures"]
        if fails:
            tv = [k for k, v in fails.items() if "torchvision is blocked" in v]
            if tv:
                out.append(f"{len(tv)} of nnrag's files that do not import in the check "
                           f"({', '.join(sorted(tv))}) import torchvision modules outside the "
                           "indexed subset, which nnrag keeps as external imports (timm's own "
                           "imports of torchvision); the check blocks torchvision, so they count "
                           "as failures here.")
        fi = h["files_indexed"][PAPER]
        if len(set(fi)) > 1:
            out.append(f"nn-rag's threaded cold index did not index the same number of files in "
                       f"every run ({', '.join(map(str, fi))}): it drops files silently.")
        if h["warm_ready_to_extract_s"]["ratio"] and h["warm_ready_to_extract_s"]["ratio"] < 1:
            out.append("Warm start: nn-rag is ready sooner because it checks nothing (it loads "
                       "its SQLite rows and never looks at the files again); nnrag checks every "
                       "file's size and mtime and then loads its resolver.")
    for name, r in (rep.get("scale") or {}).items():
        s = r["summary"]
        if not s["cold_meets_target"]:
            out.append(f"Target missed: {name} cold index {s['cold_s_2_workers']:.1f} s, "
                       f"{s['cold_over_target_s']:.1f} s over {r['target_cold_s']:.0f} s "
                       f"({s['files']:,} files, {s['files'] / s['cold_s_2_workers']:.0f} files/s "
                       f"with 2 processes; {s['cold_s_1_worker']:.1f} s with 1, so 2 processes "
                       f"give {s['speedup_2_over_1']:.2f}×).")
    return out


def tui_run(work: Path, corpora: Path, scale_corpora: Path | None, keys: int,
            runs: int) -> dict:
    """First paint on a warm cache of the built-in default corpus (median of ``runs``
    launches, as bench/tui_bench.py measures it standalone), then key response in one more
    launch on an empty cache of transformers (or of the subset), so a cold index runs while
    keys are typed."""
    from tui_bench import launch, warm

    out: dict = {}
    paint_cache = work / "tui-paint-cache"
    shutil.rmtree(paint_cache, ignore_errors=True)
    try:
        corpus = warm("", paint_cache)
        paints = [launch("", paint_cache, 0) for _ in range(runs)]
    finally:
        shutil.rmtree(paint_cache, ignore_errors=True)
    bad = [p for p in paints if not p.get("available", True) and p.get("reason")]
    if bad:
        return {"available": False, "reason": bad[0]["reason"]}
    first = [p["first_paint_s"] for p in paints if p.get("first_paint_s") is not None]
    blocks = [p["blocks_paint_s"] for p in paints if p.get("blocks_paint_s") is not None]
    out["paint"] = {"corpus": f"the built-in default corpus ({corpus['files']} files, "
                              f"{corpus['blocks']} blocks), warm cache",
                    "runs": paints, "first_paint_s": median(first),
                    "blocks_paint_s": median(blocks) if blocks else None,
                    "import_s": median([p["import_s"] for p in paints if "import_s" in p])}
    cfg = work / "tui-config.json"
    if scale_corpora is not None and (scale_corpora / "transformers").is_dir():
        from scale import scale_config

        cfg.write_text(json.dumps(scale_config(scale_corpora, "transformers")))
        out["corpus"] = "transformers (2,860 files)"
    else:
        cfg.write_text(json.dumps(subset_config(corpora)))
        out["corpus"] = "the timm + torchvision subset"
    cache = work / "tui-cache"
    shutil.rmtree(cache, ignore_errors=True)
    m = run_measured([sys.executable, str(HERE / "tui_bench.py"), "--config", str(cfg),
                      "--cache", str(cache), "--keys", str(keys), "--launched",
                      repr(time.time())], cwd=str(work))
    shutil.rmtree(cache, ignore_errors=True)
    if m.data is None:
        return {**out, "available": False, "reason": f"the TUI bench failed: {m.stderr[-500:]}"}
    return {**m.data, **out, "peak_mib": mib(m.peak_tree_pss), "load": load()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, default=HERE / ".corpora",
                    help="holds timm/ and torchvision/ (unpacked wheels); fetched when missing "
                         "(default bench/.corpora)")
    ap.add_argument("--scale-corpora", type=Path, default=None,
                    help="holds transformers/ and nn-dataset/ (default: --corpora)")
    ap.add_argument("--runs", type=int, default=3, help="runs per measure (default 3)")
    ap.add_argument("--blocks", type=Path, default=None,
                    help="block list (default ../shared/bench/blocks_timm.txt)")
    ap.add_argument("--work", type=Path, default=HERE / ".work", help="scratch (git-ignored)")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--skip", action="append", default=[],
                    choices=("side-by-side", "scale", "tui"), help="leave a part out")
    ap.add_argument("--tui-keys", type=int, default=40)
    ap.add_argument("--render", type=Path, metavar="JSON",
                    help="only re-write the Markdown report of an earlier JSON report")
    args = ap.parse_args(argv)
    if args.render:
        rep = json.loads(args.render.read_text())
        if "side_by_side" in rep:
            rep["headline"] = headline(rep["side_by_side"])
        rep["notes"] = notes(rep)
        md = args.render.with_suffix(".md")
        md.write_text(markdown(rep))
        print(md.read_text())
        return 0
    if args.blocks is None:
        args.blocks = ROOT.parent / "shared" / "bench" / "blocks_timm.txt"
        if not args.blocks.is_file():
            args.blocks = Path("/work/shared/bench/blocks_timm.txt")
    t0 = time.time()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    corpora = get_corpora(args.corpora.expanduser().resolve())
    scale_dir = (args.scale_corpora or args.corpora).expanduser().resolve()
    rep: dict = {"date": dt.date.today().isoformat(), "machine": machine(),
                 "command": "python -m bench " + " ".join(argv if argv is not None
                                                          else sys.argv[1:]),
                 "corpora": {"timm": str(corpora / "timm"),
                             "torchvision": str(corpora / "torchvision")}}
    log(f"machine: {rep['machine']}")
    if "side-by-side" not in args.skip:
        rep["side_by_side"] = side_by_side(args, corpora, work)
        rep["headline"] = headline(rep["side_by_side"])
    if "scale" not in args.skip:
        scale_corpora = get_scale_corpora(scale_dir)
        log("scale runs ...")
        rep["scale"] = run_scale(scale_corpora, work, args.runs, log=log)
    if "tui" not in args.skip:
        log("TUI ...")
        rep["tui"] = tui_run(work, corpora, scale_dir if (scale_dir / "transformers").is_dir()
                             else None, args.tui_keys, args.runs)
    rep["elapsed_min"] = (time.time() - t0) / 60
    args.results.mkdir(parents=True, exist_ok=True)
    stem = args.results / f"{rep['date']}-report"
    earlier = Path(f"{stem}.json")
    if args.skip and earlier.exists():
        # parts left out now are kept from the earlier report of the same day
        old = json.loads(earlier.read_text())
        kept = []
        for part, keys in (("side-by-side", ("side_by_side", "headline")),
                           ("scale", ("scale",)), ("tui", ("tui",))):
            if part in args.skip and keys[0] in old:
                for k in keys:
                    rep[k] = old[k]
                kept.append(part)
        if kept:
            rep["merged_from_earlier"] = {"parts": kept, "machine": old.get("machine"),
                                          "origins": {p: _origin(old, p) for p in kept}}
    rep["notes"] = notes(rep)
    Path(f"{stem}.json").write_text(json.dumps(rep, indent=1, default=str) + "\n")
    Path(f"{stem}.md").write_text(markdown(rep))
    print(Path(f"{stem}.md").read_text())
    log(f"wrote {stem}.md and {stem}.json")
    return 0


def _origin(report: dict, part: str) -> str | None:
    """The command that measured ``part`` of an earlier report: its own command, unless that
    report had itself kept the part from a run before it."""
    mf = report.get("merged_from_earlier") or {}
    if part in mf.get("parts", ()):
        return (mf.get("origins") or {}).get(part) or mf.get("command")
    return report.get("command")


if __name__ == "__main__":
    sys.exit(main())
