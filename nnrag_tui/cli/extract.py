"""``nnrag extract``: regenerate blocks as standalone files, validate them and save the ones
that pass.

Each block is extracted, then validated in the sandbox (all six stages unless ``--stage``
says otherwise; ``--no-validate`` skips it) while the next one is being extracted, and with
``--save`` promoted to the registry when it is validated (stages 1-4 pass). Results are
printed in the order the names were given. Exit code: 2 when a name could not be extracted
or a block could not be saved, else 1 when a block was not validated, else 0.
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque

from nnrag_tui.cli.common import (
    EXIT_ERROR,
    EXIT_NOT_VALIDATED,
    STAGE_CHOICES,
    StderrProgress,
    add_common,
    extractor,
    positive_int,
)


def register(sub) -> None:
    p = sub.add_parser(
        "extract", help="regenerate blocks as standalone files (validated, optionally saved)",
        description="Regenerates each block as one standalone file, validates it in a "
                    "sandboxed process (parse, compile, static check, import, instantiate, "
                    "forward) and, with --save, saves the validated ones to the registry. "
                    "Exit code 0 when every block was extracted (and validated), 1 when one "
                    "was not validated, 2 when one could not be extracted or saved.")
    add_common(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--block", metavar="NAME", help="Name, pkg.mod.Name or pkg.mod:Name")
    g.add_argument("--blocks", metavar="NAME", nargs="+")
    g.add_argument("--from-file", metavar="FILE",
                   help="a JSON list of names, or one name per line")
    p.add_argument("--repo", metavar="NAME",
                   help="take each name from this configured repository alone (forks and "
                        "vendored copies share module paths)")
    p.add_argument("--limit", type=positive_int, help="with --from-file: at most N names")
    p.add_argument("--start-from", metavar="NAME", help="with --from-file: skip names before")
    p.add_argument("--out", metavar="DIR", help="write DIR/NAME.py and DIR/NAME.spec.json")
    p.add_argument("--stdout", action="store_true", help="print the generated file(s)")
    p.add_argument("--no-validate", action="store_true",
                   help="only extract: do not run the validation stages")
    p.add_argument("--save", action="store_true",
                   help="save the blocks that are validated to the registry (--data-dir)")
    p.add_argument("--stage", choices=STAGE_CHOICES, default="forward",
                   help="the deepest validation stage to run (default: forward)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="wall-clock limit per sandboxed stage in seconds (default: 20; an "
                        "import that builds a C++ extension has at least 300)")
    p.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="blocks validated in parallel, one sandbox each (default: up to 2)")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")
    p.set_defaults(func=cmd_extract)


def cmd_extract(args) -> int:
    from nnrag_tui.engine.extractor import OutputNames, read_block_names
    from nnrag_tui.engine.paths import prepare_folder

    if args.save and args.no_validate:
        print("nnrag: error: --save keeps only the blocks that pass validation; it cannot be "
              "combined with --no-validate", file=sys.stderr)
        return EXIT_ERROR
    if args.timeout is not None and not args.timeout > 0:
        print(f"nnrag: error: --timeout must be a positive number of seconds, not "
              f"{args.timeout:g}", file=sys.stderr)
        return EXIT_ERROR
    if args.block is not None:
        names = [args.block]
    elif args.blocks is not None:
        names = args.blocks
    else:
        names = read_block_names(args.from_file, limit=args.limit, start_from=args.start_from)
    if not names:
        print("nnrag: error: no block names given", file=sys.stderr)
        return EXIT_ERROR
    if any(not n.strip() for n in names):
        print("nnrag: error: a block name cannot be empty", file=sys.stderr)
        return EXIT_ERROR
    # checked before the index is brought up to date, not after the first block is extracted
    if args.out is not None and (problem := prepare_folder(args.out)):
        print(f"nnrag: error: cannot write to --out {args.out}: {problem}", file=sys.stderr)
        return EXIT_ERROR
    from nnrag_tui.engine.sandbox import SandboxError

    pool = None if args.no_validate else _pool(args, len(names))
    try:
        with extractor(args) as ex:
            if problem := ex.unknown_repo(args.repo):  # before the index is brought up to date
                print(f"nnrag: error: --repo: {problem}", file=sys.stderr)
                return EXIT_ERROR
            if pool is not None and args.stage in ("import", "instantiate", "forward"):
                pool.start()  # the workers import torch while the index is brought up to date
            ex.warm_index_once(args.policy, progress=StderrProgress())
            tally = _Run(args, pool, ex)
            written = OutputNames()
            for name in names:
                tally.add(ex.extract_single_block(name, args.out, written, args.repo))
            tally.finish()
    except SandboxError as exc:
        print(f"nnrag: error: {exc}; to extract without validating, add --no-validate",
              file=sys.stderr)
        return EXIT_ERROR
    finally:
        if pool is not None:
            pool.close()
    if not args.json and len(names) > 1:
        print(tally.summary(len(names)), file=sys.stderr)
    if tally.failed or tally.save_errors:
        return EXIT_ERROR
    return EXIT_NOT_VALIDATED if tally.not_validated else 0


def _pool(args, n: int):
    from nnrag_tui.engine.sandbox import SandboxLimits
    from nnrag_tui.engine.validate_pool import ValidationPool

    limits = SandboxLimits()
    if args.timeout is not None:
        t = args.timeout
        limits = SandboxLimits(import_timeout=t, instantiate_timeout=t, forward_timeout=t)
    jobs = args.jobs or min(2, os.cpu_count() or 1, n)
    return ValidationPool(jobs, limits=limits, deepest=args.stage)


class _Run:
    """Extractions in the order given, each waiting for its validation (running in the pool
    while later names are extracted) before it is reported and saved."""

    def __init__(self, args, pool, extractor) -> None:
        self.args = args
        self.pool = pool
        self.extractor = extractor
        self.pending: deque = deque()  # (extraction, future or None)
        self.registry = None
        if args.save:
            from nnrag_tui.engine import paths
            from nnrag_tui.engine.registry import Registry

            self.registry = Registry(paths.data_dir(args.data_dir))
        self.failed = self.validated = self.not_validated = self.forward = 0
        self.saved = self.save_errors = 0

    def add(self, res) -> None:
        future = None
        if res.ok and self.pool is not None:
            from nnrag_tui.engine.validate import standalone_denylist

            g = res.generated
            future = self.pool.submit(g.code, g.name, g.spec, filename=f"{g.name}.py",
                                      deny=standalone_denylist(res.block.module,
                                                               g.imported_packages),
                                      call_sites=lambda: self.extractor.call_sites(res),
                                      files=g.files())
        self.pending.append((res, future))
        while self.pending and (self.pending[0][1] is None or self.pending[0][1].done()):
            self._report(*self.pending.popleft())

    def finish(self) -> None:
        while self.pending:
            self._report(*self.pending.popleft())

    def _report(self, res, future) -> None:
        report = future.result() if future is not None else None
        self.failed += not res.ok
        if report is not None:
            self.validated += report.validated
            self.not_validated += not report.validated
            self.forward += report.level == "forward_ran"
        saved, why_not = self._save(res, report)
        if self.args.json:
            doc = res.report()
            if report is not None:
                doc["validation"] = report.as_dict()
            if self.registry is not None and res.ok:
                doc["saved"] = saved.as_dict() if saved is not None else None
                if why_not:
                    doc["not_saved"] = why_not
            print(json.dumps(doc), flush=True)
            return
        for note in res.notes:  # an ambiguous name is never silent
            print(f"nnrag: note: {note}", file=sys.stderr)
        if not res.ok:
            print(f"nnrag: error: {res.requested}: {res.error}", file=sys.stderr)
            return
        # with --stdout the code owns stdout; everything else goes to stderr
        info = sys.stderr if self.args.stdout else sys.stdout
        if self.args.stdout:
            print(res.generated.code, flush=True)
        else:
            _print_extraction(res)
        if report is not None:
            print(f"  {_verdict(report)}", file=info, flush=True)
        if saved is not None:
            what = "saved" if saved.created else "already saved"
            print(f"  {what}: {saved.name} {saved.version} -> {saved.file}", file=info)
        elif why_not:
            print(f"  not saved: {why_not}", file=sys.stderr if self.save_errors else info)

    def _save(self, res, report):
        """(SaveResult or None, why it was not saved or None)."""
        if self.registry is None or not res.ok:
            return None, None
        if report is None or not report.validated:
            return None, "not validated"
        from nnrag_tui.engine.errors import NnragError

        try:
            saved = self.registry.save(res, report, sources=res.sources)
        except NnragError as exc:
            self.save_errors += 1
            return None, str(exc)
        except OSError as exc:
            self.save_errors += 1
            return None, f"cannot write the registry: {exc.strerror or exc}"
        self.saved += 1
        return saved, None

    def summary(self, n: int) -> str:
        parts = [f"{n - self.failed}/{n} extracted"]
        if self.pool is not None:
            parts.append(f"{self.validated} validated ({self.forward} ran forward)")
        if self.registry is not None:
            parts.append(f"{self.saved} saved")
        return ", ".join(parts)


def _verdict(report) -> str:
    ms = f"{1000 * sum(s.seconds for s in report.stages):.0f} ms"  # not the wait for a sandbox
    if not report.validated:
        return f"NOT validated ({ms}): {report.cause}: {report.cause_summary}"
    text = f"validated, level {report.level} ({ms})"
    fwd = report.stage("forward")
    if fwd is not None and fwd.ok and fwd.diagnostics:
        text += f": {fwd.diagnostics}"
    elif report.cause:
        text += f"; deeper: {report.cause}: {report.cause_summary}"
    return text


def _print_extraction(res) -> None:
    g = res.generated
    where = f" -> {res.paths[0]}" if res.paths else ""
    extra = f", {len(g.unresolved)} unresolved" if g.unresolved else ""
    n = len(g.definitions)
    print(f"{res.block.key}: {g.lines} lines, {n} definition{'s' if n != 1 else ''}{extra}"
          f"{where}", flush=True)
    for n, w in g.unresolved:
        print(f"  unresolved: {n} ({w})")
