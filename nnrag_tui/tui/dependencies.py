"""The dependency tree of a block, as the tree pane shows it: the target, what it uses, what
those use, and so on. Built from the resolver's ``Closure`` (its ``deps`` edges, statement by
statement); pure Python, free of Textual.

Each node says what a name is (class, function, constant, statement, import, unresolved), how
the resolver found it (local, import, re-export, star, attribute, guarded, registry, ...) and
with what confidence. Under each definition, external imports are grouped in one node and
builtins are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nnrag_tui.engine.moduleobject import IMPORT_TABLE_KIND, KIND

if TYPE_CHECKING:
    from nnrag_tui.engine.closure import Closure, Dependency, NodeId

STMT_KINDS = {"class": "class", "function": "function", "assign": "constant",
              "compound": "statement", KIND: "module", IMPORT_TABLE_KIND: "function"}


@dataclass(frozen=True)
class DepNode:
    name: str  # the name as used (or the block's name at the root)
    kind: str  # class | function | constant | statement | import | unresolved | externals
    how: str = ""
    confidence: float | None = None
    target: str = ""  # qualified name, import line, or where an unresolved name is used
    nodes: tuple[NodeId, ...] = ()  # the statements a definition stands for
    user: NodeId | None = None  # the statement that uses the name
    note: str = ""
    items: tuple[DepNode, ...] = field(default=(), compare=False)  # an externals group's

    @property
    def expandable(self) -> bool:
        return bool(self.nodes) or bool(self.items)


def confidence_text(c: float | None) -> str:
    if c is None:
        return ""
    return f"{c:.2f}".rstrip("0").rstrip(".") if c < 1 else "1.0"


class DependencyGraph:
    def __init__(self, closure: Closure) -> None:
        self.closure = closure
        self.by_user: dict[NodeId, list[Dependency]] = {}
        for d in closure.deps:
            self.by_user.setdefault(d.user, []).append(d)
        block = closure.block
        mod = (block.source, block.module)
        top = closure.target_name
        roots = tuple(n for n in closure.nodes if n[0] == mod and top in closure.stmt(n).binds)
        self.root = DepNode(block.name, "class", "target", 1.0, block.full_name, roots)

    def kind_of(self, nodes: tuple[NodeId, ...]) -> str:
        for n in nodes:
            try:
                return STMT_KINDS.get(self.closure.stmt(n).kind, "statement")
            except (KeyError, IndexError):
                continue
        return "statement"

    def children(self, node: DepNode) -> list[DepNode]:
        """What ``node`` uses: definitions (by name), unresolved names, then one group of
        external imports. A definition's statements that use each other are not repeated."""
        if node.items:
            return list(node.items)
        own = set(node.nodes)
        defs: dict[tuple, DepNode] = {}
        unresolved: dict[str, DepNode] = {}
        externals: dict[str, DepNode] = {}
        for n in node.nodes:
            for d in self.by_user.get(n, ()):
                if d.kind == "definition":
                    targets = tuple(t for t in d.nodes if t not in own)
                    if not targets:
                        continue  # the statement's own other half (same name, same module)
                    key = (d.name, d.target)
                    if key not in defs:
                        defs[key] = DepNode(d.name, self.kind_of(targets), d.how, d.confidence,
                                            d.target, targets, d.user, d.note)
                elif d.kind == "external":
                    externals.setdefault(d.target, DepNode(
                        d.name, "import", d.how, d.confidence, d.target, (), d.user, d.note))
                elif d.kind == "unresolved":
                    where = self.where(d.user)
                    unresolved.setdefault(d.name, DepNode(
                        d.name, "unresolved", d.how, d.confidence, where, (), d.user, d.note))
        out = sorted(defs.values(), key=lambda x: (x.name.lower(), x.target))
        out += sorted(unresolved.values(), key=lambda x: x.name.lower())
        if externals:
            items = tuple(sorted(externals.values(), key=lambda x: x.target))
            out.append(DepNode("externals", "externals", items=items))
        return out

    def where(self, node: NodeId | None) -> str:
        if node is None:
            return ""
        try:
            entry = self.closure.entries[node[0]]
            return f"{entry.module}:{self.closure.stmt(node).line}"
        except (KeyError, IndexError):
            return ""

    def source(self, node: DepNode) -> Snippet | None:
        """What selecting ``node`` shows: its statements with their upstream line numbers, or
        the import line(s)."""
        c = self.closure
        if node.kind == "externals":
            return Snippet(f"externals of {node.user and self.where(node.user) or 'the block'}",
                           "external imports, kept as imports",
                           ((0, "\n".join(i.target for i in node.items)),))
        if node.kind == "import":
            return Snippet(node.name, f"external import ({node.how})", ((0, node.target),))
        stmts = node.nodes
        if node.kind == "unresolved":
            stmts = (node.user,) if node.user is not None else ()
        chunks: list[tuple[int, str]] = []
        where = ""
        for n in stmts:
            try:
                st = c.stmt(n)
                ms = c.modules[n[0]]
                entry = c.entries[n[0]]
            except (KeyError, IndexError):
                continue
            if st.kind in (KIND, IMPORT_TABLE_KIND):  # not upstream text: as the file has it
                from nnrag_tui.engine.generate import statement_text  # loaded on first use

                where = where or (
                    f"made by nnrag: the module {entry.module}, used as a value"
                    if st.kind == KIND else "made by nnrag: `importlib.import_module`, "
                    "returning the modules the file holds")
                chunks.append((0, statement_text(c, n).rstrip("\n")))
                continue
            if not chunks:
                where = f"{entry.source} · {entry.facts.relpath}:{st.line}-{st.end_line}"
            chunks.append((st.line, ms.stmt_text(st).rstrip("\n")))
        if not chunks:
            return None
        if node.kind == "unresolved":
            where = f"{node.name} is used here and defined nowhere · {where}"
        return Snippet(node.name, where, tuple(chunks))


@dataclass(frozen=True)
class Snippet:
    """Source to show: chunks of (first line number, or 0 for none; text)."""

    title: str
    where: str
    chunks: tuple[tuple[int, str], ...]

    @property
    def text(self) -> str:
        return "\n\n".join(t for _, t in self.chunks)
