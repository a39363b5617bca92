"""What registers the torch operators a closure reads: its rule over one closure.

A statement that reads ``torch.ops.NS.OP`` (or registers something for an operator itself)
needs the statements of its repository that define that operator and register its kernels,
fake and gradient (engine.torchops finds them), each before it. Those come only from modules
upstream runs where the reader runs; what stays behind, and what no statement defines by name,
is said in the header.

The rule reads and extends the graph of a ``resolve._ClosureBuilder``, which asks it again
with the other rules (engine.side_effects) until none adds a statement.
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING

from nnrag_tui.engine.bindings import ModuleEntry
from nnrag_tui.engine.closure import Dependency, NodeId
from nnrag_tui.engine.imported_along import NO_IF
from nnrag_tui.engine.moduleobject import is_object_key
from nnrag_tui.engine.torchops import op_reads, registration_kinds, torch_defines

if TYPE_CHECKING:
    from nnrag_tui.engine.resolve import _ClosureBuilder

# the order the header names what left-out registrations are (torchops.registration_kinds)
_KIND_ORDER = ("kernel", "fake", "gradient", "autocast rule", "vmap rule", "dispatch rule",
               "registration")


class OpRegistrations:
    """The operator rule over one closure, with what it has read and found already."""

    def __init__(self, builder: _ClosureBuilder) -> None:
        self.b = builder
        self.r = builder.r
        self._ops_scanned = 0  # how much of the builder's ``order`` add read
        # operator -> the statements registering something for it, and whether each defines it
        self._op_nodes: dict[str, list[tuple[NodeId, bool]]] = {}
        # operator no statement of the reader's repository defines by name -> its readers
        self.undefined_ops: dict[str, list[NodeId]] = {}
        # operator -> the modules registering something for it that upstream's import of its
        # reader runs only under an ``if``, left out (_note_left_out), each with that chain
        self.conditional_ops: dict[str, dict[tuple[str, str], list[str]]] = {}
        # operator -> its registrations left out so far (_take), and the statements reading it
        self._left_out: dict[str, list[tuple[ModuleEntry, int]]] = {}
        self._readers: dict[str, list[NodeId]] = {}

    def add(self) -> bool:
        """The statements registering the torch operators that included statements read as
        ``torch.ops.NS.OP`` or register something for themselves (engine.torchops), from the
        reader's repository; each goes before its reader, and after the statements defining
        its operator. A block that calls ``halve``, made by ``@torch.library.custom_op(
        "ns::halve")``, gets what registers its fake and its gradient too
        (``torch.library.register_autograd("ns::halve", ...)``): without them tracing and
        ``backward`` raise where upstream's run. Returns whether any was added."""
        size = len(self.b.order)
        start, self._ops_scanned = self._ops_scanned, size
        for node in self.b.order[start:size]:
            if is_object_key(node[0]):
                continue
            ms = self.b.modules[node[0]]
            st = ms.stmts[node[1]]
            own = {op for op in self.r.ops_registered_at(node) if not op.endswith("::*")}
            reads = op_reads(st.node) if "torch.ops." in ms.stmt_text(st) else frozenset()
            if not own and not reads:
                continue
            registry = self.r.op_registrations(node[0][0])
            for op in sorted(own | reads):
                found = registry.get(op, [])
                if not any(defines for _, _, defines in found):
                    # an extension built for the whole namespace (torchops.built_namespaces)
                    found = [*registry.get(f"{op.partition('::')[0]}::*", ()), *found]
                if not any(defines for _, _, defines in found):
                    # (torchvision's ``register_fake("torchvision::nms")`` is for an operator
                    # its compiled extension defines: without that, registering it fails)
                    if op not in own and not torch_defines(op):
                        self.undefined_ops.setdefault(op, []).append(node)
                    continue
                regs = self._op_nodes.get(op)
                if regs is None:
                    loaded = self._loaded_with(node, found)
                    regs = self._op_nodes[op] = [(self.b.add(entry, i), defines)
                                                 for entry, i, defines in found
                                                 if defines or entry.key in loaded]
                    self._left_out[op] = [(entry, i) for entry, i, defines in found
                                          if not (defines or entry.key in loaded)]
                    self._readers[op] = []
                    defining = tuple(n for n, defines in regs if defines)
                    for n, defines in regs:
                        if not defines:
                            self._depends(n, op, defining)
                elif self._left_out[op]:
                    self._take(op, self._loaded_with(node, found))
                self._note_left_out(node, op)
                if op not in own:
                    self._readers[op].append(node)
                    self._depends(node, op, tuple(n for n, _ in regs))
        for op, left in self._left_out.items():
            if left:  # a module the closure has come to span since
                self._take(op, self.b.modules)
        return len(self.b.order) > size

    def _take(self, op: str, loaded: Container[tuple[str, str]]) -> None:
        """Adds the registrations of ``op`` left out so far whose modules are now ``loaded``:
        for a later reader, or once the closure spans their module. What is added is
        then the same whichever reader or module the closure reached first."""
        left = self._left_out[op]
        taken = [(entry, i) for entry, i in left if entry.key in loaded]
        if not taken:
            return
        self._left_out[op] = [x for x in left if x not in taken]
        regs = self._op_nodes[op]
        defining = tuple(n for n, defines in regs if defines)
        added = []
        for entry, i in taken:
            n = self.b.add(entry, i)
            regs.append((n, False))
            added.append(n)
            self._depends(n, op, defining)
            conditional = self.conditional_ops.get(op, {})
            conditional.pop(entry.key, None)
            if not conditional:
                self.conditional_ops.pop(op, None)
        for reader in self._readers[op]:
            self._depends(reader, op, tuple(added))

    def _depends(self, user: NodeId, op: str, nodes: tuple[NodeId, ...]) -> None:
        """The edge from ``user`` to the statements ``nodes`` defining or registering
        something for operator ``op``: needed as the module runs."""
        self.b.deps.append(Dependency(user, f"torch.ops.{op.replace('::', '.')}", "definition",
                                      op, "registration", 1.0, True, nodes))

    def _loaded_with(self, node: NodeId, found: list[tuple[ModuleEntry, int, bool]]
                     ) -> set[tuple[str, str]]:
        """The modules whose registrations of an operator (``found``) run upstream where
        ``node`` does: those upstream's import of its module runs through imports under no ``if``,
        those the closure spans and those that define the operator. torchrec's
        ``pallas/impl.py`` registers a TPU kernel for ``torchrec::embedding_lookup`` and
        imports jax; its package loads it only on demand, and a block reading the operator
        through ``pallas/ops.py`` runs without it. bitsandbytes' ``__init__`` imports its CUDA
        kernels only ``if torch.cuda.is_available():``, and ``backends/cuda/ops.py`` reads
        ``torch._C._cuda_getCurrentRawStream`` as it loads, which a CPU build of torch has
        not: such a module is left out, as upstream leaves it out where the condition fails,
        and the header says so (``conditional_ops``)."""
        loaded = set(self.r.imported_along_of(self.b.entries[node[0]], NO_IF))
        loaded.update(self.b.modules)
        loaded.update(e.key for e, _, defines in found if defines)
        return loaded

    def _note_left_out(self, node: NodeId, op: str) -> None:
        """The modules left out for ``op`` that upstream's import of ``node``'s module runs
        under an ``if`` (``conditional_ops``), each with the first chain of imports found."""
        along = self.r.imported_along_of(self.b.entries[node[0]])
        for e, _ in self._left_out[op]:
            if e.key in along:
                self.conditional_ops.setdefault(op, {}).setdefault(e.key, along[e.key])

    def note_undefined(self, nodes: list[NodeId]) -> None:
        """Operators read as ``torch.ops.NS.OP`` that no statement of the reader's repository
        defines by name: upstream, its compiled extension defines them (torchvision's
        ``nms``), or a helper that builds the name (spikingjelly's ``_register_dispatch(
        "sj_lif", ...)``, which the file cannot run: the header names that call). Here they
        exist only where that has run: said in the header, as a read at import then raises
        AttributeError."""
        included = set(nodes)
        parts = []
        helped: dict[str, list[str]] = {}  # the helper's call -> the operators it defines
        for op, readers in sorted(self.undefined_ops.items()):
            where = sorted({(self.b.entries[k].facts.relpath, self.b.modules[k].stmts[i].line)
                            for k, i in readers if (k, i) in included})
            if where:
                more = f" and {len(where) - 1} more" if len(where) > 1 else ""
                part = f"{op} ({where[0][0]}:{where[0][1]}{more})"
                ns = op.partition("::")[0]
                calls = self.r.unfollowed_helper_calls(readers[0][0][0]).get(ns)
                if calls:
                    helped.setdefault(self._helper_call(ns, calls), []).append(part)
                else:
                    parts.append(part)
        for call, ops in helped.items():
            many = len(ops) > 1
            self.b.notes.append(
                f"the torch operator{'s' if many else ''} {_listed(ops)} "
                f"{'are' if many else 'is'} defined upstream by {call}, a helper that also "
                "imports modules by a name it computes to its end, which no file can "
                f"hold: that call is not inlined, so here {'they exist' if many else 'it exists'}"
                " only once the call has run (the package installed and imported)")
        if parts:
            many = len(parts) > 1
            shown = ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4
                                            else "")
            self.b.notes.append(
                f"the torch operator{'s' if many else ''} {shown} "
                f"{'are' if many else 'is'} defined by no statement that names "
                f"{'them' if many else 'it'}: upstream, a compiled extension or a helper that "
                f"builds the name defines {'them' if many else 'it'}, so here "
                f"{'they exist' if many else 'it exists'} only once that has run (the package "
                f"that defines {'them' if many else 'it'} installed and imported)")

    def _helper_call(self, ns: str, calls: list[tuple[ModuleEntry, int, str]]) -> str:
        """``name("ns", ...)`` (path:line), and how many more such calls."""
        calls = sorted(calls, key=lambda c: (c[0].facts.relpath, c[1]))
        entry, i, name = calls[0]
        line = self.r.module_source(entry).stmts[i].line
        more = f" and {len(calls) - 1} more" if len(calls) > 1 else ""
        return f'`{name}("{ns}", ...)` ({entry.facts.relpath}:{line}{more})'

    def note_conditional(self, nodes: list[NodeId]) -> None:
        """The registrations for operators the file has (``conditional_ops``) that upstream
        runs only where an ``if`` holds as its package imports, left out: said in one note of
        the header, with what they register (``registration_kinds``) and the chain of imports
        that reaches the first such module."""
        included = set(nodes)
        ops: list[str] = []
        chains: dict[tuple[str, str], list[str]] = {}
        kinds: set[str] = set()
        for op, modules in sorted(self.conditional_ops.items()):
            if any(n in included for n, _ in self._op_nodes.get(op, ())):
                ops.append(op)
                chains.update(modules)
                for entry, i in self._left_out[op]:
                    if entry.key in modules:
                        kinds |= registration_kinds(self.r.module_source(entry).stmts[i].node)
        if not ops:
            return
        paths = sorted((self.b.index.entries[k].facts.relpath, k) for k in chains)
        many, plural = len(paths) > 1, len(ops) > 1
        what = _listed([f"{kind}s" for kind in sorted(kinds, key=_KIND_ORDER.index)])
        self.b.notes.append(
            f"the {what} that {_listed([p for p, _ in paths])} register"
            f"{'' if many else 's'} for the torch operator{'s' if plural else ''} "
            f"{_listed(ops)} are not inlined: upstream's import runs "
            f"{'those modules' if many else 'that module'} only under an `if` (a device or a "
            f"package present; {' -> '.join(chains[paths[0][1]])}), and here "
            f"{'those operators run' if plural else 'the operator runs'} with the kernels the "
            f"file registers")

def _listed(items: list[str], shown: int = 4) -> str:
    """``a, b and c``, or the first ``shown`` and how many more."""
    if len(items) > shown:
        return f"{', '.join(items[:shown])} and {len(items) - shown} more"
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
