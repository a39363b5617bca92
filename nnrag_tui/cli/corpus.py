"""Corpus commands: index, blocks, sources (extract has its own module)."""

from __future__ import annotations

import json
import sys

from nnrag_tui.cli.common import (
    EXIT_ERROR,
    StderrProgress,
    add_common,
    extractor,
    named,
    positive_int,
    source_errors,
)
from nnrag_tui.engine.discovery import CATEGORIES


def register(sub) -> None:
    p = sub.add_parser("index", help="index the configured repositories")
    add_common(p)
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing",
                   help="when to fetch git sources: never, when not cached (default), always")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="parser processes (default: cores)")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("blocks", help="list discovered blocks")
    add_common(p)
    p.add_argument("--category", choices=CATEGORIES)
    p.add_argument("--repo", metavar="NAME", help="only blocks of this configured repository")
    p.add_argument("--match", metavar="GLOB", help="glob on the class or qualified name")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")
    p.set_defaults(func=cmd_blocks)

    p = sub.add_parser("sources", help="configured repositories and their index status")
    add_common(p)
    p.set_defaults(func=cmd_sources)


def cmd_index(args) -> int:
    with extractor(args) as ex:
        report = ex.index(args.policy, progress=StderrProgress())  # reports waits too
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(f"{report.files} files: {report.parsed} parsed, {report.cached} unchanged, "
              f"{report.failed} failed, {report.removed} removed; {report.blocks} blocks "
              f"in {report.seconds:.2f} s")
        for s in report.sources:
            if not s.get("error"):
                commit = f" @ {s['commit'][:12]}" if s.get("commit") else ""
                print(f"  {s['name']}: {s['files']} files ({s['parsed']} parsed, "
                      f"{s['failed']} failed) from {s['origin']}{commit}")
        for src, path, reason in report.failures[:20]:
            print(f"  failed: {src}:{path}: {reason}")
        if len(report.failures) > 20:
            print(f"  ... and {len(report.failures) - 20} more failed files (see --json)")
    return EXIT_ERROR if source_errors(report) else 0


def cmd_blocks(args) -> int:
    with extractor(args) as ex:
        report = ex.warm_index_once(args.policy, progress=StderrProgress())
        if report is not None and source_errors(report):
            return EXIT_ERROR
        blocks = ex.blocks(category=args.category, repo=args.repo, match=args.match)
    if args.json:
        print(json.dumps([{
            "name": b.name, "qualname": b.full_name, "key": b.key, "category": b.category,
            "rule": b.rule, "repo": b.source, "module": b.module, "path": b.relpath,
            "line": b.line, "end_line": b.end_line, "lines": b.lines, "bases": list(b.bases),
            "doc": b.doc} for b in blocks], indent=1))
        return 0
    width = max((len(b.name) for b in blocks), default=4)
    for b in blocks:
        print(f"{b.name:<{width}}  {b.category:<17}  {b.source}  {b.relpath}:{b.line}")
    print(f"{len(blocks)} blocks", file=sys.stderr)
    return 0


def cmd_sources(args) -> int:
    with extractor(args) as ex:
        rows = ex.sources()
        configured = [s.name for s in ex.config.sources]
        external = ex.config.external_sources
    known = {r["name"] for r in rows}
    rows += [{"name": n, "files": 0, "blocks": 0, "error": "not indexed yet"}
             for n in configured if n not in known]
    for r in rows:
        r["external"] = r["name"] in external
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = r.get("error") or f"{r['files']} files, {r['blocks']} blocks"
        commit = f" @ {r['commit'][:12]}" if r.get("commit") else ""
        under = f" (modules from {r['import_root']}/)" if r.get("import_root") else ""
        ext = " (external: other blocks import it)" if r["external"] else ""
        print(named(r["name"], state) + commit + under + ext)
    return 0
