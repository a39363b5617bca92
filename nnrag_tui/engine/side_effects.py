"""Statements a closure needs for what they do as their module runs, not for a name they bind.

- **Registry fillers**: a module-level container the closure reads (``_ACTS[name]``) is complete
  only with the statements that fill it (``@register_act("x") def x``).
- **Keyed registrations**: a registration under a string key that the closure looks up, in a
  module upstream imports along with the closure's (pyro's ``settings.register(...)``).
- **Patches**: statements that change one of the closure's definitions in place after defining
  it (engine.patches).

What registers the torch operators the closure reads is engine.op_registrations' rule.

Each rule reads and extends the graph of a ``resolve._ClosureBuilder``; the builder asks them
again until none adds a statement.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.bindings import ModuleEntry
from nnrag_tui.engine.closure import BindKey, Dependency, ExternalImport, NodeId
from nnrag_tui.engine.config_keys import registrations, split_scope, type_keys
from nnrag_tui.engine.import_locations import call_of, handed_lists
from nnrag_tui.engine.imported_along import ALL, imported_along
from nnrag_tui.engine.membership import (
    fills_only,
    identity_uses_only,
    is_use,
    only_called,
    parents_of,
    runs_at_load_only,
    uses_of,
    write_only_uses,
)
from nnrag_tui.engine.modsource import (
    ModuleSource,
    TopStmt,
    filling_methods,
    holds_container,
    is_container_binding,
    named_with_module,
    registered_values,
)
from nnrag_tui.engine.parse import dotted
from nnrag_tui.engine.patches import mutated_parameters, reads_beyond_decorator_methods
from nnrag_tui.engine.reach import what_runs
from nnrag_tui.engine.subclass_hooks import SubclassHooks

if TYPE_CHECKING:
    from nnrag_tui.engine.resolve import _ClosureBuilder

# at most this many modules, run only through package ``__init__`` imports, are spanned for
# the registrations they make into one registry the block reads (span_package_fillers)
PACKAGE_FILLER_MODULES = 4

# bases that make a corpus class's instance a container (engine.modsource.holds_container)
_DICT_BASES = frozenset({"dict", "UserDict", "OrderedDict", "defaultdict"})


def _not_imported(user: str, chain: list[str], runs: str, imported: bool = True) -> str:
    """How the module ``user`` whose statement needs a registration stands to the module
    making it, which upstream's import of ``chain[0]`` reaches through ``chain`` (``runs``
    says so; ``imported``: by an import statement, not by name when first used): ``user``
    never imports it, or imports it only to run it (``from . import bricks  # noqa: F401``),
    reading nothing from it."""
    how = "imports only to run it" if imported and chain[:1] == [user] and len(chain) == 2 \
        else "never imports"
    return f"which {user} {how}: {runs}"


def _first_parameter_callees(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The names ``fn`` calls with its own first parameter as the first argument."""
    params = [*fn.args.posonlyargs, *fn.args.args]
    if not params:
        return frozenset()
    first = params[0].arg
    return frozenset(c.func.id for c in treewalk.nodes(fn)
                     if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                     and c.args and isinstance(c.args[0], ast.Name) and c.args[0].id == first)


def _only_derives(node: ast.stmt, name: str) -> bool:
    """Whether a statement uses ``name`` only as a class's base or metaclass (``class
    Module(nn.Module, Registry)``): a class that derives from a registry does not read what
    it holds as it is created, so it needs none of its registrations to load."""
    if not isinstance(node, ast.ClassDef):
        return False
    heads = {id(e) for e in (*node.bases, *(k.value for k in node.keywords))
             if isinstance(e, ast.Name)}
    return all(id(u) in heads for u in uses_of(node, name))


class SideEffects:
    """The four rules over one closure, with what each has looked at already."""

    def __init__(self, builder: _ClosureBuilder) -> None:
        self.b = builder
        self.r = builder.r
        self.index = builder.index
        self._registry_keys: set[BindKey] = set()
        self._not_registry: set[BindKey] = set()
        # a class whose registry its subclasses' creation makes and fills (``cls.registry[
        # name] = cls`` in a metaclass) -> the attributes holding it and the methods reading
        # them (``get``), the ones a read of the class must go through (engine.subclass_hooks)
        self._made_registries: dict[BindKey, frozenset[str]] = {}
        # (statement, registry name) -> whether it only stores into or refuses by it
        self._write_only: dict[tuple[NodeId, str], bool] = {}
        # (statement, registry name) -> whether it only hands it to a function filling it
        self._fill_only: dict[tuple[NodeId, str], bool] = {}
        # statement -> the names whose registry its calls fill through a method of their class
        self._fill_calls: dict[NodeId, frozenset[str]] = {}
        # (registry, string key) that a statement looks up, already searched for
        self._keys_sought: set[tuple[BindKey, str]] = set()
        self.patches: dict[BindKey, list[NodeId]] = {}  # definition -> statements changing it
        # modules imported by computed name (engine.dynimport) -> the statement importing them
        self.by_name: dict[tuple[str, str], str] = {}
        self._by_name_scanned: set[tuple[str, str]] = set()
        # modules whose plain ``import a.b.c`` statements span_effect_imports has followed
        self._effect_scanned: set[tuple[str, str]] = set()
        # such a module -> the registration statements inlined from it
        self.by_name_fillers: dict[tuple[str, str], list[NodeId]] = {}
        # registries span_package_fillers is done with, and the modules it spanned, each
        # with the chain of imports upstream runs it by and the registries it was spanned for
        self._package_scanned: set[BindKey] = set()
        self.package_fillers: dict[tuple[str, str], tuple[list[str], frozenset[BindKey]]] = {}
        # registry -> the statements added for filling it, by any registry rule
        self.fillers: dict[BindKey, list[NodeId]] = {}
        # the config ``type`` keys, modules and registries of the last round, the (module,
        # key) pairs looked for already under those registries, and the registrations added
        self._config_state: tuple[frozenset, frozenset, frozenset] | None = None
        self._config_searched: set[tuple[tuple[str, str], str]] = set()
        self._config_added: list[NodeId] = []
        self.hooks = SubclassHooks(self)

    def release(self) -> None:
        """Drops the link to the ``SubclassHooks``, which hold these rules back
        (``_ClosureBuilder.release``)."""
        del self.hooks

    def add_registry_fillers(self) -> bool:
        """A module-level container that an included statement *reads* (``_ACTS[name]``,
        ``get_model`` looking up ``_model_entrypoints``) is only complete together with the
        statements that fill it while the module executes: ``@register_act("x") def x``,
        ``@register_model class Tiny``, ``_ACTS["tanh"] = torch.tanh``. Those statements, in
        the modules the closure already spans, are added. Returns whether any was."""
        registries: dict[BindKey, list[tuple[NodeId, str, bool]]] = {}
        # read by name, or through its module (graphgym's ``register.layer_dict[name]``)
        reads = list(self.b.refs.items()) + [
            ((user, chain), key) for user, chains in self.b.chains.items()
            for chain, key in chains.items()]
        for (user, name), key in reads:
            if key[0] != "def" or key in self._not_registry:
                continue
            if key not in self._registry_keys:
                if not self._is_container(key):
                    made = self.hooks.stored_attributes(key)
                    if not made:
                        self._not_registry.add(key)
                        continue
                    # looked in through the attribute or a method reading it
                    self._made_registries[key] = made | self.hooks.reading_methods(key, made)
                self._registry_keys.add(key)
            ust = self.b.modules[user[0]].stmts[user[1]]
            made = self._made_registries.get(key)
            if made is not None and not any(f"{name}.{attr}" in self.b.modules[user[0]].access(
                    ust)[0] for attr in made):
                continue  # (a class whose registry is made for it, not looked in here)
            if name in self.b.modules[user[0]].access(ust)[0] \
                    and not self._refuses_at_load_only(user, ust, name) \
                    and not self._handed_to_fill_only(user, ust, name):
                ms = self.b.modules[user[0]]
                head = name.split(".")[0]
                load = name in ms.load_chains(ust, head) if "." in name else \
                    name in ms.uses(ust).load and not _only_derives(ust.node, name)
                registries.setdefault(key, []).append((user, name, load))
        if not registries:
            return False
        # a folder loop's modules (engine.dynimport) fill only the registries that code
        # running when the block is built and called reads (engine.reach)
        live: set[BindKey] = set()
        if any(self.r.folder_imports(self.b.entries[key[1]]) for key in registries):
            reach = self.construction_reach()
            live = {key for key, users in registries.items()
                    if any(user in reach for user, _, _ in users)}
            self.span_imports_by_name(sorted({key[1] for key in live}))
        self.span_effect_imports()
        added = False
        bound = set(self.b.bind_order)
        by_identity: dict[object, bool] = {}  # (_adds_unreachable's verdicts, this round)
        self.span_package_fillers(registries, live, bound, by_identity)
        for mkey in list(self.b.modules):
            entry, ms = self.b.entries[mkey], self.b.modules[mkey]
            for st in ms.stmts:
                node = (mkey, st.index)
                if node in self.b.seen or st.kind in ("import", "script"):
                    continue
                filled = self._registration(entry, ms, st, registries, live, bound,
                                            by_identity)
                if not filled:
                    continue
                self.b.add(entry, st.index)
                added = True
                if mkey in self.by_name:
                    self.by_name_fillers.setdefault(mkey, []).append(node)
                hooked = self.hooks.fills(entry, ms, st)
                for reg in dict.fromkeys(filled):
                    self._fills(reg, node)
                    how = "a base's `__init_subclass__` or its metaclass, as the class is " \
                        "made" if reg in hooked else "decorator or module-level statement"
                    for user, rname, load in registries[reg]:
                        # a statement upstream runs before the registration (pyro's ``class
                        # PyroModule(..., metaclass=_PyroModuleMeta)`` above ``_PyroModuleMeta.
                        # _pyro_mixin_cache[...] = PyroModuleList``) cannot need it to load
                        early = user[0] == node[0] and user[1] < node[1]
                        self.b.deps.append(Dependency(
                            user, rname, "definition", f"{entry.module}:{st.line}",
                            "registry", 0.8, load and not early, (node,),
                            f"fills the registry it reads ({how})"))
        return added

    def _registration(self, entry: ModuleEntry, ms: ModuleSource, st: TopStmt,
                      registries: dict[BindKey, list[tuple[NodeId, str, bool]]],
                      live: set[BindKey], bound: set[BindKey],
                      by_identity: dict[object, bool]) -> list[BindKey]:
        """The registries among ``registries`` that the module-level statement ``st`` fills
        and that the closure can look its registration up in; empty where it fills none or
        the closure cannot (add_registry_fillers)."""
        filled: list[BindKey] = []
        keys: list[BindKey] = []
        writers: list[BindKey] = []  # the functions it fills them through
        direct = False  # (or fills them itself)
        load_names = self._load_names(ms, st)
        values = registered_values(st.node)
        if "__name__" in load_names:
            values |= named_with_module(st.node)
        for name in load_names:
            key = self.r.binding_key(entry, ms, name)
            if key is None or (st.kind == "compound" and name in st.binds):
                continue  # (a loop's own variable: ``for _w in ...: WORDS[_w] = 1``)
            if name not in values:
                keys.append(key)
            if key in registries and (name in ms.access(st)[1] or name in
                                      self._statement_fills(entry, ms, st)):
                filled.append(key)
                direct = True
            writes = [k for k in self.writes_of(key) if k in registries]
            if writes:
                filled += writes
                keys.append(key)
                writers.append(key)
        for key in self._calls_through_modules(entry, st, load_names):
            # ``@pyro.settings.register("module_local_params", __name__, ...)``: the
            # registering function reached through its module
            writes = [k for k in self.writes_of(key) if k in registries]
            if writes:
                filled += writes
                keys.append(key)
                writers.append(key)
        # ``class Double(Base)`` below a ``Base.__init_subclass__`` or a metaclass storing
        # each new class (engine.subclass_hooks)
        filled += [k for k in self.hooks.fills(entry, ms, st) if k in registries]
        if entry.key in self.by_name:
            filled = [k for k in filled if k in live]
        # ``@register_kernel(adjust_hue, Image)`` registers under a definition the
        # block never reaches: only registrations whose other corpus names are all in
        # the closure already can be looked up. What is stored (``constraints=[...]``,
        # the right side of ``REG[key] = fn``) is no key and comes along instead
        others = [k for k in keys if k not in filled and not self.writes_of(k)]
        if not filled or any(k not in bound for k in others):
            return []
        if not direct and self._adds_unreachable(st, filled, writers, registries,
                                                 by_identity):
            return []
        return filled

    def _refuses_at_load_only(self, user: NodeId, st: TopStmt, name: str) -> bool:
        """Whether the statement ``st`` reads the registry ``name`` only to refuse a second
        registration, and only while the modules load (engine.membership): a module-level
        statement, or a function that every statement of the closure calls only then (as a
        decorator, score_sde_pytorch's ``@utils.register_model(name='ncsnv2_64')``)."""
        only = self._write_only.get((user, name))
        if only is None:
            only = self._write_only[(user, name)] = write_only_uses(st.node, name)
        if not only:
            return False
        if st.kind != "function":
            return st.kind != "class" and runs_at_load_only(st.node, lambda n: is_use(n, name))
        fn = ("def", user[0], st.node.name)  # type: ignore[attr-defined]
        sites: list[tuple[NodeId, Callable[[ast.AST], bool]]] = [
            (reader, lambda n, used=used: isinstance(n, ast.Name) and n.id == used)
            for (reader, used), key in self.b.refs.items() if key == fn]
        sites += [(reader, lambda n, chain=chain: isinstance(n, ast.Attribute)
                   and dotted(n) == chain)
                  for reader, chains in self.b.chains.items()
                  for chain, key in chains.items() if key == fn]
        for reader, picks in sites:
            node = self.b.modules[reader[0]].stmts[reader[1]].node
            if not (runs_at_load_only(node, picks) and only_called(node, picks)):
                return False
        return True

    def _adds_unreachable(self, st: TopStmt, filled: list[BindKey], writers: list[BindKey],
                          registries: dict[BindKey, list[tuple[NodeId, str, bool]]],
                          verdicts: dict[object, bool]) -> bool:
        """Whether the ``def``/``class`` statement ``st``, through bare decorators (the
        functions ``writers``), fills only registries that the closure and those functions
        use by identity alone (engine.membership): what it adds, nothing in the file can
        hold, so the registries behave the same without it. ``verdicts`` keeps each
        registry's and writer's for the round: every decorated statement of the closure's
        modules asks them."""
        if st.kind not in ("class", "function") or any(
                isinstance(d, ast.Call) for d in st.node.decorator_list):  # type: ignore
            return False
        for reg in dict.fromkeys(filled):
            if reg not in verdicts:
                verdicts[reg] = all(
                    identity_uses_only(self.b.modules[user[0]].stmts[user[1]].node, name)
                    for user, name, _ in registries[reg])
            if not verdicts[reg]:
                return False
        for key in dict.fromkeys(writers):
            held = ("writer", key, frozenset(filled))
            if held not in verdicts:
                verdicts[held] = self._stores_by_identity(key, filled)
            if not verdicts[held]:
                return False
        return True

    def _stores_by_identity(self, key: BindKey, filled: list[BindKey]) -> bool:
        """Whether the function ``key`` stores into the registries ``filled`` only objects of
        its own (engine.membership)."""
        entry = self.index.entries.get(key[1])
        if entry is None:
            return False
        ms = self.r.module_source(entry)
        for i in ms.binders.get(key[2], []):
            wst = ms.stmts[i]
            if wst.kind != "function":
                return False
            names = [n for n in ms.access(wst)[1] if self.r.binding_key(entry, ms, n) in filled]
            if not all(identity_uses_only(wst.node, n) for n in names):
                return False
        return True

    def add_keyed_registrations(self) -> bool:
        """pyro's ``pyro.settings.get("validate_poutine")`` (pyro/nn/module.py) reads what
        ``settings.register("validate_poutine", __name__, "_VALIDATION_ENABLED")`` in
        pyro/poutine/util.py registers. The block never imports that module: upstream's import
        of pyro.nn.module runs it, through the package ``pyro``, whose ``__init__`` imports
        ``pyro.poutine``. A statement that registers under a string key which the closure passes
        to a function reading that registry, in a module upstream imports along with the
        closure's (engine.imported_along), comes along. Returns whether any did."""
        readers: dict[BindKey, set[BindKey]] = {}  # function -> registries it reads
        for (user, name), key in self.b.refs.items():
            if key in self._registry_keys and user[0] in self.index.entries:
                ust = self.b.modules[user[0]].stmts[user[1]]
                if ust.kind == "function" and name in self.b.modules[user[0]].access(ust)[0]:
                    fname = ust.node.name  # type: ignore[attr-defined]
                    readers.setdefault(("def", user[0], fname), set()).add(key)
        if not readers:
            return False
        self._add_forwarding_readers(readers)
        sought: dict[tuple[BindKey, str], list[NodeId]] = {}
        constants: set[str] = set()  # names of string constants passed as keys
        calls = [((user, name), key) for (user, name), key in self.b.refs.items()]
        calls += [((user, chain), key) for user, chains in self.b.chains.items()
                  for chain, key in chains.items()]
        for (user, name), key in calls:
            if key not in readers:
                continue
            ms = self.b.modules[user[0]]
            for callee, literal, const in self.keyed_calls(self.b.entries[user[0]], ms,
                                                           ms.stmts[user[1]]):
                if const is not None:
                    constants.add(const)
                if callee == name:
                    for reg in readers[key]:
                        if (reg, literal) not in self._keys_sought:
                            sought.setdefault((reg, literal), []).append(user)
        if not sought:
            return False
        self._keys_sought |= set(sought)
        spanned = [self.index.entries[k] for k in self.b.modules if k in self.index.entries]
        along = imported_along(self.index, spanned, self.r.import_edges[ALL],
                               self.r.is_external)
        literals = sorted({literal for _, literal in sought})
        added = False
        for mkey, chain in along.items():
            entry = self.index.entries[mkey]
            if mkey in self.b.modules or self.r.is_external(entry.module) or not (
                    any(self.r.passes_literal(entry, literal) for literal in literals)
                    or any(self.r.mentions(entry, c, quoted=False) for c in constants)):
                continue
            ms = self.r.module_source(entry)
            for st in ms.stmts:
                if st.kind in ("import", "script"):
                    continue
                for callee, literal, _ in self.keyed_calls(
                        entry, ms, st, decorators_only=st.kind in ("class", "function")):
                    t = self.index.resolve_dotted(entry, callee)
                    if t.kind != "def" or t.entry is None or t.attr:
                        continue
                    for reg in self.writes_of(("def", t.entry.key, t.name)):
                        for user in sought.get((reg, literal), ()):
                            node = self.b.add(entry, st.index)
                            added = True
                            self._fills(reg, node)
                            self.b.deps.append(Dependency(
                                user, literal, "definition", f"{entry.module}:{st.line}",
                                "registry", 0.8, False, (node,),
                                f"registers {literal!r}, which upstream's import of "
                                f"{chain[0]} runs ({' -> '.join(chain)})"))
                            note = (f"{literal!r} is registered by {entry.facts.relpath}:"
                                    f"{st.line}, "
                                    + _not_imported(self.b.entries[user[0]].module, chain,
                                                    f"upstream's import of {chain[0]} runs it "
                                                    f"({' -> '.join(chain)})")
                                    + "; kept here")
                            if note not in self.b.notes:
                                self.b.notes.append(note)
        return added

    def add_config_registrations(self) -> bool:
        """OpenMMLab's ``ConvModule(..., act_cfg=dict(type='Swish'))`` builds what ``@MODELS.
        register_module() class Swish`` registered in mmcv/cnn/bricks/swish.py, which the
        block never imports: upstream's import runs it through the package ``__init__``. A
        registration through a method of a registry object of the closure, under a key that
        a ``type`` entry of a dict names in what runs when the block is built and called
        (engine.config_keys), in a module upstream imports along with the closure's, comes
        along. Returns whether any did."""
        registries: set[BindKey] = set()
        for n in self.b.order:
            st = self.b.modules[n[0]].stmts[n[1]]
            value = getattr(st.node, "value", None)
            # ``MODELS = Registry("model")``: an instance of a corpus class with a method
            # that registers (timm's ``to_2tuple = _ntuple(2)`` is none)
            if st.kind == "assign" and isinstance(value, ast.Call) and \
                    isinstance(value.func, ast.Name) and \
                    self._registers(self.b.corpus_def(self.b.refs.get((n, value.func.id)))):
                registries |= {("def", n[0], name) for name in st.binds}
        # registries of a package the file imports (a source marked external): what the
        # corpus registers into them is not run here, which the header says
        external = {k for k in self.b.external_defs if self._registry_object(k)}
        if not registries and not external:
            return False
        sought: dict[str, NodeId] = {}  # key -> the first statement naming it
        for node in sorted(self.construction_reach() | set(self._config_added)):
            ms = self.b.modules[node[0]]
            hit = self.r.type_keys.get((node[0], ms.stmts[node[1]].line))
            if hit is None:
                st = ms.stmts[node[1]]
                hit = self.r.type_keys[(node[0], st.line)] = frozenset(
                    type_keys(st.node) if "type" in ms.stmt_text(st) else ())
            for key in hit:
                sought.setdefault(key, node)
        if not sought:
            return False
        if self._scope_registries(sought, registries):
            return True  # the next round searches what the new registries name
        spanned = [self.index.entries[k] for k in self.b.modules if k in self.index.entries]
        # and the modules a registry imports by name when first used (engine.import_locations)
        by_name: dict[str, str] = {}  # such a module -> the statement naming it
        for node, lists in handed_lists(self.b).items():
            entry = self.b.entries[node[0]]
            for n in sorted({n for names in lists for n in names}):
                found = self.index.find_module(n, entry.source)
                if found is not None:
                    spanned.append(found)
                    by_name.setdefault(
                        n, f"{entry.module}:{self.b.modules[node[0]].stmts[node[1]].line}")
        # a round that brings neither a new key nor a new module nor a new registry has
        # nothing new to find; a new module (a patch that names more locations) is searched
        # for every key, and a new registry (mmcv's ``ATTENTION``, reached after mmaction's
        # attention module was searched for its key) has every module searched again
        regs = frozenset(registries | external)
        state = (frozenset(sought), frozenset(e.key for e in spanned), regs)
        if state == self._config_state:
            return False
        if self._config_state is not None and regs != self._config_state[2]:
            self._config_searched.clear()
        self._config_state = state
        along = imported_along(self.index, spanned, self.r.import_edges[ALL],
                               self.r.is_external)
        added = False
        for mkey, chain in along.items():
            entry = self.index.entries[mkey]
            keys = {k for k in sought if (mkey, k) not in self._config_searched}
            self._config_searched |= {(mkey, k) for k in keys}
            held: dict[str, dict[str | None, str]] = {}  # held key -> its scope -> the key
            for k in keys:
                scope, real = split_scope(k)
                held.setdefault(real, {})[scope] = k
            in_closure = mkey in self.b.modules
            if not keys or (in_closure and not external) or \
                    self.r.is_external(entry.module) or \
                    not self.r.mentions(entry, "register", quoted=False) or \
                    not any(self.r.mentions(entry, real, quoted=False) for real in held):
                continue
            ms = self.r.module_source(entry)
            for st in ms.stmts:
                if st.kind in ("import", "script") or (mkey, st.index) in self.b.seen:
                    continue
                for root, real in registrations(st.node):
                    reg = self._unaliased(self.r.binding_key(entry, ms, root)) \
                        if real in held else None
                    if reg not in registries and reg not in external:
                        continue
                    # ``'mmdet.CrossEntropyLoss'`` only from a registry whose scope is mmdet
                    # (engine.registry_scope: the top package of the module creating it)
                    scopes = held[real]
                    key = scopes.get(None) or scopes.get(reg[1][1].split(".")[0])
                    if key is None:
                        continue
                    if reg in external:
                        self._note_external_registration(entry, st, key, reg)
                        continue
                    if in_closure:
                        continue
                    node = self.b.add(entry, st.index)
                    added = True
                    self._config_added.append(node)
                    runs = (f"upstream's import of {chain[0]} runs it ({' -> '.join(chain)})"
                            if chain[0] not in by_name else
                            f"{by_name[chain[0]]} has upstream import {chain[0]} by name when "
                            f"first used, which runs it ({' -> '.join(chain)})")
                    self._fills(reg, node)  # type: ignore[arg-type]  (in registries)
                    user = sought[key]
                    self.b.deps.append(Dependency(
                        user, key, "definition", f"{entry.module}:{st.line}", "registry", 0.8,
                        False, (node,), f"registers {key!r}, which {runs}"))
                    note = (f"{key!r} (a config's type) is registered by {entry.facts.relpath}:"
                            f"{st.line}, "
                            + _not_imported(self.b.entries[user[0]].module, chain, runs,
                                            imported=chain[0] not in by_name)
                            + "; kept here")
                    if note not in self.b.notes:
                        self.b.notes.append(note)
        return added

    def _scope_registries(self, sought: dict[str, NodeId], registries: set[BindKey]) -> bool:
        """A key naming a scope (mmdet3d's heads build ``dict(type='mmdet.CrossEntropyLoss')``
        through mmdet3d's ``MODELS``): mmengine's ``Registry.get`` imports ``<scope>.registry``
        by name, whose registries join the tree under their parents, and looks the key up in
        the child of that scope under its own root. Which registry looks it up is not known
        here (a closure may hold mmdet's ``TASK_UTILS`` and not its ``MODELS``), so every
        statement of that module that creates a registry whose ``parent=`` is one of the
        closure's comes along, as upstream's import makes them all. Returns whether any
        did."""
        added = False
        done: set[str] = set()
        for key in sorted(sought):
            scope = split_scope(key)[0]
            if scope is None or scope in done:
                continue
            done.add(scope)
            entry = self.index.find_module(f"{scope}.registry", None)
            if entry is None or self.r.is_external(entry.module):
                continue
            ms = self.r.module_source(entry)
            for st in ms.stmts:
                call = call_of(st.node) if st.kind == "assign" else None
                parent = next((k.value for k in call.keywords if k.arg == "parent"),
                              None) if call is not None else None
                if not isinstance(parent, ast.Name) or \
                        self.r.binding_key(entry, ms, parent.id) not in registries or \
                        (entry.key, st.index) in self.b.seen:
                    continue
                node = self.b.add(entry, st.index)
                added = True
                user = sought[key]
                self.b.deps.append(Dependency(
                    user, key, "definition", f"{entry.module}:{st.line}", "registry", 0.8,
                    False, (node,), f"the registry of scope {scope!r}, which mmengine imports "
                    f"by name ({entry.module}) to look {key!r} up"))
                note = (f"{key!r} (a config's type) names the scope {scope!r}: its registries "
                        f"({entry.facts.relpath}, imported by name when the key is looked up) "
                        "are kept here")
                if note not in self.b.notes:
                    self.b.notes.append(note)
        return added

    def _unaliased(self, key: BindKey | None) -> BindKey | None:
        """The registry a name bound to another registry names: mmdet 2.x's builder has
        ``MODELS = Registry('models', ...)`` and then ``LOSSES = MODELS``, and a loss
        registers through ``@LOSSES.register_module()``."""
        seen: set[BindKey] = set()
        while key is not None and key[0] == "def" and key not in seen and \
                key[1] in self.index.entries:
            seen.add(key)
            entry = self.index.entries[key[1]]
            ms = self.r.module_source(entry)
            binders = ms.binders.get(key[2], ())
            value = getattr(ms.stmts[binders[0]].node, "value", None) \
                if len(binders) == 1 and ms.stmts[binders[0]].kind == "assign" else None
            if not isinstance(value, ast.Name):
                break
            key = self.r.binding_key(entry, ms, value.id) or key
        return key

    def _registry_object(self, key: BindKey) -> bool:
        """Whether the corpus binding ``key`` is an instance of a registry class
        (``MODELS = Registry('model')`` in mmengine/registry/root.py)."""
        entry = self.index.entries.get(key[1])
        if entry is None or not self.r.mentions(entry, "Registry", quoted=False):
            return False
        ms = self.r.module_source(entry)
        for i in ms.binders.get(key[2], ()):
            st = ms.stmts[i]
            value = getattr(st.node, "value", None)
            if st.kind == "assign" and isinstance(value, ast.Call) and \
                    isinstance(value.func, ast.Name) and \
                    self._registers(self.r.binding_key(entry, ms, value.func.id)):
                return True
        return False

    def _note_external_registration(self, entry: ModuleEntry, st: TopStmt, key: str,
                                    reg: BindKey) -> None:
        """A statement upstream's import runs that registers a key the block builds into a
        registry of a package the file imports: the statement cannot come along (it would
        register into the one installed registry again, once per file), so the header says
        what to mark external."""
        owner = reg[1][1].split(".")[0]
        mine = entry.module.split(".")[0]
        note = (f"{key!r} (a config's type) is registered into {owner}'s `{reg[2]}` by "
                f"{entry.facts.relpath}:{st.line}, which upstream's import runs; {owner} is "
                f"external in the configuration, so that registration is not in this file "
                f"and building {key!r} fails: mark {mine} external too, or {owner} not")
        if note not in self.b.notes:
            self.b.notes.append(note)

    def _registers(self, key: BindKey | None) -> bool:
        """Whether ``key`` is a corpus class whose body, or its module, defines a method
        named ``register...`` (mmengine's ``Registry.register_module``)."""
        if key is None or key[0] != "def" or key[1] not in self.index.entries:
            return False
        entry = self.index.entries[key[1]]
        if not self.r.mentions(entry, "def register", quoted=False):
            return False
        ms = self.r.module_source(entry)
        return any(ms.stmts[i].kind == "class" for i in ms.binders.get(key[2], ()))

    def _fills(self, registry: BindKey, node: NodeId) -> None:
        filling = self.fillers.setdefault(registry, [])
        if node not in filling:
            filling.append(node)

    def _add_forwarding_readers(self, readers: dict[BindKey, set[BindKey]]) -> None:
        """A function of the closure that hands its first parameter on as the first argument
        of a reader reads by that key too: a block's ``build_act("gelu")``, whose
        ``build_act(name)`` returns ``get_act(name)``, looks up ``_ACTS["gelu"]``. Such
        functions join ``readers``, through any number of hands."""
        grown = True
        while grown:
            grown = False
            for (user, name), key in list(self.b.refs.items()):
                if key not in readers or user[0] not in self.index.entries:
                    continue
                ms = self.b.modules[user[0]]
                st = ms.stmts[user[1]]
                if st.kind != "function":
                    continue
                fkey = ("def", user[0], st.node.name)  # type: ignore[attr-defined]
                new = readers[key] - readers.get(fkey, set())
                if new and name in ms.stmt_fact(st, _first_parameter_callees):
                    readers.setdefault(fkey, set()).update(new)
                    grown = True

    def keyed_calls(self, entry: ModuleEntry, ms: ModuleSource, st: TopStmt,
                    decorators_only: bool = False) -> list[tuple[str, str, str | None]]:
        """(callee, key, the constant's name or None) of the calls in ``st`` whose first
        argument is a string literal, or a name bound to one (``string_constant``)."""
        out: list[tuple[str, str, str | None]] = [
            (callee, literal, None)
            for callee, literal in ms.literal_calls(st, decorators_only=decorators_only)]
        for callee, const in ms.constant_calls(st, decorators_only=decorators_only):
            literal = self.string_constant(entry, ms, const)
            if literal is not None:
                out.append((callee, literal, const))
        return out

    def string_constant(self, entry: ModuleEntry, ms: ModuleSource, name: str) -> str | None:
        """The string a name stands for where one module-level ``NAME = "text"`` binds it, in
        the module or where its import leads (ludwig's ``BAG`` of ``ludwig.constants``)."""
        found = self.bound_by(entry, ms, name)
        node = found[0] if len(found) == 1 else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            return node.value.value
        return None

    def bound_by(self, entry: ModuleEntry, ms: ModuleSource, name: str) -> list[ast.stmt]:
        """The module-level statements binding the definition ``name`` stands for in
        ``entry``, in its module or where its import leads; none for anything else."""
        key = self.r.binding_key(entry, ms, name)
        home = self.index.entries.get(key[1]) if key is not None else None
        if home is None:
            return []
        hms = self.r.module_source(home)
        return [hms.stmts[i].node for i in hms.binders.get(key[2], [])]

    def construction_reach(self) -> set[NodeId]:
        """The statements of the closure that run when the block is built and called: from
        the block's class, through what those parts read (engine.reach)."""
        edges: dict[NodeId, dict[str, list[NodeId]]] = {}
        for d in self.b.deps:
            if d.kind == "definition" and d.nodes:
                edges.setdefault(d.user, {}).setdefault(d.name, []).extend(d.nodes)
        top = self.b.block.qualname.split(".")[0]
        starts = [(self.b.entry.key, i) for i in self.b.binders(self.b.entry, top)]
        # method names some reached class calls through ``self.x``: run in every reached
        # class that defines them (a base's ``__init__`` calling its subclass's override)
        called: frozenset[str] = frozenset()
        while True:
            todo, reached, calls = list(starts), set(), set()
            while todo:
                node = todo.pop()
                if node in reached or node[0] in self.b.objects:
                    continue
                reached.add(node)
                st = self.b.modules[node[0]].stmts[node[1]].node
                out = edges.get(node, {})
                names, attrs = what_runs(st, called)
                for name in names & out.keys():
                    todo.extend(out[name])
                calls |= attrs
            if calls <= called:
                return reached
            called = called | calls

    def span_imports_by_name(self, modules: list[tuple[str, str]]) -> None:
        """Modules that ``modules`` import by computed name while they execute
        (engine.dynimport: ``importlib.import_module("pkg.acts." + name)`` over a folder)
        count as imported, as they are upstream: the registry rule then sees what they
        register. Followed on through the packages among them."""
        todo = [k for k in modules if k not in self._by_name_scanned and k not in self.b.objects]
        while todo:
            mkey = todo.pop(0)
            if mkey in self._by_name_scanned:
                continue
            self._by_name_scanned.add(mkey)
            entry = self.b.entries[mkey]
            for line, fi in self.r.folder_imports(entry):
                for child in self.index.submodules(fi.package, entry.source):
                    if child.key in self.b.modules or self.r.is_external(child.module) or (
                            fi.public_only and child.module.rpartition(".")[2][:1] == "_"):
                        continue
                    self.b.ms(child)
                    self.by_name[child.key] = f"{entry.facts.relpath}:{line}"
                    todo.append(child.key)

    def span_effect_imports(self) -> None:
        """A module the closure spans that imports another whole by a plain ``import a.b.c``,
        binding no name of its own (graphgym's ``models/layer.py`` runs ``import
        torch_geometric.graphgym.models.act``, whose ``register_act('relu', relu)`` fills the
        ``act_dict`` that ``GeneralLayer`` reads): that module counts as spanned, as upstream
        runs it, so the registry rule sees what it registers. Followed on through the modules
        spanned so."""
        todo = [k for k in self.b.modules if k not in self._effect_scanned]
        while todo:
            mkey = todo.pop(0)
            if mkey in self._effect_scanned or mkey in self.b.objects:
                continue
            self._effect_scanned.add(mkey)
            entry = self.b.entries[mkey]
            for rec in entry.facts.imports:
                if rec.is_from or rec.asname or "." not in rec.target or \
                        rec.guard.kind == "type_checking" or self.r.is_external(rec.target):
                    continue
                found = self.index.find_imported(rec.target, entry)
                if found is None or found.module != rec.target or found.key in self.b.modules:
                    continue
                self.b.ms(found)
                todo.append(found.key)

    def span_package_fillers(self, registries: dict[BindKey, list[tuple[NodeId, str, bool]]],
                             live: set[BindKey], bound: set[BindKey],
                             by_identity: dict[object, bool]) -> None:
        """A plain container the block reads while it is built and called, filled as they run
        by modules of its repository that the closure never imports, but that upstream's
        import of the block's module runs through packages' ``__init__``: graphgym's
        ``GNNGraphHead`` looks up ``register.pooling_dict[cfg.model.graph_pooling]``, which
        ``register_pooling('add', global_add_pool)`` in ``models/pooling.py`` fills, a module
        only ``graphgym/models/__init__.py`` imports. Up to ``PACKAGE_FILLER_MODULES`` such
        modules, with a registration the closure can look up (``_registration``), count as
        spanned, so the registry rule adds what they register; more (timm's
        ``_model_entrypoints``, which every model module fills) are said in the header and
        left out, as the file would hold the whole package. A registry object with methods
        (mmengine's ``MODELS = Registry(...)``) is the config rule's
        (add_config_registrations)."""
        todo = [key for key in sorted(registries)
                if key not in self._package_scanned and self._load_fillers(key)]
        if not todo:
            return
        along = self.r.imported_along_of(self.b.entry)
        reach: set[NodeId] | None = None
        for key in todo:
            found = [m for m in self._load_fillers(key)
                     if m in along and m not in self.b.modules and m not in self.b.objects]
            if not found:
                self._package_scanned.add(key)
                continue
            if reach is None:
                reach = self.construction_reach()
            if not any(user in reach for user, _, _ in registries[key]):
                continue  # (not yet: a later round's closure may run the reader)
            adding = [m for m in found if self._fills_from(m, key, registries, live, bound,
                                                           by_identity)]
            spanned = sum(1 for m in self.package_fillers if key in self.package_fillers[m][1])
            if spanned + len(adding) > PACKAGE_FILLER_MODULES:
                self._package_scanned.add(key)
                first = sorted(self.index.entries[m].facts.relpath for m in adding)[:3]
                self.b.notes.append(
                    f"`{key[2]}` ({self.index.entries[key[1]].facts.relpath}), which this "
                    f"block reads, is filled upstream also by {len(adding)} modules that "
                    f"importing {self.b.entry.module} runs through its packages "
                    f"({', '.join(first)}, ...): their registrations are not inlined, so "
                    "here it holds only those of the modules this file inlines")
                continue
            for m in adding:
                self.b.ms(self.index.entries[m])
                chain, regs = self.package_fillers.get(m, (along[m], frozenset()))
                self.package_fillers[m] = (chain, regs | {key})

    def _fills_from(self, mkey: tuple[str, str], key: BindKey,
                    registries: dict[BindKey, list[tuple[NodeId, str, bool]]],
                    live: set[BindKey], bound: set[BindKey],
                    by_identity: dict[object, bool]) -> bool:
        """Whether a module the closure does not span has a statement filling the registry
        ``key`` that the closure can look up (``_registration``)."""
        entry = self.index.entries[mkey]
        ms = self.r.module_source(entry)
        return any(key in self._registration(entry, ms, st, registries, live, bound,
                                             by_identity)
                   for st in ms.stmts if st.kind not in ("import", "script"))

    def _load_fillers(self, key: BindKey) -> list[tuple[str, str]]:
        """The modules of a module-level container's repository, other than its own, with a
        module-level statement that fills it as it runs: one calling, or decorating with, a
        function of the container's module that stores into it, or storing into it itself.
        (A class keeping a container, such as timm's ``RmsNorm`` with its ``__constants__``,
        is none.)"""
        hit = self.r.load_fillers.get(key)
        if hit is not None:
            return hit
        self.r.load_fillers[key] = out = []
        home = self.index.entries.get(key[1])
        if home is None or self.r.is_external(home.module):
            return out
        hms = self.r.module_source(home)
        # the classes of its module whose subclasses fill it (engine.subclass_hooks)
        names = set(self.hooks.hooked_classes(key, home))
        if not names and not any(is_container_binding(hms.stmts[i].node)
                                 for i in hms.binders.get(key[2], ())):
            return out
        names.add(key[2])
        for st in hms.stmts:
            if st.kind == "function" and \
                    key in self.writes_of(("def", home.key, st.node.name)):  # type: ignore
                names.add(st.node.name)  # type: ignore[attr-defined]
        # a module defining a class whose subclasses fill it through one of ``names``
        # (``registry.add(cls)`` in ``Base.__init_subclass__``) adds that class's name: its
        # subclasses elsewhere fill it too, and are looked for in a next round
        sought, done, looked = set(names), set(), set()
        while sought:
            for mkey, entry in self.index.entries.items():
                if mkey[0] != home.source or mkey == home.key or \
                        self.r.is_external(entry.module) or \
                        not self.r.mentions_any(entry, sorted(sought), quoted=False):
                    continue
                ms = self.r.module_source(entry)
                if mkey not in out and any(
                        self._fills_as_it_runs(entry, ms, st, key, names) for st in ms.stmts
                        if st.kind not in ("import", "script")):
                    out.append(mkey)
                if mkey not in looked:
                    looked.add(mkey)
                    names |= set(self.hooks.hooked_classes(key, entry))
            done |= sought
            sought = names - done
        return out

    def _fills_as_it_runs(self, entry: ModuleEntry, ms: ModuleSource, st: TopStmt,
                          key: BindKey, names: set[str]) -> bool:
        """Whether the module-level statement ``st`` stores into the container ``key``, or
        calls (or decorates with) a function that does, by one of ``names``."""
        for n in self._load_names(ms, st):
            k = self.r.binding_key(entry, ms, n) if n in names else None
            if k is not None and (key in self.writes_of(k) or k == key and (
                    n in ms.access(st)[1] or n in self._statement_fills(entry, ms, st))):
                return True
        return key in self.hooks.fills(entry, ms, st)

    def note_package_fillers(self, nodes: list[NodeId]) -> None:
        """Registrations inlined from modules only a package ``__init__`` imports: said in the
        header, with the imports that run them upstream."""
        inlined = {n[0] for n in nodes}
        for mkey, (chain, _) in sorted(self.package_fillers.items(),
                                       key=lambda kv: self.b.entries[kv[0]].facts.relpath):
            if mkey in inlined:
                self.b.notes.append(
                    f"{self.b.entries[mkey].facts.relpath} fills a registry this block reads; "
                    f"the block's modules never import it, but upstream runs it "
                    f"({' -> '.join(chain)}): its registrations are inlined")

    def note_imports_by_name(self, nodes: list[NodeId]) -> None:
        """Registrations inlined from modules that upstream imports by computed name: said in
        the header, with the statement that imports them."""
        inlined = {n[0] for n in nodes}
        by_importer: dict[str, list[str]] = {}
        for mkey in sorted(self.by_name_fillers, key=lambda k: self.b.entries[k].facts.relpath):
            if mkey in inlined:
                by_importer.setdefault(self.by_name[mkey], []).append(
                    self.b.entries[mkey].facts.relpath)
        for importer, paths in sorted(by_importer.items()):
            folder = importer.rpartition("/")[0] + "/"
            names = [p[len(folder):] if p.startswith(folder) else p for p in paths]
            self.b.notes.append(
                f"{importer} imports the modules of its folder by computed name, and they fill "
                "registries this block reads: their registrations are inlined, from "
                f"{', '.join(names)}")

    def add_patches(self) -> bool:
        """Module-level statements, in the modules the closure spans, that change one of its
        definitions in place after defining it (engine.patches: ``GlobalParams.__new__.
        __defaults__ = ...``, ``set_cfg(cfg)``). Each is added; emission_order puts it before
        the uses that run after it upstream. Returns whether any was."""
        bound = set(self.b.bind_order)
        added = False
        read: dict[BindKey, bool] = {}
        ext_reads: dict[str, set[tuple[NodeId, str]]] = {}  # filled on first need
        for mkey in list(self.b.modules):
            entry, ms = self.b.entries[mkey], self.b.modules[mkey]
            for st in ms.stmts:
                node = (mkey, st.index)
                if node in self.b.seen or st.kind == "script":
                    continue
                if self.r.ops_registered_at(node):
                    # what registers a torch operator comes with that operator, not with the
                    # object it calls (``_lib.define("unused(Tensor x) -> Tensor")``)
                    continue
                roots, call, in_place = ms.patch_shape(st)
                changed: set[BindKey] = set()
                for name in roots or ():
                    key = self.r.binding_key(entry, ms, name) or \
                        self._external_object(entry, name, st.node, ext_reads)
                    if key is not None:
                        changed.add(key)
                for name in in_place or ():
                    key = self.r.binding_key(entry, ms, name)
                    if key is None or key not in bound or self._is_container(key):
                        continue  # a container's item stores are the registry rule's
                    if st.kind in ("class", "function"):
                        # a decorator method adds the definition to its object: needed where
                        # the closure reads that object, not where it only decorates with it
                        if key not in read:
                            read[key] = self._read_beyond_decorators(key)
                        if not read[key]:
                            continue
                    changed.add(key)
                if call is not None:
                    fkey = self.r.binding_key(entry, ms, call[0])
                    mutated = self._mutated_by(fkey) if fkey is not None else frozenset()
                    for where, name in call[1].items():
                        key = self.r.binding_key(entry, ms, name) if where in mutated else None
                        if key is not None:
                            changed.add(key)
                changed &= bound
                if not changed:
                    continue
                self.b.add(entry, st.index)
                added = True
                for key in changed:
                    self.patches.setdefault(key, []).append(node)
        return added

    def _external_object(self, entry: ModuleEntry, name: str, node: ast.stmt,
                         ext_reads: dict[str, set[tuple[NodeId, str]]]) -> BindKey | None:
        """The binding of ``name`` in ``entry`` when it is an object imported from outside the
        corpus: fastai's ``defaults.activation = nn.ReLU`` (layers.py) sets what
        ``act_cls=defaults.activation`` reads from fastcore's ``defaults``. For an imported
        module, only where the closure reads what the statement ``node`` sets: Neural
        Compressor's ``logging.TRACE = 5``, read by ``log_levels = {"0": logging.TRACE, ...}``;
        ``torch.backends.cudnn.benchmark = True`` configures the process, not the block.
        (Called where ``binding_key`` found no definition of ``name``.)"""
        recs = entry.imports.get(name)
        if recs and recs[0].name is None:
            return self._read_module_patch(entry, name, node, ext_reads)
        t = self.index.lookup(entry, name)
        if t.kind != "external" or t.how not in ("import", "heuristic") or "." not in t.name:
            return None
        return ("ext", t.name)

    def _read_module_patch(self, entry: ModuleEntry, name: str, node: ast.stmt,
                           ext_reads: dict[str, set[tuple[NodeId, str]]]) -> BindKey | None:
        """``("ext", module)`` where the assignment ``node`` sets attributes of the external
        module ``name`` binds in ``entry`` and a statement of the closure reads one of them
        through an import of that module; else None."""
        t = self.index.lookup(entry, name)
        if t.kind != "external" or t.how != "import":
            return None
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore
        patched = {d for tg in targets if isinstance(tg, ast.Attribute)
                   and (d := dotted(tg)) and d.split(".", 1)[0] == name}
        if not patched:
            return None
        if not ext_reads:
            for (user, used), key in self.b.refs.items():
                if key[0] == "ext":
                    ext_reads.setdefault(key[1], set()).add((user, used))
        rec = entry.imports[name][0]
        ident = ExternalImport(rec.module, None, rec.asname).identity
        for user, used in ext_reads.get(ident, ()):
            st = self.b.modules[user[0]].stmts[user[1]]
            if st.node is node:
                continue
            if any(c == p or c.startswith(p + ".") for c in self.b.modules[user[0]].chains(
                    st, used) for p in {used + d[len(name):] for d in patched}):
                return ("ext", ident)
        return None

    def _read_beyond_decorators(self, key: BindKey) -> bool:
        """Whether a statement of the closure, other than one that changes it, reads the
        definition ``key`` otherwise than as the root of a decorator method (engine.patches:
        ``Conv[Conv.CONV, 2]``, not ``@MODELS.register_module()``)."""
        patching = set(self.patches.get(key, ()))
        return any(k == key and user not in patching and reads_beyond_decorator_methods(
                       self.b.modules[user[0]].stmts[user[1]].node, name)
                   for (user, name), k in self.b.refs.items())

    def _is_container(self, key: BindKey) -> bool:
        """Whether a definition is a module-level container or a class holding one, as the
        registry rule sees it."""
        entry, ms = self.b.entries.get(key[1]), self.b.modules.get(key[1])
        return entry is not None and ms is not None and any(
            holds_container(ms.stmts[i].node) or self._dict_instance(entry, ms, ms.stmts[i].node)
            or self._registry_instance(entry, ms, ms.stmts[i].node)
            for i in self.b.binders(entry, key[2]))

    def _registry_instance(self, entry: ModuleEntry, ms: ModuleSource, node: ast.stmt) -> bool:
        """``NAME = Registry()`` where ``Registry`` is a corpus class that keeps a container as
        a class attribute and has a method filling it (Neural Compressor's
        ``accelerator_registry = AcceleratorRegistry()``, whose ``register_accelerator_impl``
        returns a decorator storing into ``cls.registered_accelerators``)."""
        return any(holds_container(cls) and filling_methods(cls)
                   for cls in self._instance_of(entry, ms, node))

    def _instance_of(self, entry: ModuleEntry, ms: ModuleSource, node: ast.stmt
                     ) -> list[ast.ClassDef]:
        """The corpus class of ``NAME = Cls(...)``, a statement of ``entry``'s module."""
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
            return []
        return [c for c in self.bound_by(entry, ms, value.func.id) if isinstance(c, ast.ClassDef)]

    def _class_of(self, entry: ModuleEntry, ms: ModuleSource, name: str) -> ast.ClassDef | None:
        """The corpus class ``name`` stands for in ``entry``, or whose instance it is
        (``NAME = Cls(...)`` in its module); None for anything else."""
        key = self.r.binding_key(entry, ms, name)
        home = self.index.entries.get(key[1]) if key is not None else None
        if home is None:
            return None
        hms = self.r.module_source(home)
        for node in self.bound_by(entry, ms, name):
            if isinstance(node, ast.ClassDef):
                return node
            found = self._instance_of(home, hms, node)
            if found:
                return found[0]
        return None

    def _statement_fills(self, entry: ModuleEntry, ms: ModuleSource, st: TopStmt
                         ) -> frozenset[str]:
        """``filling_calls`` of a module-level statement, worked out once."""
        key = (entry.key, st.index)
        hit = self._fill_calls.get(key)
        if hit is None:
            hit = self._fill_calls[key] = frozenset(
                self.filling_calls(entry, ms, st.node) if "(" in ms.stmt_text(st) else ())
        return hit

    def filling_calls(self, entry: ModuleEntry, ms: ModuleSource, node: ast.AST) -> set[str]:
        """The names whose registry a call in ``node`` fills through a method of their class
        (``accelerator_registry.register_accelerator_impl(name=name)``); for a ``def`` or
        ``class``, in its decorators only."""
        exprs = node.decorator_list if isinstance(
            node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else [node]
        out: set[str] = set()
        for expr in exprs:
            for call in treewalk.nodes(expr):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and isinstance(call.func.value, ast.Name)):
                    continue
                name = call.func.value.id
                if name in out:
                    continue
                cls = self._class_of(entry, ms, name)
                if cls is not None and holds_container(cls) and \
                        call.func.attr in filling_methods(cls):
                    out.add(name)
        return out

    def _dict_instance(self, entry: ModuleEntry, ms: ModuleSource, node: ast.stmt) -> bool:
        """``NAME = Registry()`` where ``Registry`` is a corpus class deriving from a dict
        (ludwig's ``class Registry(UserDict, Generic[T])``): a container as much as ``{}``."""
        return any(any((dotted(b) or "").rsplit(".", 1)[-1] in _DICT_BASES for b in cls.bases)
                   for cls in self._instance_of(entry, ms, node))

    def _mutated_by(self, key: BindKey) -> frozenset:
        """The parameters a corpus function changes in place (engine.patches)."""
        hit = self.r.mutators.get(key)
        if hit is None:
            hit = frozenset()
            entry = self.index.entries.get(key[1])
            if entry is not None and not self.r.is_external(entry.module):
                ms = self.r.module_source(entry)
                for i in ms.binders.get(key[2], []):
                    hit |= mutated_parameters(ms.stmts[i].node)
            self.r.mutators[key] = hit
        return hit

    def _handed_to_fill_only(self, user: NodeId, st: TopStmt, name: str) -> bool:
        """Whether every use of ``name`` in the statement ``st`` hands it to a corpus function
        that only fills it there (engine.membership.fills_only): graphgym's
        ``register_node_encoder`` returns ``register_base(node_encoder_dict, key, module)``,
        which reads nothing of the registry, so the encoders registered beside a block are
        no part of it until something looks one up."""
        hit = self._fill_only.get((user, name))
        if hit is None:
            hit = self._fill_only[(user, name)] = self._hands_to_fill_only(user, st, name)
        return hit

    def _hands_to_fill_only(self, user: NodeId, st: TopStmt, name: str) -> bool:
        entry, ms = self.b.entries[user[0]], self.b.modules[user[0]]
        uses = uses_of(st.node, name)
        parents = parents_of(st.node) if uses else {}
        for use in uses:
            call = parents.get(use)
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    and use in call.args):
                return False
            at = call.args.index(use)
            key = self._callee(entry, ms, call)
            if key is None or at not in self._mutated_by(key):
                return False
            home = self.index.entries.get(key[1])
            fns = [] if home is None else self._functions(home, key[2])
            if len(fns) != 1:
                return False
            a = fns[0].args  # type: ignore[attr-defined]
            params = [p.arg for p in (*a.posonlyargs, *a.args)]
            if at >= len(params) or not fills_only(fns[0], params[at]):  # type: ignore[arg-type]
                return False
        return bool(uses)

    def _functions(self, entry: ModuleEntry, name: str) -> list[ast.stmt]:
        """The ``def`` statements binding ``name`` in ``entry``'s module."""
        ms = self.r.module_source(entry)
        return [ms.stmts[i].node for i in ms.binders.get(name, [])
                if ms.stmts[i].kind == "function"]

    def handed_to_fillers(self, entry: ModuleEntry, ms: ModuleSource, fn: ast.AST
                          ) -> set[str]:
        """The names a function hands to a corpus function that fills that parameter in place
        (engine.patches): graphgym's ``register_layer(key)`` returns ``register_base(
        layer_dict, key, module)``, whose ``mapping[key] = module`` fills ``layer_dict``."""
        out: set[str] = set()
        for call in treewalk.nodes(fn):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            handed = [(i, a.id) for i, a in enumerate(call.args) if isinstance(a, ast.Name)]
            handed += [(k.arg, k.value.id) for k in call.keywords
                       if k.arg is not None and isinstance(k.value, ast.Name)]
            key = self._callee(entry, ms, call) if handed else None
            if key is not None:
                mutated = self._mutated_by(key)
                out.update(name for at, name in handed if at in mutated)
        return out

    def _callee(self, entry: ModuleEntry, ms: ModuleSource, call: ast.Call) -> BindKey | None:
        """The corpus definition a call by plain name (``register_base(...)``) calls."""
        key = self.r.binding_key(entry, ms, call.func.id)  # type: ignore[attr-defined]
        return key if key is not None and key[0] == "def" else None

    def writes_of(self, key: BindKey) -> list[BindKey]:
        """The module-level containers a function fills when called (registration helpers)."""
        hit = self.r.writers.get(key)
        if hit is not None:
            return hit
        self.r.writers[key] = []
        out: list[BindKey] = []
        entry = self.index.entries.get(key[1])
        if entry is not None and not self.r.is_external(entry.module):
            ms = self.r.module_source(entry)
            for i in ms.binders.get(key[2], []):
                st = ms.stmts[i]
                if st.kind != "function":
                    continue
                uses = ms.uses(st)
                filled = ms.access(st)[1]
                if "(" in ms.stmt_text(st):
                    filled = filled | self.filling_calls(entry, ms, ast.Module(
                        body=list(st.node.body), type_ignores=[]))  # type: ignore[attr-defined]
                    filled = filled | self.handed_to_fillers(entry, ms, st.node)
                for name in sorted(filled & (uses.lazy | uses.load)):
                    k = self.r.binding_key(entry, ms, name)
                    if k is not None and k not in out:
                        out.append(k)
        self.r.writers[key] = out
        return out

    def _calls_through_modules(self, entry: ModuleEntry, st: TopStmt,
                          load_names: list[str]) -> list[BindKey]:
        """The corpus functions that a ``def``/``class`` statement's decorators, or another
        module-level statement, call through a module (``@pyro.settings.register(...)`` below
        ``import pyro``; ``settings.register("validate_poutine", __name__, ...)`` below ``from
        pyro import settings``)."""
        names = {n for n in load_names if n in entry.imports}
        if not any(self.index.lookup(entry, n).kind == "module" for n in names):
            return []
        if st.kind in ("class", "function"):
            called = list(st.node.decorator_list)  # type: ignore[attr-defined]
        else:
            called = [c for c in treewalk.walk(st.node) if isinstance(c, ast.Call)]
        out: list[BindKey] = []
        for deco in called:
            func = deco.func if isinstance(deco, ast.Call) else deco
            chain = dotted(func) if isinstance(func, ast.Attribute) else None
            if chain is None or chain.split(".")[0] not in names:
                continue
            key = self.r.dotted_key(entry, chain)
            if key is not None:
                out.append(key)
        return out

    @staticmethod
    def _load_names(ms: ModuleSource, st: TopStmt) -> list[str]:
        """Names a statement uses while the module executes; for a ``def``/``class`` only its
        decorators can fill a registry, which spares the symtable of every skipped def."""
        if st.kind in ("class", "function"):
            decos = st.node.decorator_list  # type: ignore[attr-defined]
            return sorted({n.id for d in decos for n in treewalk.walk(d)
                           if isinstance(n, ast.Name)})
        return sorted(ms.uses(st).load)
