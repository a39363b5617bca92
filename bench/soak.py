"""Soak: index, extract and validate every block of timm + torchvision (sources under
bench/.corpora, fetched when missing) + the installed torch.nn, several rounds in one
process, and watch what a long session would leak.

Each round indexes into a fresh cache (so every round does the same work: a cold index), lists
every block, extracts each one, and validates each generated file through one sandbox that
lives for the whole soak (as it does in a TUI session), then closes its extractor. Per round it
reports the process's peak RSS (the kernel's high-water mark, reset before the round through
``/proc/self/clear_refs``), the RSS left after the round, open file descriptors, threads and
child processes before and after, and the sandbox worker's RSS. Memory is flat when the later
rounds peak no higher than the first (within ``--tolerance``); descriptors, threads and
children must come back to their count before the round. Exit status 1 when any of that fails.

Usage: python bench/soak.py [--rounds 3] [--limit N] [--no-validate] [--deepest STAGE]
                            [--corpora DIR] [--out bench/results/soak.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.extract_bench import corpora  # noqa: E402
from nnrag_tui.engine.config import parse_config  # noqa: E402
from nnrag_tui.engine.extractor import BlockExtractor  # noqa: E402


# -- process figures (Linux /proc) -----------------------------------------------------------
def status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS, VmHWM (kB) and Threads of a process."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "Threads"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def reset_peak() -> bool:
    """Resets this process's VmHWM to its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def children() -> dict[int, str]:
    """Live descendants of this process: pid -> command line (short)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if fields[0] != b"Z":
            parent[int(entry)] = int(fields[1])
    out: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= frontier
    cmds = {}
    for pid in sorted(out):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmds[pid] = fh.read().replace(b"\0", b" ").decode(errors="replace")[:80]
        except OSError:
            pass
    return cmds


def snapshot() -> dict:
    st = status()
    return {"rss_mb": round(st.get("VmRSS", 0) / 1024, 1), "fds": open_fds(),
            "threads": st.get("Threads", 0), "children": children()}


# -- the soak --------------------------------------------------------------------------------
def corpus_config(corpora: Path):
    repos = {}
    if (corpora / "timm" / "timm").is_dir():
        repos["timm"] = {"path": str(corpora / "timm" / "timm"), "priority": 1}
    if (corpora / "torchvision" / "torchvision").is_dir():
        repos["torchvision"] = {"path": str(corpora / "torchvision" / "torchvision"),
                                "priority": 2}
    repos["torch"] = {"dist": "torch", "paths": ["torch/nn/modules"], "priority": 3}
    return parse_config(repos, origin="<soak>")


def make_validator(deepest: str):
    """The validator with its own sandbox, or None (with the reason) when it cannot run."""
    try:
        from nnrag_tui.engine.validate import Validator

        v = Validator(deepest=deepest)
        probe = v.validate("import torch\n\n\nclass P(torch.nn.Module):\n    def forward(self, x)"
                           ":\n        return x\n", "P")
        if not probe.validated:
            v.close()
            return None, f"the probe block did not validate: {probe.cause} {probe.cause_summary}"
        return v, None
    except Exception as exc:  # noqa: BLE001  (a bench reports why it skips a stage)
        return None, f"{type(exc).__name__}: {exc}"


def one_round(n: int, cfg, work: Path, validator, limit: int | None) -> dict:
    gc.collect()
    before = snapshot()
    peak_ok = reset_peak()
    t0 = time.perf_counter()
    counts = {"blocks": 0, "extracted": 0, "extract_failed": 0, "validated": 0,
              "not_validated": 0, "internal_errors": 0}
    levels: dict[str, int] = {}
    timings = {}
    with BlockExtractor(cfg, cache_dir=work / f"cache-{n}", data_dir=work / "data") as ex:
        t = time.perf_counter()
        report = ex.index()
        timings["index_s"] = round(time.perf_counter() - t, 2)
        blocks = ex.blocks()
        if limit:
            blocks = blocks[:limit]
        counts["blocks"] = len(blocks)
        t = time.perf_counter()
        val_s = 0.0
        for i, b in enumerate(blocks, 1):
            res = ex.extract_single_block(b.key)
            if not res.ok:
                counts["extract_failed"] += 1
                counts["internal_errors"] += "internal error" in (res.error or "")
                continue
            counts["extracted"] += 1
            if validator is not None:
                tv = time.perf_counter()
                rep = validator.validate(res.generated.code, res.generated.name,
                                         res.generated.spec)
                val_s += time.perf_counter() - tv
                counts["validated" if rep.validated else "not_validated"] += 1
                levels[rep.level] = levels.get(rep.level, 0) + 1
            if i % 200 == 0:
                print(f"  round {n}: {i}/{len(blocks)} blocks, "
                      f"rss {status().get('VmRSS', 0) / 1024:.0f} MB", file=sys.stderr,
                      flush=True)
        timings["extract_validate_s"] = round(time.perf_counter() - t, 2)
        timings["validate_s"] = round(val_s, 2)
    del ex, blocks
    gc.collect()
    after = snapshot()
    sandbox_pid = getattr(getattr(validator, "_sandbox", None), "worker_pid", None)
    return {
        "round": n, "seconds": round(time.perf_counter() - t0, 1),
        "files": report.files, "failed_files": report.failed, **counts, "levels": levels,
        **timings,
        "peak_rss_mb": round(status().get("VmHWM", 0) / 1024, 1) if peak_ok else None,
        "rss_before_mb": before["rss_mb"], "rss_after_mb": after["rss_mb"],
        "fds_before": before["fds"], "fds_after": after["fds"],
        "threads_before": before["threads"], "threads_after": after["threads"],
        "children_before": len(before["children"]), "children_after": len(after["children"]),
        "children_after_list": after["children"],
        "sandbox_worker_rss_mb": round(status(sandbox_pid).get("VmRSS", 0) / 1024, 1)
        if sandbox_pid else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="blocks per round (default: all)")
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("--deepest", default="forward",
                    choices=("parse", "compile", "static", "import", "instantiate", "forward"))
    ap.add_argument("--corpora", default=str(HERE / ".corpora"))
    ap.add_argument("--tolerance", type=float, default=0.10,
                    help="allowed growth of a later round's peak over the first (fraction)")
    ap.add_argument("--out", default=str(HERE / "results" / "soak.json"))
    args = ap.parse_args(argv)

    cfg = corpus_config(corpora(Path(args.corpora).resolve()))
    start = snapshot()
    validator, why = (None, "--no-validate") if args.no_validate else make_validator(args.deepest)
    if validator is None:
        print(f"soak: validation skipped: {why}", file=sys.stderr)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="nnrag-soak-") as tmp:
        for n in range(1, args.rounds + 1):
            r = one_round(n, cfg, Path(tmp), validator, args.limit)
            rounds.append(r)
            print(f"round {n}: {r['blocks']} blocks ({r['extracted']} extracted, "
                  f"{r['validated']} validated) in {r['seconds']} s; peak RSS "
                  f"{r['peak_rss_mb']} MB, after {r['rss_after_mb']} MB; fds "
                  f"{r['fds_before']}->{r['fds_after']}; threads {r['threads_before']}->"
                  f"{r['threads_after']}; children {r['children_before']}->"
                  f"{r['children_after']}; sandbox worker {r['sandbox_worker_rss_mb']} MB",
                  flush=True)
    if validator is not None:
        validator.close()
    threading_left = threading.active_count()
    gc.collect()
    end = snapshot()

    problems = []
    first = rounds[0]["peak_rss_mb"]
    for r in rounds[1:]:
        if first and r["peak_rss_mb"] and r["peak_rss_mb"] > first * (1 + args.tolerance):
            problems.append(f"round {r['round']} peaked at {r['peak_rss_mb']} MB, above round "
                            f"1's {first} MB by more than {args.tolerance:.0%}")
    for r in rounds:
        for k in ("fds", "threads", "children"):
            if r[f"{k}_after"] > r[f"{k}_before"] + (1 if r["round"] == 1 and validator
                                                     and k != "fds" else 0):
                problems.append(f"round {r['round']}: {k} {r[f'{k}_before']} -> "
                                f"{r[f'{k}_after']}")
        if r["internal_errors"]:
            problems.append(f"round {r['round']}: {r['internal_errors']} internal errors")
    if end["children"]:
        problems.append(f"children left after closing everything: {end['children']}")
    if end["fds"] > start["fds"]:
        problems.append(f"file descriptors {start['fds']} at start, {end['fds']} at the end")
    result = {
        "corpora": args.corpora, "rounds": rounds, "start": start, "end": end,
        "validation": None if validator is None and why else args.deepest,
        "validation_skipped": why, "threads_at_end": threading_left,
        "flat": not problems, "problems": problems,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"start: rss {start['rss_mb']} MB, {start['fds']} fds, {len(start['children'])} "
          f"children; end: rss {end['rss_mb']} MB, {end['fds']} fds, "
          f"{len(end['children'])} children")
    print("flat: yes" if not problems else "NOT flat:\n  " + "\n  ".join(problems))
    print(f"written: {args.out}")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
