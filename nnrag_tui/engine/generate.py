"""The generator: one standalone file per block from its closure.

Layout: a provenance header, ``from __future__`` imports, external imports grouped per PEP 8
(standard library, then third party), the inlined statements in definition-before-use order,
each copied byte for byte from upstream apart from the rewrites the header lists, then
``__all__``. The same closure always gives the same bytes.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nnrag_tui import __version__
from nnrag_tui.engine.closure import ALWAYS_EXTERNAL, UNUSED, Closure, ExternalImport, NodeId
from nnrag_tui.engine.deferred import DeferredRun, deferred_runs
from nnrag_tui.engine.gcpolicy import fewer_collections
from nnrag_tui.engine.import_locations import emptied as emptied_lists
from nnrag_tui.engine.modsource import ModuleSource, annotated
from nnrag_tui.engine.moduleobject import is_object_key
from nnrag_tui.engine.nesting import (
    LazyGroup,
    NestedModule,
    external_users,
    nesting,
    typing_reads,
)
from nnrag_tui.engine.provenance import repo_path
from nnrag_tui.engine.registry_scope import pinned as pin_scope
from nnrag_tui.engine.rewrite import ImportEdits, indented, rewrite_statement
from nnrag_tui.engine.spec import build_spec, find_class
from nnrag_tui.engine.typing_only import TypingGroup, typing_group

if TYPE_CHECKING:
    from nnrag_tui.engine.facts import Block
    from nnrag_tui.engine.resolve import Resolver

STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__"}
MAX_MODULE_FILE = 64 << 20  # bytes: a larger file found through ``__file__`` is not copied


@dataclass(frozen=True)
class Definition:
    """Provenance of one inlined statement."""

    source: str
    module: str
    relpath: str
    line: int
    end_line: int
    sha1: str
    names: tuple[str, ...]
    rewrites: tuple[str, ...] = ()


@dataclass
class GeneratedBlock:
    name: str
    key: str
    code: str
    spec: dict
    definitions: list[Definition]
    externals: list[str]
    unresolved: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)
    # upstream files the code finds beside its module (``__file__``): (path on disk, path
    # from the generated file's folder), see ``files``
    module_files: list[tuple[str, str]] = field(default_factory=list)
    # the packages the file may import although the corpus has them: torch, and the sources
    # the configuration marks external (engine.validate.standalone_denylist)
    imported_packages: frozenset[str] = ALWAYS_EXTERNAL

    @property
    def lines(self) -> int:
        return self.code.count("\n")

    @property
    def rewrites(self) -> list[str]:
        return [f"{d.relpath}:{d.line}: {r}" for d in self.definitions for r in d.rewrites]

    def files(self) -> dict[str, bytes]:
        """The files that go beside the generated file, by their path from its folder
        (asteroid's ``bark_matrix_16k.mat``, whisper's ``assets/mel_filters.npz``), read
        from the source now; one that is gone or over ``MAX_MODULE_FILE`` is left out."""
        out: dict[str, bytes] = {}
        for path, rel in self.module_files:
            try:
                if os.path.getsize(path) <= MAX_MODULE_FILE:
                    with open(path, "rb") as fh:
                        out[rel] = fh.read()
            except OSError:
                continue
        return out


def regenerate(resolver: Resolver, block: Block, sources: dict[str, dict]
               ) -> tuple[Closure, GeneratedBlock]:
    """The closure of ``block`` and the file generated from it, with the cyclic garbage
    collector running less often meanwhile (engine.gcpolicy): a closure allocates in bursts
    that it would walk again and again, finding next to no garbage."""
    with fewer_collections():
        closure = resolver.closure(block)
        return closure, generate(closure, sources)


def generate(closure: Closure, sources: dict[str, dict]) -> GeneratedBlock:
    block = closure.block
    body: list[str] = []
    users = external_users(closure)
    typing = typing_group(closure, users) if closure.typing_only else None
    nests, groups = nesting(closure, users, frozenset(typing.nodes if typing else ()))
    if typing is not None:
        typing.externals = sorted({*typing.externals, *typing_reads(
            nests, groups, users, frozenset(typing.nodes))})
    runs, tried = deferred_runs(closure, {*nests, *(n for found in nests.values() for m in found
                                                    for n in m.nodes),
                                          *(n for g in groups for n in g.nodes),
                                          *(typing.nodes if typing else ())}, groups, users,
                                  frozenset(typing.nodes if typing else ()))
    texts, definitions, inner = _statement_texts(closure, nests, groups, typing, runs, tried)
    anchors = {run.anchor for run in runs}
    outer = [n for n in closure.nodes if n not in inner]
    for prev, node in zip([None, *outer], outer):
        if prev is not None:
            body.append("\n\n" if node in anchors else _separator(closure, prev, node))
        body.append(texts[node].rstrip() + "\n")
    exported = block.qualname.rsplit(".", 1)[-1]
    top = closure.out_names.get(("def", (block.source, block.module), closure.target_name),
                                closure.target_name)
    tail: list[str] = []
    if "." in block.qualname:
        tail.append(f"{exported} = {top}.{block.qualname.split('.', 1)[1]}\n")
    tail.append(f"__all__ = [{exported!r}]\n".replace("'", '"'))
    moved = {i for found in [*nests.values(), groups, [typing] if typing else []]
             for m in found for i in m.externals}
    imports = _import_section(closure.future, [e for i, e in closure.externals.items()
                                               if i not in moved] + (
        [typing.guard_import] if typing and typing.guard_import else []))
    notes = list(closure.notes)
    for run in runs:
        if run.note is None:
            notes.append(run.note_text(closure))
        else:
            notes[run.note] = run.note_text(closure)
    header = _header(closure, definitions, sources, notes)
    parts = [header, imports] if imports else [header]
    code = "\n".join(parts) + "\n\n" + "".join(body) + "\n\n" + "".join(tail)
    ms = closure.modules[(block.source, block.module)]
    cls = find_class(ast.Module(body=[s.node for s in ms.stmts], type_ignores=[]),
                     block.qualname)
    spec = build_spec(
        cls, name=exported, qualname=block.full_name, category=block.category,
        bases=list(block.bases),
        dependencies=[{"name": d.name, "kind": d.kind, "target": d.target, "how": d.how,
                       "confidence": d.confidence, **({"note": d.note} if d.note else {}),
                       **({"typing_only": True} if d.typing_only else {})}
                      for d in _unique_deps(closure)],
        externals=[e.text() for e in closure.externals.values()],
        source={"repo": block.source, "module": block.module,
                "path": repo_path(sources.get(block.source), block.relpath),
                "lines": [block.line, block.end_line],
                **{k: v for k, v in sources.get(block.source, {}).items()
                   if k in ("origin", "commit", "version")}},
    )
    if closure.module_files:
        spec["files"] = [rel for _, rel in closure.module_files]
    return GeneratedBlock(exported, block.key, code, spec, definitions,
                          [e.text() for e in closure.externals.values()],
                          list(closure.unresolved), notes,
                          list(closure.module_files), closure.imported_packages)


def _statement_texts(closure: Closure, nests: dict[NodeId, list[NestedModule]],
                     groups: list[LazyGroup], typing: TypingGroup | None,
                     runs: list[DeferredRun], tried: list[LazyGroup]
                     ) -> tuple[dict[NodeId, str], list[Definition], set[NodeId]]:
    """Every statement's text as the file has it, its header entry, and the statements that
    go inside another's text (engine.nesting): a guard of the module that imports theirs, or
    the ``try`` of their group (those of ``groups`` in ``tried``; the others' modules each run
    in a function of engine.deferred), or the ``if TYPE_CHECKING:`` of the typing-only ones
    (engine.typing_only), which the group's last statement's text stands for (that statement
    is then not among the inner ones), or the function that runs a module's code at the first
    import of it inside a function (engine.deferred), which goes right above its anchor."""
    by_user = _ByUser.of(closure)
    unsure_by_node: dict[NodeId, dict[tuple[int, str], str]] = {}
    for g in groups:
        for (user, line, bound) in g.sites:
            key = closure.guarded_imports[(user, line, bound)]
            unsure_by_node.setdefault(user, {})[(line - closure.stmt(user).line + 1, bound)] = \
                f"cannot import name {key[2]!r} from {key[1][1]!r}"
    calls: dict[NodeId, dict[int, tuple[str, ...]]] = {}
    for run in runs:
        for user, line in run.sites:
            at = calls.setdefault(user, {})
            rel = line - closure.stmt(user).line + 1
            at[rel] = (*at.get(rel, ()), run.runner)
    notes: dict[NodeId, str] = {}
    for run in runs:
        notes.update((n, run.statement_note(closure, n)) for n in run.nodes)
    for found in nests.values():
        for m in found:
            where = f"{closure.entries[m.site[0]].facts.relpath}:{closure.stmt(m.site).line}"
            notes.update((n, f"indented, inside the `{m.guard}` of {where}") for n in m.nodes)
    last: dict[NodeId, LazyGroup | TypingGroup] = {}
    for g in tried:
        last[g.nodes[-1]] = g
        notes.update((n, _group_note(closure, g, n[0])) for n in g.nodes)
    if typing is not None:
        last[typing.nodes[-1]] = typing
        notes.update((n, typing.note()) for n in typing.nodes)
    texts: dict[NodeId, str] = {}
    definitions: list[Definition] = []
    for node in closure.nodes:
        nested = {m.line - closure.stmt(node).line + 1:
                  (_nested_code(closure, m, texts), _nested_note(closure, m))
                  for m in nests.get(node, ())}
        text, log = _statement_text(closure, node, by_user, nested,
                                    unsure_by_node.get(node), calls.get(node))
        texts[node] = text
        if node in notes:
            log = [*log, notes[node]]
        g = last.get(node)
        if isinstance(g, TypingGroup):
            texts[node] = f"if {g.guard}:\n" + indented(_nested_code(closure, g, texts), "    ")
        elif g is not None:
            texts[node] = ("try:\n" + indented(_nested_code(closure, g, texts), "    ")
                           + "except ImportError:\n    pass\n")
        st = closure.stmt(node)
        entry = closure.entries[node[0]]
        if not is_object_key(node[0]):  # a module object is not upstream text (its note says)
            definitions.append(Definition(entry.source, entry.module, entry.facts.relpath,
                                          st.line, st.end_line, entry.facts.sha1,
                                          tuple(sorted(st.binds)), tuple(log)))
    for run in runs:  # (each above those before it at its anchor)
        head = _import_section([], [closure.externals[i] for i in run.externals])
        texts[run.anchor] = (run.code(texts, lambda a, b: _separator(closure, a, b), head)
                             + "\n\n" + texts[run.anchor])
    return texts, definitions, set(notes) - set(last)


def _group_note(closure: Closure, g: LazyGroup, module: tuple[str, str]) -> str:
    """The header's line on a statement of a lazy group: where upstream imports its module,
    if it does (the first such place), or which of the group's modules import it."""
    sites = [(closure.entries[user[0]].facts.relpath, line)
             for user, line, bound in g.sites
             if closure.guarded_imports[(user, line, bound)][1] == module]
    if sites:
        where = ", ".join(f"{r}:{n}" for r, n in sorted(set(sites))[:1])
        more = len(set(sites)) - 1
        where += f" and {more} more" if more else ""
        why = f"as upstream imports its module only inside functions ({where})"
    else:
        why = "as upstream imports its module only from modules imported inside functions"
    return f"indented, inside a `try` of its own, {why}"


def _nested_code(closure: Closure, m: NestedModule | LazyGroup | TypingGroup,
                 texts: dict[NodeId, str]) -> str:
    """The statements of a module emitted inside the guard of its import, or of a group
    (engine.nesting, engine.typing_only), after the imports only they make, at column 0."""
    head = _import_section([], [closure.externals[i] for i in m.externals]).rstrip()
    parts = [head + "\n"] if head else []
    for prev, node in zip([None, *m.nodes], m.nodes):
        if prev is not None or parts:
            parts.append("\n\n" if prev is None else _separator(closure, prev, node))
        parts.append(texts[node].rstrip() + "\n")
    return "".join(parts)


def _nested_note(closure: Closure, m: NestedModule) -> str:
    relpath = closure.entries[m.module].facts.relpath
    more = [k for k in m.helpers if not is_object_key(k)]
    if more:
        relpath += (f" (with {len(more)} more module{'s' if len(more) > 1 else ''} only "
                    "this import leads to)")
    packages = sorted({closure.externals[i].module.split(".")[0] for i in m.externals}
                      | set(m.fallbacks))
    if m.guard == "if":
        return (f"{relpath} runs inside this `if`, indented, where upstream imports it: only "
                f"where the condition holds, as upstream's import (it imports "
                f"{', '.join(packages)})")
    return (f"{relpath} runs inside this `try`, indented, where upstream imports it: without "
            f"{', '.join(packages)}, its import fails here too and the fallback holds")


def _separator(closure: Closure, a: NodeId, b: NodeId) -> str:
    """Two blank lines around definitions; module-level statements that follow each other
    upstream keep the blank line or none they had there (a block of constants stays one)."""
    ms = closure.modules[a[0]]
    if b[0] != a[0] or b[1] != a[1] + 1:
        return "\n\n"
    sa, sb = ms.stmts[a[1]], ms.stmts[b[1]]
    gap = ms.lines[sa.end_line : sb.line - 1]
    if "class" in (sa.kind, sb.kind) or "function" in (sa.kind, sb.kind) or len(gap) > 1 or \
            any(line.strip() for line in gap):
        return "\n\n"
    return "\n" * len(gap)


def statement_text(closure: Closure, node: NodeId) -> str:
    """One statement as the generated file has it, rewrites made."""
    return _statement_text(closure, node, _ByUser.of(closure, node))[0]


@dataclass
class _ByUser:
    """The closure's tables keyed by (statement, ...), by statement: looked up once per
    statement, where a walk of each table per statement was quadratic (a closure of vllm's
    holds 6,658 statements)."""

    refs: dict[NodeId, list[tuple[str, tuple]]] = field(default_factory=dict)
    early: dict[NodeId, list[tuple[str, tuple]]] = field(default_factory=dict)
    guarded: dict[NodeId, list[tuple[int, str, tuple | None]]] = field(default_factory=dict)
    unsure: dict[NodeId, list[tuple[int, str, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, closure: Closure, only: NodeId | None = None) -> _ByUser:
        """The tables of ``closure`` (of the statement ``only`` alone, where given)."""
        by = cls()
        for table, into in ((closure.refs, by.refs), (closure.early_refs, by.early)):
            for (user, name), key in table.items():
                if only is None or user == only:
                    into.setdefault(user, []).append((name, key))
        for (user, line, bound), key in closure.guarded_imports.items():
            if only is None or user == only:
                by.guarded.setdefault(user, []).append((line, bound, key))
        for (user, line, bound), message in closure.unsure_imports.items():
            if only is None or user == only:
                by.unsure.setdefault(user, []).append((line, bound, message))
        return by


def _statement_text(closure: Closure, node: NodeId, by_user: _ByUser,
                    nested: dict[int, tuple[str, str]] | None = None,
                    more_unsure: dict[tuple[int, str], str] | None = None,
                    runs: dict[int, tuple[str, ...]] | None = None
                    ) -> tuple[str, list[str]]:
    ms = closure.modules[node[0]]
    st = ms.stmts[node[1]]
    text = ms.stmt_text(st)
    renames: dict[str, str] = {}
    for name in st.binds:
        out = closure.out_names.get(("def", node[0], name))
        if out and out != name:
            renames[name] = out
    for name, key in by_user.refs.get(node, ()):
        out = closure.out_names.get(key)
        if out and out != name:
            renames[name] = out
    fake = closure.relocated_files.get(node[0])
    if fake is not None and "__file__" in text:
        # upstream's path in the folder beside the file laid out as its tree (engine.resolve,
        # ``relocations``): from there the statement reaches the files above its module
        renames["__file__"] = (
            '__import__("os").path.join(__import__("os").path.dirname(__import__("os").path'
            f'.abspath(__file__)), {fake!r})')
    doc = _module_docstring(ms) if "__doc__" in text and st.kind != "class" else None
    if doc is not None and "__doc__" in ms.uses(st).load | ms.uses(st).lazy:
        # ``_doc_template = __doc__`` (pyro/settings.py): the module's docstring, which the
        # generated file, whose docstring is none, does not have
        renames["__doc__"] = repr(doc)
    chains = {c: closure.out_names[k] for c, k in closure.chains.get(node, {}).items()
              if k in closure.out_names}
    early = {name: closure.out_names[key] for name, key in by_user.early.get(node, ())
             if key in closure.out_names}
    guarded = {}
    for line, bound, key in by_user.guarded.get(node, ()):
        guarded[(line - st.line + 1, bound)] = (
            "" if key == UNUSED else closure.out_names.get(key) if key else None)
    unsure = {(line - st.line + 1, bound): message
              for line, bound, message in by_user.unsure.get(node, ())}
    unsure.update(more_unsure or {})
    entry = closure.entries[node[0]]
    home = (entry.module, entry.facts.is_package) if st.kind != "import" else None
    listed: list[str] = []  # the rewrites made before libcst's
    if node in closure.emptied_locations:
        text, listed = emptied_lists(text, closure.emptied_locations[node],
                                     inert=node in closure.registry_scopes)
    scope = closure.registry_scopes.get(node)
    if scope is not None:
        text, pinned = pin_scope(text, scope)
        listed += pinned
    edits = ImportEdits(guarded, unsure, nested or {}, runs or {})
    # a statement with no annotation has none to quote: parsing it to find none cost
    # tensordict's first block a third of its rewrites
    quote = node[0] in closure.quoted_annotations and annotated(st.node)
    out, log = rewrite_statement(text, renames, chains, edits, early, home, quote=quote,
                                 typing=ms.typing_names)
    return out, [*listed, *log]


def _module_docstring(ms: ModuleSource) -> str | None:
    """The module's docstring as written upstream (what its ``__doc__`` holds), if any."""
    first = ms.stmts[0].node if ms.stmts else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
            isinstance(first.value.value, str):
        return first.value.value
    return None


def _import_section(future: list[str], externals: list[ExternalImport]) -> str:
    groups: dict[str, list[str]] = {"future": [], "stdlib": [], "third": []}
    if future:
        groups["future"].append(f"from __future__ import {', '.join(sorted(future))}")
    froms: dict[tuple[str, str], list[str]] = {}
    plain: dict[str, set[str]] = {"stdlib": set(), "third": set()}
    for imp in externals:
        group = "stdlib" if imp.module.split(".")[0] in STDLIB else "third"
        if imp.module == "__future__":
            continue
        if imp.name is None:
            plain[group].add(imp.text())
        else:
            alias = f"{imp.name} as {imp.asname}" if imp.asname else imp.name
            froms.setdefault((group, imp.module), []).append(alias)
    for group in ("stdlib", "third"):
        lines = sorted(plain[group])
        for (g, module), names in sorted(froms.items()):
            if g == group:
                lines.append(f"from {module} import {', '.join(sorted(set(names)))}")
        groups[group] = lines
    return "\n\n".join("\n".join(v) for v in groups.values() if v) + ("\n" if any(
        groups.values()) else "")


def _header(closure: Closure, definitions: list[Definition], sources: dict[str, dict],
            notes: list[str]) -> str:
    b = closure.block
    out = [
        f"# Generated by nnrag {__version__}: the block `{b.qualname}` and every definition it",
        "# needs, copied from upstream; only the rewrites listed below were made.",
        f"# block: {b.key} ({b.category})",
    ]
    for name in sorted({d.source for d in definitions}):
        info = sources.get(name, {})
        at = info.get("commit") or info.get("version") or "unversioned"
        under = (f" (paths below are under its {info['import_root']}/)"
                 if info.get("import_root") else "")
        out.append(f"# source: {name} {info.get('origin', '')} @ {at}{under}")
    out.append("# definitions (path, sha1: first-last line name):")
    by_file: dict[tuple[str, str, str], list[Definition]] = {}
    for d in definitions:
        by_file.setdefault((d.source, d.relpath, d.sha1), []).append(d)
    for (_, relpath, sha1), defs in sorted(by_file.items()):
        spans: list[list] = []  # [first, last, names]; nameless statements in a row as one
        for d in sorted(defs, key=lambda d: d.line):
            if spans and not d.names and not spans[-1][2] and d.line == spans[-1][1] + 1:
                spans[-1][1] = d.end_line
            else:
                spans.append([d.line, d.end_line, d.names])
        items = [f"{a}-{b} {','.join(names) or '-'}" for a, b, names in spans]
        out.extend(_wrap(f"#   {relpath}, {sha1[:12]}: ", items))
    rewrites = [f"{d.relpath}:{d.line}: {r}" for d in definitions for r in d.rewrites]
    if rewrites:
        out.append("# rewrites:")
        out.extend(f"#   {r}" for r in rewrites)
    if closure.unresolved:
        out.append("# unresolved: " + ", ".join(f"{n} ({w})" for n, w in closure.unresolved))
    for note in notes:
        out.append(f"# note: {note}")
    return "\n".join(out) + "\n"


def _wrap(prefix: str, items: list[str], width: int = 99) -> list[str]:
    lines, cur = [], prefix
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else "")
        if len(cur) + len(piece) > width and cur.strip("# ") and cur != prefix:
            lines.append(cur.rstrip())
            cur = "#     "
        cur += piece
    lines.append(cur.rstrip())
    return lines


def _unique_deps(closure: Closure):
    seen = set()
    for d in closure.deps:
        k = (d.name, d.kind, d.target)
        if k not in seen:
            seen.add(k)
            yield d
