"""Command line: ``nnrag index``, ``nnrag blocks`` ... Thin: every command calls the engine and
turns engine errors into one line on stderr and a non-zero exit code."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Sequence

from nnrag_tui import __version__
from nnrag_tui.engine.discovery import CATEGORIES
from nnrag_tui.engine.errors import NnragError

EXIT_ERROR = 2


def _common(p: argparse.ArgumentParser) -> None:
    # Accepted before and after the command. The defaults live on the top-level parser only
    # (SUPPRESS here): a subparser default would overwrite `nnrag --config F index`'s value.
    sup = argparse.SUPPRESS
    p.add_argument("--config", metavar="FILE", default=sup, help="corpus configuration (JSON); "
                   "default: the built-in corpus (installed torch.nn, plus timm/torchvision if "
                   "installed)")
    p.add_argument("--cache-dir", metavar="DIR", default=sup,
                   help="clones and index (env NNRAG_CACHE_DIR)")
    p.add_argument("--data-dir", metavar="DIR", default=sup,
                   help="saved blocks (env NNRAG_DATA_DIR)")
    p.add_argument("--json", action="store_true", default=sup,
                   help="machine-readable output on stdout")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnrag",
        description="Turn PyTorch repositories into a library of dependency-closed nn.Module "
                    "blocks. With no command, opens the terminal app.")
    parser.add_argument("--version", action="version", version=f"nnrag {__version__}")
    _common(parser)
    parser.set_defaults(config=None, cache_dir=None, data_dir=None, json=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("index", help="index the configured repositories")
    _common(p)
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing",
                   help="when to fetch git sources: never, when not cached (default), always")
    p.add_argument("--workers", type=int, default=None, help="parser processes (default: cores)")

    p = sub.add_parser("blocks", help="list discovered blocks")
    _common(p)
    p.add_argument("--category", choices=CATEGORIES)
    p.add_argument("--repo", metavar="NAME", help="only blocks of this configured repository")
    p.add_argument("--match", metavar="GLOB", help="glob on the class or qualified name")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")

    p = sub.add_parser("extract", help="regenerate blocks as standalone files")
    _common(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--block", metavar="NAME", help="Name, pkg.mod.Name or pkg.mod:Name")
    g.add_argument("--blocks", metavar="NAME", nargs="+")
    g.add_argument("--from-file", metavar="FILE",
                   help="a JSON list of names, or one name per line")
    p.add_argument("--limit", type=int, help="with --from-file: at most N names")
    p.add_argument("--start-from", metavar="NAME", help="with --from-file: skip names before")
    p.add_argument("--out", metavar="DIR", help="write DIR/NAME.py and DIR/NAME.spec.json")
    p.add_argument("--stdout", action="store_true", help="print the generated file(s)")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")

    p = sub.add_parser("sources", help="configured repositories and their index status")
    _common(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from nnrag_tui.engine.config import ConfigWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", ConfigWarning)
        warnings.showwarning = _show_warning  # type: ignore[assignment]
        try:
            if args.command is None:
                return _run_app(args)
            return COMMANDS[args.command](args)
        except NnragError as exc:
            print(f"nnrag: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            print("nnrag: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:
            return 0


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"nnrag: warning: {message}", file=sys.stderr)


def _extractor(args):
    from nnrag_tui.engine.extractor import BlockExtractor

    return BlockExtractor(args.config, cache_dir=args.cache_dir, data_dir=args.data_dir,
                          workers=getattr(args, "workers", None))


class _StderrProgress:
    """Progress on stderr: one rewritten line on a terminal, sparse lines otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = ""

    def __call__(self, p) -> None:
        if p.phase == "fetch":
            msg = f"{p.source}: preparing {p.current}"
        elif p.phase == "parse":
            msg = f"{p.source}: parsed {p.done}/{p.total} {p.current}"
        elif p.phase == "discover":
            msg = "discovering blocks"
        else:
            msg = ""
        if self.tty:
            sys.stderr.write("\r\033[K" + msg[:150])
            if p.phase == "done":
                sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        elif p.phase in ("fetch", "discover") or (p.phase == "parse" and p.done == p.total):
            print(msg, file=sys.stderr)


def cmd_index(args) -> int:
    with _extractor(args) as ex:
        report = ex.index(args.policy, progress=_StderrProgress(),
                          on_wait=lambda: print("nnrag: waiting for another nnrag process "
                                                "that is indexing this cache", file=sys.stderr))
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
    return EXIT_ERROR if _source_errors(report) else 0


def _source_errors(report) -> bool:
    """One ``nnrag: error:`` line on stderr per source that could not be indexed; True when
    no source could be."""
    errors = [s for s in report.sources if s.get("error")]
    for s in errors:
        print(f"nnrag: error: {_named(s['name'], s['error'])}", file=sys.stderr)
    return bool(errors) and len(errors) == len(report.sources)


def _named(name: str, msg: str) -> str:
    """``name: msg``, unless the engine's message already starts with the name."""
    return msg if msg.startswith(f"{name}:") else f"{name}: {msg}"


def cmd_blocks(args) -> int:
    with _extractor(args) as ex:
        report = ex.warm_index_once(args.policy, progress=_StderrProgress())
        if report is not None and _source_errors(report):
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
    with _extractor(args) as ex:
        rows = ex.sources()
        configured = [s.name for s in ex.config.sources]
    known = {r["name"] for r in rows}
    rows += [{"name": n, "files": 0, "blocks": 0, "error": "not indexed yet"}
             for n in configured if n not in known]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = r.get("error") or f"{r['files']} files, {r['blocks']} blocks"
        commit = f" @ {r['commit'][:12]}" if r.get("commit") else ""
        print(_named(r["name"], state) + commit)
    return 0


def cmd_extract(args) -> int:
    from nnrag_tui.engine.extractor import read_block_names

    if args.block:
        names = [args.block]
    elif args.blocks:
        names = args.blocks
    else:
        names = read_block_names(args.from_file, limit=args.limit, start_from=args.start_from)
    if not names:
        print("nnrag: error: no block names given", file=sys.stderr)
        return EXIT_ERROR
    failed = 0
    with _extractor(args) as ex:
        ex.warm_index_once(args.policy, progress=_StderrProgress())
        for name in names:
            res = ex.extract_single_block(name, args.out)
            failed += not res.ok
            if args.json:
                print(json.dumps(res.report()), flush=True)
            elif args.stdout and res.ok:
                print(res.generated.code)
            else:
                _print_extraction(res)
    if not args.json and len(names) > 1:
        print(f"{len(names) - failed}/{len(names)} extracted", file=sys.stderr)
    return EXIT_ERROR if failed else 0


def _print_extraction(res) -> None:
    for note in res.notes:
        print(f"nnrag: note: {note}", file=sys.stderr)
    if not res.ok:
        print(f"{res.requested}: failed: {res.error}")
        return
    g = res.generated
    where = f" -> {res.paths[0]}" if res.paths else ""
    extra = f", {len(g.unresolved)} unresolved" if g.unresolved else ""
    print(f"{res.block.key}: {g.lines} lines, {len(g.definitions)} definitions{extra}{where}")
    for n, w in g.unresolved:
        print(f"  unresolved: {n} ({w})")


def _run_app(args) -> int:
    from nnrag_tui.tui.app import run_app

    return run_app(config=args.config, cache_dir=args.cache_dir, data_dir=args.data_dir)


COMMANDS = {"index": cmd_index, "blocks": cmd_blocks, "sources": cmd_sources,
            "extract": cmd_extract}
