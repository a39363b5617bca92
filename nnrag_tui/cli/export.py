"""Export commands: nnrag export NAME --into DIR, nnrag export-specs --jsonl FILE."""

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
        "export", help="write a block as a module into another project's package",
        description="Writes a block (freshly extracted, or a saved one with --registry) as a "
                    "module of the package at DIR: definitions the package already has, "
                    "structurally identical, are imported from there instead of copied. "
                    "Nothing is overwritten without --force.")
    add_common(p)
    p.add_argument("name", metavar="NAME",
                   help="Name, pkg.mod.Name or pkg.mod:Name (with --registry: a saved name)")
    p.add_argument("--into", metavar="DIR", required=True, help="the target package folder")
    p.add_argument("--module", metavar="NAME",
                   help="module name (default: the class name in snake case)")
    p.add_argument("--registry", action="store_true", help="export a saved block")
    p.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")
    p.add_argument("--force", action="store_true", help="overwrite a different existing file")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "export-specs", help="a JSON Lines dataset of the blocks' neutral specs (no code)",
        description="One JSON object per block: its neutral spec (signatures, category, "
                    "dependencies, externals, provenance), no upstream code. Docstring "
                    "summaries are upstream text: only with --summaries.")
    add_common(p)
    p.add_argument("--jsonl", metavar="FILE", required=True, help="output file ('-': stdout)")
    p.add_argument("--registry", action="store_true", help="the saved blocks, not the index")
    p.add_argument("--category", choices=CATEGORIES)
    p.add_argument("--repo", metavar="NAME")
    p.add_argument("--match", metavar="GLOB")
    p.add_argument("--limit", type=int, metavar="N")
    p.add_argument("--summaries", action="store_true",
                   help="include docstring summaries (upstream text)")
    p.add_argument("--force", action="store_true", help="overwrite FILE")
    p.add_argument("--policy", choices=("never", "missing", "always"), default="missing")
    p.set_defaults(func=cmd_export_specs)


def _registry(args):
    from nnrag_tui.engine import paths
    from nnrag_tui.engine.export import ExportError

    try:
        from nnrag_tui.engine.registry import Registry
    except ImportError:
        raise ExportError("the registry is not available in this installation") from None
    return Registry(paths.data_dir(args.data_dir))


def cmd_export(args) -> int:
    from nnrag_tui.engine import export

    if args.registry:
        code, cls, label = export.block_code(name=args.name, registry=_registry(args))
    else:
        with extractor(args) as ex:
            report = ex.warm_index_once(args.policy, progress=StderrProgress())
            if report is not None and source_errors(report):
                return EXIT_ERROR
            res = ex.extract_single_block(args.name)
            for note in res.notes:
                print(f"nnrag: note: {note}", file=sys.stderr)
            if not res.ok:
                print(f"nnrag: error: cannot export {args.name!r}: {res.error}",
                      file=sys.stderr)
                return EXIT_ERROR
            code, cls, label = res.generated.code, res.generated.name, res.block.key
    plan = export.plan_export(code, cls, args.into, module=args.module, force=args.force,
                              label=label)
    if not args.dry_run and plan.already_present is None and not plan.blocked:
        export.apply_export(plan)
    if args.json:
        d = plan.as_dict()
        d["dry_run"] = args.dry_run
        print(json.dumps(d, indent=2))
    else:
        print(plan.text(dry_run=args.dry_run))
    if plan.blocked and not args.dry_run:
        print("nnrag: error: refusing to overwrite " + ", ".join(
            str(f.path) for f in plan.blocked) + " (use --force)", file=sys.stderr)
        return EXIT_ERROR
    return 0


def cmd_export_specs(args) -> int:
    from nnrag_tui.engine import export

    to_stdout = args.jsonl == "-"
    if args.registry:
        records = export.registry_spec_records(_registry(args), summaries=args.summaries)
        n = export.write_jsonl(records, None if to_stdout else args.jsonl, force=args.force,
                               stream=sys.stdout)
    else:
        with extractor(args) as ex:
            report = ex.warm_index_once(args.policy, progress=StderrProgress())
            if report is not None and source_errors(report):
                return EXIT_ERROR
            registry = None
            try:
                registry = _registry(args)
            except export.ExportError:
                pass
            records = export.spec_records(ex, category=args.category, repo=args.repo,
                                          match=args.match, limit=args.limit,
                                          summaries=args.summaries, registry=registry)
            n = export.write_jsonl(records, None if to_stdout else args.jsonl,
                                   force=args.force, stream=sys.stdout)
    if not to_stdout:
        print(f"{n} records -> {args.jsonl}", file=sys.stderr)
    return 0
