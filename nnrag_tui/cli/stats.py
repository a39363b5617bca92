"""Statistics command: nnrag stats [--json|--markdown] [--extract]."""

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
        "stats", help="blocks per repository and category, extraction and validation rates",
        description="The paper's tables: blocks per repository and per category, extraction "
                    "success (--extract), validation pass rate with its Wilson 95%% interval "
                    "(from the registry), failure causes, time and lines per block, the "
                    "index's cache hit rate.")
    add_common(p)
    p.add_argument("--markdown", action="store_true", help="Markdown tables")
    p.add_argument("--extract", action="store_true",
                   help="extract every block now (nothing written) for success, lines and "
                        "time per block")
    p.add_argument("--limit", type=int, metavar="N", help="with --extract: the first N blocks")
    p.add_argument("--category", choices=CATEGORIES, help="only this category")
    p.add_argument("--repo", metavar="NAME", help="only this repository")
    p.add_argument("--no-registry", action="store_true",
                   help="leave the registry's validation results out")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")
    p.set_defaults(func=cmd_stats)


def cmd_stats(args) -> int:
    from nnrag_tui.engine import paths, stats

    with extractor(args) as ex:
        report = ex.warm_index_once(args.policy, progress=StderrProgress())
        if report is not None and source_errors(report):
            return EXIT_ERROR
        registry, why = (None, None) if args.no_registry else stats.load_registry(
            paths.data_dir(args.data_dir))
        progress = _Progress() if args.extract else None
        rep = stats.collect(ex, extract=args.extract, limit=args.limit,
                            category=args.category, repo=args.repo, registry=registry,
                            index_report=report, progress=progress)
        if progress is not None:
            progress.done()
    if why:
        rep.notes.append(why)
    if args.json:
        print(json.dumps(rep.as_dict(), indent=1))
    elif args.markdown:
        sys.stdout.write(rep.markdown())
    else:
        sys.stdout.write(rep.text())
    return 0


class _Progress:
    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.tty:
            sys.stderr.write(f"\r\033[K{phase}: {done}/{total}")
            sys.stderr.flush()
        elif done == total or done % 200 == 0:
            print(f"{phase}: {done}/{total}", file=sys.stderr)

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
