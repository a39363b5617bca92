"""Definitions the closure holds only for names that ``if TYPE_CHECKING:`` imports bind: they go
inside an ``if TYPE_CHECKING:`` of their own, as upstream has them, never run.

nerfstudio's ``engine/callbacks.py`` has ``if TYPE_CHECKING: from nerfstudio.engine.trainer
import Trainer`` for one annotation, ``trainer: "Optional['Trainer']"``. Upstream never imports
the trainer as its model modules import. A file that defines ``Trainer`` at the top level, so
that the annotation resolves, runs the trainer's module and what it imports: its viewer, and the
viewer's ``import splines``. Without splines that file fails to import where upstream's modules
do not.

A statement is typing-only when every path to it from the block passes through such an import
(the edge ``Dependency.typing_only``: the import in the guard's body, or a string annotation's
``adi.Instance`` read through ``if TYPE_CHECKING: from pkg import instance as adi``); a
statement that something running reaches stays at the top level. The typing-only statements go
as one group, where the last of them was, after the external imports only they read, inside
``if TYPE_CHECKING:``: the names stay defined for readers of the file and for type checkers
(and pyflakes), and the file runs what upstream runs. As upstream, ``typing.get_type_hints``
cannot resolve such an annotation.
"""

from __future__ import annotations

from dataclasses import dataclass

from nnrag_tui.engine.closure import Closure, Dependency, ExternalImport, NodeId

_TC = ExternalImport("typing", "TYPE_CHECKING", None)


@dataclass
class TypingGroup:
    nodes: list[NodeId]  # in emission order; the last one's place is the group's
    externals: list[str]  # identities of the external imports only they read
    guard: str  # what the ``if`` tests: ``TYPE_CHECKING`` as the file binds it
    sites: list[str]  # ``path:line`` of the statements whose such imports lead to them
    # the import of ``TYPE_CHECKING`` the file needs for that, where it has none
    guard_import: ExternalImport | None = None

    def note(self) -> str:
        """The header's line on each of its statements."""
        more = f" and {len(self.sites) - 1} more" if len(self.sites) > 1 else ""
        return (f"indented, inside `if {self.guard}:`: only imports under one lead to it "
                f"({self.sites[0]}{more})")


def typing_only(deps: list[Dependency], nodes: list[NodeId], block: set[NodeId]
                ) -> frozenset[NodeId]:
    """The statements of ``nodes`` every path from the ``block``'s statements to which passes
    through an edge of ``Dependency.typing_only``."""
    heads = {n for d in deps if d.typing_only for n in d.nodes}
    if not heads:
        return frozenset()
    edges: dict[NodeId, list[tuple[NodeId, bool]]] = {}
    for d in deps:
        for n in d.nodes:
            edges.setdefault(d.user, []).append((n, d.typing_only))
    reached = _reach(heads, edges, typing_edges=True)
    # what no such edge leads to is there for its own reasons (a registration, say), and runs
    running = {n for n in nodes if n not in reached or n in block}
    return frozenset(reached - _reach(running, edges, typing_edges=False))


def _reach(start: set[NodeId], edges: dict[NodeId, list[tuple[NodeId, bool]]],
           typing_edges: bool) -> set[NodeId]:
    seen, todo = set(start), list(start)
    while todo:
        for n, typing in edges.get(todo.pop(), ()):
            if n not in seen and (typing_edges or not typing):
                seen.add(n)
                todo.append(n)
    return seen


def typing_group(closure: Closure, ext_users: dict[str, set[NodeId]]) -> TypingGroup | None:
    """The group of the closure's typing-only statements, with the external imports only they
    read; None where there are none."""
    nodes = closure.typing_only
    if not nodes:
        return None
    # (not the import the guard reads, should only they read it too)
    externals = sorted(i for i, users in ext_users.items()
                       if i in closure.externals and users and users <= nodes
                       and i not in (_TC.identity, "typing"))
    ordered = [n for n in closure.nodes if n in nodes]
    sites = sorted({(closure.entries[d.user[0]].facts.relpath, closure.stmt(d.user).line)
                    for d in closure.deps if d.typing_only and d.user not in nodes})
    where = [f"{path}:{line}" for path, line in sites]
    tc = closure.externals.get(_TC.identity)
    if tc is not None:
        return TypingGroup(ordered, externals, tc.bound, where)
    typing = closure.externals.get("typing")
    if typing is not None:
        return TypingGroup(ordered, externals, f"{typing.bound}.TYPE_CHECKING", where)
    taken = set(closure.out_names.values()) | {e.bound for e in closure.externals.values()}
    if _TC.bound in taken:  # a definition of that name: the guard needs no name of its own
        return TypingGroup(ordered, externals, '__import__("typing").TYPE_CHECKING', where)
    return TypingGroup(ordered, externals, _TC.bound, where, _TC)
