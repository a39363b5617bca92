"""What the resolver finds for one block: the statements of its dependency closure, the edges
between them (each with how it was resolved), the external imports and the names the file gives
each binding. ``engine.resolve`` builds it; ``engine.generate`` writes it out."""

from __future__ import annotations

from dataclasses import dataclass, field

from nnrag_tui.engine.bindings import ModuleEntry
from nnrag_tui.engine.facts import Block
from nnrag_tui.engine.modsource import ModuleSource, TopStmt

# packages never inlined, also where their own source is the corpus
ALWAYS_EXTERNAL = frozenset({"torch"})
NodeId = tuple[tuple[str, str], int]  # ((source, module), statement index)
BindKey = tuple  # ("def", (source, module), name) | ("ext", identity)
UNUSED: BindKey = ("unused",)  # an import inside a function whose name nothing there reads


@dataclass(frozen=True)
class ExternalImport:
    """One external import in original form: ``import module [as asname]`` or
    ``from module import name [as asname]``."""

    module: str
    name: str | None
    asname: str | None

    @property
    def bound(self) -> str:
        if self.asname:
            return self.asname
        return self.name if self.name is not None else self.module.split(".")[0]

    @property
    def identity(self) -> str:
        """What the bound name refers to; two imports with one identity bind the same object."""
        if self.name is not None:
            return f"{self.module}.{self.name}"
        return self.module if self.asname else self.module.split(".")[0]

    def with_bound(self, bound: str) -> ExternalImport:
        default = self.name if self.name is not None else (
            self.module if "." not in self.module else None)
        if self.name is None and "." in self.module and self.asname is None:
            # ``import a.b`` binds ``a``: renaming it needs ``import a as x``.
            return ExternalImport(self.module.split(".")[0], None, bound)
        return ExternalImport(self.module, self.name, None if bound == default else bound)

    def text(self) -> str:
        alias = f" as {self.asname}" if self.asname else ""
        if self.name is None:
            return f"import {self.module}{alias}"
        return f"from {self.module} import {self.name}{alias}"


@dataclass(frozen=True)
class Dependency:
    """One resolved (or unresolved) name use: an edge of the dependency graph."""

    user: NodeId
    name: str
    kind: str  # definition | external | builtin | unresolved
    target: str  # qualified name of the definition, the external import, or ""
    how: str  # local | import | re-export | star | attribute | builtin | heuristic | guarded |
    # local-import (imported inside a function)
    confidence: float
    load: bool  # needed while the module executes (orders definitions)
    nodes: tuple[NodeId, ...] = ()
    note: str = ""
    # through an ``if TYPE_CHECKING:`` import, which never runs (engine.typing_only)
    typing_only: bool = False


@dataclass
class Closure:
    block: Block
    nodes: list[NodeId]  # in emission order
    modules: dict[tuple[str, str], ModuleSource]
    entries: dict[tuple[str, str], ModuleEntry]
    deps: list[Dependency]
    externals: dict[str, ExternalImport]  # identity -> import (with its final bound name)
    out_names: dict[BindKey, str]
    refs: dict[tuple[NodeId, str], BindKey]  # (statement, name used) -> binding
    chains: dict[NodeId, dict[str, BindKey]]  # statement -> dotted chain -> binding
    guarded_imports: dict[tuple[NodeId, int, str], BindKey | None]  # (stmt, line, bound)
    unresolved: list[tuple[str, str]] = field(default_factory=list)  # (name, "module:line")
    notes: list[str] = field(default_factory=list)  # ambiguous picks and other warnings
    future: list[str] = field(default_factory=list)
    # (statement, name) -> binding, for reads that run before the statement binds that very
    # name (``class Output(Output):``); ``refs`` holds the statement's own uses of it
    early_refs: dict[tuple[NodeId, str], BindKey] = field(default_factory=dict)
    # files upstream finds beside a module through ``__file__``: (path on disk, path from the
    # generated file's folder), which go beside the file (engine.modulefiles)
    module_files: list[tuple[str, str]] = field(default_factory=list)
    # the guarded or function-local imports of ``guarded_imports`` whose definition its module
    # may leave undefined -> the ImportError upstream's import then raises
    unsure_imports: dict[tuple[NodeId, int, str], str] = field(default_factory=dict)
    # statement -> the lists of corpus module names it hands a definition that imports them
    # by name later, made empty in the file (engine.import_locations)
    emptied_locations: dict[NodeId, set[tuple[str, ...]]] = field(default_factory=dict)
    # statement creating a registry that infers its scope from the creating module's name ->
    # the scope written into the call in the file, None where the call gives one
    # (engine.registry_scope)
    registry_scopes: dict[NodeId, str | None] = field(default_factory=dict)
    # the packages imported, never inlined: torch and the sources marked external
    imported_packages: frozenset[str] = ALWAYS_EXTERNAL
    # modules whose ``from __future__ import annotations`` the file cannot have (others'
    # definitions evaluate their annotations): their annotations are written as strings
    quoted_annotations: frozenset[tuple[str, str]] = frozenset()
    # modules whose statements reach above their folder through ``__file__`` -> the path
    # their ``__file__`` is here, from the file's folder (``<source>.files/<upstream path>``)
    relocated_files: dict[tuple[str, str], str] = field(default_factory=dict)
    # statements only ``if TYPE_CHECKING:`` imports lead to, which never run
    # (engine.typing_only)
    typing_only: frozenset[NodeId] = frozenset()
    # module imported only inside functions -> (the index in ``notes`` of the header's note
    # on its module-level code, that code's statements), which may run at the first such
    # import (engine.deferred)
    deferred_code: dict[tuple[str, str], tuple[int, tuple[NodeId, ...]]] = \
        field(default_factory=dict)
    # (statement, first line of a statement inside one of its functions) -> the definition a
    # chain there reads through a module ``__getattr__``, which imports its module then: a
    # site of engine.deferred, as an import inside a function is (engine.lazyattr)
    lazy_reads: dict[tuple[NodeId, int], BindKey] = field(default_factory=dict)
    # the modules of the closure that upstream's import of the block's module certainly runs
    # (through imports under no guard: engine.imported_along), whatever imports them inside
    # functions: their code runs as the file is imported
    run_at_import: frozenset[tuple[str, str]] = frozenset()

    def stmt(self, node: NodeId) -> TopStmt:
        return self.modules[node[0]].stmts[node[1]]

    @property
    def target_name(self) -> str:
        return self.block.qualname.split(".")[0]

