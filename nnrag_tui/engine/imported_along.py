"""What upstream runs along with a module: importing ``pyro.nn.module`` first runs
``pyro/__init__.py``, which imports ``pyro.poutine``, whose ``__init__`` imports
``pyro.poutine.util``, whose ``settings.register("validate_poutine", ...)`` fills the registry
that ``pyro.settings.get("validate_poutine")`` in ``pyro/nn/module.py`` reads. The block never
imports ``pyro.poutine.util`` itself, so only this walk finds that registration.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable

from nnrag_tui.engine.bindings import ModuleEntry, ModuleIndex

Edges = dict[tuple[str, str], list[ModuleEntry]]


# which guarded module-level imports a walk follows (engine.facts.Guard.kind): all, those under
# no ``if`` (a ``try`` or ``with`` taken to run through), or only those under no guard at all;
# ``if TYPE_CHECKING:`` never
ALL, NO_IF, UNGUARDED = "all", "no-if", "unguarded"


def follows(kind: str, guards: str) -> bool:
    """Whether a walk following ``guards`` follows an import under a guard of ``kind``."""
    if kind == "type_checking":
        return False
    return guards == ALL or not kind or guards == NO_IF and kind != "if"


def imported_along(index: ModuleIndex, start: Iterable[ModuleEntry], edges: Edges,
                   is_external: Callable[[str], bool], guards: str = ALL
                   ) -> dict[tuple[str, str], list[str]]:
    """Every corpus module that importing the ``start`` modules runs (their packages'
    ``__init__`` and, transitively, what each imports at module level, guarded imports
    included, ``if TYPE_CHECKING:`` ones not), each with the chain of module names that leads
    to it from a start module. An import leads into another repository of the corpus where the
    importing module's own repository has no module of that name, as engine.bindings resolves
    it: mmdet's ``from mmcv.ops import ...`` runs ``mmcv/ops/__init__.py``, which registers
    ``DCNv2``. ``edges`` caches each module's direct ones, through the imports ``guards``
    follows: ``UNGUARDED``, only those under no ``try``, ``if`` or ``with``, which upstream's
    import certainly runs; ``NO_IF``, not those under an ``if`` either, which upstream runs
    only where its condition holds (bitsandbytes' ``if torch.cuda.is_available(): from
    .backends.cuda import ops``)."""
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
            out = edges[e.key] = _imports_run(index, e, is_external, guards)
        for found in out:
            if found.key not in seen:
                seen[found.key] = [*chain, found.module]
                queue.append(found)
    return seen


def _imports_run(index: ModuleIndex, e: ModuleEntry, is_external: Callable[[str], bool],
                 guards: str = ALL) -> list[ModuleEntry]:
    """The corpus modules that importing ``e`` runs directly: its packages, and what its
    module-level imports name (with their packages), from ``e``'s own source where it has
    them (only the imports ``guards`` follows)."""
    modules = _runs_first(e.module)
    for rec in e.facts.imports:
        if not rec.target or not follows(rec.guard.kind, guards):
            continue
        for target in [rec.target] + ([f"{rec.target}.{rec.name}"] if rec.name else []):
            modules += [*_runs_first(target), target]
    out: dict[tuple[str, str], ModuleEntry] = {}
    for module in modules:
        if is_external(module):
            continue
        found = index.find_imported(module, e)
        if found is not None:
            out.setdefault(found.key, found)
    return list(out.values())


def _runs_first(module: str) -> list[str]:
    """The packages Python imports before ``module``: ``a`` and ``a.b`` for ``a.b.c``."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


class RunOrder:
    """When upstream's import of one module runs each statement of the corpus modules it
    imports, as far as module-level imports tell: ``import a.b.c`` runs ``a``, then ``a.b``,
    then ``a.b.c``, and each module's statements run in line order, an import's whole module
    before the statements below it. mmcv's ``conv.py`` registers ``Conv3d`` before
    ``wrappers.py`` registers its own ``Conv3d`` with ``force=True``, as ``mmcv/cnn/bricks/
    __init__.py`` imports ``conv`` first."""

    def __init__(self, index: ModuleIndex, start: ModuleEntry,
                 is_external: Callable[[str], bool],
                 steps: dict[tuple[str, str], list[tuple[str, object]]] | None = None) -> None:
        """``steps``: each module's steps, kept across the run orders of one index and
        ``is_external`` (the same modules' steps, asked again for each start module)."""
        self.index = index
        self.is_external = is_external
        self._steps_of = {} if steps is None else steps
        # module -> (first line, position): its statements from that line on run at position
        self.marks: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._run(start)

    def position(self, key: tuple[str, str], line: int) -> tuple[int, int] | None:
        """A sort key for the statement at ``line`` of module ``key``; None where importing
        the start module does not run that module."""
        marks = self.marks.get(key)
        if not marks:
            return None
        i = bisect_right(marks, (line, float("inf"))) - 1
        return (marks[max(i, 0)][1], line)

    def _steps(self, e: ModuleEntry) -> list[tuple[str, object]]:
        """What running ``e`` does, in order: run its packages, begin, then for each import
        run its modules and mark the line after it. Not to be changed."""
        hit = self._steps_of.get(e.key)
        if hit is None:
            hit = self._steps_of[e.key] = self._own_steps(e)
        return hit

    def _own_steps(self, e: ModuleEntry) -> list[tuple[str, object]]:
        steps: list[tuple[str, object]] = [("run", m) for m in self._found(_runs_first(e.module), e)]
        steps.append(("begin", None))
        for rec in sorted(e.facts.imports, key=lambda r: r.line):
            if rec.guard.kind == "type_checking" or not rec.target:
                continue
            targets = [*_runs_first(rec.target), rec.target]
            if rec.name:
                targets.append(f"{rec.target}.{rec.name}")
            steps += [("run", m) for m in self._found(targets, e)]
            steps.append(("mark", rec.end_line + 1))
        return steps

    def _found(self, modules: list[str], importer: ModuleEntry) -> list[ModuleEntry]:
        """The corpus modules of these names, as ``importer``'s own imports resolve them
        (engine.bindings)."""
        out: list[ModuleEntry] = []
        for module in modules:
            if self.is_external(module):
                continue
            found = self.index.find_imported(module, importer)
            if found is not None and found not in out:
                out.append(found)
        return out

    def _run(self, start: ModuleEntry) -> None:
        """Python's import, without recursion (import chains can be long): a module begins
        once; a frame asked to run a module already begun (an import cycle, or a package
        whose ``__init__`` imported it meanwhile) goes on without it."""
        counter = 0
        stack: list[tuple[ModuleEntry, list[tuple[str, object]], int]] = [
            (start, self._steps(start), 0)]
        while stack:
            e, steps, i = stack.pop()
            if i >= len(steps):
                continue
            kind, arg = steps[i]
            if kind == "begin" and e.key in self.marks:
                continue  # it ran meanwhile, while its packages were imported
            stack.append((e, steps, i + 1))
            if kind == "run":
                m = arg
                assert isinstance(m, ModuleEntry)
                if m.key not in self.marks:
                    stack.append((m, self._steps(m), 0))
            elif kind == "begin":
                counter += 1
                self.marks[e.key] = [(0, counter)]
            elif e.key in self.marks:  # "mark": what follows an import runs after its module
                counter += 1
                self.marks[e.key].append((int(arg), counter))  # type: ignore[arg-type]
