"""What upstream runs along with a module: importing ``pyro.nn.module`` first runs
``pyro/__init__.py``, which imports ``pyro.poutine``, whose ``__init__`` imports
``pyro.poutine.util``, whose ``settings.register("validate_poutine", ...)`` fills the registry
that ``pyro.settings.get("validate_poutine")`` in ``pyro/nn/module.py`` reads. The block never
imports ``pyro.poutine.util`` itself, so only this walk finds that registration.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from nnrag_tui.engine.bindings import ModuleEntry, ModuleIndex

Edges = dict[tuple[str, str], list[ModuleEntry]]


def imported_along(index: ModuleIndex, start: Iterable[ModuleEntry], edges: Edges
                   ) -> dict[tuple[str, str], list[str]]:
    """Every corpus module of the same source that importing the ``start`` modules runs
    (their packages' ``__init__`` and, transitively, what each imports at module level,
    guarded imports included, ``if TYPE_CHECKING:`` ones not), each with the chain of module
    names that leads to it from a start module. ``edges`` caches each module's direct ones."""
    seen: dict[tuple[str, str], list[str]] = {}
    queue: deque[ModuleEntry] = deque()
    for e in sorted(start, key=lambda e: e.key):
        if e.key not in seen:
            seen[e.key] = [e.module]
            queue.append(e)
    while queue:
        e = queue.popleft()
        chain = seen[e.key]
        out = edges.get(e.key)
        if out is None:
            out = edges[e.key] = _imports_run(index, e)
        for found in out:
            if found.key not in seen:
                seen[found.key] = [*chain, found.module]
                queue.append(found)
    return seen


def _imports_run(index: ModuleIndex, e: ModuleEntry) -> list[ModuleEntry]:
    """The corpus modules of ``e``'s source that importing ``e`` runs directly: its
    packages, and what its module-level imports name (with their packages)."""
    modules = _runs_first(e.module)
    for rec in e.facts.imports:
        if rec.guard.kind == "type_checking" or not rec.target:
            continue
        for target in [rec.target] + ([f"{rec.target}.{rec.name}"] if rec.name else []):
            modules += [*_runs_first(target), target]
    out: dict[tuple[str, str], ModuleEntry] = {}
    for module in modules:
        found = index.find_module(module, e.source)
        if found is not None and found.source == e.source:
            out.setdefault(found.key, found)
    return list(out.values())


def _runs_first(module: str) -> list[str]:
    """The packages Python imports before ``module``: ``a`` and ``a.b`` for ``a.b.c``."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]
