"""Plain data passed between stages: picklable, frozen, free of behaviour beyond small helpers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Guard:
    """The module-level compound statement a definition or import sits under.

    ``kind`` is ``""`` (none), ``"try"`` / ``"except"`` (a ``try`` statement, e.g. an
    ImportError fallback), ``"type_checking"`` (``if TYPE_CHECKING:``) or ``"if"`` (any other
    ``if``, its ``else`` included). ``line``/``end_line`` span the whole guarding statement.
    """

    kind: str = ""
    line: int = 0
    end_line: int = 0
    test: str = ""  # the if-test or the handled exception types, as source text


NO_GUARD = Guard()
# the Guard.kind of ``ModuleFacts.lazy_imports``: an import in a module's ``__getattr__``,
# its span that function's (engine.lazyattr)
GETATTR = "getattr"
# the Guard.kind of ``ModuleFacts.module_imports``: a module-level ``name =
# importlib.import_module("a.b")``, recorded as ``import a.b as name`` (engine.dynimport)
IMPORT_MODULE = "import_module"


@dataclass(frozen=True, slots=True)
class ImportRecord:
    """One name bound by an import statement at module level, in its original form."""

    bound: str  # the local name it binds; "*" for a star import
    module: str  # the module as written ("" for ``from . import x``)
    name: str | None  # the imported name of a from-import; None for ``import a.b``
    asname: str | None
    level: int  # leading dots of a relative import
    target: str  # the absolute module the statement refers to ("" if it escapes the root)
    line: int
    end_line: int
    guard: Guard = NO_GUARD

    @property
    def is_star(self) -> bool:
        return self.bound == "*"

    @property
    def is_from(self) -> bool:
        return self.name is not None

    def full_name(self) -> str:
        """What the bound name refers to, absolute: ``a.b`` for ``import a.b as c``, ``a`` for
        ``import a.b``, ``pkg.mod.X`` for ``from pkg.mod import X``."""
        if self.name is None:
            return self.target if self.asname else self.target.split(".")[0]
        return f"{self.target}.{self.name}" if self.target else self.name


@dataclass(frozen=True, slots=True)
class Symbol:
    """A definition at module level (or a class nested in a class): class, function or the
    target of an assignment. Spans are 1-based lines and 0-based columns and include
    decorators."""

    name: str
    qualname: str  # dotted inside the module: "Outer.Inner"
    kind: str  # "class" | "function" | "assign"
    line: int
    end_line: int
    col: int
    end_col: int
    def_line: int = 0  # the line of the ``class``/``def`` keyword (after decorators)
    bases: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()  # e.g. "metaclass=ABCMeta"
    decorators: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()  # names bound in a class body
    abstract_methods: tuple[str, ...] = ()
    forward_raises: bool = False  # forward only raises NotImplementedError
    calls: tuple[str, ...] = ()  # dotted callees inside a class (for categories)
    doc: str = ""  # first line of the docstring
    guard: Guard = NO_GUARD
    parent: str | None = None  # qualname of the enclosing class
    alias: str = ""  # for ``X = a.b.C`` (one plain name bound to a dotted name): ``a.b.C``
    # a class's own ``__call__`` does the work itself, as a forward would (timm's
    # JsdCrossEntropy, TRL's ULDLoss): it neither hands over to ``forward`` or another
    # ``__call__`` nor only raises (``parse.call_runs``)
    call_runs: bool = False
    # a module-level function's: the names it calls with fixed sizes, as a model-size
    # variant does (``def SiT_XL_2(**kwargs): return SiT(depth=28, hidden_size=1152, ...)``;
    # ``parse.size_variant_builds``), which makes a class so built a whole network
    builds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ModuleFacts:
    """Everything the index keeps about one file."""

    relpath: str
    module: str
    is_package: bool
    sha1: str
    size: int
    symbols: tuple[Symbol, ...] = ()
    imports: tuple[ImportRecord, ...] = ()
    all_names: tuple[str, ...] | None = None  # ``__all__`` when it is a literal
    error: str | None = None  # why the file could not be indexed
    lines: int = 0
    # lines of module-level statements that bind names no statement spells out
    # (``locals()[name] = cls``, ``globals().update(...)``: engine.namespace)
    namespace_writes: tuple[int, ...] = ()
    # folders the module puts on ``sys.path`` as it runs, relative to the source's root like
    # ``relpath`` (engine.syspath)
    path_inserts: tuple[str, ...] = ()
    # the imports by which the module's ``__getattr__`` provides a name (PEP 562), each bound
    # to the name it provides; guard kind "getattr" (engine.lazyattr)
    lazy_imports: tuple[ImportRecord, ...] = ()
    # the names a module-level ``importlib.import_module("a.b")`` binds, each recorded as the
    # import ``import a.b as name``; guard kind "import_module" (engine.dynimport)
    module_imports: tuple[ImportRecord, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class Block:
    """A discovered nn.Module subclass: a candidate for extraction."""

    source: str
    module: str
    qualname: str  # inside the module
    relpath: str
    line: int
    end_line: int
    category: str
    rule: str  # which rule decided the category
    bases: tuple[str, ...] = ()  # resolved, fully qualified
    doc: str = ""
    guard: str = ""

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def full_name(self) -> str:
        return f"{self.module}.{self.qualname}"

    @property
    def key(self) -> str:
        """The explicit selector: ``module.path:Qual.Name``."""
        return f"{self.module}:{self.qualname}"

    @property
    def lines(self) -> int:
        return self.end_line - self.line + 1


@dataclass(frozen=True)
class IndexReport:
    files: int
    parsed: int
    cached: int
    failed: int
    removed: int
    blocks: int
    seconds: float
    sources: tuple[dict, ...] = field(default_factory=tuple)
    failures: tuple[tuple[str, str, str], ...] = ()  # (source, relpath, reason)

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "parsed": self.parsed,
            "cached": self.cached,
            "failed": self.failed,
            "removed": self.removed,
            "blocks": self.blocks,
            "seconds": round(self.seconds, 4),
            "sources": list(self.sources),
            "failures": [
                {"source": s, "path": p, "reason": r} for s, p, r in self.failures
            ],
        }
