"""A corpus module that upstream uses as a value, not only through ``mod.X`` chains.

kornia's AutoAugment builds its operations with ``getattr(ops, name)(prob, mag)`` from a table
of names, litgpt's LoRA config picks its MLP with ``getattr(litgpt.lora, self.mlp_class_name)``,
torchvision's feature extraction lists ``inspect.getmembers(torchvision.ops)``. Inlined, the
module itself is gone. Keeping ``from kornia... import ops`` instead needs the package installed
and mixes its classes with the inlined ones, so an ``isinstance`` against an inlined base fails.

The generated file gets a module object instead: one statement, placed after every name it
holds, that makes a ``types.ModuleType`` under upstream's module name and fills it with the
names upstream's module binds (its definitions and imports, star imports included; dunder
names and submodules left out). Each name is a dependency like any other, inlined or imported,
so ``getattr``, ``vars`` and ``inspect.getmembers`` see what they see upstream.

Where a statement reads the object by ``getattr`` with a name it computes (CrypTen's
``cryptensor.py``: ``for module_name in functions.__all__: module = getattr(functions,
module_name)``, then ``getattr(module, func)`` for each ``func`` of ``module.__all__``), any
name of its ``__all__`` may come back: the submodules it lists are held, each a module object
of its own, and each such object also holds the module's ``__all__`` and every name that
lists, those otherwise left out included: dunder names (``logic.py``'s ``__eq__``) and those
made at run time (``regular.py``'s ``globals()[function_name] = regular_func`` for each name
of its ``__all__``).

A name upstream's module binds on some paths only (in one arm of an ``if``, in an ``except``
clause) is set by a ``try`` of its own, so the object lacks it where the file never bound it,
as upstream's module does; a name a module-level ``del`` removed is left out.

Where upstream hands the module to ``importlib.resources`` (audiotools' ``playback.py``:
``importlib_resources.files(templates).joinpath("headers.html")``, ``templates`` a package of
data files only), the object is the anchor of its files: it gets a ``__spec__`` (and
``__file__``, and ``__path__`` for a package) that points at a folder beside the generated file,
named by the module, where the module's data files go (engine.modulefiles). A plain module
object has no spec, and ``files()`` raised TypeError where upstream's reads its files.

A corpus module imported inside a function, where upstream's import of the block's module has
run that module already (so the import only fetches it), gets such an object too: torch_geometric's
``aggregation_resolver`` runs ``import torch_geometric.nn.aggr as aggr`` and searches
``vars(aggr)``, so its object holds every name. Where the function only reads ``mod.X`` from it
(torchvision's ``Image.__new__``: ``F.pil_to_tensor(data)``), the object holds just those names
(``attribute_reads``), and grows when another user needs more. A module upstream runs first at
that import (einops' ``from .layers import tensorflow``) stays an import (engine.deferred).

The statement is not upstream text: it lives in a module of its own in the closure (the key
``(source, module + "#object")``) and the header says what it stands for.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.flow import definitely_bound
from nnrag_tui.engine.modulefiles import MAX_SHOWN
from nnrag_tui.engine.nodecache import per_node

if TYPE_CHECKING:  # the app's tree view reads KIND without loading the resolver's modules
    from nnrag_tui.engine.bindings import Target
    from nnrag_tui.engine.modsource import ModuleSource

MODULE_OBJECT = "__nnrag_module__"  # the name the statement binds, renamed on output
KIND = "module_object"  # its TopStmt.kind
# the TopStmt.kind of the function standing in for ``importlib.import_module``, which returns
# the module objects it holds (engine.computed_imports)
IMPORT_TABLE_KIND = "import_table"
OBJECT_SUFFIX = "#object"


def object_key(module_key: tuple[str, str]) -> tuple[str, str]:
    return (module_key[0], module_key[1] + OBJECT_SUFFIX)


def is_object_key(key: tuple[str, str]) -> bool:
    return key[1].endswith(OBJECT_SUFFIX)


def namespace(index, entry) -> list[str]:
    """The names ``entry``'s module binds at its top level, as ``getattr`` finds them. Those
    its ``__getattr__`` makes when asked (engine.lazyattr) are none: upstream's module holds
    one only once something asked, and copying it would run what upstream's runs then as the
    file loads."""
    names = (set(entry.defs) | set(entry.imports)) - set(entry.lazy)
    for star in entry.stars:
        src = index.find_imported(star.target, entry)
        if src is not None:
            names |= index.exports(src)
    return sorted(n for n in names if not (n.startswith("__") and n.endswith("__"))
                  and n != MODULE_OBJECT)


def unsure_members(ms: ModuleSource, members: list[str]) -> tuple[set[str], set[str]]:
    """(unsure, gone): the members that upstream's module may lack once it has run, bound on
    some paths only (brevitas' ``error_message``, bound in an ``except`` clause under ``if
    config.VERBOSE``), and those a module-level ``del`` removed for good. Copied like the
    others, each would raise NameError on import or hold what upstream's module does not."""
    deletes = {st.index: {t.id for t in st.node.targets if isinstance(t, ast.Name)}
               for st in ms.stmts if isinstance(st.node, ast.Delete)}
    touched = {n: [*ms.binders.get(n, ()), *(i for i, gone in deletes.items() if n in gone)]
               for n in members}
    sure = definitely_bound([ms.stmts[i].node
                             for i in sorted({i for idx in touched.values() for i in idx})])
    gone = {n for n, idx in touched.items() if idx and max(idx) in deletes
            and n in deletes[max(idx)]}
    return {n for n, idx in touched.items() if idx and n not in sure} - gone, gone


def reads_computed_attr(stmt: ast.stmt, value: str) -> bool:
    """Whether ``stmt`` calls ``getattr`` on ``value`` (a name or a dotted chain) with a name
    it computes, not a string literal."""
    return value in _computed_attr_objects(stmt)


@per_node
def _computed_attr_objects(stmt: ast.AST) -> frozenset[str]:
    """What ``stmt`` calls ``getattr`` on with a computed name, as written."""
    return frozenset(ast.unparse(node.args[0]) for node in treewalk.walk(stmt)
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                     and node.func.id == "getattr" and len(node.args) >= 2
                     and not isinstance(node.args[1], ast.Constant))


# the calls that take a package (or module) as the anchor of its files
RESOURCE_CALLS = frozenset(f"{m}.{f}" for m in ("importlib.resources", "importlib_resources")
                           for f in ("files", "read_text", "read_binary", "open_text",
                                     "open_binary", "path", "is_resource", "contents"))
# the names the anchor's lines read, each bound by the external import of the same dotted name
ANCHOR_NAMES = {"os": "os", "spec_from_file_location": "importlib.util.spec_from_file_location"}


def attribute_reads(scope: ast.AST, name: str) -> frozenset[str] | None:
    """The attributes ``scope`` reads from ``name`` (torchvision's ``from torchvision.transforms.
    v2 import functional as F`` inside ``Image.__new__``, then ``F.pil_to_tensor(data)``), where
    it uses ``name`` only so; None where it uses it otherwise too (torch_geometric's
    ``vars(aggr)``), or rebinds it."""
    heads = {id(n.value): n.attr for n in treewalk.walk(scope)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == name and isinstance(n.ctx, ast.Load)}
    out: set[str] = set()
    for n in treewalk.walk(scope):
        if isinstance(n, ast.Name) and n.id == name:
            if id(n) not in heads:
                return None
            out.add(heads[id(n)])
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                n is not scope and n.name == name:
            return None
    return frozenset(out)


def reads_resources(stmt: ast.stmt, name: str, identity: Callable[[str], str | None]) -> int:
    """The line where ``stmt`` hands ``name`` to a call of ``RESOURCE_CALLS`` as the anchor
    (its first argument), or 0. ``identity`` gives what an external name of the statement
    imports (``importlib_resources`` for ``pkg_resources`` of ``import importlib_resources as
    pkg_resources``), or None for any other name."""
    for node in _calls_by_first_argument(stmt).get(name, ()):
        parts, func = [], node.func
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        root = identity(func.id) if isinstance(func, ast.Name) else None
        if root is not None and ".".join([root, *reversed(parts)]) in RESOURCE_CALLS:
            return node.lineno
    return 0


@per_node
def _calls_by_first_argument(stmt: ast.AST) -> dict[str, list[ast.Call]]:
    """The calls below ``stmt`` whose first argument is a plain name, by that name, in
    ``ast.walk``'s order."""
    out: dict[str, list[ast.Call]] = {}
    for node in treewalk.walk(stmt):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            out.setdefault(node.args[0].id, []).append(node)
    return out


def anchor_text(module: str, filename: str) -> str:
    """The lines that make the object the anchor of the files in the folder ``module`` beside
    the generated file, as upstream's module is of the files beside its ``filename``."""
    text = (f"# its files are in the folder {module} beside this file\n"
            f"{MODULE_OBJECT}.__file__ = os.path.join(\n"
            f'    os.path.dirname(os.path.abspath(__file__)), "{module}", "{filename}")\n'
            f"{MODULE_OBJECT}.__spec__ = spec_from_file_location(\n"
            f'    "{module}", {MODULE_OBJECT}.__file__)\n')
    if filename == "__init__.py":
        text += f"{MODULE_OBJECT}.__path__ = {MODULE_OBJECT}.__spec__.submodule_search_locations\n"
    return text


def object_text(module: str, members: list[str],
                unsure: set[str] | frozenset[str] = frozenset(),
                anchor: str | None = None, package: str | None = None,
                named_as_file: bool = False) -> str:
    """The statement; a member of ``unsure`` is set only where this file has bound it. With
    ``anchor`` (upstream's file name of the module), the object is the anchor of its files;
    with ``package``, that is its ``__package__``, as upstream's module has it; with
    ``named_as_file``, its ``__name__`` is the file's, where its classes are defined."""
    # (no ``update`` where what reads it reads only what every module has: ``__name__``)
    return (f'{MODULE_OBJECT} = types.ModuleType("{module}")\n'
            + (f'{MODULE_OBJECT}.__package__ = "{package}"\n' if package is not None else "")
            + (f"{MODULE_OBJECT}.__name__ = __name__\n" if named_as_file else "")
            + update_text(members, unsure) + (anchor_text(module, anchor) if anchor else ""))


def update_text(members: list[str], unsure: set[str] | frozenset[str] = frozenset()) -> str:
    """What puts ``members`` into the object; also the second statement of an object made in
    two (``ModuleObject.late``), which adds the names upstream's module binds below the point
    where a module it imports reads it."""
    body = "".join(f"    {n}={n},\n" for n in members if n not in unsure)
    text = f"{MODULE_OBJECT}.__dict__.update(\n{body})\n" if body else ""
    for n in sorted(unsure & set(members)):
        text += (f"try:  # bound on some paths only\n"
                 f'    {MODULE_OBJECT}.__dict__["{n}"] = {n}\n'
                 "except NameError:\n    pass\n")
    return text


def object_source(module: str, members: list[str],
                  unsure: set[str] | frozenset[str] = frozenset(),
                  anchor: str | None = None, late: list[str] | None = None,
                  package: str | None = None, named_as_file: bool = False) -> ModuleSource:
    """The statement as a module of its own: one top-level unit spanning all its lines; with
    ``late``, two: the object with the other members, then one that adds those."""
    from nnrag_tui.engine.modsource import ModuleSource, TopStmt

    early = [n for n in members if n not in (late or ())]
    first = object_text(module, early, unsure, anchor, package, named_as_file)
    ms = ModuleSource(first + update_text(late or [], unsure), f"<module object of {module}>")
    end = first.count("\n")
    ms.stmts = [TopStmt(0, 1, end, KIND, frozenset({MODULE_OBJECT}), ms.stmts[0].node),
                *([TopStmt(1, end + 1, len(ms.lines), KIND, frozenset(),
                           next(st.node for st in ms.stmts if st.line > end))]
                  if late else [])]
    ms.binders = {MODULE_OBJECT: [0]}
    return ms


@dataclass
class ModuleObject:
    """One module object of a closure: what it holds, and what the header says of it."""

    module: str
    name: str  # as its first user calls it; a clash may rename it in the file
    user: str  # where that user is, ``module:line``
    members: list[tuple[str, Target]]  # the names upstream's module binds, as found
    unsure: set[str]  # members bound on some paths only
    submodules: frozenset[str]  # members that are submodules: left out unless held
    held: list[str] = field(default_factory=list)  # submodules held as module objects
    visited: bool = False  # its members followed (a member added later is followed then)
    listed: bool = False  # read by a computed name: holds what its ``__all__`` lists
    # holds only the names that the functions importing it read from it (attribute_reads)
    partial: bool = False
    # where it is the anchor of upstream's files: upstream's file name of the module, who
    # reads its files (``module:line``), and those files (path on disk, path beside the file)
    anchor: str | None = None
    reader: str = ""
    files: list[tuple[str, str]] = field(default_factory=list)
    # members added by a second statement, below what they need: upstream's module binds them
    # below the import of a module that reads it half run, as that module loads
    # (resolve: split_half_run_objects)
    late: list[str] = field(default_factory=list)
    late_reader: str = ""  # that module
    # its ``__package__``, where code reads a module's (engine.computed_imports)
    package: str | None = None
    # why it is the anchor of upstream's files: what its reader does with it
    anchor_how: str = "reads its files through importlib.resources"
    use: str = "uses as a value"  # what its first user does with upstream's module
    # where its ``__name__`` is compared with a class's ``__module__`` (``module:line``): it
    # is the file's (engine.computed_imports)
    named_as_file: str = ""

    def source(self) -> ModuleSource:
        return object_source(self.module, sorted([n for n, _ in self.members] + self.held),
                             self.unsure, self.anchor, sorted(self.late), self.package,
                             bool(self.named_as_file))

    def name_note(self) -> str:
        if not self.named_as_file:
            return ""
        return (f"; its `__name__` is this file's, since {self.named_as_file} compares a "
                "class's `__module__` with it and that module's classes are defined here")

    def note(self, name: str) -> str:
        count = len(self.members) + len(self.held)
        if self.partial:
            held = sorted([n for n, _ in self.members] + self.held)
            what = ", ".join(f"`{n}`" for n in held) if count <= MAX_SHOWN else \
                f"the {count} names of that module read from it there"
            if not held:  # (spikingjelly's ``surrogate_module.__name__``)
                return (f"`{name}` is a module object standing in for {self.module}, which "
                        f"{self.user} imports inside a function: it holds none of the names "
                        "that module binds, since the function reads none of them from it "
                        "(only what every module has, such as `__name__`), so calling that "
                        "function needs no installed package" + self.name_note())
            return (f"`{name}` is a module object standing in for {self.module}, which "
                    f"{self.user} imports inside a function: it holds {what}, inlined or "
                    "imported here, so calling that function needs no installed package"
                    + self.name_note())
        left = len(self.submodules - set(self.held))
        return (f"`{name}` is a module object standing in for {self.module}, which {self.user} "
                f"{self.use}: it holds the {count} name{'s' if count != 1 else ''} that "
                "module binds, each inlined or imported here"
                + (f" ({left} submodule{'s' if left != 1 else ''} left out)" if left else "")
                + (self.late_note() if self.late else "")
                + (self.anchor_note() if self.anchor else "") + self.name_note())

    def late_note(self) -> str:
        count = len(self.late)
        names = ", ".join(f"`{n}`" for n in sorted(self.late)) if count <= MAX_SHOWN else \
            f"{count} of them"
        return (f"; {self.late_reader} reads it as it loads, which upstream's {self.module} "
                f"imports before binding {names}, so {'they are' if count > 1 else 'it is'} "
                "added to it later, as upstream binds them")

    def anchor_note(self) -> str:
        count = len(self.files)
        if not count and self.anchor_how != ModuleObject.anchor_how:
            return (f"; {self.reader} {self.anchor_how}, so it has a `__file__` and a spec in "
                    f"the folder {self.module} beside this file, which holds none of the "
                    "files upstream has beside the module")
        shown = ", ".join(rel.split("/", 1)[1] for _, rel in self.files[:MAX_SHOWN])
        more = f" and {count - MAX_SHOWN} more" if count > MAX_SHOWN else ""
        return (f"; {self.reader} {self.anchor_how}, so it has a "
                f"spec that points at the folder {self.module} beside this file, where its "
                f"{count} data file{'s' if count != 1 else ''} go"
                + (f" ({shown}{more})" if count else "")
                + " when nnrag writes, saves or validates the file; copy them along with it")
