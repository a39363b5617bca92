"""The resolver: a block's dependency closure, statement by statement.

Starting from the block's class statement, every module-level name each included statement uses
(``modsource`` gives CPython's own scoping verdict) is followed through that statement's own
module: to statements of the same module, through imports to definitions in other corpus
modules (``bindings``), to external imports (kept in their original form) or to builtins. Every
edge records how it was resolved and its confidence; names that cannot be resolved are reported
with where they occur. The result says which statements to copy, in which order, which
externals to import and which names must be renamed to avoid clashes.
"""

from __future__ import annotations

import ast
import hashlib
import os
import posixpath
import re
from dataclasses import replace
from pathlib import Path

from nnrag_tui.engine import scopes, treewalk
from nnrag_tui.engine.bindings import (
    ModuleEntry,
    ModuleIndex,
    Target,
    binding_import,
    last_plain_import,
    made_at_run_time,
)
from nnrag_tui.engine.closure import (
    ALWAYS_EXTERNAL,
    UNUSED,
    BindKey,
    Closure,
    Dependency,
    ExternalImport,
    NodeId,
)
from nnrag_tui.engine.computed_imports import HeldModules, is_table_key
from nnrag_tui.engine.config_keys import registers_own_name
from nnrag_tui.engine.dynimport import (
    FolderImport,
    folder_imports,
    helper_calls,
    helper_skips_private,
)
from nnrag_tui.engine.emission import emission_order
from nnrag_tui.engine.errors import ResolutionError
from nnrag_tui.engine.extensions import compiled_on_disk
from nnrag_tui.engine.facts import Block, ImportRecord
from nnrag_tui.engine.flow import definitely_bound
from nnrag_tui.engine.import_locations import handed_lists, location_notes
from nnrag_tui.engine.imported_along import (
    ALL,
    NO_IF,
    UNGUARDED,
    Edges,
    RunOrder,
    imported_along,
)
from nnrag_tui.engine.lazyattr import read_sites
from nnrag_tui.engine.modsource import (
    ModuleSource,
    TopStmt,
    bound_only_by_imports,
    demangled,
    evaluates_annotations,
    first_read_line,
    rebound_beside,
)
from nnrag_tui.engine.modulefiles import (
    CLIMBS,
    MAX_SHOWN,
    ModuleFiles,
    included_files,
    is_plain_relative,
    listed,
    shortlist,
    uses_module_file,
)
from nnrag_tui.engine.moduleobject import (
    ANCHOR_NAMES,
    MODULE_OBJECT,
    ModuleObject,
    attribute_reads,
    is_object_key,
    namespace,
    object_key,
    reads_computed_attr,
    reads_resources,
    unsure_members,
)
from nnrag_tui.engine.op_registrations import OpRegistrations
from nnrag_tui.engine.parse import dotted, resolve_relative
from nnrag_tui.engine.registry_scope import scope_registries, shared_tree_clashes
from nnrag_tui.engine.side_effects import SideEffects
from nnrag_tui.engine.torchops import (
    NamespaceHelper,
    may_register,
    module_registrations,
    namespace_helper_calls,
    namespace_parameter,
    op_reads,
)
from nnrag_tui.engine.typing_only import typing_only

# ``sys.modules[name] = module``, as a package aliases its old module paths
_SYS_MODULES_STORE = re.compile(r"\bsys\.modules\[[^\]\n]+\]\s*=(?!=)")


def _reads_operator(ms: ModuleSource, st: TopStmt) -> bool:
    """Whether a module-level statement reads a torch operator of a corpus
    (``torch.ops.NS.OP``, engine.torchops): it needs what registers it to have run."""
    return "torch.ops." in ms.stmt_text(st) and bool(ms.stmt_fact(st, op_reads))


def _packages(modules) -> str:
    """The top-level packages of these modules, as the header names them."""
    return ", ".join(sorted({m.split(".")[0] for m in modules}))


# a bare file name as a literal holds it: ``"yolo26.yaml"``, ``"rtdetr-l.yaml"``
_FILE_NAME = re.compile(r"[A-Za-z0-9_][\w.-]*\.[A-Za-z0-9]{1,8}")


class Resolver:
    def __init__(self, index: ModuleIndex, roots: dict[str, str],
                 external_packages: frozenset[str] = ALWAYS_EXTERNAL) -> None:
        self.index = index
        self.roots = roots
        self.external_packages = external_packages
        self._sources: dict[tuple[str, str], ModuleSource] = {}
        self.module_files = ModuleFiles()
        self.writers: dict[BindKey, list[BindKey]] = {}  # function -> containers it fills
        self.mutators: dict[BindKey, frozenset] = {}  # function -> parameters it changes
        # registry -> the modules of its repository whose statements fill it as they run,
        # outside its own module (SideEffects.span_package_fillers)
        self.load_fillers: dict[BindKey, list[tuple[str, str]]] = {}
        # class (or ("metaclass", class), or ("statement", module, index) of a class statement)
        # -> what creating a subclass (a class, that class) fills: registries by name, and
        # attributes stored through the class made (engine.subclass_hooks)
        self.subclass_fills: dict[object, tuple[tuple[BindKey, ...], frozenset[str]]] = {}
        # module -> (line, what) of its statements importing a folder's modules by name
        self._folder_imports: dict[tuple[str, str], list[tuple[int, FolderImport]]] = {}
        # imported_along.ALL -> module -> the modules importing it runs directly; the same
        # through the imports imported_along.NO_IF and UNGUARDED follow
        self.import_edges: dict[str, Edges] = {ALL: {}, NO_IF: {}, UNGUARDED: {}}
        # (module, statement line) -> the config ``type`` keys it names (engine.config_keys)
        self.type_keys: dict[tuple[tuple[str, str], int], frozenset[str]] = {}
        self._run_orders: dict[tuple[str, str], RunOrder] = {}
        # module -> what running it does (engine.imported_along.RunOrder), shared by the orders
        self._run_steps: dict[tuple[str, str], list[tuple[str, object]]] = {}
        self._along: dict[str, dict[tuple[str, str], dict[tuple[str, str], list[str]]]] = {
            ALL: {}, NO_IF: {}, UNGUARDED: {}}
        self._mentions: dict[tuple[tuple[str, str], str], bool] = {}
        # string -> the pattern of a call with it as first argument (``passes_literal``)
        self._first_arguments: dict[str, re.Pattern[bytes]] = {}
        # module -> its file's bytes, for the cheap tests before parsing (``mentions_any``)
        self._file_data: dict[tuple[str, str], bytes] = {}
        # source -> operator (``NS::OP``) -> the statements registering something for it, and
        # whether each defines it (engine.torchops)
        self._ops: dict[str, dict[str, list[tuple[ModuleEntry, int, bool]]]] = {}
        # source -> (module, statement index) -> the operators that statement registers for
        self._ops_at: dict[str, dict[tuple[tuple[str, str], int], tuple[str, ...]]] = {}
        self._ops_unfollowed: dict[str, dict[str, list[tuple[ModuleEntry, int, str]]]] = {}

    def run_order(self, entry: ModuleEntry) -> RunOrder:
        """The order upstream's import of ``entry`` runs the statements it runs."""
        hit = self._run_orders.get(entry.key)
        if hit is None:
            hit = self._run_orders[entry.key] = RunOrder(self.index, entry, self.is_external,
                                                         self._run_steps)
        return hit

    def imported_along_of(self, entry: ModuleEntry, guards: str = ALL
                          ) -> dict[tuple[str, str], list[str]]:
        """Every corpus module upstream's import of ``entry`` runs, each with its chain of
        imports (engine.imported_along), through the guarded imports ``guards`` follows
        (``UNGUARDED``: those it runs certainly, wherever it imports at all). Cached."""
        cache = self._along[guards]
        hit = cache.get(entry.key)
        if hit is None:
            hit = cache[entry.key] = imported_along(self.index, [entry],
                                                    self.import_edges[guards],
                                                    self.is_external, guards)
        return hit

    def is_external(self, module: str) -> bool:
        """torch is always imported, also when its own source is the corpus, and so are the
        packages of a source the configuration marks external."""
        return module.split(".", 1)[0] in self.external_packages

    def why_imported(self, module: str) -> str:
        """Why a corpus definition of ``module`` is imported rather than inlined."""
        top = module.split(".", 1)[0]
        if top in ALWAYS_EXTERNAL:
            return f"{top} is always imported, never inlined"
        return f"{top} is external in the configuration: imported, never inlined"

    def on_disk(self, module: str) -> bool:
        """Whether a source's tree has the module ``module`` (a file, or a package directory),
        indexed or not."""
        rel = module.replace(".", "/")
        return any(os.path.isfile(f"{root}/{rel}.py") or os.path.isdir(f"{root}/{rel}")
                   for root in self.roots.values() if root)

    def namespace_package(self, module: str) -> tuple[str, ...] | None:
        """The files of a folder with indexed modules but no ``__init__.py`` (a namespace
        package, which binds nothing but its submodules), or None for any other module: a
        name imported from it is not there, upstream either. zetascale's ``zeta/ops`` has
        ``__Init__.py``, an ``__init__.py`` only on a file system that ignores case."""
        if module not in self.index.packages:
            return None
        rel = module.replace(".", "/")
        folders = [f"{root}/{rel}" for root in self.roots.values()
                   if root and os.path.isdir(f"{root}/{rel}")]
        if not folders or any(os.path.isfile(f"{f}/__init__.py") for f in folders):
            return None
        return tuple(sorted(n for f in folders for n in os.listdir(f)))

    def compiled_on_disk(self, module: str) -> bool:
        """Whether a source's tree has ``module`` only as a compiled extension (compressai's
        ``_CXX.cpython-311-x86_64-linux-gnu.so`` in its wheel) or a stub of one
        (engine.extensions)."""
        return compiled_on_disk(self.roots.values(), module)

    def sys_modules_writer(self, module: str) -> str | None:
        """The ``__init__.py`` (its path in the source) of an indexed package above ``module``
        that puts modules into ``sys.modules`` as it runs: fla's ``fla/modules/__init__.py``
        makes ``fla.modules.layernorm`` an alias of ``fla.modules.norm.layernorm`` that way,
        so a module no file defines is not from another version."""
        parts = module.split(".")
        for i in range(len(parts) - 1, 0, -1):
            entry = self.index.find_module(".".join(parts[:i]), None)
            if entry is not None and entry.facts.relpath.endswith("__init__.py") and \
                    _SYS_MODULES_STORE.search(self.module_source(entry).text):
                return entry.facts.relpath
        return None

    def op_registrations(self, source: str) -> dict[str, list[tuple[ModuleEntry, int, bool]]]:
        """The module-level statements of one repository that register torch operators, by
        operator (engine.torchops); its files are read once, and parsed where they may."""
        hit = self._ops.get(source)
        if hit is None:
            hit = self._ops[source] = {}
            at = self._ops_at[source] = {}
            self._ops_unfollowed[source] = {}
            entries = [(key, entry) for key, entry in sorted(self.index.entries.items())
                       if key[0] == source]
            may = {key for key, entry in entries if may_register(self.file_data(entry))}
            helpers = self._namespace_helpers([e for k, e in entries if k in may])
            called = sorted({name for _, name in helpers})
            for key, entry in entries:
                data = self.file_data(entry)
                mine = {}
                if called and any(f"{name}(".encode() in data for name in called):
                    mine = self._helper_names(entry, helpers)
                if key not in may and not mine:
                    continue
                stmts = self.module_source(entry).stmts
                nodes = [st.node for st in stmts]
                followed = {name: h for name, h in mine.items() if h.runnable}
                for st, ops in zip(stmts, module_registrations(nodes, followed)):
                    for op, defines in ops.items():
                        hit.setdefault(op, []).append((entry, st.index, defines))
                    if ops:
                        at[(key, st.index)] = tuple(sorted(ops))
                unfollowed = {name: h for name, h in mine.items() if not h.runnable}
                for i, ns, name in namespace_helper_calls(nodes, unfollowed):
                    self._ops_unfollowed[source].setdefault(ns, []).append((entry, i, name))
        return hit

    def unfollowed_helper_calls(self, source: str
                                ) -> dict[str, list[tuple[ModuleEntry, int, str]]]:
        """By namespace, the module-level statements of one repository that call a helper
        defining operators in it which a file cannot run (torchops.namespace_parameter), each
        with the name called: spikingjelly's ``_register_dispatch("sj_lif", ...)``."""
        self.op_registrations(source)
        return self._ops_unfollowed[source]

    def _namespace_helpers(self, entries: list[ModuleEntry]
                           ) -> dict[tuple[str, str], NamespaceHelper]:
        """(module, name) of each module-level function of ``entries`` that defines operators
        in the namespace it is given, with where it takes it and whether a file can run it
        (torchops.namespace_parameter)."""
        out = {}
        for entry in entries:
            for st in self.module_source(entry).stmts:
                if st.kind == "function":
                    found = namespace_parameter(st.node)
                    if found is not None:
                        out[(entry.module, st.node.name)] = found
        return out

    def _helper_names(self, entry: ModuleEntry,
                      helpers: dict[tuple[str, str], NamespaceHelper]
                      ) -> dict[str, NamespaceHelper]:
        """The names a module binds to such helpers: its own, and those it imports by name
        (``from ..dispatch import _register_dispatch``), under no ``if TYPE_CHECKING:``."""
        out = {name: found for (module, name), found in helpers.items()
               if module == entry.module}
        for bound, records in entry.imports.items():
            for r in records:
                found = helpers.get((r.target, r.name or ""))
                if found is not None and r.guard.kind != "type_checking":
                    out[bound] = found
        return out

    def ops_registered_at(self, node: tuple[tuple[str, str], int]) -> tuple[str, ...]:
        """The operators a module-level statement registers something for (``NS::OP``)."""
        source = node[0][0]
        if source not in self._ops_at:
            self.op_registrations(source)
        return self._ops_at[source].get(node, ())

    def mentions(self, entry: ModuleEntry, literal: str, quoted: bool = True) -> bool:
        """Whether a module's file has ``literal`` as a string in quotes (or anywhere, not
        ``quoted``): a cheap test before parsing it; cached."""
        return self.mentions_any(entry, [literal], quoted)

    def mentions_any(self, entry: ModuleEntry, literals: list[str], quoted: bool = True
                     ) -> bool:
        """``mentions`` for any of ``literals``, reading the file at most once."""
        keys = [(entry.key, lit if quoted else f"\0{lit}") for lit in literals]
        hits = [self._mentions.get(k) for k in keys]
        if any(hits):
            return True
        if all(h is not None for h in hits):
            return False
        data = self.file_data(entry)
        found = False
        for lit, k, h in zip(literals, keys, hits):
            if h is None:
                needles = [f"{q}{lit}{q}".encode() for q in "\"'"] if quoted else \
                    [lit.encode()]
                h = self._mentions[k] = any(n in data for n in needles)
            found = found or h
        return found

    def passes_literal(self, entry: ModuleEntry, literal: str) -> bool:
        """Whether a module's file has a call whose first argument is the string ``literal``
        (``register("bilinear"``, also on the next line or after a string prefix), as a
        keyed registration needs: a stricter test than ``mentions`` before parsing the
        module for one. 112 timm modules name ``'bilinear'`` or ``'bicubic'``, mostly as a
        keyword's value (``interpolation='bilinear'``) or in a dict, and ``str_to_interp_mode(
        'bilinear')`` had each of them parsed; cached."""
        key = (entry.key, f"\1{literal}")
        hit = self._mentions.get(key)
        if hit is None:
            if not self.mentions(entry, literal):
                hit = False
            else:
                pattern = self._first_arguments.get(literal)
                if pattern is None:
                    pattern = self._first_arguments[literal] = re.compile(
                        rb"\(\s*(?:#[^\n]*\n\s*)*[rRuU]?(?:'''|\"\"\"|'|\")"
                        + re.escape(literal.encode()) + rb"['\"]")
                hit = pattern.search(self.file_data(entry)) is not None
            self._mentions[key] = hit
        return hit

    def file_data(self, entry: ModuleEntry) -> bytes:
        """The module's text as bytes (b"" where its file cannot be read), kept: a registry's
        fillers are looked for in every module of its repository, once per registry, and
        deepspeed's ``InferenceEngine`` read its 751 files again for each (9% of its time)."""
        data = self._file_data.get(entry.key)
        if data is None:
            ms = self._sources.get(entry.key)
            try:
                data = ms.text.encode("utf-8") if ms is not None else \
                    (Path(self.roots[entry.source]) / entry.facts.relpath).read_bytes()
            except OSError:
                data = b""
            self._file_data[entry.key] = data
        return data

    def module_source(self, entry: ModuleEntry) -> ModuleSource:
        ms = self._sources.get(entry.key)
        if ms is None:
            path = Path(self.roots[entry.source]) / entry.facts.relpath
            try:
                data = self._file_data.get(entry.key) or path.read_bytes()
            except OSError as exc:
                raise ResolutionError(f"cannot read {path}: {exc.strerror or exc}") from None
            if hashlib.sha1(data).hexdigest() != entry.facts.sha1:
                raise ResolutionError(
                    f"{path} changed since it was indexed; run `nnrag index` again")
            ms = ModuleSource(_decode(data), str(path))
            ms.crlf = b"\r" in data
            self._unbind_module_imports(entry, ms)
            self._sources[entry.key] = ms
        return ms

    def _unbind_module_imports(self, entry: ModuleEntry, ms: ModuleSource) -> None:
        """A module-level ``name = importlib.import_module("a.b")`` that binds ``name`` to a
        corpus module (bindings: ``_imported_by_call``) is an import, not a definition: the
        name is that module, inlined or made a module object as for ``import a.b as name``,
        and the statement binds nothing the file needs."""
        for name, rec in entry.by_call.items():
            binders = ms.binders.get(name, [])
            if len(binders) == 1 and ms.stmts[binders[0]].line == rec.line and \
                    self.index.lookup(entry, name).kind == "module":
                del ms.binders[name]

    def folder_imports(self, entry: ModuleEntry) -> list[tuple[int, FolderImport]]:
        """The module-level statements of ``entry`` that import a package's modules by
        computed name while the module executes (engine.dynimport), with their lines."""
        hit = self._folder_imports.get(entry.key)
        if hit is not None:
            return hit
        out: list[tuple[int, FolderImport]] = []
        ms = self.module_source(entry)
        is_package = entry.facts.relpath.endswith("__init__.py")
        for st in ms.stmts:
            if st.kind in ("class", "function", "import"):
                continue
            found = folder_imports(st.node, entry.module, is_package, self.index.packages)
            for fname, package in helper_calls(st.node, self.index.packages):
                skips = self._helper_skips_private(entry, ms, fname)
                if skips is not None:
                    found.append(FolderImport(package, skips))
            out.extend((st.line, f) for f in found)
        self._folder_imports[entry.key] = out
        return out

    def _helper_skips_private(self, entry: ModuleEntry, ms: ModuleSource,
                              name: str) -> bool | None:
        """For the corpus function ``name`` (as ``entry`` sees it): None if it imports no
        module by computed name, else whether it skips the ``_`` ones (engine.dynimport)."""
        key = self.binding_key(entry, ms, name)
        where = self.index.entries.get(key[1]) if key is not None else None
        if key is None or where is None or self.is_external(where.module):
            return None
        wms = self.module_source(where)
        for i in wms.binders.get(key[2], []):
            hit = helper_skips_private(wms.stmts[i].node)
            if hit is not None:
                return hit
        return None

    def binding_key(self, entry: ModuleEntry, ms: ModuleSource, name: str) -> BindKey | None:
        """The module-level binding ``name`` refers to inside ``entry`` (definitions only)."""
        if any(ms.stmts[i].kind != "import" for i in ms.binders.get(name, [])):
            return ("def", entry.key, name)
        t = self.index.lookup(entry, name)
        if t.kind == "def" and t.entry is not None and not t.attr:
            return ("def", t.entry.key, t.name)
        return None

    def dotted_key(self, entry: ModuleEntry, chain: str) -> BindKey | None:
        """The corpus definition the dotted chain ``chain`` stands for inside ``entry``
        (``registry.add`` below ``from . import registry``), definitions only."""
        t = self.index.resolve_dotted(entry, chain)
        return ("def", t.entry.key, t.name) if t.kind == "def" and t.entry is not None \
            and not t.attr else None

    def closure(self, block: Block) -> Closure:
        entry = self.index.entries.get((block.source, block.module))
        if entry is None:
            raise ResolutionError(f"module {block.module} of {block.source} is not indexed")
        builder = _ClosureBuilder(self, block, entry)
        try:
            return builder.build()
        finally:
            builder.release()


class _ClosureBuilder:
    def __init__(self, resolver: Resolver, block: Block, entry: ModuleEntry) -> None:
        self.r = resolver
        self.index = resolver.index
        self.block = block
        self.entry = entry
        self.order: list[NodeId] = []  # discovery order
        self.seen: set[NodeId] = set()
        self.deps: list[Dependency] = []
        self.refs: dict[tuple[NodeId, str], BindKey] = {}
        self.early_refs: dict[tuple[NodeId, str], BindKey] = {}
        self.deferred_unindexed: set[str] = set()  # unindexed modules imported in functions
        self.chains: dict[NodeId, dict[str, BindKey]] = {}
        self.guarded: dict[tuple[NodeId, int, str], BindKey | None] = {}
        self.unsure: dict[tuple[NodeId, int, str], str] = {}  # see Closure.unsure_imports
        # (statement, name) that some included statement reads; the ``if TYPE_CHECKING:``
        # imports of a name nothing reads yet wait in ``pending``
        self.demanded: set[tuple[NodeId, str]] = set()
        self.pending: dict[tuple[NodeId, str], list[ImportRecord]] = {}
        self.externals: dict[str, ExternalImport] = {}
        # a corpus definition of an external package -> its import (external_def)
        self.external_defs: dict[BindKey, ExternalImport] = {}
        self.bind_order: dict[BindKey, None] = {}  # ordered: the order names were bound
        self.unresolved: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self.module_files: list[tuple[str, str]] = []  # (path on disk, path beside the file)
        # module -> the path its ``__file__`` gets beside the file (``relocations``)
        self.relocated_files: dict[tuple[str, str], str] = {}
        # names only a statement storing into its module's namespace makes (engine.namespace)
        # -> the statements inlined for them
        self.made_at_run_time: dict[BindKey, tuple[NodeId, ...]] = {}
        # (module, name) read where a module-level ``name = importlib.import_module("a.b")``
        # binds it to a corpus module (engine.dynimport), in the order they were read
        self.imported_by_call: dict[tuple[tuple[str, str], str], None] = {}
        self.modules: dict[tuple[str, str], ModuleSource] = {}
        self.entries: dict[tuple[str, str], ModuleEntry] = {}
        self.shared: dict[BindKey, BindKey] = {}  # binding -> binding whose name it takes
        self.avoid: dict[BindKey, set[str]] = {}  # binding -> names that would be captured
        # module objects (engine.moduleobject), by their key
        self.objects: dict[tuple[str, str], ModuleObject] = {}
        # imports of a corpus module inside a function: (statement, the import, where it
        # leads, directly in a class body, the header's note on it)
        self.local_modules: list[tuple[NodeId, ImportRecord, Target, bool, str]] = []
        self.object_notes: dict[tuple[str, str], int] = {}  # module object -> its note
        self.deferred_code: dict[tuple[str, str], tuple[int, tuple[NodeId, ...]]] = {}
        self._run_at_import: frozenset[tuple[str, str]] | None = None
        # (statement, first line of a statement inside a function of it) -> the definition
        # a chain there reads through a module ``__getattr__`` (engine.lazyattr)
        self.lazy_reads: dict[tuple[NodeId, int], BindKey] = {}
        self.effects = SideEffects(self)
        self.ops = OpRegistrations(self)
        self.held = HeldModules(self)

    def release(self) -> None:
        """Drops the links from the builder to its rules (``SideEffects`` and
        ``OpRegistrations`` hold the builder, and ``SideEffects`` its ``SubclassHooks``, which
        hold it back): without those reference cycles, the builder's working state is freed as
        soon as the closure is built, not at the next full garbage collection
        (engine.gcpolicy)."""
        self.effects.release()
        del self.effects
        del self.ops
        del self.held

    # -- graph -----------------------------------------------------------------------------
    def ms(self, entry: ModuleEntry) -> ModuleSource:
        ms = self.modules.get(entry.key)
        if ms is None:
            ms = self.modules[entry.key] = self.r.module_source(entry)
            self.entries[entry.key] = entry
        return ms

    def add(self, entry: ModuleEntry, idx: int) -> NodeId:
        self.ms(entry)
        return self._add((entry.key, idx))

    def _add(self, node: NodeId) -> NodeId:
        if node not in self.seen:
            self.seen.add(node)
            self.order.append(node)
            for name in self.modules[node[0]].stmts[node[1]].binds:
                self._bind(("def", node[0], name))
        return node

    def module_object(self, mentry: ModuleEntry, name: str, user: str,
                      only: frozenset[str] | None = None) -> NodeId:
        """The statement standing in for the corpus module ``mentry`` where it is used as a
        value (engine.moduleobject), named ``name`` as its first user calls it; holding only
        the names ``only`` where given (an import inside a function that reads nothing else
        from it), until a user needs more."""
        key = object_key(mentry.key)
        obj = self.objects.get(key)
        if obj is None:
            members, unsure, subs = self._object_members(mentry, only)
            obj = self.objects[key] = ModuleObject(mentry.module, name, user, members, unsure,
                                                   subs, partial=only is not None)
            self.modules[key] = obj.source()
            self.entries[key] = mentry
            self.object_notes[key] = len(self.notes)
            self.notes.append(obj.note(name))
        elif obj.partial:
            self._widen_object(key, only)
        if only:
            self.hold_submodules_of(key, only, user)
        return self._add((key, 0))

    def module_object_of(self, node: NodeId, name: str) -> tuple[str, str] | None:
        """The module object that ``name`` is where statement ``node`` reads it (bound at
        module level, or by an import inside its function), if any."""
        found = [self.refs.get((node, name))] + [
            key for (n, _, bound), key in self.guarded.items() if n == node and bound == name]
        keys = {k[1] for k in found if k is not None and k[0] == "def" and
                k[2] == MODULE_OBJECT and k[1] in self.objects}
        return keys.pop() if len(keys) == 1 else None

    def _object_members(self, mentry: ModuleEntry, only: frozenset[str] | None
                        ) -> tuple[list[tuple[str, Target]], set[str], frozenset[str]]:
        """(members, those bound on some paths only, submodules) of a module object for
        ``mentry``, of the names ``only`` where given."""
        names = namespace(self.index, mentry)
        if only is not None:
            names = [n for n in names if n in only]
        found = {n: self.index.lookup(mentry, n) for n in names}
        unsure, gone = unsure_members(self.ms(mentry), list(found))
        # (``from __future__ import annotations`` binds ``annotations`` too: a directive
        # to the compiler, which a file without that import cannot bind, left out)
        members = [(n, t) for n, t in found.items() if t.kind in ("def", "external") and not (
            n == "types" and not (t.kind == "external" and t.name == "types"))
            and n not in gone and not t.name.startswith("__future__.")]
        subs = frozenset(n for n, t in found.items() if t.kind == "module")
        return members, unsure, subs

    def _widen_object(self, key: tuple[str, str], only: frozenset[str] | None) -> None:
        """A module object that held only some names of its module gets ``only`` too, or
        every name where ``only`` is None."""
        obj, mentry = self.objects[key], self.entries[key]
        have = {n for n, _ in obj.members}
        if only is not None and only <= have:
            return
        members, unsure, subs = self._object_members(mentry, only)
        added = [(n, t) for n, t in members if n not in have]
        obj.submodules |= subs
        if only is None:
            obj.partial = False
        if not added:
            return
        obj.members += added
        obj.unsure |= unsure & {n for n, _ in added}
        self.modules[key] = obj.source()
        if obj.visited:  # (else its visit follows them)
            for n, t in added:
                self.follow_member((key, 0), mentry, n, t)

    def split_half_run_objects(self) -> None:
        """A module object that a module reads as it loads, where upstream's module imports
        that one as it runs: physicsnemo's ``unet.py`` reads ``network_module``, its package,
        in a class body, and the package's ``__init__`` imports ``unet`` below ``song_unet``
        and above nothing else. Upstream that read sees the package half run, holding only
        what it binds above that import. The object then holds those names, and a second
        statement adds the rest once they are made (``ModuleObject.late``); a reader at load
        time that upstream's package does not import as it runs sees it whole, so it waits
        for that statement too."""
        readers_of: dict[tuple[str, str], list[int]] = {}  # object -> its readers at load
        for i, d in enumerate(self.deps):
            if d.load:
                for n in d.nodes:
                    if n[1] == 0 and n[0] in self.objects and d.user[0] != n[0]:
                        readers_of.setdefault(n[0], []).append(i)
        for key, readers in readers_of.items():
            node0, obj, mentry = (key, 0), self.objects[key], self.entries[key]
            half: dict[tuple[str, str], int] = {}
            for i in readers:
                user = self.deps[i].user[0]
                line = self.index.importing_line(mentry, self.entries[user])
                if line is not None:
                    half[user] = min(line, half.get(user, line))
            if not half:
                continue
            cut = min(half.values())
            ms = self.ms(mentry)
            late = [n for n, _ in obj.members if self._first_bound(mentry, ms, n) >= cut]
            if not late:
                continue
            obj.late = late
            obj.late_reader = self.entries[min(half, key=half.__getitem__)].module
            self.modules[key] = obj.source()
            node1 = self._add((key, 1))
            moved = set(late)
            for i, d in enumerate(self.deps):
                if d.user == node0 and d.name.split(".")[0] in moved:
                    self.deps[i] = replace(d, user=node1)
            for n in late:
                ref = self.refs.pop((node0, n), None)
                if ref is not None:
                    self.refs[(node1, n)] = ref
            self.refs[(node1, MODULE_OBJECT)] = ("def", key, MODULE_OBJECT)
            self.deps.append(Dependency(node1, MODULE_OBJECT, "definition", obj.module,
                                        "module-object", 1.0, True, (node0,)))
            for i in readers:
                if self.deps[i].user[0] not in half:
                    self.deps[i] = replace(self.deps[i], nodes=(*self.deps[i].nodes, node1))

    @staticmethod
    def _first_bound(entry: ModuleEntry, ms: ModuleSource, name: str) -> int:
        """The first line of ``entry`` that binds ``name``: a statement, else a star import
        (0 where neither does: bound from the start)."""
        lines = [ms.stmts[i].line for i in ms.binders.get(name, ())]
        return min(lines or [r.line for r in entry.stars] or [0])

    def hold_submodules_of(self, key: tuple[str, str], names: frozenset[str], where: str
                           ) -> None:
        """The submodules among ``names`` that a partial module object is read for."""
        for n in sorted(names - {m for m, _ in self.objects[key].members}):
            if self.index.lookup(self.entries[key], n).kind == "module":
                self.hold_submodules(key, [n], where)

    def bind_local_module_imports(self) -> set[str]:
        """An import of a corpus module inside a function binds the module object standing in
        for that module where the file has one already (deepspeed's ``get_dist_msg`` has
        ``from deepspeed import comm as dist``, and its ``deepspeed.comm`` is a value
        elsewhere): ``dist = dist_comm``. Any other is kept as written, which needs the
        package installed once the function runs, as its note in the header says. Returns the
        notes of those no longer kept."""
        bound: set[str] = set()
        kept: set[str] = set()
        for node, rec, t, in_class_body, note in self.local_modules:
            key = object_key(t.entry.key) if t.kind == "module" and t.entry else None
            if key not in self.objects:
                kept.add(note)
                continue
            self.guarded[(node, rec.line, rec.bound)] = ("def", key, MODULE_OBJECT)
            # (no order: the object is here for its other users, and waits for every name
            # of its module, which the function's other needs would then wait for too)
            self.deps.append(Dependency(node, rec.bound, "definition", t.name, "local-import",
                                        1.0, in_class_body))
            bound.add(note)
        return bound - kept

    def visit_module_object(self, node: NodeId) -> None:
        entry = self.entries[node[0]]
        obj = self.objects[node[0]]
        obj.visited = True
        for name, t in obj.members:
            self.follow_member(node, entry, name, t)
        imp = self.external_import(entry, "types", Target("external", "types", how="import"))
        self.refs[(node, "types")] = ("ext", imp.identity)
        self.deps.append(Dependency(node, "types", "external", imp.text(), "import", 1.0, True))

    def follow_member(self, node: NodeId, entry: ModuleEntry, name: str, t: Target) -> None:
        """The member ``name`` of the module object ``node``, found as ``t``."""
        binders = self.guarded_binders(entry, name) if t.kind == "external" else None
        if binders:
            # mmcv's ext_loader binds ``extension`` by ``from parrots import extension``
            # in the ``else`` of ``if torch.__version__ != 'parrots':``: the statement
            # binds it, kept whole as for any reader, not the import made unconditional
            nodes = self.add_binders(entry, name, binders)
            self.refs[(node, name)] = ("def", entry.key, name)
            self.deps.append(Dependency(node, name, "definition", f"{entry.module}.{name}",
                                        "local", 1.0, True, nodes))
            return
        self.follow(node, entry, self.modules[node[0]].stmts[0], name, t, True, set())

    def hold_listed(self, key: tuple[str, str], where: str) -> None:
        """The module object ``key``, read by ``getattr`` with a computed name: it holds the
        submodules its module's ``__all__`` lists, each likewise, and each has that
        ``__all__`` and every name it lists that the module binds (engine.moduleobject)."""
        obj, mentry = self.objects[key], self.entries[key]
        listed = mentry.facts.all_names
        if obj.listed or not listed:
            return
        obj.listed = True
        have = {n for n, _ in obj.members}
        found = {n: self.index.lookup(mentry, n) for n in ("__all__", *listed)
                 if n not in have}
        if mentry.facts.namespace_writes:
            # a builtin's name that ``__all__`` lists is one the module makes (CrypTen's
            # ``sum``): a module has no builtins of its own
            found.update({n: made_at_run_time(mentry, n) for n, t in found.items()
                          if t.kind == "builtin"})
        added = [(n, t) for n, t in found.items() if t.kind in ("def", "external")]
        if added:
            obj.members += added
            obj.unsure |= unsure_members(self.ms(mentry), [n for n, _ in added])[0]
            self.modules[key] = obj.source()
            if obj.visited:  # (else its visit follows them)
                for n, t in added:
                    self.follow_member((key, 0), mentry, n, t)
        for n, t in found.items():
            if t.kind in ("def", "external"):
                continue
            self.hold_submodules(key, [n], where)  # (where ``n`` is one)
            sub = self.refs.get(((key, 0), n))
            if sub is not None and sub[1] in self.objects:
                self.hold_listed(sub[1], where)

    def add_resource_anchors(self) -> None:
        """A module object that a statement hands to ``importlib.resources`` (audiotools'
        ``importlib_resources.files(templates)``) becomes the anchor of upstream's files:
        its lines give it a spec that points at a folder beside the file, and the data files
        beside upstream's module go there (engine.moduleobject)."""
        def identity(user: NodeId, name: str) -> str | None:
            ref = self.refs.get((user, name))
            return ref[1] if ref is not None and ref[0] == "ext" else None

        if not self.objects:
            return
        wanted = {n: ExternalImport(t.rpartition(".")[0], n, None) if "." in t else
                  ExternalImport(t, None, None) for n, t in ANCHOR_NAMES.items()}
        readers = sorted((use, ref) for use, ref in self.refs.items() if ref[0] == "def"
                         and ref[1] in self.objects and not is_object_key(use[0][0]))
        for (user, name), ref in readers:
            if self.objects[ref[1]].anchor is not None:
                continue
            obj = self.objects[ref[1]]
            st = self.modules[user[0]].stmts[user[1]]
            line = reads_resources(st.node, name, lambda n: identity(user, n))
            if not line or any(t.kind != "external" or t.name != wanted[n].identity
                               for n, t in obj.members if n in wanted):
                continue  # (a member named ``os`` that is not os would be read instead)
            entry = self.entries[ref[1]]
            root = self.r.roots.get(entry.source)
            folder = os.path.dirname(entry.facts.relpath)
            files = self.r.module_files.tree(os.path.join(root, folder)) if root else []
            self.anchor_object(ref[1], f"{self.entries[user[0]].module}:{line}", files)

    def anchor_object(self, key: tuple[str, str], reader: str, files: list[str],
                      how: str | None = None) -> None:
        """The module object ``key`` gets a ``__file__`` and a spec pointing at a folder
        beside the file, named by its module, where ``files`` (paths from its module's folder
        upstream) go; ``reader`` (``module:line``) reads them, as ``how`` says."""
        obj, entry = self.objects[key], self.entries[key]
        node = (key, 0)
        wanted = {n: ExternalImport(t.rpartition(".")[0], n, None) if "." in t else
                  ExternalImport(t, None, None) for n, t in ANCHOR_NAMES.items()}
        for n, imp in wanted.items():
            imp = self.add_external(imp)
            self._bind(("ext", imp.identity))
            self.refs[(node, n)] = ("ext", imp.identity)
            self.deps.append(Dependency(node, n, "external", imp.text(), "import", 1.0, True))
        root = self.r.roots.get(entry.source) or ""
        folder = os.path.dirname(entry.facts.relpath)
        obj.anchor = os.path.basename(entry.facts.relpath)
        obj.reader = reader
        if how is not None:
            obj.anchor_how = how
        obj.files = [(os.path.join(root, folder, f), f"{obj.module}/{f}") for f in files]
        self.modules[key] = obj.source()
        self.module_files += [f for f in obj.files if f not in self.module_files]

    def add_object_chains(self) -> bool:
        """brevitas' ``ops_ste.py`` has ``fn_prefix = brevitas`` (or ``torch``, on another
        path) and calls ``fn_prefix.ops.autograd_ste_ops.round_ste_impl(x)`` in its functions.
        A module object leaves submodules out, so upstream's ``brevitas.ops`` was missing. Where
        a name assigned from a module object is read with such a chain, each submodule on the
        chain is held by the object before it, as a module object of its own. Returns whether
        any was added."""
        aliases: dict[BindKey, tuple[str, str]] = {}  # name assigned an object -> the object
        for (user, name), key in list(self.refs.items()):
            if key[0] != "def" or key[1] not in self.objects or user[0] in self.objects:
                continue
            st = self.modules[user[0]].stmts[user[1]]
            if st.kind in ("class", "function"):
                continue
            for a in treewalk.walk(st.node):
                if isinstance(a, ast.Assign) and isinstance(a.value, ast.Name) and \
                        a.value.id == name:
                    aliases.update({("def", user[0], t.id): key[1] for t in a.targets
                                    if isinstance(t, ast.Name)})
        added = False
        for (user, name), key in list(self.refs.items()):
            if key not in aliases:
                continue
            ms = self.modules[user[0]]
            st = ms.stmts[user[1]]
            where = f"{self.entries[user[0]].module}:{st.line}"
            for chain in sorted(ms.chains(st, name)):
                added |= self.hold_submodules(aliases[key], chain.split(".")[1:], where)
        return added

    def hold_submodules(self, key: tuple[str, str], parts: list[str], where: str) -> bool:
        """The submodules along ``parts`` (``ops``, ``autograd_ste_ops``), read from the
        module object ``key``, each held by the one before it."""
        added = False
        for part in parts:
            mentry, obj = self.entries[key], self.objects[key]
            t = self.index.lookup(mentry, part)
            sub = t.entry if t.kind == "module" else None
            if sub is None and t.kind not in ("def", "external", "builtin"):
                # a submodule the import system set on its package, bound by no statement
                sub = self.index.find_module(f"{mentry.module}.{part}", mentry.source)
            if sub is None or self.r.is_external(sub.module):
                break
            node = self.module_object(sub, part, where)
            if part not in obj.held:
                obj.held.append(part)
                self.modules[key] = obj.source()
                self.refs[((key, 0), part)] = ("def", node[0], MODULE_OBJECT)
                self.deps.append(Dependency((key, 0), part, "definition", sub.module,
                                            "module-object", 1.0, True, (node,)))
                added = True
            key = node[0]
        return added

    def corpus_def(self, ref: BindKey | None) -> BindKey | None:
        """The corpus definition a reference binds: the reference itself for a definition
        the file inlines, the definition behind the import for one of a package the file
        imports (``external_def``: mmengine's ``Registry`` where mmengine is external)."""
        if ref is None or ref[0] == "def":
            return ref
        if ref[0] == "ext":
            for key, imp in self.external_defs.items():
                if imp.identity == ref[1]:
                    return key
        return None

    def _bind(self, key: BindKey) -> None:
        self.bind_order.setdefault(key)

    def binders(self, entry: ModuleEntry, name: str) -> list[int]:
        ms = self.ms(entry)
        return [i for i in ms.binders.get(name, []) if ms.stmts[i].kind != "import"]

    def namespace_writers(self, entry: ModuleEntry, name: str) -> list[int]:
        """The statements that store names into ``entry``'s namespace (pyro's ``locals()[_name]
        = _PyroDist``), where no statement of it binds ``name`` by name (bindings.lookup
        assumes they make it)."""
        ms = self.ms(entry)
        if name in ms.binders or not entry.facts.namespace_writes:
            return []
        lines = set(entry.facts.namespace_writes)
        return [st.index for st in ms.stmts if st.line in lines]

    @staticmethod
    def own_global_binders(ms: ModuleSource, st: TopStmt, name: str,
                           indexes: list[int]) -> list[int]:
        """The binders (``indexes``) of ``name`` that a read of it by ``st`` needs, where
        ``st`` is a function that rebinds that very name through ``global`` (diffusers'
        ``_is_package_available`` and its ``_package_map`` cache): not the module-level calls of
        such functions, which the reads by other statements need
        (``modsource._global_rebinding_calls``)."""
        calls = ms.rebinding_calls.get(name)
        if not calls or name not in ms.global_writers.get(st.index, ()):
            return indexes
        return [i for i in indexes if i not in calls] or indexes

    def add_binders(self, entry: ModuleEntry, name: str,
                    indexes: list[int] | None = None) -> tuple[NodeId, ...]:
        """The statements that bind ``name`` in ``entry`` (or those of ``indexes``), added
        as read for that name."""
        made: BindKey | None = None
        if indexes is None:
            indexes = self.binders(entry, name)
            if not indexes:
                indexes = self.namespace_writers(entry, name)
                if indexes:
                    made = ("def", entry.key, name)
                    self._bind(made)  # before the statement's own names, as it is read first
        nodes = tuple(self.add(entry, i) for i in indexes)
        if made is not None:
            self.made_at_run_time[made] = nodes
        for n in nodes:
            if (n, name) not in self.demanded:
                self.demanded.add((n, name))
                for rec in self.pending.pop((n, name), ()):
                    self.guarded_import(n, entry, rec)
        return nodes

    def build(self) -> Closure:
        top = self.block.qualname.split(".")[0]
        starts = self.binders(self.entry, top)
        if not starts:
            raise ResolutionError(f"{self.block.key}: no statement defines {top!r}")
        self._bind(("def", self.entry.key, top))
        for i in starts:
            self.add(self.entry, i)
        pos = 0
        while True:
            while pos < len(self.order):
                node = self.order[pos]
                pos += 1
                self.visit(node)
            effects = self.effects
            if not (effects.add_registry_fillers() | effects.add_patches()
                    | effects.add_keyed_registrations() | self.add_object_chains()
                    | effects.add_config_registrations()
                    | self.ops.add() | self.held.add()):
                break
        gone = self.bind_local_module_imports()
        self.add_resource_anchors()
        self.held.add_module_dunders()
        self.split_half_run_objects()
        emptied = handed_lists(self)
        scopes = scope_registries(self)
        for note in location_notes(self, emptied, set(scopes)) + shared_tree_clashes(self):
            if note not in self.notes:
                self.notes.append(note)
        out_names = self.allocate_names()
        for key, i in self.object_notes.items():  # as the file names it, with all it holds
            obj = self.objects[key]
            self.notes[i] = obj.note(out_names.get(("def", key, MODULE_OBJECT), obj.name))
        self.notes = [n for n in self.notes if n not in gone]
        nodes = emission_order(self)
        future: list[str] = []
        for key in {n[0] for n in nodes}:
            for f in self.modules[key].future:
                if f not in future:
                    future.append(f)
        typing = typing_only(self.deps, nodes, {(self.entry.key, i) for i in starts})
        quoted = self.quoted_annotations(nodes, future, typing)
        if quoted:
            future.remove("annotations")
        self.note_unindexed_imports()
        self.note_assumed_externals(nodes)
        self.note_script_folders(nodes)
        self.note_configured_externals()
        self.note_made_at_run_time()
        self.note_imported_by_call()
        self.note_deferred_modules(nodes)
        self.note_module_files(nodes)
        self.note_namespace_readers(nodes)
        self.note_subclass_readers(nodes)
        self.effects.note_imports_by_name(nodes)
        self.effects.note_package_fillers(nodes)
        self.ops.note_undefined(nodes)
        self.ops.note_conditional(nodes)
        crlf = sorted({self.entries[n[0]].facts.relpath for n in nodes
                       if self.modules[n[0]].crlf})
        if crlf:
            self.notes.append(f"{', '.join(crlf)} "
                              f"{'ends its' if len(crlf) == 1 else 'end their'} lines with "
                              "CRLF upstream; here every line ends with LF")
        return Closure(self.block, nodes, self.modules, self.entries, self.deps,
                       self.externals, out_names, self.refs, self.chains, self.guarded,
                       self.unresolved, self.notes, sorted(future), self.early_refs,
                       self.module_files, self.unsure, emptied, scopes,
                       self.r.external_packages, quoted, self.relocated_files, typing,
                       self.deferred_code, self.lazy_reads, self.run_at_import())

    def run_at_import(self) -> frozenset[tuple[str, str]]:
        """The modules of the closure that upstream's import of the block's module certainly
        runs (``Closure.run_at_import``); none looked for where no definition is imported
        inside a function or under a guard, the only ones engine.deferred and engine.nesting
        could put off."""
        if self._run_at_import is None:
            lazy = any(d.how in ("local-import", "guarded") for d in self.deps)
            self._run_at_import = frozenset(
                k for k in self.r.imported_along_of(self.entry, UNGUARDED)
                if k in self.modules) if lazy else frozenset()
        return self._run_at_import

    def quoted_annotations(self, nodes: list[NodeId], future: list[str],
                           typing: frozenset[NodeId]) -> frozenset[tuple[str, str]]:
        """One file has one ``from __future__ import annotations``, which makes every
        annotation in it a string. Where a definition from a module without it evaluates
        annotations (torchmd-net's warp kernels, ``X: wp.array(dtype=dtype_wp)`` in a function
        that binds ``dtype_wp``, built as the module imports; ``inspect.signature``), the file
        has no such import, and the annotations of the definitions from the modules with it
        are written as the strings it makes of them upstream: the modules returned. Said in
        the header. What only ``if TYPE_CHECKING:`` imports lead to (``typing``) never runs,
        and evaluates nothing."""
        if "annotations" not in future:
            return frozenset()
        eager = sorted({self.entries[n[0]].facts.relpath for n in nodes
                        if n not in typing and "annotations" not in self.modules[n[0]].future
                        and self.modules[n[0]].stmt_fact(self.modules[n[0]].stmts[n[1]],
                                                         evaluates_annotations)})
        if not eager:
            return frozenset()
        lazy = {n[0] for n in nodes if "annotations" in self.modules[n[0]].future}
        shown = sorted({self.entries[k].facts.relpath for k in lazy})
        self.notes.append(
            "no `from __future__ import annotations` here, though "
            f"{', '.join(shown)} {'has' if len(shown) == 1 else 'have'} it upstream: "
            f"definitions from {', '.join(eager)} evaluate their annotations, so the "
            "annotations of the others are written as the strings it makes of them "
            "(listed under rewrites)")
        return frozenset(lazy)

    def note_deferred_modules(self, nodes: list[NodeId]) -> None:
        """A module upstream imports only inside functions (whisper's ``timing.py``: ``def
        median_filter(...): from .triton_ops import median_filter_cuda``) runs its module-level
        code when such a function is first called; inlined, that code runs when the file is
        imported. Where it is more than definitions (``try: import triton except ImportError:
        raise RuntimeError(...)``, or an assignment that calls one of the corpus's: BigVGAN's
        ``anti_alias_activation_cuda = load.load()`` builds a CUDA extension, or one that
        reads a torch operator: spikingjelly's ``_ops/lif/__init__.py`` binds ``_forward =
        torch.ops.sj_lif.forward.default`` after the statement registering it), the file may
        fail to import where upstream's module does not: said in the header. A module that
        upstream's import of the block's module runs anyway, through a package ``__init__``
        (solo's ``utils/backbones.py``, which ``solo/utils/__init__.py`` imports), runs when
        the file is imported, as there."""
        incoming: dict[tuple[str, str], list[Dependency]] = {}
        called: dict[NodeId, set[str]] = {}  # the definitions each statement reads as it runs
        for d in self.deps:
            if d.kind != "definition":
                continue
            if d.load:
                called.setdefault(d.user, set()).add(d.name)
            for key in {n[0] for n in d.nodes if n[0] != d.user[0]}:
                incoming.setdefault(key, []).append(d)
        for key, edges in incoming.items():
            if key == self.entry.key or any(d.how != "local-import" for d in edges) \
                    or key in self.run_at_import():
                continue
            ms = self.modules[key]
            found = tuple((k, i) for k, i in nodes if k == key and (
                ms.stmts[i].kind in ("compound", "other") or ms.stmts[i].kind == "assign"
                and (called.get((k, i), set()) & ms.load_calls(ms.stmts[i])
                     or _reads_operator(ms, ms.stmts[i]))))
            if not found:
                continue
            code = [ms.stmts[i] for _, i in found]
            self.deferred_code[key] = (len(self.notes), found)  # engine.deferred
            first = min(edges, key=lambda d: (d.user, d.name))
            user = self.entries[first.user[0]].module
            lines = ", ".join(f"{st.line}-{st.end_line}" for st in code)
            self.notes.append(
                f"{self.entries[key].facts.relpath} is imported only inside functions upstream "
                f"({user}: `{first.name}`), so its module-level code ran at the first call; "
                f"here its lines {lines} run when this file is imported")

    def note_namespace_readers(self, nodes: list[NodeId]) -> None:
        """Statements that look names up in ``globals()`` read every definition of their module
        (as the module runs, every one above them), which is why those are inlined; said in
        the header, once per module."""
        lines: dict[str, list[str]] = {}
        later: dict[str, bool] = {}  # whether one of them looks up as its functions run
        for key, i in sorted(nodes, key=lambda n: (self.entries[n[0]].facts.relpath, n[1])):
            ms = self.modules[key]
            st = ms.stmts[i]
            if ms.reads_namespace(st):
                path = self.entries[key].facts.relpath
                lines.setdefault(path, []).append(str(st.line))
                later[path] = later.get(path, False) or "globals" in ms.uses(st).lazy
        for path, at in lines.items():
            which = "every definition of that module" if later[path] else (
                "every definition of that module above the last of them (they look as the "
                "module runs)")
            self.notes.append(
                f"{path} looks names up in globals() (line{'s' if len(at) > 1 else ''} "
                f"{', '.join(at)}), so {which} is inlined; globals() is "
                "this file's here, where a renamed definition has its new name")

    def note_subclass_readers(self, nodes: list[NodeId]) -> None:
        """Statements that list a class's subclasses (``__subclasses__()``) read every subclass
        their module defines, which is why those are inlined; said in the header."""
        for key, i in sorted(nodes, key=lambda n: (self.entries[n[0]].facts.relpath, n[1])):
            st = self.modules[key].stmts[i]
            for base, subs in self.modules[key].subclasses_listed(st).items():
                self.notes.append(
                    f"{self.entries[key].facts.relpath}:{st.line} lists the subclasses of "
                    f"`{base}` (`__subclasses__()`), so the {len(subs)} its module defines are "
                    "inlined; subclasses from other modules are not")

    def note_module_files(self, nodes: list[NodeId]) -> None:
        """Definitions that find files through ``__file__`` (engine.modulefiles): here it is the
        generated file, with none of upstream's files beside it. The files the statements name
        go beside it, at their path from the module's folder; said in the header. A module
        whose statements reach above its folder (``relocated_files``) gets a ``__file__`` of
        its own instead, in a folder beside the file laid out as upstream's source tree, where
        the files it reads go at their path from the source root."""
        def with_file(n: NodeId) -> bool:
            if is_object_key(n[0]):  # a module object's own ``__file__`` (anchor_text)
                return False
            ms = self.modules[n[0]]
            st = ms.stmts[n[1]]
            return "__file__" in ms.stmt_text(st) and uses_module_file(st.node)

        file_nodes = [n for n in nodes if with_file(n)]
        relocated = self.relocations(nodes, file_nodes)
        self.relocated_files = {key: fake for key, (fake, _) in relocated.items()}
        parts, any_found = [], False
        moved: dict[tuple[str, str], list[str]] = {}
        elsewhere: frozenset[str] | None = None
        for key, i in sorted(file_nodes, key=lambda n: (self.entries[n[0]].facts.relpath, n[1])):
            st = self.modules[key].stmts[i]
            if elsewhere is None:  # what the statements without ``__file__`` name
                elsewhere = frozenset().union(*(
                    self.modules[k].literals(self.modules[k].stmts[j])
                    for k, j in nodes if not with_file((k, j))))
            entry = self.entries[key]
            root = self.r.roots.get(entry.source)
            found = self.r.module_files.named(root, entry.facts.relpath, st.node,
                                              elsewhere) if root else []
            hubs = self.r.module_files.hub_repositories(root, entry.facts.relpath, st.node) \
                if root else []
            outside = self.r.module_files.outside(root, entry.facts.relpath, st.node) \
                if root else []
            what = ", ".join(f"`{b}`" for b in sorted(st.binds)) or "a statement"
            part = f"{what} ({entry.facts.relpath}:{st.line})"
            if key in relocated:
                folder = relocated[key][0].split("/", 1)[0]
                files = [*found, *(f for *_, fs in hubs for f in fs), *outside]
                for up, _ in files:
                    self.add_module_file(os.path.join(root, up), f"{folder}/{up}")
                if files:
                    part += " reads " + ", ".join(sorted({up for up, _ in files}))
                moved.setdefault(key, []).append(part)
                continue
            any_found |= bool(found or hubs)
            if found:
                part += " reads " + listed(found)
            if hubs:
                part += (" and" if found else "") + " loads the torch.hub " + ", ".join(
                    f"repository {up} (as {rel}, its {len(files)} files)" for up, rel, files in hubs)
            for up, rel in [*found, *(f for *_, files in hubs for f in files)]:
                self.add_module_file(os.path.join(root, up), rel)
            if outside:
                part += (" reads " if not (found or hubs) else " and ") + listed(outside) + (
                    ", above this file's folder, where nnrag does not write: put "
                    f"{'them' if len(outside) > 1 else 'it'} there yourself")
            parts.append(part)
        if parts:
            self.notes.append(
                "`__file__` is this file here, not the upstream module, so files looked up "
                f"beside it are missing: {'; '.join(parts)}"
                + ("; they go beside this file, at the path shown, where nnrag writes, saves "
                   "or validates it; copy them there when you copy the file" if any_found
                   else ""))
        for key, (fake, above) in sorted(relocated.items(), key=lambda kv: kv[1][0]):
            entry, root = self.entries[key], self.r.roots[self.entries[key].source]
            folder = fake.split("/", 1)[0]
            for up, _ in above:
                self.add_module_file(os.path.join(root, up), f"{folder}/{up}")
            # an empty file where the module's own is: its folder exists, and ``..`` from it
            # resolves (the module's code is in this file)
            self.add_module_file(os.devnull, fake)
            reads = sorted({up for up, _ in above})
            named = f"; its statements name {', '.join(reads)}" if reads else ""
            if len(reads) > 2 * MAX_SHOWN:  # a package searched recursively (``above``)
                named = (f"; its statements name or search its package for "
                         f"{', '.join(reads[:MAX_SHOWN])} and {len(reads) - MAX_SHOWN} more")
            self.notes.append(
                f"`__file__` in the statements of {entry.facts.relpath} is {fake} beside this "
                "file, not this file: they reach above the module's folder, so its files go in "
                f"the folder {folder}, laid out as upstream's source tree ("
                + "; ".join(moved.get(key, []))
                + named
                + f"; {entry.facts.relpath} itself is there as an empty file, its code being "
                "here), where nnrag writes, saves or validates this file; copy that folder "
                "along with it")
        self.add_included_headers()

    def add_module_file(self, path: str, rel: str) -> None:
        if rel not in {r for _, r in self.module_files}:
            self.module_files.append((path, rel))

    def add_included_headers(self) -> None:
        """The headers that the C++ and CUDA sources among the files going beside the
        generated file include from their folders (``included_files``), and that no statement
        names: compiling a source needs them where upstream has them, relative to it. Said in
        the header, and so is a header that would go above the file's folder, where nnrag
        does not write (``#include "../include/k.h"`` from a source beside the file)."""
        taken = {r for _, r in self.module_files}
        added: list[str] = []
        above: list[str] = []
        for path, rel in list(self.module_files):
            for inc in included_files(path):
                at = posixpath.normpath(posixpath.join(posixpath.dirname(rel), inc))
                if at in taken:
                    continue
                taken.add(at)
                if is_plain_relative(at):
                    self.module_files.append(
                        (os.path.normpath(os.path.join(os.path.dirname(path), inc)), at))
                    added.append(at)
                else:
                    above.append(at)
        if added or above:
            self.notes.append(
                "the C++ and CUDA sources among the files that go beside this file include "
                + (f"headers from their folders, which go with them: {shortlist(added)}"
                   if added else "headers from their folders")
                + (f"{'; and ' if added else ': '}{shortlist(above)} (from this file's folder), "
                   "above it, where nnrag does not write: put "
                   f"{'them' if len(above) > 1 else 'it'} there yourself" if above else ""))

    def module_literals(self, key: tuple[str, str], nodes: list[NodeId]) -> frozenset[str]:
        ms = self.modules[key]
        return frozenset().union(*(ms.literals(ms.stmts[j]) for k, j in nodes if k == key))

    def searched_names(self, key: tuple[str, str], nodes: list[NodeId]) -> frozenset[str]:
        """The file names (``"yolo26.yaml"``) the closure's literals hold, where one of its
        statements searches a tree rooted at a name of module ``key`` recursively: ultralytics'
        ``check_file`` runs ``glob.glob(str(ROOT / "**" / file), recursive=True)``, ``ROOT``
        being ``Path(__file__).resolve().parents[1]`` in ``ultralytics/utils/__init__.py``,
        and ``DetectionModel(cfg="yolo26.yaml")`` finds ``cfg/models/26/yolo26.yaml`` that
        way. Empty where no statement does."""
        def searches(user: NodeId) -> bool:
            ms = self.modules[user[0]]
            st = ms.stmts[user[1]]
            return "**" in ms.literals(st) and "recursive" in ms.stmt_text(st)

        if not any(ref[0] == "def" and ref[1] == key and user[0] != key and searches(user)
                   for (user, _name), ref in self.refs.items()):
            return frozenset()
        return frozenset(w for k, j in nodes for w in self.modules[k].literals(
            self.modules[k].stmts[j]) if _FILE_NAME.fullmatch(w) and not w.endswith(".py"))

    def relocations(self, nodes: list[NodeId], file_nodes: list[NodeId]
                    ) -> dict[tuple[str, str], tuple[str, list[tuple[str, str]]]]:
        """The modules whose statements read ``__file__`` and reach above its folder
        (``Path(__file__).parents[1]``, ``"../app/package.json"``) to a file upstream's tree
        has there, each with the path its ``__file__`` gets, from the generated file's folder
        (``ultralytics.files/ultralytics/utils/__init__.py``), and the files of its package
        that its statements name (``ModuleFiles.above``). Such files cannot go beside the file
        at their path from the module's folder: the tree they are in is rebuilt instead, in a
        folder of its own (``<source>.files``)."""
        out: dict[tuple[str, str], tuple[str, list[tuple[str, str]]]] = {}
        for key in sorted({k for k, _ in file_nodes}):
            entry, ms = self.entries[key], self.modules[key]
            root = self.r.roots.get(entry.source)
            own = [ms.stmts[j] for k, j in nodes if k == key]
            if not root or not any(CLIMBS.search(ms.stmt_text(st)) for st in own):
                continue
            relpath = entry.facts.relpath
            above = self.r.module_files.above(root, relpath, self.module_literals(key, nodes),
                                              self.searched_names(key, nodes))
            if above or any(self.r.module_files.outside(root, relpath, ms.stmts[j].node)
                            for k, j in file_nodes if k == key):
                out[key] = (f"{entry.source}.files/{relpath}", above)
        return out

    def note_assumed_externals(self, nodes: list[NodeId]) -> None:
        """Names no corpus module binds, imported from the external ``from X import *`` they
        most likely come from (bindings.external_star): a guess, which the header says, one
        line per star import."""
        included = set(nodes)
        by_note: dict[str, set[str]] = {}
        for d in self.deps:
            if d.kind == "external" and d.how == "heuristic" and d.note and d.user in included:
                by_note.setdefault(d.note, set()).add(d.name)
        for note, names in sorted(by_note.items()):
            self.notes.append(f"{', '.join(f'`{n}`' for n in sorted(names))}: no corpus module "
                              f"binds {'them' if len(names) > 1 else 'it'}, {note}")

    def note_script_folders(self, nodes: list[NodeId]) -> None:
        """The packages the file takes from beside a folder upstream's scripts run in
        (bindings.script_folder_module): a guess at how upstream is run, which the header
        says, one line per folder."""
        keys = {n[0] for n in nodes}
        emitted = {k[1] for k in keys}
        found: dict[str, set[str]] = {}  # folder -> top-level names taken from it
        for key in sorted(keys):
            entry = self.index.entries.get(key)
            if entry is None:
                continue
            for rec in entry.facts.imports:
                if rec.level or not rec.target:
                    continue
                folder = self.index.script_folder(rec.target, entry)
                if folder is None and rec.name:  # (``from ops_dcnv3 import modules``, a
                    # folder without ``__init__.py``)
                    folder = self.index.script_folder(f"{rec.target}.{rec.name}", entry)
                if folder is None:
                    continue
                top = f"{folder}.{rec.target.split('.')[0]}"
                if any(m == top or m.startswith(top + ".") for m in emitted):
                    found.setdefault(folder, set()).add(top[len(folder) + 1:])
        for folder, tops in sorted(found.items()):
            names = ", ".join(f"`{t}`" for t in sorted(tops))
            where = folder.replace(".", "/") + "/"
            them = "them" if len(tops) > 1 else "it"
            self.notes.append(f"{names}: taken from {where}, as no source has {them} at its "
                              f"top: a script run in that folder, which Python puts first on "
                              f"sys.path, imports {them} from there")

    def note_configured_externals(self) -> None:
        """The packages the file imports because the configuration marks their source
        external: the file needs them installed, which the header says."""
        tops = sorted({imp.module.split(".")[0] for imp in self.externals.values()}
                      & (self.r.external_packages - ALWAYS_EXTERNAL))
        if tops:
            self.notes.append(f"{', '.join(tops)}: external in the configuration, imported "
                              "and never inlined; the file needs "
                              f"{'them' if len(tops) > 1 else 'it'} installed")

    def note_made_at_run_time(self) -> None:
        """Names a module makes only by storing into its namespace: a guess, which the header
        says, one line per module."""
        by_module: dict[tuple[str, str], list[str]] = {}
        for key in self.made_at_run_time:
            by_module.setdefault(key[1], []).append(key[2])
        for mkey, names in sorted(by_module.items()):
            entry = self.entries[mkey]
            lines = entry.facts.namespace_writes
            many = len(names) > 1
            self.notes.append(
                f"{', '.join(f'`{n}`' for n in sorted(names))}: no statement of "
                f"{entry.facts.relpath} binds {'them' if many else 'it'} by name; assumed "
                f"made at run time by its line{'s' if len(lines) > 1 else ''} "
                f"{', '.join(map(str, lines))}, kept here, which store"
                f"{'' if len(lines) > 1 else 's'} names into its namespace")

    def note_imported_by_call(self) -> None:
        """The statements ``name = importlib.import_module("a.b")`` read as imports: they
        are not copied, so the header says what stands for them."""
        for mkey, name in self.imported_by_call:
            entry = self.entries[mkey]
            rec = entry.by_call[name]
            ms = self.ms(entry)
            st = next(st for st in ms.stmts if st.line == rec.line)
            text = " ".join(ms.stmt_text(st).split())
            self.notes.append(
                f"{entry.facts.relpath}:{rec.line} `{text}` is read as the import "
                f"`import {rec.target} as {name}`: that statement is not copied, and what "
                f"`{name}` is read for is inlined here as for that import")

    def note_unindexed_imports(self) -> None:
        """Imports of an indexed package's modules that its ``paths`` leave out (a source
        indexed as ``transformers/models`` keeps ``from transformers.cache_utils import
        Cache``): the file is not standalone, which the header says with the remedy. Also
        said: such modules imported only inside functions (needed when those are called),
        compiled extension modules (no source to inline), modules a package puts into
        ``sys.modules`` as it runs, and modules the sources do not have at all (written
        against another version)."""
        found = sorted({imp.module for imp in self.externals.values()
                        if imp.module.split(".")[0] in self.index.packages
                        and self.index.find_module(imp.module, None) is None
                        and not self.r.is_external(imp.module)})
        # ``from pytorch3d import _C``: a compiled extension of an indexed package (bindings.
        # follow_import), which a source tree has only once the package is built
        subs = sorted({f"{imp.module}.{imp.name}" for imp in self.externals.values()
                       if imp.name is not None and not self.r.is_external(imp.module)
                       and (e := self.index.find_module(imp.module, None)) is not None
                       and e.facts.is_package
                       and self.index.find_module(f"{imp.module}.{imp.name}", None) is None
                       and self.index.extension(f"{imp.module}.{imp.name}")})
        compiled = [m for m in found if not self.r.on_disk(m) and self.r.compiled_on_disk(m)]
        compiled += [m for m in subs if self.r.compiled_on_disk(m)]
        built = [m for m in subs if m not in compiled]
        missing = [m for m in found if not self.r.on_disk(m) and m not in compiled]
        mods = [m for m in found if m not in missing and m not in compiled]
        for m in list(mods):
            files = self.r.namespace_package(m)
            if files is None:
                continue
            mods.remove(m)  # ``import zeta.ops`` works, and there is nothing to inline
            names = sorted({imp.name for imp in self.externals.values()
                            if imp.module == m and imp.name is not None})
            if not names:
                continue
            cased = [f for f in files if f.lower() == "__init__.py"]
            where = (f"; its `{cased[0]}` is `__init__.py` only on a file system that ignores "
                     "case" if cased else "")
            self.notes.append(
                f"imports {', '.join(f'`{n}`' for n in names)} from {m}, a folder without "
                f"`__init__.py` (a namespace package, which binds only its submodules){where}: "
                f"upstream's import fails the same way{' where case matters' if cased else ''}, "
                "kept as written")
        if mods:
            tops = _packages(mods)
            self.notes.append(
                f"imports {', '.join(mods)}: modules of {tops} outside the indexed paths, kept "
                f"as imports, so the file needs {tops} installed (index the whole package to "
                "inline them)")
        deferred = sorted(self.deferred_unindexed - set(found))
        if deferred:
            tops = _packages(deferred)
            self.notes.append(
                f"functions import {', '.join(deferred)} inside their bodies: modules of "
                f"{tops} outside the indexed paths, so calling those functions needs {tops} "
                "installed")
        if compiled:
            tops = _packages(compiled)
            self.notes.append(
                f"imports {', '.join(compiled)}: compiled extension modules of {tops}, which "
                f"have no Python source to copy, kept as imports, so the file needs {tops} "
                "installed")
        if built:
            tops = _packages(built)
            self.notes.append(
                f"imports {', '.join(built)}: compiled extension modules that building {tops} "
                f"makes (its setup.py names them), which have no Python source to copy, kept "
                f"as imports, so the file needs {tops} installed")
        for m in list(missing):
            init = self.r.sys_modules_writer(m)
            if init:
                missing.remove(m)
                self.notes.append(
                    f"imports {m}, which no file of the {_packages([m])} sources indexed here "
                    f"defines; {init} puts modules into sys.modules as it runs, where it likely "
                    f"comes from: kept as written, so the file needs {_packages([m])} "
                    "installed")
        if missing:
            tops = _packages(missing)
            self.notes.append(
                f"imports {', '.join(missing)}, which the {tops} sources indexed here do not "
                "have (upstream was written against another version), kept as written: the "
                "file imports only where a version that has it is installed")

    def visit(self, node: NodeId) -> None:
        if node[0] in self.objects:
            self.visit_module_object(node)
            return
        if is_table_key(node[0]):  # (its rule follows what it holds: engine.computed_imports)
            return
        entry = self.entries[node[0]]
        ms = self.modules[node[0]]
        st = ms.stmts[node[1]]
        uses = ms.uses(st)
        if st.kind == "compound":
            self.visit_guarded_imports(node, entry, st)
        if st.kind in ("class", "function", "compound"):
            self.visit_local_imports(node, entry, st)
        names = [(n, True) for n in sorted(uses.load)] + [(n, False) for n in sorted(uses.lazy)]
        names += [(n, False) for n in sorted(uses.string_annotation_names - uses.load - uses.lazy)]
        for name, load in names:
            if load and name in uses.own:
                # ``except ImportError as e: warn(e)``: the statement's own binding, which
                # every other statement binding ``e`` has nothing to do with
                self.refs.setdefault((node, name), ("def", entry.key, name))
                continue
            self.resolve_name(node, entry, ms, st, name, load, uses.assigned_global)

    def resolve_name(self, node: NodeId, entry: ModuleEntry, ms: ModuleSource, st: TopStmt,
                     name: str, load: bool, assigned_global: set[str]) -> None:
        others = [i for i in self.binders(entry, name) if i != st.index]
        if others and self.r.is_external(entry.module) and all(
                ms.stmts[i].kind != "compound" for i in others):
            # torch's own source as the corpus: everything but the target stays an import
            t = Target("def", name, entry, how="local")
            self.follow(node, entry, st, name, t, load, assigned_global)
            return
        if load and name in st.binds and st.kind in ("class", "function", "assign") and \
                not any(i < st.index for i in others):
            # ``from .outputs import Output`` ... ``class Output(Output):``: bases, decorators,
            # defaults and a right-hand side run before the statement binds the name, so they
            # read the import above it, not the statement itself
            plain = self.plain_import(entry, name, st.line)
            if plain is not None:
                self.follow(node, entry, st, name, self.index.follow_import(entry, plain), load,
                            assigned_global)
                # kept apart: ``refs`` is for the statement's later reads of itself (a method
                # naming its class); a corpus module or an unresolved name records no ref
                key = self.refs.pop((node, name), None)
                if key is not None:
                    self.early_refs[(node, name)] = key
                return
        if others:
            if load:
                others = [i for i in others if i < st.index] or others
            module = self.type_checking_module(entry, name, others)
            if module is not None:
                # ``if TYPE_CHECKING: from allennlp.data import instance as adi`` read as
                # ``"adi.Instance"``: the chains lead to definitions, as for a plain import,
                # through an import that never runs
                first = len(self.deps)
                self.follow(node, entry, st, name, module, load, assigned_global)
                self.deps[first:] = [replace(d, typing_only=True) if d.user == node else d
                                     for d in self.deps[first:]]
                return
            plain = self.plain_import(entry, name, st.line if load else None)
            if plain is not None:
                others = [i for i in others
                          if not self.reimports(entry, ms.stmts[i], name, plain, st)]
            if plain is not None and (not others or plain.line > max(
                    ms.stmts[i].line for i in others)):
                # ``try: import simplejson as json`` ... then ``import json``: the import
                # holds, whatever the statements before it bound; and a guarded statement
                # that imports the very same thing again adds nothing
                self.follow(node, entry, st, name, self.index.follow_import(entry, plain), load,
                            assigned_global)
                return
            nodes = self.add_binders(entry, name, self.own_global_binders(ms, st, name, others))
            key: BindKey = ("def", entry.key, name)
            self.refs[(node, name)] = key
            self.deps.append(Dependency(node, name, "definition", f"{entry.module}.{name}",
                                        "local", 1.0, load, nodes))
            if plain is not None and all(ms.stmts[i].kind == "compound" for i in others):
                self.import_beneath(entry, name, plain, key, nodes)
            return
        if name in st.binds:
            # Only this statement binds it: a self-reference (recursion, a class naming itself),
            # unless its eager use already read an import above it (see above)
            key = ("def", entry.key, name)
            self.refs.setdefault((node, name), key)
            plain = self.plain_import(entry, name, st.line)
            if st.kind == "compound" and plain is not None:
                # FlagEmbedding's ``if is_torch_fx_available(): if ...: import torch.fx`` then
                # ``_prepare_4d_causal_attention_mask = torch.fx.wrap(_prepare_4d_...)``: a
                # statement that rebinds the name only on some paths reads the import above
                # it on the others, as any later reader does (``import_beneath``)
                self.import_beneath(entry, name, plain, key, (node,))
            return
        # a read as the module runs, between two imports of the name: the one above it
        above = st.line if load and sum(
            not r.guard.kind for r in entry.imports.get(name, ())) > 1 else None
        t = self.index.lookup(entry, name, 0, above)
        if t.kind == "module" and name in entry.by_call and name not in entry.imports:
            self.imported_by_call.setdefault((entry.key, name))
        self.follow(node, entry, st, name, t, load, assigned_global)

    def type_checking_module(self, entry: ModuleEntry, name: str, binders: list[int]
                             ) -> Target | None:
        """The corpus module ``name`` stands for where only ``if TYPE_CHECKING:`` imports of
        that one module bind it; None otherwise."""
        ms = self.ms(entry)
        spans = [(ms.stmts[i].line, ms.stmts[i].end_line) for i in binders
                 if ms.stmts[i].kind == "compound"]
        if len(spans) != len(binders):
            return None
        recs = [r for r in entry.imports.get(name, ()) if any(a <= r.line <= b for a, b in spans)]
        if not recs or any(r.guard.kind != "type_checking" for r in recs) or not all(
                bound_only_by_imports(ms.stmts[i].node, name) for i in binders):
            return None
        targets = [self.index.follow_import(entry, r) for r in recs]
        t = targets[0]
        if t.kind != "module" or t.entry is None or any(
                (o.kind, o.name) != (t.kind, t.name) for o in targets[1:]):
            return None
        return t

    def guarded_binders(self, entry: ModuleEntry, name: str) -> list[int]:
        """The statements that bind ``name`` in ``entry``'s module once it has run, where
        guarded statements do (``try``/``if`` importing it), not a plain import after them:
        as ``resolve_name`` finds them for a reader that runs after the module."""
        others = self.binders(entry, name)
        plain = self.plain_import(entry, name, None)
        if others and plain is not None:
            ms = self.ms(entry)
            others = [i for i in others if not self.reimports(entry, ms.stmts[i], name, plain)]
            if others and plain.line > max(ms.stmts[i].line for i in others):
                return []
        return others

    @staticmethod
    def plain_import(entry: ModuleEntry, name: str, above: int | None) -> ImportRecord | None:
        """The last unguarded module-level import that binds ``name`` (above line ``above``
        when the name is read while the module executes)."""
        return last_plain_import(entry.imports.get(name, ()), above)

    def reimports(self, entry: ModuleEntry, st: TopStmt, name: str, plain: ImportRecord,
                  reader: TopStmt | None = None) -> bool:
        """Whether a guarded statement binds ``name`` only by importing what ``plain``
        imports (yolov5's ``except ImportError: import os; os.system("pip install ...")``).
        ``import torch.fx`` binds the ``torch`` of ``import torch`` too (FlagEmbedding's
        ``if is_torch_fx_available(): import torch.fx``), unless ``reader`` reads into
        ``torch.fx``, which that import loads."""
        if st.kind != "compound" or not bound_only_by_imports(st.node, name):
            return False
        inner = [r for r in entry.imports.get(name, ()) if st.line <= r.line <= st.end_line]
        return bool(inner) and all(
            (r.target, r.name) == (plain.target, plain.name)
            or self.binds_package_of(entry, r, plain, reader) for r in inner)

    def binds_package_of(self, entry: ModuleEntry, rec: ImportRecord, plain: ImportRecord,
                         reader: TopStmt | None) -> bool:
        """Whether ``rec`` is ``import a.b`` binding the very ``a`` that ``plain`` (``import
        a`` or ``import a.c``) binds, for a ``reader`` that reads no chain into ``a.b``."""
        if rec.name is not None or rec.asname is not None or plain.name is not None or \
                plain.asname is not None or \
                rec.target.split(".")[0] != plain.target.split(".")[0] or reader is None:
            return False
        return not any(c == rec.target or c.startswith(rec.target + ".")
                       for c in self.ms(entry).chains(reader, rec.bound))

    def import_beneath(self, entry: ModuleEntry, name: str, rec: ImportRecord, key: BindKey,
                       nodes: tuple[NodeId, ...]) -> None:
        """``import os`` and later ``try: ... except ImportError: import os``, or ``if cond:
        X = other``: the conditional statements rebind the name only on some paths, so the
        plain import is needed beneath them. Both bind one name in the generated file."""
        t = self.index.follow_import(entry, rec)
        if t.kind == "def" and t.entry is not None and self.r.is_external(t.entry.module):
            imp = self.external_def(entry, name, t, rec)
            self.shared[key] = ("ext", imp.identity)
            for n in nodes:
                self.deps.append(Dependency(n, name, "external", imp.text(), t.how,
                                            t.confidence, True))
            return
        if t.kind == "module" and self.r.is_external(t.name):
            t = Target("external", t.name, how="import")
        if t.kind == "external":
            imp = self.external_import(entry, name, t)
            self.shared[key] = ("ext", imp.identity)
            for n in nodes:
                self.deps.append(Dependency(n, name, "external", imp.text(), t.how,
                                            t.confidence, True))
        elif t.kind == "def" and t.entry is not None and not t.attr:
            inner = self.add_binders(t.entry, t.name)
            self.shared[key] = ("def", t.entry.key, t.name)
            for n in nodes:  # the import's definition first, then what rebinds it
                self.deps.append(Dependency(n, name, "definition", t.qualified, t.how,
                                            t.confidence, True, inner, t.note))

    def follow(self, node: NodeId, entry: ModuleEntry, st: TopStmt, name: str, t: Target,
               load: bool, assigned_global: set[str]) -> None:
        if name in assigned_global and (t.kind == "unresolved" or t.how == "heuristic"):
            # ``global reg_`` then ``reg_ = ...`` in pykan's ``fit``: the statement binds the
            # name itself, so it is neither unresolved nor a guess from elsewhere (``from
            # sympy import *``)
            return
        if t.kind == "def" and t.entry is not None and self.r.is_external(t.entry.module):
            imp = self.external_def(entry, name, t)
            self.refer_external(node, name, imp)
            self.deps.append(Dependency(node, name, "external", imp.text(), t.how,
                                        t.confidence, load, (),
                                        self.r.why_imported(t.entry.module)))
        elif t.kind == "def" and t.entry is not None:
            own = self.binders(entry, t.name) if t.entry.key == entry.key else []
            nodes = self.add_binders(t.entry, t.name, self.own_global_binders(
                self.ms(entry), st, t.name, own) if own else None)
            key = ("def", t.entry.key, t.name)
            self.refs[(node, name)] = key
            if name != t.name:
                self.avoid_capture(key, node)
            self.note_ambiguity(entry, t)
            if t.confidence < 1.0 and t.note and key not in self.made_at_run_time and \
                    f"{name}: {t.note}" not in self.notes:
                self.notes.append(f"{name}: {t.note}")  # a pick that is not certain is said
            self.deps.append(Dependency(node, name, "definition", t.qualified, t.how,
                                        t.confidence, load, nodes, t.note))
        elif t.kind == "module" and self.r.is_external(t.name):
            imp = self.external_import(entry, name, Target("external", t.name, how="import"))
            self.refer_external(node, name, imp)
            self.submodule_imports(entry, st, name)
            self.deps.append(Dependency(node, name, "external", imp.text(), "import", 1.0, load))
        elif t.kind == "module":
            self.follow_module(node, entry, st, name, t, load)
        elif t.kind == "external":
            imp = self.external_import(entry, name, t)
            self.refer_external(node, name, imp)
            self.submodule_imports(entry, st, name)
            self.deps.append(Dependency(node, name, "external", imp.text(), t.how,
                                        t.confidence, load, (), t.note))
        elif t.kind == "builtin":
            return
        else:
            private = demangled(name, st.node)
            where = unresolved_where(entry, self.ms(entry), st,
                                     private[0] if private else name, t)
            if private is not None:
                # ``warnings.warn(__MSG)`` in a method: Python looks up ``_Cls__MSG``, which
                # upstream never binds either (its module-level ``__MSG`` is another name)
                where += f", private to class {private[1]}: looked up as {name}"
                name = private[0]
            self.unresolved.append((name, where))
            self.deps.append(Dependency(node, name, "unresolved", "", "none", 0.0, load, (),
                                        t.note))

    def refer_external(self, node: NodeId, name: str, imp: ExternalImport) -> None:
        """``name`` in the statement ``node`` reads the external ``imp``. One import binds each
        external for the whole file, under the name the first import met gives it, so a read
        under another name is renamed (torchrec: ``import logging as logger`` in one module,
        ``import logging`` in another): that name must not be one the statement binds inside,
        where the read would be captured (``logger = logging.getLogger(...)`` in a function
        would read its own unbound local)."""
        key: BindKey = ("ext", imp.identity)
        self.refs[(node, name)] = key
        if self.externals[imp.identity].bound != name:
            self.avoid_capture(key, node, keep=name)

    def follow_module(self, node: NodeId, entry: ModuleEntry, st: TopStmt, name: str,
                      t: Target, load: bool) -> None:
        """A name bound to a corpus module: each ``mod.X`` chain becomes a dependency on X and
        is rewritten to X's name in the generated file."""
        ms = self.modules[node[0]]  # ``st`` is its statement
        chains = sorted(ms.chains(st, name), key=lambda c: (len(c), c))
        # each chain is needed at load only where the statement reads it then
        at_load = ms.load_chains(st, name) if load else frozenset()
        done: set[str] = set()
        found = False
        where = f"{entry.module}:{st.line}"
        for chain in chains:
            if any(chain.startswith(d + ".") for d in done):
                continue
            now = chain in at_load
            ct = self.index.resolve_dotted(entry, chain)
            if ct.kind == "unresolved" and self.index.through_getattr(entry, chain):
                # made by a module ``__getattr__`` not followed (engine.lazyattr): the module
                # object standing in for the module lacks it, as the header says
                made = replace(ct, note=f"made by {chain.rsplit('.', 1)[0]}'s module "
                                        "`__getattr__` when asked for, which is not followed")
                self.unresolved.append(
                    (chain, unresolved_where(entry, self.ms(entry), st, chain, made)))
                self.deps.append(Dependency(node, chain, "unresolved", "", "none", 0.0, now,
                                            (), ct.note))
                continue
            if ct.kind == "def" and not ct.attr and ct.entry is not None:
                nodes = self.add_binders(ct.entry, ct.name)
                key = ("def", ct.entry.key, ct.name)
                self.chains.setdefault(node, {})[chain] = key
                self.avoid_capture(key, node)
                sites = None if now or not self.index.through_getattr(entry, chain) else \
                    read_sites(st.node, chain, ms.lines)
                if sites:
                    # read only in functions, through a module ``__getattr__`` that imports
                    # it then (engine.lazyattr): as an import inside those functions
                    self.lazy_reads.update(((node, line), key) for line in sites)
                    self.deps.append(Dependency(node, chain, "definition", ct.qualified,
                                                "local-import", ct.confidence, False, nodes))
                else:
                    self.deps.append(Dependency(node, chain, "definition", ct.qualified,
                                                "attribute", ct.confidence, now, nodes))
                done.add(chain)
                found = True
            elif ct.kind == "external":
                imp = ExternalImport(ct.name.rsplit(".", 1)[0], ct.name.rsplit(".", 1)[1], None)
                self.externals.setdefault(imp.identity, imp)
                self._bind(("ext", imp.identity))
                self.chains.setdefault(node, {})[chain] = ("ext", imp.identity)
                self.deps.append(Dependency(node, chain, "external", imp.text(), "attribute",
                                            ct.confidence, now))
                done.add(chain)
                found = True
        for chain in sorted(chains, key=lambda c: (-len(c), c)):
            # ``getattr(litgpt.lora, name)``: a submodule reached by a chain, used as a value
            ct = self.index.resolve_dotted(entry, chain)
            if ct.kind == "module" and ct.entry is not None and \
                    not self.r.is_external(ct.entry.module) and ms.reads_bare(st, chain, done):
                obj = self.module_object(ct.entry, chain.rsplit(".", 1)[-1], where)
                if reads_computed_attr(st.node, chain):
                    self.hold_listed(obj[0], where)
                self.chains.setdefault(node, {})[chain] = ("def", obj[0], MODULE_OBJECT)
                self.avoid_capture(("def", obj[0], MODULE_OBJECT), node)
                self.deps.append(Dependency(node, chain, "definition", ct.name,
                                            "module-object", 1.0, chain in at_load, (obj,)))
                done.add(chain)
                found = True
        if found and not ms.reads_bare(st, name, done):
            return
        if t.entry is not None:
            obj = self.module_object(t.entry, name, where)
            if reads_computed_attr(st.node, name):
                self.hold_listed(obj[0], where)
            self.refs[(node, name)] = ("def", obj[0], MODULE_OBJECT)
            self.deps.append(Dependency(node, name, "definition", t.name, "module-object", 1.0,
                                        load, (obj,)))
        else:
            # A package whose ``__init__`` is not indexed, used as a value, cannot be inlined:
            # keep its import, and say the file needs that package installed.
            ext = Target("external", t.name, how="module-object", confidence=0.5)
            imp = self.external_import(entry, name, ext)
            self.refs[(node, name)] = ("ext", imp.identity)
            note = (f"{entry.module}:{st.line}: corpus module {t.name} is used as a value; "
                    f"kept `{imp.text()}`, so the file needs {t.name.split('.')[0]} installed")
            if note not in self.notes:
                self.notes.append(note)
            self.deps.append(Dependency(node, name, "external", imp.text(), "module-object",
                                        0.5, load, (), note))

    def visit_guarded_imports(self, node: NodeId, entry: ModuleEntry, st: TopStmt) -> None:
        """Imports inside a kept ``try``/``if``: corpus ones become dependencies (and are
        rewritten to assignments), external ones stay as they are. An ``if TYPE_CHECKING:``
        import never runs, so it brings its definition only once something reads its name
        (peft's ``mapping.py`` imports ``BaseTuner`` and ``PeftConfig`` there for two
        annotations); until then it is dropped as unused."""
        uses = self.ms(entry).uses(st)
        reads = uses.load | uses.lazy | uses.string_annotation_names  # its own body's too
        for recs in entry.imports.values():
            for rec in recs:
                if not (st.line <= rec.line <= st.end_line):
                    continue
                if rec.guard.kind == "type_checking" and rec.bound not in reads \
                        and (node, rec.bound) not in self.demanded:
                    self.guarded[(node, rec.line, rec.bound)] = UNUSED
                    self.pending.setdefault((node, rec.bound), []).append(rec)
                    continue
                self.guarded_import(node, entry, rec)
        self.visit_guarded_stars(node, entry, st, reads)

    def visit_guarded_stars(self, node: NodeId, entry: ModuleEntry, st: TopStmt,
                            reads: set[str] | frozenset[str]) -> None:
        """Star imports of corpus modules inside a kept ``try``/``if`` (rockpool's
        ``nn/modules/torch/__init__.py``: ``try: from .torch_module import *`` and eleven
        more, ``except: ... TorchModule = missing_backend_shim(...)``). Each name the star
        binds is one guarded import of it, taken up where a reader needs that name from the
        statement (or the statement reads it itself); the star import itself goes, as the
        file must not import the corpus. Where nothing needs one of its names it is dropped."""
        for star in entry.stars:
            if not (st.line <= star.line <= st.end_line) or not star.target:
                continue
            src = self.index.find_imported(star.target, entry)
            if src is None or self.r.is_external(src.module):
                continue
            self.guarded[(node, star.line, "*")] = UNUSED
            for name in sorted(self.index.exports(src)):
                rec = replace(star, bound=name, name=name)
                if (node, name) in self.demanded or name in reads:
                    self.guarded_import(node, entry, rec)
                else:
                    self.pending.setdefault((node, name), []).append(rec)

    def guarded_import(self, node: NodeId, entry: ModuleEntry, rec: ImportRecord) -> None:
        """One import inside the kept compound statement ``node``."""
        self.guarded.pop((node, rec.line, rec.bound), None)  # read after all
        t = self.index.follow_import(entry, rec)
        if t.kind == "def" and t.entry is not None:
            nodes = self.add_binders(t.entry, t.name)
            key = ("def", t.entry.key, t.name)
            self.guarded[(node, rec.line, rec.bound)] = key
            if rec.guard.kind == "type_checking" and rec.bound == t.name \
                    and not _runs_binding(entry, rec.bound):
                # never executed: the import and the inlined definition are one name (unless
                # the module binds the name as it runs: torchquantum's ``else: QuantumDevice
                # = None`` is not the class, whose name it takes in the file)
                self.shared[("def", entry.key, rec.bound)] = key
            elif rec.guard.kind != "type_checking":
                self.note_unsure(node, rec, t.entry, t.name, nodes)
            self.deps.append(Dependency(node, rec.bound, "definition", t.qualified,
                                        "guarded", t.confidence, True, nodes,
                                        typing_only=rec.guard.kind == "type_checking"))
        elif t.kind == "module" and t.entry is not None:
            # ``except ImportError: from .. import triton_missing as dummy`` then
            # ``dummy.DummyImport()`` (spikingjelly): the name stands for the module object
            obj = self.module_object(t.entry, rec.bound, f"{entry.module}:{rec.line}")
            key = ("def", obj[0], MODULE_OBJECT)
            self.guarded[(node, rec.line, rec.bound)] = key
            self.deps.append(Dependency(node, rec.bound, "definition", t.name, "module-object",
                                        1.0, True, (obj,),
                                        typing_only=rec.guard.kind == "type_checking"))

    def note_unsure(self, node: NodeId, rec: ImportRecord, home: ModuleEntry, name: str,
                    binders: tuple[NodeId, ...]) -> None:
        """An import of ``name`` from ``home`` that raises ImportError upstream where the
        statements binding it there can run to their end without binding it (megatron's
        ``try: from transformer_engine.pytorch.attention import ...; def fused_apply_rotary_pos_emb
        ... except ImportError: pass``)."""
        if not rec.is_from or not binders or ("def", home.key, name) in self.made_at_run_time:
            return
        ms = self.ms(home)
        if name not in definitely_bound([ms.stmts[n[1]].node for n in binders]):
            self.unsure[(node, rec.line, rec.bound)] = \
                f"cannot import name {rec.name!r} from {rec.target or home.module!r}"

    def visit_local_imports(self, node: NodeId, entry: ModuleEntry, st: TopStmt) -> None:
        """Imports inside a function (timm's ``def load_pretrained(...): from
        .vision_transformer import _load_weights``, deferred to avoid an import cycle): a
        corpus name becomes a dependency, inlined at module level, and the import is dropped
        or becomes ``bound = name`` (the file has no package for a relative import, and
        importing the corpus is what the file must not do). External ones stay deferred."""
        ms = self.ms(entry)
        for imp, in_class_body, holder in ms.nested_imports(st):
            for rec in _import_records(imp, entry):
                if self.r.is_external(rec.target or ""):
                    continue
                t = self.index.follow_import(entry, rec)
                if t.kind == "external" and (rec.target or "").split(".")[0] \
                        not in self.index.packages:
                    # another package's: kept as written, read or not (``try: import sklearn
                    # except ImportError: raise ...`` in peft checks that it is there)
                    continue
                if not in_class_body and not ms.mentions_outside_imports(st, rec.bound) \
                        and not self.registers(t):
                    # (in a class body the import is a class attribute: kept whatever reads it)
                    self.guarded[(node, rec.line, rec.bound)] = UNUSED
                    continue
                if t.kind == "def" and t.entry is not None and not t.attr \
                        and not self.r.is_external(t.entry.module):
                    nodes = self.add_binders(t.entry, t.name)
                    key = ("def", t.entry.key, t.name)
                    self.guarded[(node, rec.line, rec.bound)] = key
                    # the import becomes ``bound = name``, in a scope whose other locals
                    # would capture ``name`` (BigVGAN binds a local ``Activation1d`` beside
                    # ``from .cuda import Activation1d as CudaActivation1d``); it is dropped
                    # where ``name`` is ``bound``, unless the scope binds that otherwise too
                    self.avoid_capture(key, node, keep=None if rebound_beside(
                        holder, imp, rec.bound) else rec.bound)
                    self.note_unsure(node, rec, t.entry, t.name, nodes)
                    self.deps.append(Dependency(node, rec.bound, "definition", t.qualified,
                                                "local-import", t.confidence, in_class_body,
                                                nodes))
                elif t.kind == "module" and t.entry is not None and holder is not None \
                        and not in_class_body and not self.r.is_external(t.entry.module) \
                        and (rec.is_from or rec.asname or "." not in (rec.target or "")) \
                        and t.entry.key in self.r.imported_along_of(self.entry):
                    # the module itself, bound by the import, of a module upstream's import
                    # of the block's module runs already (so the import only fetches it): a
                    # module object stands in for it, holding what the function reads from it
                    # (all where it uses it as a value, torch_geometric's ``vars(aggr)``), so
                    # the file needs no package. A module upstream first runs there (einops'
                    # ``from .layers import tensorflow``, which imports tensorflow) stays an
                    # import, as its code must run only then (engine.deferred)
                    obj = self.module_object(t.entry, rec.bound, f"{entry.module}:{rec.line}",
                                             attribute_reads(holder, rec.bound))
                    self.guarded[(node, rec.line, rec.bound)] = ("def", obj[0], MODULE_OBJECT)
                    self.deps.append(Dependency(node, rec.bound, "definition", t.name,
                                                "local-import", 1.0, False, (obj,)))
                elif t.kind in ("module", "unresolved") and (
                        t.entry is not None or self.index.find_module(
                            rec.target, entry.source) is not None):
                    note = (f"{entry.module}:{rec.line}: `{rec.bound}` is imported from the "
                            f"corpus inside a function and kept as written; calling it needs "
                            f"{entry.module.split('.')[0]} installed")
                    if note not in self.notes:
                        self.notes.append(note)
                    # unless the module is a value here already (bind_local_module_imports)
                    self.local_modules.append((node, rec, t, in_class_body, note))
                elif rec.target and rec.target.split(".")[0] in self.index.packages and \
                        self.index.find_module(rec.target, None) is None:
                    self.deferred_unindexed.add(rec.target)  # said once, in the header

    def registers(self, t: Target) -> bool:
        """Whether ``t`` is a corpus definition whose decorator registers it (``@registry.
        register``, ``@MODELS.register_module()``): an import of it that nothing reads is
        there for that, as pytorch3d's ``GenericModel.pre_expand`` imports ``LSTMRenderer``
        and six more so that implicitron's registry has them when the model is configured."""
        if t.kind != "def" or t.entry is None or t.attr or self.r.is_external(t.entry.module):
            return False
        ms = self.ms(t.entry)
        for i in ms.binders.get(t.name, ()):
            node = ms.stmts[i].node
            for d in getattr(node, "decorator_list", ()):
                name = dotted(d.func if isinstance(d, ast.Call) else d) or ""
                if name.rpartition(".")[2].startswith("register"):
                    return True
        return False

    def external_def(self, entry: ModuleEntry, name: str, t: Target,
                     rec: ImportRecord | None = None) -> ExternalImport:
        """A corpus definition of a package that is imported, never inlined (torch, a source
        marked external): the import as the using module writes it when it imports the name
        from that package (``from mmengine.registry import Registry``, not the module
        defining it), else from the defining module. One import per definition: the first
        form met binds it for every user."""
        key: BindKey = ("def", t.entry.key, t.name)
        imp = self.external_defs.get(key)
        if imp is None:
            if rec is None and entry.imports.get(name):
                rec = binding_import(entry.imports[name], None)
            if rec is not None and rec.name is not None and rec.target and \
                    self.r.is_external(rec.target):
                imp = ExternalImport(rec.target, rec.name, rec.asname)
            else:
                imp = ExternalImport(t.entry.module, t.name, None if t.name == name else name)
            imp = self.external_defs[key] = self.add_external(imp)
        self._bind(("ext", imp.identity))
        return imp

    def external_import(self, entry: ModuleEntry, name: str, t: Target) -> ExternalImport:
        recs = entry.imports.get(name)
        imp: ExternalImport | None = None
        if t.how in ("import", "module-object") and recs:
            # an import of what the lookup found (``from torch import einsum`` and later
            # ``from einops import einsum``: the second), as the module writes it; the first
            # of those binding the same thing (``import torch`` before ``import torch.fx``)
            rec: ImportRecord = next((r for r in recs if r.full_name() == t.name),
                                     binding_import(recs, None))
            if rec.name is None:
                imp = ExternalImport(rec.target, None, rec.asname)
            elif rec.target:
                imp = ExternalImport(rec.target, rec.name, rec.asname)
        if imp is None:
            mod, _, last = t.name.rpartition(".")
            imp = ExternalImport(mod, last, None if last == name else name) if mod else \
                ExternalImport(t.name, None, None)
        imp = self.add_external(imp)
        self._bind(("ext", imp.identity))
        return imp

    def submodule_imports(self, entry: ModuleEntry, st: TopStmt, name: str) -> None:
        """The module's other ``import a.b.c`` of the external package the statement reads as
        ``name``, for each ``a.b.c...`` chain it reads: they bind the same name, and the
        file's one import of it would leave the submodule unloaded. orb's
        ``property_definitions.py`` has ``import ase.data`` and ``import ase.db.row`` and reads
        ``ase.db.row.AtomsRow``: kept ``import ase.data`` alone, 6 files raised AttributeError
        ("module 'ase' has no attribute 'db'") where upstream's module imports."""
        recs = [r for r in entry.imports.get(name, ()) if r.name is None and r.asname is None
                and r.target and "." in r.target and not r.guard.kind]  # (a guarded one
        # may fail where upstream's guard catches it: it stays with its guard)
        if not recs:
            return
        chains = self.ms(entry).chains(st, name)
        for rec in recs:
            if any(c == rec.target or c.startswith(rec.target + ".") for c in chains):
                imp = self.add_external(ExternalImport(rec.target, None, None))
                self._bind(("ext", imp.identity))

    def add_external(self, imp: ExternalImport) -> ExternalImport:
        """Records an external import; the first of one identity binds it."""
        prev = self.externals.get(imp.identity)
        if prev is None:
            self.externals[imp.identity] = imp
        elif imp.name is None and prev.name is None and imp.module != prev.module and \
                imp.asname is None and prev.asname is None:
            # ``import torch`` and ``import torch.nn`` both bind torch: keep both lines
            self.externals[f"{imp.module}#"] = imp
        return imp

    def note_ambiguity(self, entry: ModuleEntry, t: Target) -> None:
        if t.entry is None:
            return
        cands = self.index.by_module.get(t.entry.module, [])
        if len(cands) > 1 and t.entry.source != entry.source:
            msg = (f"{t.entry.module} exists in {len(cands)} repositories "
                   f"({', '.join(c.source for c in cands)}); took {t.entry.source} "
                   f"by priority")
            if msg not in self.notes:
                self.notes.append(msg)

    # -- naming and order ------------------------------------------------------------------
    def avoid_capture(self, key: BindKey, node: NodeId, keep: str | None = None) -> None:
        """``mod.X`` or an alias of X, rewritten to X's own name in a statement that binds
        that name in one of its inner scopes (``def __init__(self, X=mod.X)``, a class
        attribute ``X = ...``), would be captured: X must take another name there. ``keep``:
        the name the statement reads it by, which its reads may keep."""
        ms = self.modules[node[0]]
        locals_ = ms.local_names(ms.stmts[node[1]]) - {keep}
        if locals_:
            self.avoid.setdefault(key, set()).update(locals_)

    def registers_itself(self, key: BindKey) -> bool:
        """Whether a statement of the closure that binds the definition ``key`` registers it
        under its own name (config_keys.registers_own_name)."""
        if key[0] != "def" or key[1] not in self.modules:
            return False
        ms = self.modules[key[1]]
        return any((key[1], i) in self.seen and registers_own_name(ms.stmts[i].node)
                   for i in ms.binders.get(key[2], ()))

    def allocate_names(self) -> dict[BindKey, str]:
        # ``__all__`` is the file's own, the block's, bound last: a module's that the file
        # inlines takes another name, or a function that reads it when called (torch_points3d's
        # ``set_backend``: ``for val in __all__``) would read the block's
        taken: dict[str, BindKey] = {"__all__": ("file", "__all__")}
        out: dict[BindKey, str] = {}
        # a name made at run time cannot be renamed: it takes its own first; then a
        # definition that registers itself under its own name, which a registry would
        # otherwise hold under the new one (mmcv's ``@MODELS.register_module() class
        # MultiheadAttention`` beside mmpretrain's unregistered ``MultiheadAttention``)
        for key in sorted(self.bind_order, key=lambda k: (k not in self.made_at_run_time,
                                                          not self.registers_itself(k))):
            if key in self.shared:
                continue
            if key[0] == "def" and key[1] in self.objects:
                want = self.objects[key[1]].name
                tail = self.entries[key[1]].module.rsplit(".", 1)[-1]
            elif key[0] == "def":
                want = key[2]
                tail = key[1][1].rsplit(".", 1)[-1]
            else:
                imp = self.externals.get(key[1])
                if imp is None:
                    continue
                want = imp.bound
                tail = imp.module.split(".")[-1]
            name = want
            avoid = self.avoid.get(key, set())
            own = _own_name(imp) if key[0] == "ext" and name in avoid else None
            if own is not None and own not in taken and own not in avoid:
                name = own  # ``import logging as logger`` captured: ``logging``
            elif (name in taken and taken[name] != key) or name in avoid:
                name = _renamed(want, tail)
                k = 2
                while name in taken or name in avoid:
                    name = _renamed(want, f"{tail}{k}")
                    k += 1
            taken[name] = key
            out[key] = name
        for key, other in self.shared.items():
            if other in out:
                out[key] = out[other]
        for ident, imp in list(self.externals.items()):
            bound = out.get(("ext", imp.identity))
            if bound is not None and bound != imp.bound:
                self.externals[ident] = imp.with_bound(bound)
        return out


def unresolved_where(entry: ModuleEntry, ms: ModuleSource, st: TopStmt, name: str,
                     t: Target) -> str:
    """Where the statement ``st`` reads the unresolved ``name`` (``module:line``, the line of
    its first read as the module's name, not a local of that name in another method), and
    why, where the lookup knows more than that nothing binds it: timm_3d's davit imports
    ``LayerNorm2d`` from ``timm_3d.layers``, which has none. The line is worked out once per
    statement and name: each block whose closure holds the statement reports it (in a
    profile of 40 torchrl blocks, two fifths of the time went into walking the same classes for
    the same names)."""
    line = ms.memo(("unresolved read", st.index, name), lambda: _first_global_read(ms, st, name))
    where = f"{entry.module}:{line or st.line}"
    if t.note and t.note != f"not bound in {entry.module}":
        where += f", {t.note}"
    return where


def _first_global_read(ms: ModuleSource, st: TopStmt, name: str) -> int | None:
    """``unresolved_where``'s line: the first that reads ``name`` as the module's."""
    try:
        lines = scopes.global_read_lines(ms.stmt_text(st), name, st.node, st.line)
    except ValueError:
        lines = []
    return min(lines) + st.line - 1 if lines else first_read_line(st.node, name)


def _runs_binding(entry: ModuleEntry, name: str) -> bool:
    """Whether ``entry`` binds ``name`` at module level other than by an ``if TYPE_CHECKING:``
    import (its ``else``'s ``X = None``, say)."""
    return any(s.guard.kind != "type_checking" for s in entry.defs.get(name, ())) or any(
        r.guard.kind != "type_checking" for r in entry.imports.get(name, ()))


def _renamed(want: str, tail: str) -> str:
    """``want`` renamed after its module's last part ``tail``: ``Mlp_layers``. A dunder name
    stays one (``__all_functions__``): ``__all___functions`` read in a class body or method
    would be a private name, which Python looks up as ``_Cls__all___functions``."""
    tail = tail.replace(".", "_")
    if len(want) > 4 and want.startswith("__") and want.endswith("__"):
        return f"{want[:-2]}_{tail}__"
    return f"{want}_{tail}"


def _own_name(imp: ExternalImport) -> str | None:
    """The name an external import binds without its ``as``, where that name is the object
    itself (``logging`` of ``import logging as logger``); None for ``import a.b as c``, whose
    ``a`` is another object."""
    if imp.name is not None:
        return imp.name
    return imp.module if "." not in imp.module else None


def _import_records(node: ast.Import | ast.ImportFrom, entry: ModuleEntry) -> list[ImportRecord]:
    end = node.end_lineno or node.lineno
    if isinstance(node, ast.Import):
        return [ImportRecord(a.asname or a.name.split(".")[0], a.name, None, a.asname, 0, a.name,
                             node.lineno, end) for a in node.names]
    target = resolve_relative(entry.module, entry.facts.is_package, node.level, node.module)
    return [ImportRecord(a.asname or a.name, node.module or "", a.name, a.asname, node.level,
                         target, node.lineno, end) for a in node.names if a.name != "*"]


def _decode(data: bytes) -> str:
    import io
    import tokenize

    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(enc)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        text = data.decode("utf-8", "replace")
    text = text[1:] if text.startswith("\ufeff") else text
    # one file, one kind of line ending: a CRLF module's lines are copied with "\n" (said in
    # the header); line numbers are unchanged, as Python counts "\r\n" as one line break
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
