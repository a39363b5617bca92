"""How small could a block file be? A lower bound from what the block actually runs.

A generated file keeps every definition the block can reach, whatever arguments a user passes
(issue: dependency closure). This script measures the other extreme: for each extracted timm
block it imports the file, builds the block with the validator's guessed arguments and runs one
forward pass in eval mode (the validator's own stages, ``engine.blockrun``), with a profiler
recording which of the file's functions and methods ran. It then counts the lines of a file that
kept only

- the block's own class, every definition with code that ran, and every class of the built
  module tree (with their bases),
- the import lines, two blank lines per definition and ``__all__``,

and nothing else: no provenance header, no module constants, no other definition. Such a file
would fail for any argument other than the guessed one (timm's string registries and conv
factories would be gone), so this is a floor, not a proposal: no definition-level cut that keeps
each definition's text can be smaller for the block to even build and run once.

Usage: python bench/executed_bound.py [--corpora DIR] [--out bench/results/executed_bound.json]
"""

from __future__ import annotations

import ast
import collections
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(HERE))

from forked import run_forked  # noqa: E402

from bench.extract_bench import corpora, timm_bench_args, timm_config  # noqa: E402
from bench.measure import cpu_speed  # noqa: E402
from nnrag_tui.engine import sandbox_worker as worker  # noqa: E402
from nnrag_tui.engine.blockrun import stages  # noqa: E402
from nnrag_tui.engine.extractor import BlockExtractor, OutputNames  # noqa: E402

TARGET = 120  # the median lines per file


def top_level(code: str) -> tuple[int, list[tuple[int, int, str]]]:
    """(import lines, [(first, last, name)] of the file's top-level definitions); a
    definition's span starts at its first decorator. Other statements do not count."""
    imports, spans = 0, []
    for st in ast.parse(code).body:
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            imports += st.end_lineno - st.lineno + 1
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([d.lineno for d in st.decorator_list] + [st.lineno])
            spans.append((first, st.end_lineno, st.name))
    return imports, spans


def measure(path: str, name: str) -> dict:
    """In a forked child: run the validator's import, instantiate and forward stages on the
    file under a profiler; which top-level definitions did the block need for that one run?"""
    import torch

    torch.set_num_threads(1)
    sys.meta_path.insert(0, worker._Deny(["timm", "torchvision"]))
    code = Path(path).read_text(encoding="utf-8")
    imports, spans = top_level(code)
    here = os.path.abspath(path)
    ran: set[int] = set()  # first lines of the file's function code objects that were called

    def profile(frame, event, arg):
        co = frame.f_code
        # class bodies run on import whatever the block needs: only functions count
        if event == "call" and co.co_filename == here and co.co_flags & inspect.CO_NEWLOCALS:
            ran.add(co.co_firstlineno)

    job = {"name": name, "timeouts": {"instantiate": 10.0, "forward": 10.0}}
    state: dict = {"file": here}
    reached = "nothing"
    sys.setprofile(profile)
    try:
        for stage, fn in (("import", stages.stage_import),
                          ("instantiate", stages.stage_instantiate),
                          ("forward", stages.stage_forward)):
            fn(job, state)
            reached = stage
    except BaseException:  # noqa: BLE001  (how far it got is the answer)
        pass
    finally:
        sys.setprofile(None)
    used = {name}
    if isinstance(state.get("instance"), torch.nn.Module):
        for m in state["instance"].modules():
            used.update(c.__name__ for c in type(m).__mro__ if c.__module__ == stages.MODULE_NAME)
    kept, dropped = [], []
    for first, last, nm in spans:
        hit = nm in used or any(first <= ln <= last for ln in ran)
        (kept if hit else dropped).append((nm, last - first + 1))
    bound = imports + sum(n + 2 for _, n in kept) + 1
    return {"reached": reached, "lines": len(code.splitlines()), "bound": bound,
            "kept": len(kept), "dropped": dropped}


def summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if "bound" in r]
    ran = [r for r in ok if r["reached"] == "forward"]
    weight: collections.Counter = collections.Counter()
    files: collections.Counter = collections.Counter()
    for r in ran:
        for nm, n in r["dropped"]:
            weight[nm] += n
            files[nm] += 1
    return {
        "blocks": len(rows),
        "measured": len(ok),
        "forward_ran": len(ran),
        "lines_median": statistics.median(r["lines"] for r in ok) if ok else 0,
        "bound_median": statistics.median(r["bound"] for r in ok) if ok else 0,
        "bound_median_forward_ran": statistics.median(r["bound"] for r in ran) if ran else 0,
        "lines_median_forward_ran": statistics.median(r["lines"] for r in ran) if ran else 0,
        "bound_at_most_target": sum(r["bound"] <= TARGET for r in ok),
        "lines_at_most_target": sum(r["lines"] <= TARGET for r in ok),
        # the definitions carried for other arguments, by lines over all files
        "not_run_heaviest": [{"name": nm, "lines": w, "files": files[nm]}
                             for nm, w in weight.most_common(15)],
        "failed": {r["key"]: r["error"] for r in rows if "error" in r},
    }


def run(ex: BlockExtractor, names: list[str], outdir: Path) -> dict:
    written = OutputNames()
    rows = []
    for name in names:
        res = ex.extract_single_block(name, outdir, written)
        if not res.ok:
            rows.append({"key": name, "error": res.error})
            continue
        ans, status = run_forked(lambda r=res: measure(r.paths[0], r.generated.name), 120)
        rows.append({"key": name, **(ans if ans is not None else {"error": status})})
    return summary(rows)


def main() -> None:
    args = timm_bench_args("executed_bound.json")
    import torch  # noqa: F401  (warm once; every file is measured in a forked child)

    corp = corpora(Path(args.corpora).resolve())
    report: dict = {"cpu_speed_loop_s": cpu_speed()}
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        ex = BlockExtractor(timm_config(corp), cache_dir=Path(tmp) / "cache",
                            data_dir=Path(tmp) / "data")
        ex.index()
        names = [n.strip() for n in Path(args.blocks).read_text().splitlines() if n.strip()]
        report["list"] = run(ex, names, Path(tmp) / "list")
        if not args.only_list:
            report["all_timm"] = run(ex, [b.key for b in ex.blocks(repo="timm")],
                                     Path(tmp) / "all")
    report["wall_s"] = time.perf_counter() - t
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for part in ("list", "all_timm"):
        if part not in report:
            continue
        r = report[part]
        print(f"## {part}: {r['measured']}/{r['blocks']} measured, forward ran in "
              f"{r['forward_ran']}")
        print(f"lines per file: median {r['lines_median']} (generated, every reachable "
              f"definition); {r['lines_at_most_target']} files at most {TARGET}")
        print(f"floor (only what one default build and forward run): median "
              f"{r['bound_median']}, {r['bound_median_forward_ran']} where forward ran "
              f"(generated: {r['lines_median_forward_ran']}); {r['bound_at_most_target']} "
              f"files at most {TARGET}")
        heavy = ", ".join(f"{d['name']} ({d['files']} files)" for d in r["not_run_heaviest"][:6])
        print(f"heaviest definitions carried but not run: {heavy}")
    print(f"{report['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
