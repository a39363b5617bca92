"""Extraction benchmark and quality figures (issue: dependency closure and regeneration).

Indexes timm 1.0.31 + torchvision 0.29.1 sources (as `path` sources), then extracts the 100
blocks of shared/bench/blocks_timm.txt and every timm block, and reports: extraction time per
block (median, p90), all-timm wall time, files produced, fresh-process import rate, files with
undefined names (pyflakes), star imports, definitions identical to upstream (apart from listed
rewrites) and lines per file.

Usage: python bench/extract_bench.py [--corpora DIR] [--out bench/results/extract.json]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.measure import cpu_speed  # noqa: E402
from nnrag_tui.engine.config import parse_config  # noqa: E402
from nnrag_tui.engine.extractor import BlockExtractor, OutputNames  # noqa: E402


def corpora(dest: Path) -> Path:
    if not (dest / "timm").is_dir() or not (dest / "torchvision").is_dir():
        script = ROOT.parent / "shared" / "bench" / "get_corpora.sh"
        subprocess.run(["bash", str(script), str(dest)], check=True)
    return dest


def timm_config(corp: Path):
    """timm first, torchvision second, both as ``path`` sources of their unpacked wheels."""
    return parse_config({
        "timm": {"path": str(corp / "timm"), "paths": ["timm"], "priority": 1},
        "torchvision": {"path": str(corp / "torchvision"), "paths": ["torchvision"],
                        "priority": 2},
    })


def undefined_names(code: str, filename: str) -> list[str]:
    """pyflakes' undefined names, less its known false alarms (validate.known_false_alarms):
    a line's ``# noqa: F821``, the strings of an aliased ``Literal[...]``, a function's own
    local read above the line that binds it."""
    import ast

    from pyflakes import api, messages

    from nnrag_tui.engine.validate import known_false_alarms

    class Rep:
        def __init__(self):
            self.msgs = []
            self.found = []

        def flake(self, m):
            if isinstance(m, (messages.UndefinedName, messages.UndefinedExport,
                              messages.UndefinedLocal)):
                self.msgs.append(str(m))
                self.found.append({"name": str(m.message_args[0]), "line": m.lineno,
                                   "kind": type(m).__name__})

        def unexpectedError(self, f, m):
            self.msgs.append(f"error: {m}")
            self.found.append({"name": None, "line": 0})

        def syntaxError(self, f, m, *a):
            self.msgs.append(f"syntax: {m}")
            self.found.append({"name": None, "line": 0})

    rep = Rep()
    api.check(code, filename, rep)
    if rep.found and all(u["name"] is not None for u in rep.found):
        false = known_false_alarms(ast.parse(code, filename), code, rep.found)
        return [m for m, u in zip(rep.msgs, rep.found) if (u["name"], u["line"]) not in false]
    return rep.msgs


def has_star_import(code: str) -> bool:
    """Whether the file has a ``from X import *`` statement; a comment of its header naming
    one upstream has (``# note: ... assumed from `from fastcore.foundation import *```) is
    none (icevision's 9 files counted so)."""
    return any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
               for n in ast.walk(ast.parse(code)))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else 0.0


def run(names: list[str], ex: BlockExtractor, outdir: Path, repo: str | None = None) -> dict:
    """Extracts ``names`` (of the repository ``repo`` alone, where given: two repositories
    can have one module path, ControlNet's ``ldm`` and latent-diffusion's) and measures them."""
    times, results = [], []
    written = OutputNames()  # same-named blocks get their own files, as in `nnrag extract`
    for name in names:
        t = time.perf_counter()
        res = ex.extract_single_block(name, outdir, written, repo=repo)
        times.append(time.perf_counter() - t)
        results.append(res)
    ok = [r for r in results if r.ok]
    undefined, unreported = {}, {}
    stars = 0
    rewritten_defs = 0
    total_defs = 0
    roots = {k: Path(v["root"]) for k, v in ex.store.source_roots().items()}
    identical = mismatched = 0
    for r in ok:
        for d in r.generated.definitions:
            upstream = "".join((roots[d.source] / d.relpath).read_text(encoding="utf-8")
                               .splitlines(keepends=True)[d.line - 1:d.end_line]).rstrip()
            if upstream in r.generated.code:
                identical += 1
            elif not d.rewrites:
                mismatched += 1  # changed without a listed rewrite: must never happen
        msgs = undefined_names(r.generated.code, r.paths[0])
        if msgs:
            undefined[r.requested] = msgs
            # a name upstream never binds either (vit-pytorch's ``einsum``) is reported to the
            # user as unresolved; any other is the tool's own fault
            reported = {n for n, _ in r.generated.unresolved}
            if any((m.rsplit("'", 2) + [""])[1] not in reported for m in msgs):
                unreported[r.requested] = msgs
        stars += has_star_import(r.generated.code)
        total_defs += len(r.generated.definitions)
        rewritten_defs += sum(1 for d in r.generated.definitions if d.rewrites)
    files = [r.paths[0] for r in ok]
    imported, failures = 0, {}
    for i in range(0, len(files), 200):
        out = subprocess.run([sys.executable, "-I", str(HERE / "import_check.py"),
                              *files[i:i + 200]], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            d = json.loads(line)
            if d["ok"]:
                imported += 1
            else:
                failures[Path(d["path"]).stem] = d["error"]
    lines = [r.generated.lines for r in ok]
    return {
        "blocks": len(names),
        "produced": len(ok),
        "not_produced": {r.requested: r.error for r in results if not r.ok},
        "imported": imported,
        "import_failures": failures,
        "files_with_undefined_names": len(undefined),
        "undefined": undefined,
        "files_with_unreported_undefined_names": len(unreported),
        "star_imports": stars,
        "definitions": total_defs,
        "definitions_rewritten": rewritten_defs,
        "definitions_identical": identical,
        "definitions_changed_unlisted": mismatched,
        "lines_median": statistics.median(lines) if lines else 0,
        "lines_max": max(lines, default=0),
        "extract_ms_median": 1000 * statistics.median(times),
        "extract_ms_p90": 1000 * pct(times, 0.9),
        "extract_s_total": sum(times),
    }


# Light third-party packages that timm's own blocks import beside torch (timm.data's transforms
# import Pillow): a file that needs one imports only where it is installed
# (``scripts/install.sh bench``); timm and torchvision themselves never import here.
BENCH_PACKAGES = {"PIL": "pillow", "numpy": "numpy"}


def missing_packages() -> list[str]:
    return [pkg for mod, pkg in BENCH_PACKAGES.items() if importlib.util.find_spec(mod) is None]


def timm_bench_args(report: str) -> argparse.Namespace:
    """The options of a benchmark over the 100-block list and every timm block: where the
    corpora are (downloaded if missing), the block list, the report file (``report`` in
    bench/results by default) and whether to skip the all-timm run."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpora", default=str(HERE / ".corpora"))
    ap.add_argument("--blocks", default=str(ROOT.parent / "shared" / "bench" / "blocks_timm.txt"))
    ap.add_argument("--out", default=str(HERE / "results" / report))
    ap.add_argument("--only-list", action="store_true", help="skip the all-timm run")
    return ap.parse_args()


def main() -> None:
    args = timm_bench_args("extract.json")
    corp = corpora(Path(args.corpora).resolve())
    cfg = timm_config(corp)
    speed = cpu_speed()  # the machine is shared: how fast it runs now (see bench/measure.py)
    report: dict = {"cpu_speed_loop_s": speed, "missing_packages": missing_packages()}
    if report["missing_packages"]:
        print(f"extract_bench: {', '.join(report['missing_packages'])} not installed here: the "
              "blocks that import them count as import failures (scripts/install.sh bench)",
              file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        ex = BlockExtractor(cfg, cache_dir=Path(tmp) / "cache", data_dir=Path(tmp) / "data")
        ex.index()
        t = time.perf_counter()
        ex.resolver()
        report["resolver_load_s"] = time.perf_counter() - t
        names = [n.strip() for n in Path(args.blocks).read_text().splitlines() if n.strip()]
        report["list"] = run(names, ex, Path(tmp) / "list")
        if not args.only_list:
            keys = [b.key for b in ex.blocks(repo="timm")]
            t = time.perf_counter()
            ex._resolver = None  # one process, from a cold resolver: the whole timm run
            ex.resolver()
            report["all_timm"] = run(keys, ex, Path(tmp) / "all")
            report["all_timm"]["wall_s_including_resolver_load"] = time.perf_counter() - t
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"machine speed: a 5M-step Python loop takes {speed} s (bench/measure.py cpu_speed; "
          "higher = a busier host)")
    for part in ("list", "all_timm"):
        if part not in report:
            continue
        r = report[part]
        print(f"## {part}: {r['blocks']} blocks")
        print(f"produced {r['produced']}/{r['blocks']}, imported {r['imported']}, "
              f"undefined-name files {r['files_with_undefined_names']}, star imports "
              f"{r['star_imports']}, definitions {r['definitions']} "
              f"({r['definitions_identical']} byte-identical, {r['definitions_rewritten']} with "
              f"listed rewrites, {r['definitions_changed_unlisted']} changed unlisted), "
              f"lines median "
              f"{r['lines_median']} max {r['lines_max']}, extract median "
              f"{r['extract_ms_median']:.1f} ms p90 {r['extract_ms_p90']:.1f} ms, total "
              f"{r['extract_s_total']:.1f} s")


if __name__ == "__main__":
    main()
