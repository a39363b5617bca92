"""nnrag's side of the side-by-side benchmark: one phase per process, one JSON line out.

Phases (``python bench/nnrag_tool.py PHASE --config F --cache DIR ...``):
  index [--workers N] [--resolver] [--digest]
                          ``BlockExtractor.index()``; with ``--resolver`` also the time to load
                          the resolver (ready to extract); ``--digest`` hashes the index contents
  extract --names F --out D [--validate]
                          extract every name of F (in-process, warm index), timing each block;
                          with ``--validate`` also validates each produced file and times that
                          (``--deepest import`` stops at the paper's bar: parse, compile,
                          undefined names, import; default: on to instantiate and forward)
The subset configuration that matches the paper tool's built-in one is ``subset_config()``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from measure import emit

SUBSET = {"timm": ["timm/models", "timm/layers"],
          "torchvision": ["torchvision/models", "torchvision/ops"]}


def subset_config(corpora: Path) -> dict:
    """Path sources over the unpacked corpora, restricted to the sub-directories the paper's
    tool indexes (timm/models, timm/layers, torchvision/models, torchvision/ops)."""
    return {name: {"path": str(corpora / name), "paths": paths, "priority": i + 1,
                   "description": f"{name} ({', '.join(paths)}), as the paper tool indexes it"}
            for i, (name, paths) in enumerate(SUBSET.items())}


class NnragValidator:
    """nnrag's validator (``nnrag_tui.engine.validate.Validator``): parse, compile, static
    undefined-name check, then import / instantiate / forward in its sandboxed worker."""

    def __init__(self, deepest: str = "forward") -> None:
        from nnrag_tui.engine.validate import Validator

        self.v = Validator(deepest=deepest)
        self.startup_s = 0.0

    def start(self) -> None:
        t = time.perf_counter()
        start = getattr(self.v.sandbox, "start", None)
        if callable(start):
            start()
        self.startup_s = time.perf_counter() - t

    def run(self, path: str, name: str, spec: dict | None) -> dict:
        rep = self.v.validate(Path(path).read_text(encoding="utf-8"), name, spec)
        return {"valid": bool(rep.validated), "level": rep.level, "cause": rep.cause}

    def close(self) -> None:
        self.v.close()


def validator(deepest: str = "forward") -> tuple[NnragValidator | None, str]:
    """nnrag's validator when the engine has one, else ``None`` and why not."""
    if importlib.util.find_spec("nnrag_tui.engine.validate") is None:
        return None, "not yet available (no nnrag_tui.engine.validate)"
    try:
        return (NnragValidator(deepest),
                f"nnrag_tui.engine.validate.Validator (stages parse..{deepest})")
    except (ImportError, AttributeError, TypeError) as exc:
        return None, f"not available ({type(exc).__name__}: {exc})"


def _extractor(args):
    from nnrag_tui.engine.config import parse_config
    from nnrag_tui.engine.extractor import BlockExtractor

    cfg = parse_config(json.loads(Path(args.config).read_text()), origin=str(args.config))
    return BlockExtractor(cfg, cache_dir=args.cache, data_dir=Path(args.cache) / "data",
                          workers=args.workers)


def phase_index(args) -> dict:
    t0 = time.perf_counter()
    ex = _extractor(args)
    t1 = time.perf_counter()
    report = ex.index()
    t2 = time.perf_counter()
    out = {"seconds": t2 - t1, "construct_s": t1 - t0, "files": report.files,
           "parsed": report.parsed, "cached": report.cached, "failed": report.failed,
           "blocks": report.blocks,
           "failures": [f"{s}:{p}: {r}" for s, p, r in report.failures][:50],
           "sources": [{k: s.get(k) for k in ("name", "files", "failed", "blocks")}
                       for s in ex.sources()]}
    if args.resolver:
        t3 = time.perf_counter()
        ex.resolver()
        out["resolver_s"] = time.perf_counter() - t3
    if args.digest:
        from index_bench import index_digest

        from nnrag_tui.engine.extractor import INDEX_FILE

        ex.close()
        out["digest"] = index_digest(Path(args.cache) / INDEX_FILE)
    ex.close()
    return out


def phase_extract(args) -> dict:
    names = [n.strip() for n in Path(args.names).read_text().splitlines()
             if n.strip() and not n.startswith("#")]
    ex = _extractor(args)
    t0 = time.perf_counter()
    ex.index()
    ex.resolver()
    warm_s = time.perf_counter() - t0
    out_dir = Path(args.out)
    val, how = validator(args.deepest) if args.validate else (None, "not requested")
    if val is not None:
        val.start()
    from nnrag_tui.engine.extractor import OutputNames

    blocks = []
    written = OutputNames()  # same-named blocks get their own files, as in `nnrag extract`
    for name in names:
        t = time.perf_counter()
        res = ex.extract_single_block(name, out_dir, written)
        ext = time.perf_counter() - t
        entry = {"name": name, "success": res.ok, "extract_s": ext,
                 "file": res.paths[0] if res.paths else None, "reason": res.error}
        if val is not None and res.ok:
            t = time.perf_counter()
            entry.update(val.run(res.paths[0], res.generated.name, res.generated.spec))
            entry["validate_s"] = time.perf_counter() - t
        blocks.append(entry)
    if val is not None:
        val.close()
    ex.close()
    return {"warm_s": warm_s, "validator": how,
            "validator_startup_s": val.startup_s if val is not None else None, "blocks": blocks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=("index", "extract"))
    ap.add_argument("--config", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--resolver", action="store_true")
    ap.add_argument("--digest", action="store_true")
    ap.add_argument("--names")
    ap.add_argument("--out")
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--deepest", default="forward", choices=("import", "forward"),
                    help="the validator's last stage (import: the paper's bar)")
    args = ap.parse_args()
    emit(phase_index(args) if args.phase == "index" else phase_extract(args))


if __name__ == "__main__":
    main()
