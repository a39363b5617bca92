"""Where a saved block came from and what it needs: the provenance record (source repositories,
commits, the file SHA-1 and SWHID of every inlined definition, validation runs) and the
requirements record (the generated file's imports mapped to installed distributions as PEP 508
pins). Plain dicts in, plain dicts out: the registry stores them as JSON."""

from __future__ import annotations

import ast
import hashlib
import platform
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from nnrag_tui import __version__
from nnrag_tui.engine import treewalk

FORMAT = 1
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__"}


def now() -> str:
    """A UTC timestamp, ISO 8601, to the millisecond."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def git_blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def swhid(data: bytes) -> str:
    """The Software Heritage id of a file's content: ``swh:1:cnt:<git blob id>``."""
    return f"swh:1:cnt:{git_blob_id(data)}"


def tool_info() -> dict:
    return {"name": "nnrag", "version": __version__,
            "python": platform.python_version()}


# -- provenance -----------------------------------------------------------------------------
def source_info(name: str, info: dict | None) -> dict:
    """One source repository as provenance: name, URL or path, commit, kind, version."""
    info = info or {}
    origin = info.get("origin")
    out = {"name": name, "url": origin if _is_url(origin) else None, "origin": origin,
           "commit": info.get("commit"), "kind": info.get("kind"),
           "version": info.get("version")}
    if info.get("import_root"):  # a src layout: the definitions' paths start with it
        out["import_root"] = info["import_root"]
    return out


def repo_path(info: dict | None, relpath: str) -> str:
    """A file's path in its repository, which its URL and a SWHID's origin need: the import
    root's folder (``src`` of a src layout), then the path under it."""
    prefix = (info or {}).get("import_root") or ""
    return f"{prefix}/{relpath}" if prefix and relpath else relpath


def build_provenance(extraction: Any, sources: dict[str, dict] | None, code: bytes) -> dict:
    """The provenance of a generated block (without validation, which ``validation_run`` adds).
    ``sources`` is the index's ``source_roots()``: each definition's file is read from there to
    compute its SHA-1 and SWHID. A file that changed since it was indexed gets no SWHID and a
    note, since its current bytes are not the ones the block was copied from."""
    g = extraction.generated
    block = extraction.block
    sources = sources or {}
    spec_src = (g.spec or {}).get("source", {}) if isinstance(g.spec, dict) else {}
    repo = getattr(block, "source", None) or spec_src.get("repo")
    used = sorted({d.source for d in g.definitions} | ({repo} if repo else set()))
    file_ids: dict[tuple[str, str], dict] = {}
    definitions = []
    for d in g.definitions:
        key = (d.source, d.relpath)
        if key not in file_ids:
            file_ids[key] = _file_ids(sources.get(d.source), d.relpath, d.sha1)
        ids = file_ids[key]
        origin = sources.get(d.source, {}).get("origin")
        entry = {"source": d.source, "module": d.module,
                 "path": repo_path(sources.get(d.source), d.relpath),
                 "lines": [d.line, d.end_line], "names": list(d.names),
                 "sha1": d.sha1, "swhid": ids["swhid"]}
        if ids["swhid"]:
            qual = ids["swhid"] + (f";origin={origin}" if _is_url(origin) else "")
            entry["swhid_qualified"] = qual + f";lines={d.line}-{d.end_line}"
        if d.rewrites:
            entry["rewrites"] = list(d.rewrites)
        if ids.get("note"):
            entry["note"] = ids["note"]
        definitions.append(entry)
    src = sources.get(repo, {}) if repo else {}
    return {
        "format": FORMAT,
        "tool": tool_info(),
        "block": {
            "class": g.name, "key": g.key,
            "qualname": getattr(block, "full_name", None) or (g.spec or {}).get("qualname"),
            "category": getattr(block, "category", None) or (g.spec or {}).get("category"),
            "repo": repo, "url": src.get("origin") if _is_url(src.get("origin")) else None,
            "origin": src.get("origin", spec_src.get("origin")),
            "commit": src.get("commit", spec_src.get("commit")),
            "module": getattr(block, "module", None) or spec_src.get("module"),
            "path": (repo_path(src, block.relpath) if getattr(block, "relpath", None)
                     else spec_src.get("path")),
            "lines": ([block.line, block.end_line] if block is not None
                      else spec_src.get("lines")),
        },
        "code": {"sha1": hashlib.sha1(code).hexdigest(),
                 "sha256": hashlib.sha256(code).hexdigest(), "swhid": swhid(code),
                 "lines": code.count(b"\n")},
        "sources": [source_info(n, sources.get(n)) for n in used],
        "definitions": definitions,
        "externals": list(g.externals),
        "unresolved": [{"name": n, "where": w} for n, w in g.unresolved],
        "validation": None,
    }


def _file_ids(info: dict | None, relpath: str, indexed_sha1: str) -> dict:
    if not info or not info.get("root"):
        return {"swhid": None, "note": "source root unknown: file not read"}
    try:
        data = (Path(info["root"]) / relpath).read_bytes()
    except OSError as exc:
        return {"swhid": None, "note": f"source file unreadable: {exc.strerror or exc}"}
    if hashlib.sha1(data).hexdigest() != indexed_sha1:
        return {"swhid": None, "note": "source file changed since it was indexed; "
                                      "re-index and save again for its SWHID"}
    return {"swhid": swhid(data)}


def _is_url(origin: object) -> bool:
    return isinstance(origin, str) and "://" in origin


# -- validation -----------------------------------------------------------------------------
def validation_run(validation: Any, at: str | None = None) -> dict:
    """A validator report (duck-typed: ``.validated``, ``.level``, ``.stages`` with ``.stage``,
    ``.ok``, ``.seconds``, and ``.as_dict()``) as a timestamped record."""
    at = at or now()
    stages = []
    for s in getattr(validation, "stages", None) or ():
        get = s.get if isinstance(s, dict) else (lambda k, s=s: getattr(s, k, None))
        stages.append({"stage": get("stage"), "ok": bool(get("ok")), "seconds": get("seconds")})
    as_dict = getattr(validation, "as_dict", None)
    report = as_dict() if callable(as_dict) else (validation if isinstance(validation, dict)
                                                  else None)
    if isinstance(validation, dict):
        get = validation.get
    else:
        def get(k, default=None):
            return getattr(validation, k, default)
    return {"at": at, "validated": bool(get("validated", False)), "level": get("level"),
            "stages": stages, "report": report}


def add_validation(provenance: dict, run: dict) -> dict:
    """Records one validation run: the latest verdict, the last time each stage passed, and
    the history of runs."""
    prev = provenance.get("validation") or {}
    levels = dict(prev.get("levels") or {})
    for s in run["stages"]:
        if s["ok"] and s["stage"]:
            levels[s["stage"]] = run["at"]
    if run["level"] and run["level"] not in levels:
        levels[run["level"]] = run["at"]
    provenance["validation"] = {
        "validated": run["validated"], "level": run["level"], "at": run["at"],
        "levels": levels, "runs": [*(prev.get("runs") or []), run]}
    return provenance


def same_validation(provenance: dict, run: dict) -> bool:
    """True when ``run`` says nothing new: same verdict, level and stage outcomes as the
    latest recorded run."""
    last = ((provenance.get("validation") or {}).get("runs") or [None])[-1]
    if last is None:
        return False

    def shape(r: dict) -> tuple:
        return (r["validated"], r["level"], tuple((s["stage"], s["ok"]) for s in r["stages"]))
    return shape(last) == shape(run)


# -- requirements ---------------------------------------------------------------------------
def build_requirements(code: str, sources: Iterable[dict]) -> dict:
    """``required_repos.json``: every module the generated file imports, mapped to the
    installed distributions that provide it (``importlib.metadata``) and pinned per PEP 508.
    The standard library is listed apart; modules no installed distribution provides are
    listed as unknown. A local version label (``2.13.0+cpu``) is left out of the pin, which
    PEP 440 lets ``==2.13.0`` match; the installed version is kept beside it."""
    modules = imported_modules(code)
    dist_map = _packages_distributions()
    imports, pins, unknown, stdlib = [], {}, [], []
    for top, lines in modules.items():
        entry: dict = {"module": top, "imports": lines}
        if top in STDLIB:
            entry["kind"] = "stdlib"
            stdlib.append(top)
        else:
            dists = []
            for dist in dist_map.get(top, ()):
                try:
                    version = metadata.version(dist)
                except metadata.PackageNotFoundError:
                    continue
                pin = f"{dist}=={version.split('+', 1)[0]}"
                dists.append({"name": dist, "version": version, "requirement": pin})
                pins[pin.lower()] = pin
            if dists:
                entry["kind"] = "distribution"
                entry["distributions"] = dists
            else:
                entry["kind"] = "unknown"
                unknown.append(top)
        imports.append(entry)
    return {
        "format": FORMAT,
        "python": f">={sys.version_info.major}.{sys.version_info.minor}",
        "requirements": sorted(pins.values(), key=str.lower),
        "imports": imports,
        "stdlib": sorted(stdlib),
        "unknown": sorted(unknown),
        "sources": [{"name": s["name"], "url": s.get("url"), "origin": s.get("origin"),
                     "commit": s.get("commit"), "version": s.get("version")}
                    for s in sources],
    }


def imported_modules(code: str) -> dict[str, list[str]]:
    """Top-level module name -> the import statements (as written) that need it, for every
    import anywhere in the file (guarded ones too). Relative imports cannot work in a
    standalone file; they are reported under the name ``.<module>``."""
    tree = ast.parse(code)
    found: dict[str, list[str]] = {}
    for node in treewalk.walk(tree):
        if isinstance(node, ast.Import):
            tops = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                tops = ["." * node.level + (node.module or "")]
            else:
                tops = [(node.module or "").split(".")[0]]
        else:
            continue
        text = ast.get_source_segment(code, node) or ast.unparse(node)
        for top in tops:
            lines = found.setdefault(top, [])
            if text not in lines:
                lines.append(text)
    return dict(sorted(found.items()))


@lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    try:
        return {k: sorted(set(v)) for k, v in metadata.packages_distributions().items()}
    except Exception:  # noqa: BLE001 (a broken distribution's metadata must not stop a save)
        return {}

