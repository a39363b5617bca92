"""The minimal rewrites of an upstream statement, through libcst so that everything else
(comments, decorators, formatting) stays byte for byte.

Three kinds: renaming a module-level name (a clash between two definitions, or an alias whose
definition is inlined under its own name), turning ``mod.X`` into ``X`` when ``mod`` is a corpus
module whose ``X`` is inlined, and replacing a guarded import of a corpus name with an
assignment. Only names that resolve to the module scope are touched (scope analysis), never a
local, a parameter, an attribute or a keyword argument.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import GlobalScope, MetadataWrapper, PositionProvider, ScopeProvider


def rewrite_statement(
    text: str,
    renames: dict[str, str],
    chains: dict[str, str],
    guarded: dict[tuple[int, str], str | None],
) -> tuple[str, list[str]]:
    """Returns the rewritten text and one line per rewrite made. ``guarded`` maps (line inside
    the statement, bound name) of an import to the name it should be assigned from (``None``:
    drop it; the definition it imported is already inlined under the bound name)."""
    if not renames and not chains and not guarded:
        return text, []
    wrapper = MetadataWrapper(cst.parse_module(text))
    scopes = wrapper.resolve(ScopeProvider)
    positions = wrapper.resolve(PositionProvider)
    global_scope = next((s for s in set(scopes.values()) if isinstance(s, GlobalScope)), None)
    global_access: set[int] = set()
    name_marks: dict[int, str] = {}
    def_marks: dict[int, str] = {}
    for scope in set(scopes.values()):
        if scope is None:
            continue
        for access in scope.accesses:
            node = access.node
            if not isinstance(node, cst.Name):
                continue
            refs = access.referents
            if refs and not all(isinstance(r.scope, GlobalScope) for r in refs):
                continue
            global_access.add(id(node))
            if node.value in renames:
                name_marks[id(node)] = renames[node.value]
    if global_scope is not None:
        for old, new in renames.items():
            for a in global_scope.assignments[old]:
                node = getattr(a, "node", None)
                if isinstance(node, (cst.ClassDef, cst.FunctionDef)):
                    def_marks[id(node)] = new
                elif isinstance(node, cst.Name):
                    name_marks[id(node)] = new
    log: list[str] = []
    tr = _Rewriter(name_marks, def_marks, chains, global_access, guarded, renames, positions,
                   log)
    out = wrapper.module.visit(tr)
    return out.code, log


def _dotted(node: cst.BaseExpression) -> tuple[str, cst.Name] | None:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts)), node
    return None


def _import_names(node: cst.Import | cst.ImportFrom) -> list[cst.ImportAlias]:
    names = node.names
    return list(names) if not isinstance(names, cst.ImportStar) else []


class _Rewriter(cst.CSTTransformer):
    def __init__(self, name_marks, def_marks, chains, global_access, guarded, renames,
                 positions, log) -> None:
        super().__init__()
        self.name_marks = name_marks
        self.def_marks = def_marks
        self.chains = chains
        self.global_access = global_access
        self.guarded = guarded
        self.renames = renames
        self.positions = positions
        self.log = log

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        new = self.name_marks.get(id(original))
        if new is not None and new != original.value:
            self.log.append(f"renamed `{original.value}` -> `{new}`")
            return updated.with_changes(value=new)
        return updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        new = self.def_marks.get(id(original))
        if new is not None:
            self.log.append(f"renamed class `{original.name.value}` -> `{new}`")
            return updated.with_changes(name=cst.Name(new))
        return updated

    def leave_FunctionDef(self, original: cst.FunctionDef,
                          updated: cst.FunctionDef) -> cst.FunctionDef:
        new = self.def_marks.get(id(original))
        if new is not None:
            self.log.append(f"renamed function `{original.name.value}` -> `{new}`")
            return updated.with_changes(name=cst.Name(new))
        return updated

    def leave_Attribute(self, original: cst.Attribute,
                        updated: cst.Attribute) -> cst.BaseExpression:
        if not self.chains:
            return updated
        d = _dotted(original)
        if d is None:
            return updated
        dotted, root = d
        new = self.chains.get(dotted)
        if new is not None and id(root) in self.global_access:
            self.log.append(f"`{dotted}` -> `{new}` (inlined)")
            return cst.Name(new)
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine):
        if not self.guarded:
            return updated
        line = self.positions[original].start.line
        body: list[cst.BaseSmallStatement] = []
        changed = False
        for small in updated.body:
            if not isinstance(small, (cst.Import, cst.ImportFrom)):
                body.append(small)
                continue
            keep: list[cst.ImportAlias] = []
            assigns: list[cst.BaseSmallStatement] = []
            for alias in _import_names(small):
                bound = (alias.asname.name.value if alias.asname is not None  # type: ignore
                         else cst.helpers.get_full_name_for_node(alias.name) or "")
                if isinstance(small, cst.Import) and alias.asname is None:
                    bound = bound.split(".")[0]
                key = (line, bound)
                if key not in self.guarded:
                    keep.append(alias)
                    continue
                changed = True
                source = self.guarded[key]
                target = self.renames.get(bound, bound)
                if source is not None and source != target:
                    assigns.append(cst.Assign(targets=[cst.AssignTarget(cst.Name(target))],
                                              value=cst.Name(source)))
                    self.log.append(f"guarded import of `{bound}` -> `{target} = {source}` "
                                    f"(inlined)")
                else:
                    self.log.append(f"guarded import of `{bound}` dropped (inlined)")
            if keep:
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                body.append(small.with_changes(names=keep))
            body.extend(assigns)
        if not changed:
            return updated
        if not body:
            body = [cst.Pass()]
        return updated.with_changes(body=body)
