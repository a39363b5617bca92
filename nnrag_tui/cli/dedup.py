"""Uniqueness command: nnrag dedup [PATH...|--registry|--index]."""

from __future__ import annotations

import json
import sys

from nnrag_tui.cli.common import (
    EXIT_ERROR,
    StderrProgress,
    add_common,
    extractor,
    source_errors,
)
from nnrag_tui.engine.discovery import CATEGORIES


def register(sub) -> None:
    p = sub.add_parser(
        "dedup", help="how many blocks are genuinely unique (exact, lexical, structural)",
        description="Three-level uniqueness (exact after canonicalisation, MinHash/LSH lexical "
                    "near-duplicates, AST structural clones) plus a diversity top-up, over "
                    "the registry (default), the index, or .py files and folders.")
    add_common(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help=".py files or folders")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--registry", action="store_true", help="the saved blocks (default)")
    src.add_argument("--index", action="store_true", help="every block in the index")
    p.add_argument("--extracted", action="store_true",
                   help="with --index: compare the regenerated standalone files instead of "
                        "the upstream class text")
    p.add_argument("--category", choices=CATEGORIES, help="with --index: only this category")
    p.add_argument("--repo", metavar="NAME", help="with --index: only this repository")
    p.add_argument("--match", metavar="GLOB", help="with --index: glob on the block name")
    p.add_argument("--tau", type=float, help="lexical Jaccard threshold (default 0.90)")
    p.add_argument("--kappa", type=float, help="structural similarity threshold (default 0.95)")
    p.add_argument("--shingle", type=int, help="tokens per shingle (default 5)")
    p.add_argument("--family", choices=("auto", "category", "stem", "none"),
                   help="families for the top-up: category, name stem, none (default auto: "
                        "category for blocks, none for files)")
    p.add_argument("--min-support", type=int,
                   help="top-up: kept members each family should have (default 1; 0 = off)")
    p.add_argument("--topup-scope", choices=("family", "all"),
                   help="top-up near-duplicate check against the family's kept members "
                        "(default) or everything kept")
    p.add_argument("--prefix", action="append", metavar="P",
                   help="cosmetic name prefix to strip (repeatable; replaces the defaults)")
    p.add_argument("--prefer", action="append", metavar="P",
                   help="name prefix preferred as representative (repeatable, in order)")
    p.add_argument("--workers", type=int, help="fingerprint processes (default: up to 2)")
    p.add_argument("--markdown", action="store_true", help="the uniqueness table as Markdown")
    p.add_argument("--clusters", type=int, default=10, metavar="N",
                   help="show the N largest clusters (default 10; 0 = none)")
    p.add_argument("--members", action="store_true", help="list every removed member")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")
    p.set_defaults(func=cmd_dedup)


def cmd_dedup(args) -> int:
    from nnrag_tui.engine import dedup

    options = dedup.with_options(
        dedup.DedupOptions(), tau=args.tau, kappa=args.kappa, shingle=args.shingle,
        family=args.family, min_support=args.min_support, topup_scope=args.topup_scope,
        prefixes=tuple(args.prefix) if args.prefix else None,
        prefer=tuple(args.prefer) if args.prefer else None, workers=args.workers).check()
    if args.paths and (args.registry or args.index):
        print("nnrag: error: give PATHs, --registry or --index, not several", file=sys.stderr)
        return EXIT_ERROR
    notes: list[str] = []
    if args.paths:
        source = "files"
        items = dedup.items_from_paths(args.paths)
    elif args.index:
        source = "index"
        with extractor(args) as ex:
            report = ex.warm_index_once(args.policy, progress=StderrProgress())
            if report is not None and source_errors(report):
                return EXIT_ERROR
            items, notes = dedup.items_from_index(ex, extracted=args.extracted,
                                                  category=args.category, repo=args.repo,
                                                  match=args.match)
    else:
        from nnrag_tui.engine import paths

        source = "registry"
        items, notes = dedup.items_from_registry(dedup.load_registry(paths.data_dir(
            args.data_dir)))
        if not items:
            notes.append("the registry has no saved blocks; try --index or PATHs")
    progress = _Progress()
    rep = dedup.deduplicate(items, options, progress=progress)
    progress.done()
    rep.notes[:0] = notes
    if args.json:
        d = rep.as_dict(members=True)
        d["source"] = source
        print(json.dumps(d, indent=1))
        return 0
    if args.markdown:
        sys.stdout.write(rep.markdown())
        return 0
    print(render_text(rep, source, args.clusters, args.members))
    return 0


class _Progress:
    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.tty:
            sys.stderr.write(f"\r\033[K{phase}: {done}/{total}")
            sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def render_text(rep, source: str, clusters: int = 10, members: bool = False) -> str:
    c = rep.counts()
    o = rep.options
    pct = 100.0 * c["unique"] / c["total"] if c["total"] else 0.0
    out = [(f"{c['total']} items ({source}): {c['exact']} exact, {c['lexical']} lexical "
           f"(tau {o.tau}), {c['structural']} structural (kappa {o.kappa}) duplicates "
           f"removed, {c['topup']} topped up: {c['unique']} unique ({pct:.1f}%) in "
           f"{rep.seconds:.1f} s"), ""]
    header = ("FAMILY", "TOTAL", "EXACT", "LEXICAL", "STRUCT", "TOP-UP", "UNIQUE", "%")
    rows = [header] + [(r["family"], str(r["total"]), str(r["exact"]), str(r["lexical"]),
                        str(r["structural"]), str(r["topup"]), str(r["unique"]),
                        f"{r['unique_pct']:.1f}") for r in rep.table()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        out.append("  ".join(r[0].ljust(widths[0]) if i == 0 else r[i].rjust(widths[i])
                             for i in range(len(header))))
    def label(item_id: str) -> str:
        name = rep.name(item_id)
        return item_id if source == "files" or name == item_id else f"{name} [{item_id}]"

    shown = [cl for cl in rep.clusters() if cl.members]
    if members:
        clusters = len(shown)
    if clusters and shown:
        out += ["", f"largest clusters ({min(clusters, len(shown))} of {len(shown)}):"]
        for cl in shown[:clusters]:
            levels: dict[str, int] = {}
            for m in cl.members:
                levels[m.level] = levels.get(m.level, 0) + 1
            how = ", ".join(f"{n} {lv}" for lv, n in levels.items())
            out.append(f"  {label(cl.representative)} +{len(cl.members)} ({how})")
            limit = len(cl.members) if members else 3
            for m in cl.members[:limit]:
                out.append(f"    - {label(m.id)}: {m.level} {m.similarity:.3f} "
                           f"~ {rep.name(m.matched)}")
            if len(cl.members) > limit:
                out.append(f"    ... {len(cl.members) - limit} more (--members)")
    if rep.topups:
        out += ["", "top-up (given back to under-represented families):"]
        for t in rep.topups:
            out.append(f"  {label(t.id)} family {t.family}: max lexical "
                       f"{t.lexical:.3f}, structural {t.structural:.3f}")
    for note in rep.notes:
        out.append(f"note: {note}")
    return "\n".join(out)
