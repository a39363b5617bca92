"""Faithfulness on timm: generated blocks against the upstream classes (bench/differential.py).

Indexes timm 1.0.31 + torchvision 0.29.1 sources, extracts the blocks of
shared/bench/blocks_timm.txt (or every timm block with --all), and compares each with the real
upstream class, imported from the same timm sources (torchvision, which cannot be imported beside
the CPU torch here, is replaced by stand-ins): same signature, module tree, state_dict and initial
weights under the same seed, and the same outputs in eval and train mode with the same weights.

With --torchvision, every torchvision block is compared the same way with the real upstream
class from the torchvision sources. They import here once ``torchvision._meta_registrations``,
which only registers shapes for the compiled operators of a torchvision wheel built against
another torch, is an empty module; a block that calls those operators (``nms``, ``roi_align``)
fails upstream and is not comparable.

Usage: python bench/faithful_bench.py [--corpora DIR] [--all] [--torchvision]
                                      [--out bench/results/faithful.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.extract_bench import corpora, timm_config  # noqa: E402
from bench.measure import cpu_speed  # noqa: E402
from nnrag_tui.engine.extractor import BlockExtractor, OutputNames  # noqa: E402


_RENAMED_DEFINITION = re.compile(r"renamed (?:class|function) `(\w+)` -> `(\w+)`")


def renamed_definitions(rewrites: list[str]) -> dict[str, str]:
    """{name here: name upstream} of the classes and functions the header lists as renamed (a
    clash of two same-named definitions in one file): their repr shows the new name."""
    return {new: old for r in rewrites for old, new in _RENAMED_DEFINITION.findall(r)}


def jobs_for(ex: BlockExtractor, names: list[str], outdir: Path,
             repo: str | None = None) -> tuple[list[dict], dict]:
    """The comparisons of ``names`` (of the repository ``repo`` alone, where given)."""
    jobs, failed = [], {}
    written = OutputNames()  # 207 timm blocks share a name: one file each
    roots = ex.store.source_roots()
    for name in names:
        res = ex.extract_single_block(name, outdir, written, repo=repo)
        if not res.ok:
            failed[name] = res.error
            continue
        jobs.append({"key": res.block.key, "file": res.paths[0],
                     "call_sites": ex.call_sites(res),
                     "renamed": renamed_definitions(res.generated.rewrites),
                     "relocated": relocated_folders(res.generated.module_files,
                                                    Path(res.paths[0]).parent),
                     "beside": run_folders(ex, res.block, roots)})
    return jobs, failed


def run_folders(ex: BlockExtractor, block, roots: dict) -> list[str]:
    """The folders above the block's module that no package encloses, innermost first, as
    paths (``ModuleIndex.run_folders``): the folders its repository's scripts run from, where
    the engine looks for what the module imports that its repository has by no other name."""
    index = ex.resolver().index
    entry = index.entries.get((block.source, block.module))
    root = roots.get(block.source, {}).get("root")
    if entry is None or not root:
        return []
    rel = Path(entry.facts.relpath)
    depth = len(block.module.split(".")) + (rel.name == "__init__.py")
    base = Path(root, *rel.parts[:len(rel.parts) - depth])
    return [str(base.joinpath(*folder.split("."))) for folder in index.run_folders(entry)]


def relocated_folders(module_files, here: Path) -> dict[str, str]:
    """{folder beside the generated file: the upstream folder it stands for} of the files
    nnrag puts beside the file (``tortoise_tts.files/tortoise/data/mel_norms.pth`` for
    ``<root>/tortoise/data/mel_norms.pth``): a path upstream builds from ``__file__`` names
    the one, the generated file's the other."""
    out = {}
    for path, rel in module_files:
        up, gen = Path(path).parts, Path(rel).parts
        n = 0
        while n < min(len(up), len(gen)) and up[-1 - n] == gen[-1 - n]:
            n += 1
        out[str(here.joinpath(*gen[:len(gen) - n]))] = str(Path(*up[:len(up) - n]))
    return out


# packages a deployment has that never import beside the CPU torch here: their stand-ins
# report themselves installed (importlib.metadata), other stand-ins stay missing
INSTALLED_STAND_INS = ("torchvision", "torchaudio")


def differential(jobs: list[dict], source_root: Path | list[Path], timeout: float,
                 stubs: tuple[str, ...] = ("torchvision",),
                 blank: tuple[str, ...] = (),
                 installed: tuple[str, ...] = INSTALLED_STAND_INS) -> list[dict]:
    """bench/differential.py over ``jobs`` with the upstream sources at ``source_root`` (one
    root or several), stand-ins for ``stubs`` (those also in ``installed``, packages a
    deployment has but this machine cannot import, report themselves installed) and empty
    modules for ``blank``."""
    roots = source_root if isinstance(source_root, list) else [source_root]
    cmd = [sys.executable, "-I", str(HERE / "differential.py"), "--timeout", str(timeout)]
    for root in roots:
        cmd += ["--path", str(root)]
    for pkg in stubs:
        cmd += ["--stub-installed" if pkg in installed else "--stub", pkg]
    for name in blank:
        cmd += ["--blank", name]
    # a block that fetches a model or tokenizer from the Hugging Face hub while it is built
    # (imagen's T5 encoder) fails at once instead of retrying until the timeout; set these
    # to 0 to let both sides download
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           **os.environ}
    proc = subprocess.run(cmd, input="".join(json.dumps(j) + "\n" for j in jobs),
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"bench/differential.py failed:\n{proc.stderr[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def summary(results: list[dict], failed: dict) -> dict:
    verdicts = collections.Counter(r["verdict"] for r in results)
    depth = collections.Counter(
        "eval+train" if "train" in r.get("checked", []) else
        "eval" if "eval" in r.get("checked", []) else "structure only"
        for r in results if r["verdict"] == "same")
    return {
        "blocks": len(results) + len(failed), "not_extracted": failed,
        "verdicts": dict(verdicts), "same_checked": dict(depth),
        "differs": {r["key"]: r["reason"] for r in results if r["verdict"] == "differs"},
        "not_comparable": {r["key"]: r["reason"] for r in results
                           if r["verdict"] in ("not_comparable", "timeout")},
        # measured again alone, in a fresh interpreter, after differing in the shared run
        "differs_only_after_other_jobs": {r["key"]: r["differs_after_other_jobs"]
                                          for r in results if "differs_after_other_jobs" in r},
        "compare_s_total": round(sum(r["s"] for r in results), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpora", default=str(HERE / ".corpora"))
    ap.add_argument("--blocks", default=str(ROOT.parent / "shared" / "bench" / "blocks_timm.txt"))
    ap.add_argument("--all", action="store_true", help="every timm block, not only the list")
    ap.add_argument("--torchvision", action="store_true", help="and every torchvision block")
    ap.add_argument("--names", nargs="+", help="these blocks instead of the list")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per block")
    ap.add_argument("--out", default=str(HERE / "results" / "faithful.json"))
    args = ap.parse_args()
    corp = corpora(Path(args.corpora).resolve())
    cfg = timm_config(corp)
    report: dict = {"cpu_speed_loop_s": cpu_speed()}
    with tempfile.TemporaryDirectory() as tmp:
        ex = BlockExtractor(cfg, cache_dir=Path(tmp) / "cache", data_dir=Path(tmp) / "data")
        ex.index()
        parts = {"list": args.names or [n.strip() for n in
                                        Path(args.blocks).read_text().splitlines() if n.strip()]}
        if args.all:
            parts["all_timm"] = [b.key for b in ex.blocks(repo="timm")]
        if args.torchvision:
            parts["all_torchvision"] = [b.key for b in ex.blocks(repo="torchvision")]
        for part, names in parts.items():
            jobs, failed = jobs_for(ex, names, Path(tmp) / part)
            t = time.perf_counter()
            if part == "all_torchvision":
                results = differential(jobs, corp / "torchvision", args.timeout, stubs=(),
                                       blank=("torchvision._meta_registrations",))
            else:
                results = differential(jobs, corp / "timm", args.timeout)
            report[part] = summary(results, failed)
            report[part]["wall_s"] = round(time.perf_counter() - t, 1)
            report[part]["results"] = results
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for part in parts:
        r = report[part]
        print(f"## {part}: {r['blocks']} blocks, {r['wall_s']} s")
        print(f"verdicts {r['verdicts']}; same, checked to: {r['same_checked']}")
        for key, why in r["differs"].items():
            print(f"  differs  {key}: {why}")
        for key, why in r["not_comparable"].items():
            print(f"  n/c      {key}: {why}")


if __name__ == "__main__":
    main()
