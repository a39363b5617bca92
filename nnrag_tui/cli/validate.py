"""Validation commands: ``nnrag validate NAME|FILE [--json]``.

FILE (an existing ``.py`` path) is validated as it is; NAME is extracted from the index first
(like ``nnrag extract --block NAME``) and the generated file validated. Exit code 0 when the
block is validated (stages 1-4 pass), 1 when it is not, 2 for usage and engine errors.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from nnrag_tui.cli.common import (
    EXIT_ERROR,
    EXIT_NOT_VALIDATED,
    STAGE_CHOICES,
    StderrProgress,
    add_common,
    extractor,
)


def register(sub) -> None:
    p = sub.add_parser("validate", help="validate a block (by name) or a block file",
                       description="Runs the validation stages (parse, compile, static check "
                                   "for undefined names, import, instantiate, forward) with "
                                   "the block's code in a sandboxed process. Exit code 0 when "
                                   "the block is validated (the first four stages pass), 1 "
                                   "when not, 2 on errors.")
    add_common(p)
    p.add_argument("target", metavar="NAME|FILE",
                   help="a block name (Name, pkg.mod.Name or pkg.mod:Name) or a .py file")
    p.add_argument("--class", dest="cls", metavar="NAME",
                   help="with FILE: the class to instantiate (default: the first name of "
                        "__all__, else the last class)")
    p.add_argument("--stage", choices=STAGE_CHOICES, default="forward",
                   help="the deepest stage to run (default: forward)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="wall-clock limit per sandboxed stage in seconds (default: 20; an "
                        "import that builds a C++ extension has at least 300)")
    p.add_argument("--allow-source-imports", action="store_true",
                   help="with NAME: let the file import its source package (by default it "
                        "is blocked in the sandbox, so that 'validated' means standalone)")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing",
                   help="with NAME: when to fetch git sources before extracting")
    p.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    from nnrag_tui.engine.sandbox import Sandbox, SandboxLimits

    limits = SandboxLimits()
    if args.timeout is not None:
        t = max(0.1, args.timeout)
        limits = SandboxLimits(import_timeout=t, instantiate_timeout=t, forward_timeout=t)
    sandbox = Sandbox(limits=limits)
    try:
        return _validate(args, sandbox)
    finally:
        sandbox.close()


def _validate(args, sandbox) -> int:
    target = args.target
    path = Path(target)
    if path.is_file():
        try:
            code = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"nnrag: error: cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                  file=sys.stderr)
            return EXIT_ERROR
        return _run(args, sandbox, code, args.cls, None, path.name, {"file": str(path)},
                    files=files_beside(path))
    if target.endswith(".py") or os.sep in target:
        print(f"nnrag: error: no such file: {target}", file=sys.stderr)
        return EXIT_ERROR
    from nnrag_tui.engine.validate import standalone_denylist
    from nnrag_tui.engine.validate_pool import start_in_background

    # the sandbox worker imports torch (seconds) while the block is being extracted
    start_in_background(sandbox)
    with extractor(args) as ex:
        ex.warm_index_once(args.policy, progress=StderrProgress())
        res = ex.extract_single_block(target)
        for note in res.notes:
            print(f"nnrag: note: {note}", file=sys.stderr)
        if not res.ok:
            print(f"nnrag: error: {target}: {res.error}", file=sys.stderr)
            return EXIT_ERROR
        gen = res.generated
        if not args.allow_source_imports:
            sandbox.deny_imports = standalone_denylist(res.block.module, gen.imported_packages)
        # the corpus's own constructor calls, looked up only if guessed arguments fail
        return _run(args, sandbox, gen.code, args.cls or gen.name, gen.spec, f"{gen.name}.py",
                    {"block": res.block.key, "repo": res.block.source},
                    call_sites=lambda: ex.call_sites(res), files=gen.files())


def files_beside(path: Path) -> dict[str, bytes]:
    """The files a block file written by nnrag finds beside itself: those its spec
    (``NAME.spec.json``, ``"files"``) lists, where they are."""
    from nnrag_tui.engine.modulefiles import is_plain_relative

    try:
        listed = json.loads(path.with_name(f"{path.stem}.spec.json").read_text(
            encoding="utf-8")).get("files") or []
    except (OSError, ValueError, AttributeError):
        return {}
    out: dict[str, bytes] = {}
    for rel in listed:
        if isinstance(rel, str) and is_plain_relative(rel) and (path.parent / rel).is_file():
            out[rel] = (path.parent / rel).read_bytes()
    return out


def _run(args, sandbox, code, name, spec, filename, extra, call_sites=None,
         files=None) -> int:
    from nnrag_tui.engine.validate import Validator

    with Validator(sandbox, deepest=args.stage) as validator:
        report = validator.validate(code, name, spec, filename=filename,
                                    call_sites=call_sites, files=files)
    if args.json:
        print(json.dumps({**report.as_dict(), **extra}, indent=2))
    else:
        _print_report(report, args.stage)
    return 0 if report.validated else EXIT_NOT_VALIDATED


def _print_report(report, deepest: str) -> None:
    from nnrag_tui.engine.validate import STAGES

    state = "validated" if report.validated else "NOT validated"
    print(f"{report.name}: {state} (level: {report.level}) in "
          f"{1000 * report.seconds:.0f} ms")
    ran = {s.stage: s for s in report.stages}
    for stage in STAGES[: STAGES.index(deepest) + 1]:
        v = ran.get(stage)
        if v is None:
            print(f"  {stage:<12} {'-':<4} {'':>9}  not run")
            continue
        diag = v.diagnostics.replace("\n", " ")
        print(f"  {stage:<12} {'ok' if v.ok else 'FAIL':<4} {1000 * v.seconds:>7.1f} ms"
              + (f"  {diag}" if diag else ""))
    if report.cause:
        print(f"cause: {report.cause}: {report.cause_summary}")
    sb = report.sandbox or {}
    if sb.get("output", "").strip():
        out = sb["output"].rstrip()
        lines = out.splitlines()
        shown = "\n".join("  | " + ln for ln in lines[-10:])
        more = f" (last 10 of {len(lines)} lines)" if len(lines) > 10 else ""
        print(f"output{more}:\n{shown}")
    prot = sb.get("protections") or {}
    for note in prot.get("notes", []):
        print(f"nnrag: note: sandbox: {note}", file=sys.stderr)
