"""Extraction and faithfulness on any corpus: the timm figures, for other repositories.

Indexes the repositories of a corpus configuration, extracts every block of each (or of the
ones named with --repo) and reports per repository what extract_bench reports for timm (files
produced, fresh-process imports, files with undefined names, definitions changed without a
listed rewrite, lines, extraction time) and what faithful_bench reports (each generated block
against its upstream class: same, differs or not comparable; bench/differential.py).

The upstream classes are imported from the indexed sources themselves; packages that the
sources import but this machine lacks can be replaced by stand-ins (--stub PKG, repeatable),
and other source roots put on the path (the other repositories of the configuration, and
--path DIR, e.g. the timm sources that Swin-Transformer imports). A file that imports a missing
third-party package fails the import figure: that figure says what this machine has, the
undefined-name and faithfulness figures do not depend on it.

Usage: python bench/corpus_bench.py --config sample_configs/other_repos.json
           [--repo NAME ...] [--block KEY ...] [--stub PKG ...] [--path DIR ...]
           [--out bench/results/corpora.json]
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.extract_bench import run  # noqa: E402
from bench.faithful_bench import (  # noqa: E402
    INSTALLED_STAND_INS,
    differential,
    jobs_for,
    summary,
)
from bench.measure import cpu_speed  # noqa: E402
from nnrag_tui.engine.config import load_config  # noqa: E402
from nnrag_tui.engine.extractor import BlockExtractor  # noqa: E402

# imported at module level by the sources measured here but absent (or not importable beside
# the CPU torch) on this machine; a block that really calls into one is "not comparable"
DEFAULT_STUBS = ("torchvision", "torchaudio", "cv2", "ultralytics", "ema_pytorch", "accelerate",
                 "pandas", "requests", "yaml", "PIL", "matplotlib", "seaborn", "scipy", "thop",
                 "pytorch_fid", "psutil", "IPython", "git")
# installed or not, these never import beside the CPU torch
ALWAYS_STUBBED = INSTALLED_STAND_INS


def default_stubs() -> tuple[str, ...]:
    """The stand-ins this machine needs: a default package that is installed is the real one
    (numba checks scipy's version when it imports)."""
    return tuple(p for p in DEFAULT_STUBS
                 if p in ALWAYS_STUBBED or importlib.util.find_spec(p) is None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="a corpus configuration (JSON)")
    ap.add_argument("--repo", action="append", default=[], help="only this repository")
    ap.add_argument("--block", action="append", default=[],
                    help="only this block (its key, module:Name) of the repositories measured")
    ap.add_argument("--stub", action="append", default=[], help="one more stand-in package")
    ap.add_argument("--path", action="append", default=[], help="one more source root")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per comparison")
    ap.add_argument("--cache-dir", help="keep clones and the index here (default: temporary)")
    ap.add_argument("--out", default=str(HERE / "results" / "corpora.json"))
    args = ap.parse_args()
    cfg = load_config(args.config)
    report: dict = {"cpu_speed_loop_s": cpu_speed(), "config": str(args.config), "repos": {}}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(args.cache_dir) if args.cache_dir else Path(tmp) / "cache"
        ex = BlockExtractor(cfg, cache_dir=cache, data_dir=Path(tmp) / "data")
        for src in ex.index().sources:
            if src.get("error"):
                print(f"{src['name']}: not indexed: {src['error']}", file=sys.stderr)
        roots = ex.store.source_roots()
        for repo in args.repo or [s.name for s in cfg.sources]:
            if repo not in roots:
                print(f"{repo}: not indexed (see the index errors above)", file=sys.stderr)
                continue
            keys = [b.key for b in ex.blocks(repo=repo)
                    if not args.block or b.key in args.block]
            if not keys:
                print(f"{repo}: no blocks", file=sys.stderr)
                continue
            # from this repository: another may have the same key (ControlNet's copy of
            # latent-diffusion's ``ldm``), and the key alone gives the one of higher priority,
            # where the upstream import below finds this repository's own first
            r = run(keys, ex, Path(tmp) / "extract" / repo, repo)
            jobs, failed = jobs_for(ex, keys, Path(tmp) / "faithful" / repo, repo)
            t = time.perf_counter()
            # the repository's own root first, then the others the configuration indexes
            # (mae's models import timm, configured beside it)
            path = [Path(roots[repo]["root"])] + [
                Path(other["root"]) for name, other in roots.items() if name != repo
            ] + list(map(Path, args.path))
            # the packages measured are the real ones, never stand-ins (ultralytics is one
            # by default, for the repositories that import it)
            own = {key.split(".")[0] for key in keys}
            stubs = tuple(p for p in default_stubs() + tuple(args.stub) if p not in own)
            results = differential(jobs, path, args.timeout, stubs)
            r["faithful"] = summary(results, failed) | {
                "wall_s": round(time.perf_counter() - t, 1), "results": results}
            r["source"] = {k: roots[repo].get(k) for k in ("origin", "commit", "version")}
            report["repos"][repo] = r
            f = r["faithful"]
            print(f"## {repo}: {r['blocks']} blocks; produced {r['produced']}, imported "
                  f"{r['imported']}, undefined-name files {r['files_with_undefined_names']} "
                  f"({r['files_with_unreported_undefined_names']} not reported as unresolved), "
                  f"changed unlisted {r['definitions_changed_unlisted']}, lines median "
                  f"{r['lines_median']}, extract median {r['extract_ms_median']:.1f} ms; "
                  f"verdicts {f['verdicts']}", flush=True)
            causes = collections.Counter(
                (err.strip().splitlines() or ["?"])[-1][:100]
                for err in r["import_failures"].values())
            r["import_failure_causes"] = dict(causes.most_common())
            for cause, n in causes.most_common():
                print(f"  not imported ({n}): {cause}")
            for name, msgs in r["undefined"].items():
                print(f"  undefined  {name}: {'; '.join(msgs)[:300]}")
            for name, why in f["differs"].items():
                print(f"  differs    {name}: {why}")
            for name, why in f["differs_only_after_other_jobs"].items():
                print(f"  differed only after other jobs' imports (alone: the verdict above) "
                      f"{name}: {why}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
