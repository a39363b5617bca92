"""Import-system resolution over the whole index: what a name used in a module refers to.

Follows a module's own definitions and imports (relative imports, package ``__init__``
re-exports and chains of them, ``from x import *`` honouring ``__all__``, ``import a.b as c``
with attribute chains, aliases) to a corpus definition, a corpus module or an external name.
Absolute module names are looked up in the using module's own source first, so a definition
never comes from another repository that merely has the same module name.
"""

from __future__ import annotations

import builtins
import functools
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable

from nnrag_tui.engine.facts import ImportRecord, ModuleFacts, Symbol
from nnrag_tui.engine.syspath import CWD

BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__",
                                       "__package__", "__loader__", "__path__", "__builtins__"}
MAX_DEPTH = 40
# top-level modules never looked for beside a script's folder (ModuleIndex.script_folder_module)
NEVER_BESIDE = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__", "torch"}
GUARD_RANK = {"": 0, "try": 1, "with": 2, "type_checking": 3, "if": 4, "except": 5}


@dataclass
class ModuleEntry:
    """One indexed module with lookup tables built from its facts."""

    source: str
    priority: int
    file_id: int
    facts: ModuleFacts
    defs: dict[str, list[Symbol]] = field(default_factory=dict)  # top-level bindings
    classes: dict[str, Symbol] = field(default_factory=dict)  # by qualname, nested included
    imports: dict[str, list[ImportRecord]] = field(default_factory=dict)
    stars: list[ImportRecord] = field(default_factory=list)
    # the names its ``__getattr__`` provides by an import (engine.lazyattr)
    lazy: dict[str, ImportRecord] = field(default_factory=dict)
    # the names a module-level ``importlib.import_module("a.b")`` binds (engine.dynimport)
    by_call: dict[str, ImportRecord] = field(default_factory=dict)

    @classmethod
    def from_facts(cls, source: str, priority: int, file_id: int,
                   facts: ModuleFacts) -> ModuleEntry:
        e = cls(source, priority, file_id, facts)
        for s in facts.symbols:
            if s.parent is None:
                e.defs.setdefault(s.name, []).append(s)
            if s.kind == "class":
                e.classes[s.qualname] = s
        for imp in facts.imports:
            if imp.is_star:
                e.stars.append(imp)
            else:
                e.imports.setdefault(imp.bound, []).append(imp)
        for recs in e.imports.values():
            recs.sort(key=lambda r: GUARD_RANK.get(r.guard.kind, 9))
        e.lazy = {imp.bound: imp for imp in facts.lazy_imports}
        e.by_call = {imp.bound: imp for imp in facts.module_imports}
        return e

    @property
    def module(self) -> str:
        return self.facts.module

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.facts.module)


@dataclass(frozen=True)
class Target:
    """What a name refers to. ``kind``: ``def`` (a module-level binding ``name`` of
    ``entry``; ``attr`` holds a nested class path or attribute tail), ``module``, ``external``
    (``name`` is the absolute dotted name), ``builtin`` or ``unresolved``."""

    kind: str
    name: str
    entry: ModuleEntry | None = None
    attr: str = ""
    how: str = "local"  # local | import | re-export | star | attribute | builtin | heuristic
    confidence: float = 1.0
    note: str = ""

    @property
    def qualified(self) -> str:
        if self.entry is None:
            return self.name
        base = self.entry.module if self.kind == "module" else f"{self.entry.module}.{self.name}"
        return f"{base}.{self.attr}" if self.attr else base


class ModuleIndex:
    def __init__(self, rows: Iterable[tuple[str, int, int, ModuleFacts]],
                 checkout_packages: dict[str, str] | None = None,
                 extension: Callable[[str], bool] | None = None) -> None:
        """``rows``: the indexed modules; ``checkout_packages``: {source: package} for a source
        that is a repository checkout whose root folder is itself a package, indexed under
        that package's name (sources.checkout_packages): its scripts run in that folder;
        ``extension``: whether a module is a compiled extension of the sources
        (engine.extensions), none without it."""
        self.checkout_packages = dict(checkout_packages or {})
        self.extension = extension or (lambda module: False)
        self.entries: dict[tuple[str, str], ModuleEntry] = {}
        self.by_module: dict[str, list[ModuleEntry]] = {}
        self.priority: dict[str, int] = {}
        for source, priority, fid, facts in rows:
            if not facts.ok:
                continue
            e = ModuleEntry.from_facts(source, priority, fid, facts)
            self.entries[e.key] = e
            self.by_module.setdefault(facts.module, []).append(e)
            self.priority.setdefault(source, priority)
        for lst in self.by_module.values():
            lst.sort(key=lambda e: (e.priority, e.source))
        self._exports: dict[tuple[str, str], frozenset[str]] = {}
        self._ext_star: dict[tuple[str, str], tuple[str, str] | None] = {}
        self._memo: dict[tuple, Target] = {}  # (module key, name[, line it has run to])
        self._importing: dict[tuple[tuple[str, str], tuple[str, str]], int | None] = {}
        self._folders: dict[tuple[str, str], list[str]] = {}  # (run_folders)

    # -- modules ---------------------------------------------------------------------------
    @functools.cached_property
    def packages(self) -> frozenset[str]:
        """Every dotted prefix of an indexed module (``a`` and ``a.b`` for ``a.b.c``): the
        packages that exist, whether or not their ``__init__`` is indexed."""
        out: set[str] = set()
        for module in self.by_module:
            parts = module.split(".")
            out.update(".".join(parts[:i]) for i in range(1, len(parts)))
        return frozenset(out)

    @functools.cached_property
    def _submodules(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for module in self.by_module:
            parent = module.rpartition(".")[0]
            if parent:
                out.setdefault(parent, []).append(module)
        return {k: sorted(v) for k, v in out.items()}

    def submodules(self, package: str, source: str) -> list[ModuleEntry]:
        """The indexed modules directly inside ``package`` (its modules and the ``__init__``
        of its subpackages) that ``source`` has, by name."""
        out = []
        for module in self._submodules.get(package, ()):
            e = self.find_module(module, source)
            if e is not None and e.source == source:
                out.append(e)
        return out

    @functools.cached_property
    def _path_roots(self) -> dict[str, list[str]]:
        """Source -> the packages whose folders its modules put on ``sys.path`` (engine.
        syspath), as dotted prefixes of its module names."""
        inserted: dict[str, list[str]] = {}
        for e in self.entries.values():
            for folder in e.facts.path_inserts:
                if folder.startswith(CWD):
                    continue  # (where it points depends on the working folder: _cwd_folders)
                if folder not in inserted.setdefault(e.source, []):
                    inserted[e.source].append(folder)
        out: dict[str, list[str]] = {}
        for source, folders in inserted.items():
            for folder in folders:
                prefix = self._folder_package(source, folder)
                if prefix and prefix not in out.setdefault(source, []):
                    out[source].append(prefix)
        return out

    def _folder_package(self, source: str, folder: str) -> str | None:
        """The dotted name the modules in ``folder`` (relative to the source's root) have
        above their own: ``pkg.sub`` for ``pkg/sub/x.py`` named ``pkg.sub.x``; None where
        no module of the source is in it, or its modules' names start there already."""
        head = "" if folder == "." else folder + "/"
        for e in self.entries.values():
            if e.source != source or not e.facts.relpath.startswith(head):
                continue
            rest = e.facts.relpath[len(head):].removesuffix(".py").replace("/", ".")
            rest = rest.removesuffix(".__init__").removesuffix("__init__")
            if not rest:
                continue  # (the folder's own ``__init__``)
            if e.module == rest:
                return None
            if e.module.endswith("." + rest):
                return e.module[: -len(rest) - 1]
        return None

    def find_module(self, module: str, from_source: str | None) -> ModuleEntry | None:
        cands = self.by_module.get(module)
        if not cands and from_source is not None:
            # a module found under a folder its source puts on ``sys.path`` (torchxrayvision's
            # ``from model.utils import get_norm``)
            for prefix in self._path_roots.get(from_source, ()):
                for e in self.by_module.get(f"{prefix}.{module}", ()):
                    if e.source == from_source:
                        return e
        if not cands:
            return None
        if from_source is not None:
            for e in cands:
                if e.source == from_source:
                    return e
        return cands[0]

    def find_imported(self, module: str, importer: ModuleEntry) -> ModuleEntry | None:
        """The module ``importer``'s ``import module`` loads: ``find_module``, and where
        ``importer``'s own source has none of that name, one beside a folder a script of that
        source is run from (``script_folder_module``), before another source's."""
        found = self.find_module(module, importer.source)
        if found is not None and found.source == importer.source:
            return found
        return self.script_folder_module(module, importer) or found

    def script_folder_module(self, module: str, importer: ModuleEntry) -> ModuleEntry | None:
        """``module`` in a folder above ``importer`` that no package encloses, innermost
        first: the folder of the scripts that import it. UniFormer's ``object_detection/``
        (no ``__init__.py``) holds ``mmcv_custom/`` and a changed copy of ``mmdet/`` beside
        its ``train.py``; its backbones import ``from mmcv_custom import load_checkpoint``
        and ``from mmdet.models.builder import BACKBONES``, which Python finds there as the
        script runs: the folder is first on ``sys.path``. A standard library module or torch
        is never looked for there, nor is the importer itself: hyena-dna's
        ``src/ops/fftconv.py`` runs ``import fftconv``, its compiled extension."""
        if module.split(".")[0] in NEVER_BESIDE:
            return None
        for folder in self.run_folders(importer):
            for e in self.by_module.get(f"{folder}.{module}", ()):
                if e.source == importer.source and e is not importer:
                    return e
        return None

    def script_folder(self, module: str, importer: ModuleEntry) -> str | None:
        """The folder (a dotted module prefix) ``importer``'s import of ``module`` finds it in
        (``script_folder_module``); None where its source has the module by name."""
        found = self.find_module(module, importer.source)
        if found is not None and found.source == importer.source:
            return None
        e = self.script_folder_module(module, importer)
        return e.module[: -len(module) - 1] if e is not None else None

    def _beside(self, t: Target, module: str, importer: ModuleEntry) -> Target:
        """``t``, found through ``importer``'s import of ``module``, as a guess where that
        import found the module beside a script's folder (``script_folder_module``)."""
        if self.script_folder(module, importer) is None:
            return t
        return Target(t.kind, t.name, t.entry, t.attr, "heuristic", min(t.confidence, 0.8),
                      t.note)

    @functools.cached_property
    def _cwd_folders(self) -> dict[str, frozenset[str]]:
        """{source: the folders (dotted prefixes) its modules put on ``sys.path`` as relative
        paths of their own (engine.syspath.CWD)}: KAIR's ``models/network_faceenhancer.py``
        runs ``sys.path.insert(0, 'models')``, then ``from op import upfirdn2d``; a script run
        at the root, as KAIR's are, finds ``models/op`` so."""
        out: dict[str, set[str]] = {}
        for e in self.entries.values():
            for folder in e.facts.path_inserts:
                if folder.startswith(CWD):
                    out.setdefault(e.source, set()).add(
                        folder.removeprefix(CWD).strip("/").replace("/", "."))
        return {source: frozenset(folders) for source, folders in out.items()}

    @functools.cached_property
    def _entered(self) -> dict[str, frozenset[str]]:
        """{source: the folders (dotted prefixes) its modules' absolute imports name}: a
        folder imported through by name (safari's ``import src.tasks.metrics as M``) is
        reached from a folder above it, where the scripts run, not run in itself."""
        out: dict[str, set[str]] = {}
        for e in self.entries.values():
            names = out.setdefault(e.source, set())
            for r in e.facts.imports:
                if r.level == 0 and r.target:
                    parts = r.target.split(".")
                    names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        return {source: frozenset(names) for source, names in out.items()}

    def run_folders(self, importer: ModuleEntry) -> list[str]:
        """The folders above ``importer`` (dotted module prefixes, innermost first) that no
        package of its source encloses; the source's root is not one (``find_module``). The
        root folder of a checkout indexed as a package (``checkout_packages``) is one: ACNet's
        root holds an ``__init__.py`` and ``builder.py``, and its modules import ``from
        builder import ConvBuilder``, as its scripts run there. A folder the source's imports
        name (``_entered``) is none: safari's ``src/tasks/tasks.py`` runs ``import
        src.tasks.metrics as M`` and ``import torchmetrics as tm``, the installed package, not
        its neighbour ``src/tasks/torchmetrics.py``, as its scripts run at the root; unless a
        module puts it on ``sys.path`` by a relative path (``_cwd_folders``)."""
        hit = self._folders.get(importer.key)
        if hit is None:
            parts = importer.module.split(".")
            entered = (self._entered.get(importer.source, frozenset())
                       - self._cwd_folders.get(importer.source, frozenset()))
            hit = []
            for i in range(1, len(parts)):
                prefix = ".".join(parts[:i])
                checkout = i == 1 and self.checkout_packages.get(importer.source) == prefix
                if not checkout and any(e.source == importer.source and e.facts.is_package
                                        for e in self.by_module.get(prefix, ())):
                    break  # (a package's folder, and every folder inside it)
                if prefix not in entered:
                    hit.append(prefix)
            hit.reverse()
            self._folders[importer.key] = hit
        return hit

    # -- names -----------------------------------------------------------------------------
    def lookup(self, entry: ModuleEntry, name: str, _depth: int = 0,
               _above: int | None = None) -> Target:
        """The module-level binding of ``name`` as seen from inside ``entry`` (by a module
        that ``entry`` imports at line ``_above``, while it has run only that far)."""
        key = (entry.key, name) if _above is None else (entry.key, name, _above)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        if _depth > MAX_DEPTH:
            return Target("unresolved", name, note="import cycle")
        self._memo[key] = Target("unresolved", name, note="import cycle")  # cycle guard
        t = self._lookup(entry, name, _depth, _above)
        self._memo[key] = t
        return t

    def _lookup(self, entry: ModuleEntry, name: str, depth: int,
                above: int | None = None) -> Target:
        lazy = entry.lazy.get(name)
        if lazy is not None:
            # PEP 562: the module binds the name by no statement (a value-less annotation at
            # most), and its ``__getattr__`` makes it when asked (engine.lazyattr)
            # (no target: a branch that computes the value, or runs code first)
            t = self.follow_import(entry, lazy, depth) if lazy.target else None
            if t is None or t.kind == "unresolved":
                return Target("unresolved", name, note=(
                    f"made by {entry.module}'s module `__getattr__` (line {lazy.line}) "
                    "when asked for, which is not followed"))
            return t
        if name in entry.defs:
            return self._imported_by_call(entry, name, depth) or Target("def", name, entry)
        recs = entry.imports.get(name)
        if recs:
            first = binding_import(recs, above)
            t = self.follow_import(entry, first, depth)
            if t.kind in ("external", "unresolved"):
                # ``try: from fast_ext import X`` / ``except ImportError: from .slow import X``:
                # the corpus fallback is the definition known to exist (and to be a module,
                # for discovery); the resolver keeps the guard where the try itself is inlined.
                for rec in recs:
                    if rec is first or rec.line < first.line:  # (what it rebinds)
                        continue
                    if rec.guard.kind not in ("try", "except", "if"):
                        continue
                    alt = self.follow_import(entry, rec, depth)
                    if alt.kind in ("def", "module"):
                        return Target(alt.kind, alt.name, alt.entry, alt.attr, alt.how,
                                      min(alt.confidence, 0.9),
                                      f"{entry.module}:{rec.line}: corpus fallback of a guarded "
                                      f"import ({t.name} otherwise)")
                if self._alternatives(entry, recs, depth):
                    # ``try: from torch._six import inf`` / ``except ModuleNotFoundError: from
                    # torch import inf`` (deepspeed's runtime/utils.py): which one binds the
                    # name is decided as the module runs, so the statements are what it is
                    return Target("def", name, entry)
            return t
        for star in _star_order(entry.stars, above):
            t = self._from_star(entry, star, name, depth)
            if t is not None:
                return t
        if entry.facts.is_package:
            sub = self.find_module(f"{entry.module}.{name}", entry.source)
            if sub is not None:
                return Target("module", sub.module, sub, how="attribute")
        if name in BUILTINS:
            return Target("builtin", name, how="builtin")
        if entry.facts.namespace_writes:
            # pyro's ``locals()[_name] = _PyroDist`` in a loop: the only statements that can
            # bind a name the module does not bind by name
            return made_at_run_time(entry, name)
        ext = self.external_star(entry)
        if ext is not None:
            star, via = ext
            return Target("external", f"{star}.{name}", how="heuristic", confidence=0.5,
                          note=f"assumed from `from {star} import *`"
                          + (f" (in {via}, which the star imports of {entry.module} reach)"
                             if via != entry.module else ""))
        return Target("unresolved", name, note=f"not bound in {entry.module}")

    def _imported_by_call(self, entry: ModuleEntry, name: str, depth: int) -> Target | None:
        """The corpus module ``name`` is, where its one binding is a module-level ``name =
        importlib.import_module("a.b")`` (physicsnemo's ``network_module``), as ``import a.b
        as name`` would bind it; None where the name is bound otherwise too, or ``a.b`` is no
        module of the sources (the statement then stays as written)."""
        rec = entry.by_call.get(name)
        if rec is None or len(entry.defs[name]) != 1 or name in entry.imports:
            return None
        t = self.follow_import(entry, rec, depth)
        return t if t.kind == "module" and t.entry is not None else None

    def external_star(self, entry: ModuleEntry) -> tuple[str, str] | None:
        """The external ``from X import *`` a name no corpus module binds most likely comes
        from, with the module that has it: ``entry``'s own first, then one its corpus star
        imports reach through modules without ``__all__`` (fastai's ``from .imports import
        *`` leads to ``from fastcore.all import *``, where ``PrePostInitMeta`` comes from)."""
        if entry.key in self._ext_star:
            return self._ext_star[entry.key]
        self._ext_star[entry.key] = None  # cycle guard
        found = None
        inner = []
        for star in entry.stars:
            if not star.target:
                continue
            src = self.find_imported(star.target, entry)
            if src is None:
                found = found or (star.target, entry.module)
            elif src.facts.all_names is None:
                inner.append(src)
        for src in inner:
            if found is not None:
                break
            found = self.external_star(src)
        self._ext_star[entry.key] = found
        return found

    def _from_star(self, entry: ModuleEntry, star: ImportRecord, name: str,
                   depth: int) -> Target | None:
        src = self.find_imported(star.target, entry)
        if src is None or name not in self.exports(src):
            return None
        t = self.lookup(src, name, depth + 1)
        if t.kind in ("def", "module", "external"):
            return _with_how(t, "star")
        return None

    def _alternatives(self, entry: ModuleEntry, recs: list[ImportRecord], depth: int) -> bool:
        """Whether guarded imports alone bind a name, and not all of them to one thing."""
        if any(r.guard.kind not in ("try", "except", "if") for r in recs):
            return False
        found = {(t.kind, t.name) for t in (self.follow_import(entry, r, depth) for r in recs)}
        return len(found) > 1

    def follow_import(self, entry: ModuleEntry, rec: ImportRecord, depth: int = 0) -> Target:
        if not rec.target:
            return Target("unresolved", rec.bound, note="relative import above the top package")
        if rec.name is None:
            mod = rec.target if rec.asname else rec.target.split(".")[0]
            return self.module_target(mod, entry.source, how="import", importer=entry)
        src = self.find_imported(rec.target, entry)
        if src is entry and not _bound_above(entry, rec):
            # ``from . import constants as converter_constants`` in a package's ``__init__``
            # that binds ``constants = _Constants(converter_constants, ...)`` below it
            # (hummingbird): the package has no such attribute yet, so the import loads the
            # submodule
            sub = self.find_imported(f"{rec.target}.{rec.name}", entry)
            if sub is not None:
                return Target("module", sub.module, sub, how="import")
        if src is not None:
            # (an import inside a function runs once the package has run to its end)
            at_top = rec in entry.imports.get(rec.bound, ())
            t = self.lookup(src, rec.name, depth + 1,
                            self.importing_line(src, entry) if at_top else None)
            if t.kind != "unresolved":
                direct = t.kind == "def" and t.entry is src
                return self._beside(_with_how(t, "import" if direct else (
                    "star" if t.how == "star" else "re-export")), rec.target, entry)
        sub = self.find_imported(f"{rec.target}.{rec.name}", entry)
        if sub is not None:
            return self._beside(Target("module", sub.module, sub, how="import"),
                                f"{rec.target}.{rec.name}", entry)
        if src is not None and src.facts.is_package and \
                self.extension(f"{rec.target}.{rec.name}"):
            # ``from pytorch3d import _C``: the package's compiled extension, which has no
            # Python source; upstream's import loads it, and the file keeps the import
            # (Resolver.note_unindexed_imports says so)
            return Target("external", f"{rec.target}.{rec.name}", how="import")
        if src is not None:
            return Target("unresolved", rec.name,
                          note=f"{rec.target} has no {rec.name!r}")
        if _climbs_to_root(entry, rec):
            # RepLKNet's ``segmentation/replknet.py``, meant to be copied into mmseg's
            # ``models/backbones/``, has ``from ..builder import BACKBONES``: no module of
            # the sources is ``builder``, and ``from builder import ...`` would be a guess
            top = entry.module.split(".")[0]
            return Target("unresolved", rec.name, note=(
                f"`from {'.' * rec.level}{rec.module} import {rec.name}` climbs above the top "
                f"package {top}, to a module {rec.target} no source indexed here has: "
                "upstream's import fails as well, unless the module is copied into a package "
                "that has one"))
        return Target("external", f"{rec.target}.{rec.name}", how="import")

    def importing_line(self, package: ModuleEntry, importer: ModuleEntry) -> int | None:
        """``_importing_line``, once per pair: every module-level import the lookup follows
        asks it."""
        key = (package.key, importer.key)
        if key not in self._importing:
            self._importing[key] = _importing_line(package, importer)
        return self._importing[key]

    def module_target(self, module: str, from_source: str | None, how: str,
                      importer: ModuleEntry | None = None) -> Target:
        """The module ``module``, imported by ``importer`` where given (``find_imported``)."""
        e = self.find_module(module, from_source) if importer is None else \
            self.find_imported(module, importer)
        if e is not None:
            t = Target("module", e.module, e, how=how)
            return t if importer is None else self._beside(t, module, importer)
        # A package whose __init__ is not indexed but whose submodules are.
        if module in self.packages:
            return Target("module", module, None, how=how)
        return Target("external", module, how=how)

    def resolve_dotted(self, entry: ModuleEntry, dotted: str) -> Target:
        """Resolves ``a.b.C`` used in ``entry``: the head by lookup, the rest as attributes."""
        parts = dotted.split(".")
        t = self.lookup(entry, parts[0])
        for i, attr in enumerate(parts[1:], start=1):
            if t.kind == "module":
                mod = t.name
                if t.entry is not None:
                    nt = self.lookup(t.entry, attr)
                    if nt.kind != "unresolved":
                        t = _with_how(nt, "attribute")
                        continue
                sub_name = f"{mod}.{attr}"
                src = t.entry.source if t.entry else entry.source
                nt = self.module_target(sub_name, src, "attribute")
                if nt.kind == "external" and t.entry is not None:
                    return Target("unresolved", ".".join(parts[: i + 1]),
                                  note=f"{mod} has no {attr!r}")
                t = nt
            elif t.kind == "external":
                t = Target("external", f"{t.name}.{attr}", how=t.how, confidence=t.confidence,
                           note=t.note)
            elif t.kind == "def":
                t = Target("def", t.name, t.entry, f"{t.attr}.{attr}" if t.attr else attr,
                           how=t.how, confidence=t.confidence)
            else:
                return t
        return t

    def through_getattr(self, entry: ModuleEntry, dotted: str) -> bool:
        """Whether the last attribute of ``a.b.X`` used in ``entry`` is one its module's
        ``__getattr__`` imports when asked (engine.lazyattr): reading it runs that import."""
        head, _, last = dotted.rpartition(".")
        if not head:
            return False
        t = self.resolve_dotted(entry, head)
        return t.kind == "module" and t.entry is not None and last in t.entry.lazy

    def exports(self, entry: ModuleEntry) -> frozenset[str]:
        """Names ``from entry import *`` binds."""
        hit = self._exports.get(entry.key)
        if hit is not None:
            return hit
        self._exports[entry.key] = frozenset()  # cycle guard
        if entry.facts.all_names is not None:
            names = frozenset(entry.facts.all_names)
        else:
            acc = {n for n in entry.defs if not n.startswith("_")}
            acc |= {n for n in entry.imports if not n.startswith("_")}
            for star in entry.stars:
                src = self.find_imported(star.target, entry)
                if src is not None:
                    acc |= self.exports(src)
            names = frozenset(acc)
        self._exports[entry.key] = names
        return names

    def class_symbol(self, t: Target) -> tuple[ModuleEntry, Symbol] | None:
        """The class a ``def`` target names, following ``Outer.Inner`` (an alias ``Alias =
        Real`` is no class here: discovery follows it, ``BlockDiscovery.base_targets``)."""
        if t.kind != "def" or t.entry is None:
            return None
        qual = f"{t.name}.{t.attr}" if t.attr else t.name
        sym = t.entry.classes.get(qual)
        if sym is not None:
            return t.entry, sym
        return None


def binding_import(recs: list[ImportRecord], above: int | None) -> ImportRecord:
    """Of the module-level imports of one name, the one that binds it once the module has run
    (to line ``above``, where given): the last unguarded one, as the last to run rebinds it.
    slot_attention's ``from torch import einsum, nn`` and then ``from einops import ...,
    einsum``: its functions call einops' ``einsum``. Where none is unguarded, the first."""
    return last_plain_import(recs, above) or recs[0]


def last_plain_import(recs, above: int | None) -> ImportRecord | None:
    """Of the module-level imports of one name (``recs``), the last unguarded one (above line
    ``above``, where given); None where there is none."""
    plain = [r for r in recs if not r.guard.kind and (above is None or r.line < above)]
    return max(plain, key=lambda r: r.line) if plain else None


def _climbs_to_root(entry: ModuleEntry, rec: ImportRecord) -> bool:
    """Whether the relative import ``rec`` climbs to above ``entry``'s top package, where
    Python's import raises ("beyond top-level package"): ``resolve_relative`` reads
    ``from ..x import y`` from the source's root, which finds a module there, if the sources
    have one, but has no package for the dots alone."""
    from nnrag_tui.engine.parse import resolve_relative  # (the app loads this module alone)

    return bool(rec.level) and not resolve_relative(entry.module, entry.facts.is_package,
                                                    rec.level, None)


def made_at_run_time(entry: ModuleEntry, name: str) -> Target:
    """``name``, which ``entry`` does not bind by name, as made by its statements that store
    into its namespace (``ModuleFacts.namespace_writes``)."""
    lines = entry.facts.namespace_writes
    return Target("def", name, entry, how="heuristic", confidence=0.5,
                  note=f"not bound by name in {entry.module}: assumed made at run time "
                  f"by its line{'s' if len(lines) > 1 else ''} "
                  f"{', '.join(map(str, lines))}, which store names into its namespace")


def _star_order(stars: list[ImportRecord], above: int | None) -> list[ImportRecord]:
    """The star imports in the order they are asked for a name: the unguarded ones that have
    run (above line ``above``, where given) last first, as the last to run binds it; then the
    guarded ones as they come (``try: from .fast import *`` before its ``except ImportError:
    from .slow import *``).

    torch_mimicry's ``modules/__init__.py`` runs ``from .layers import *`` (an ``SNLinear``
    function), ``from .resblocks import *`` and ``from .spectral_norm import *`` (an
    ``SNLinear`` class): a module importing ``SNLinear`` from the package once it has run
    gets the class, while ``resblocks``, which imports ``SNConv2d`` from it halfway (at the
    star import that runs it), gets ``layers``' function."""
    plain = [s for s in stars if not s.guard.kind and (above is None or s.line < above)]
    return [*reversed(plain), *(s for s in stars if s.guard.kind)]


def _importing_line(package: ModuleEntry, importer: ModuleEntry) -> int | None:
    """The first line at which ``package`` imports ``importer`` as it runs, unguarded, where
    it does: there ``importer`` reads ``package`` half run (``ModuleIndex.importing_line``
    keeps it)."""
    if package is importer:
        return None
    lines = [r.line for r in package.stars if r.target == importer.module and not r.guard.kind]
    lines += [r.line for recs in package.imports.values() for r in recs
              if not r.guard.kind and (r.target == importer.module or
                                       f"{r.target}.{r.name}" == importer.module)]
    return min(lines) if lines else None


def _bound_above(entry: ModuleEntry, rec: ImportRecord) -> bool:
    """Whether ``entry`` binds ``rec.name`` at its top level above the import ``rec``."""
    return any(s.line < rec.line for s in entry.defs.get(rec.name, ())) or any(
        r.line < rec.line for r in entry.imports.get(rec.name, ()))


def _with_how(t: Target, how: str) -> Target:
    if t.how == how:
        return t
    return Target(t.kind, t.name, t.entry, t.attr, how, t.confidence, t.note)
