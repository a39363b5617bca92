"""Registry commands: nnrag registry list|show|remove|export."""

from __future__ import annotations

import argparse
import json
import sys

from nnrag_tui.cli.common import add_common


def register(sub) -> None:
    reg = sub.add_parser("registry", help="saved blocks: list, show, remove, export",
                         description="The blocks you saved, under the data directory "
                                     "(--data-dir, env NNRAG_DATA_DIR).")
    add_common(reg)
    rsub = reg.add_subparsers(dest="registry_command", metavar="ACTION", required=True)

    p = rsub.add_parser("list", help="saved blocks with their latest version")
    add_common(p)
    p.set_defaults(func=cmd_list)

    p = rsub.add_parser("show", help="metadata, provenance and files of a saved block")
    add_common(p)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", dest="block_version", metavar="V",
                   help="v1, v2, ... (default: the latest)")
    p.add_argument("--code", action="store_true", help="print the saved file")
    p.set_defaults(func=cmd_show)

    p = rsub.add_parser("remove", help="remove a saved block (every version, or --version)")
    add_common(p)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", dest="block_version", metavar="V",
                   help="remove only this version")
    p.set_defaults(func=cmd_remove)

    p = rsub.add_parser("export", help="copy a saved block's file and JSON into a folder")
    add_common(p)
    p.add_argument("name", metavar="NAME")
    p.add_argument("dest", metavar="DIR")
    p.add_argument("--version", dest="block_version", metavar="V",
                   help="v1, v2, ... (default: the latest)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.set_defaults(func=cmd_export)


def _registry(args: argparse.Namespace):
    from nnrag_tui.engine import paths
    from nnrag_tui.engine.registry import Registry

    return Registry(paths.data_dir(args.data_dir))


def cmd_list(args) -> int:
    reg = _registry(args)
    rows = reg.list()
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
        return 0
    if not rows:
        print(f"no saved blocks in {reg.root}", file=sys.stderr)
        return 0
    header = ("NAME", "LATEST", "VERSIONS", "CATEGORY", "REPO", "VALIDATION", "SAVED")
    table = [header] + [(r.name, r.latest, str(len(r.versions)), r.category or "-",
                         r.repo or "-", _level(r.validated, r.level), r.saved_at[:19])
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    print(f"{len(rows)} saved block{'s' if len(rows) != 1 else ''} in {reg.root}",
          file=sys.stderr)
    return 0


def cmd_show(args) -> int:
    saved = _registry(args).show(args.name, args.block_version)
    if args.json:
        print(json.dumps(saved.as_dict(), indent=2))
        return 0
    if args.code:
        sys.stdout.write(saved.code_path.read_text(encoding="utf-8"))
        return 0
    prov, req, man = saved.provenance, saved.requirements, saved.manifest
    blk = prov.get("block", {})
    val = prov.get("validation") or {}
    print(f"{saved.name} {saved.version} (versions: {', '.join(saved.versions)})")
    print(f"  block:      {blk.get('key')} ({blk.get('category') or '-'})")
    where = blk.get("url") or blk.get("origin") or "-"
    at = f" @ {blk['commit']}" if blk.get("commit") else ""
    print(f"  repository: {blk.get('repo')} {where}{at}")
    print(f"  upstream:   {blk.get('path')}:{'-'.join(map(str, blk.get('lines') or []))}")
    print(f"  saved:      {man.get('saved_at')} by nnrag {prov.get('tool', {}).get('version')}")
    print(f"  validation: {_level(val.get('validated') if val else None, val.get('level'))}"
          + (f" at {val['at']}" if val.get("at") else ""))
    print(f"  code:       {prov.get('code', {}).get('lines')} lines, "
          f"{prov.get('code', {}).get('swhid')}")
    print("  definitions:")
    for d in prov.get("definitions", []):
        lines = "-".join(map(str, d.get("lines") or []))
        print(f"    {d['path']}:{lines} {','.join(d.get('names') or []) or '-'}  "
              f"{d.get('swhid') or d.get('note', 'no SWHID')}")
    if req.get("requirements"):
        print(f"  requires:   {' '.join(req['requirements'])}")
    if req.get("unknown"):
        print(f"  unknown:    {' '.join(req['unknown'])} (no installed distribution)")
    print("  files:")
    for kind, path in saved.files.items():
        print(f"    {kind:<13}{path}")
    return 0


def cmd_remove(args) -> int:
    removed = _registry(args).remove(args.name, args.block_version)
    if args.json:
        print(json.dumps({"name": args.name, "removed": removed}))
    else:
        print(f"removed {args.name} {', '.join(removed)}")
    return 0


def cmd_export(args) -> int:
    written = _registry(args).export(args.name, args.dest, args.block_version, force=args.force)
    if args.json:
        print(json.dumps({"name": args.name, "files": [str(p) for p in written]}, indent=2))
    else:
        for p in written:
            print(p)
    return 0


def _level(validated: bool | None, level: str | None) -> str:
    if validated is None:
        return "not validated"
    return f"{'validated' if validated else 'failed'}" + (f" ({level})" if level else "")
