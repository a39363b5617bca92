"""Uniqueness: which blocks (or files) are genuinely different.

The paper's protocol (its companion tool nn-dup), in four steps over a set of Python texts:

1. **exact**: a hash of the canonical form: the parsed tree (so comments and formatting do not
   count) without docstrings and ``__all__``, with the names the item defines stripped of
   cosmetic prefixes (``_Conv``, ``MyConv`` and ``Conv`` are one name), so variants that
   differ only in those collapse. ``canonical_source`` shows that form as text.
2. **lexical**: MinHash + LSH (datasketch) over k-token shingles of the tokens (comments and
   docstrings dropped, string quoting ignored, the same prefix stripping); every LSH candidate
   is verified by the exact Jaccard of the two shingle sets (``tau``, 0.90).
3. **structural**: AST fingerprints. Identifiers the item binds (variables, parameters,
   ``self.`` attributes, its own classes and helpers) and literals are normalised; free names
   (imported, builtin, or defined outside the item) and API attributes (``nn.Conv2d``,
   ``x.view``) are kept, so calling a different helper is a different structure. Class and
   module bodies are order-free (reordered methods are the same structure) while statement
   order inside a function counts. Similarity is the weighted Jaccard of the multisets of
   subtree hashes (``kappa``, 0.95), candidates again from MinHash + LSH.
4. **diversity top-up**: families (category, or name stem) left below ``min_support`` kept
   members get some back from their removed members, the most distinct first, never an exact
   copy of a kept item nor a near-duplicate (``tau``/``kappa``) of the family's kept members
   (``topup_scope="all"``: of anything kept).

Each level is greedy in preference order (validated first, then the preferred name prefixes,
then input order, which for the index is repository priority): an item is removed only when it
is within the threshold of an item that is kept at that point, so every removed member names
the member it matched and their similarity. Clusters follow those matches to the kept
representative.

Fingerprints are computed per top-level statement group, memoised on its text, in a process
pool for large inputs; datasketch is imported only when fingerprints are computed (it costs
most of a second).
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import os
import re
import textwrap
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.errors import NnragError
from nnrag_tui.engine.lines import source_lines

LEVELS = ("exact", "lexical", "structural")
FAMILY_MODES = ("auto", "category", "stem", "none")
# Cosmetic prefixes of names (case-insensitive; a prefix only counts when what follows starts
# a new word: ``MyConv`` -> ``Conv`` but ``Mystic`` stays). Leading underscores always go.
# ``rag``/``alt``/``ast``/``ga``/``rl`` are the generator prefixes of the LEMUR dataset.
DEFAULT_PREFIXES = ("my", "custom", "rag", "alt", "ast", "ga", "rl")
KEEP_FUNCTION_NAMES = frozenset({"forward", "extra_repr", "reset_parameters"})
_PARALLEL_MIN = 200  # fewer items than this are fingerprinted in-process
VERIFY_MAX = 64  # LSH candidates verified exactly per query, best MinHash estimates first


class DedupError(NnragError):
    """Bad input for dedup (a missing path, a bad threshold, an unknown family mode)."""


# -- inputs ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DedupItem:
    """One text to compare: a block's class source, a generated file, any ``.py`` file."""

    id: str
    text: str
    name: str = ""
    family: str = ""  # the category, when known
    origin: str = ""  # repository, registry, or folder
    validated: bool | None = None


@dataclass(frozen=True)
class DedupOptions:
    tau: float = 0.90  # lexical: verified shingle Jaccard
    kappa: float = 0.95  # structural: weighted Jaccard of AST subtree hashes
    shingle: int = 5  # tokens per shingle
    num_perm: int = 128  # MinHash permutations
    lsh_margin: float = 0.10  # candidates whose MinHash estimate is this far below are skipped
    prefixes: tuple[str, ...] = DEFAULT_PREFIXES
    prefer: tuple[str, ...] = ()  # name prefixes preferred as representatives, in order
    family: str = "auto"  # auto (category when known, else none) | category | stem | none
    min_support: int = 1  # top-up: kept members each family should have
    topup_scope: str = "family"  # near-duplicate check of a top-up against: family | all
    workers: int | None = None  # fingerprint processes (default: up to 2)

    def check(self) -> DedupOptions:
        for label, v in (("tau", self.tau), ("kappa", self.kappa)):
            if not 0.0 < v <= 1.0:
                raise DedupError(f"--{label} must be in (0, 1], got {v}")
        if self.shingle < 1:
            raise DedupError(f"--shingle must be at least 1, got {self.shingle}")
        if self.num_perm < 16:
            raise DedupError(f"num_perm must be at least 16, got {self.num_perm}")
        if self.family not in FAMILY_MODES:
            raise DedupError(f"--family must be one of {', '.join(FAMILY_MODES)}")
        if self.topup_scope not in ("family", "all"):
            raise DedupError("--topup-scope must be 'family' or 'all'")
        if self.min_support < 0:
            raise DedupError("--min-support must be 0 or more")
        return self


# -- names -----------------------------------------------------------------------------------
def strip_prefixes(name: str, prefixes: Sequence[str] = DEFAULT_PREFIXES) -> str:
    """``name`` without leading underscores and cosmetic prefixes (``MyConv`` -> ``Conv``,
    ``rag_Net`` -> ``Net``, ``_Block`` -> ``Block``); never empties a name."""
    out = name
    changed = True
    while changed:
        changed = False
        bare = out.lstrip("_-")
        if bare and bare != out:
            out, changed = bare, True
        low = out.lower()
        for p in prefixes:
            p = p.lower()
            if not p or not low.startswith(p) or len(out) <= len(p):
                continue
            rest = out[len(p):]
            if rest[0] in "_-" or (rest[0].isupper() and not out[len(p) - 1].isupper()):
                stripped = rest.lstrip("_-")
                if stripped:
                    out, changed = stripped, True
                    break
    return out


_HASHY = re.compile(r"^(?:[0-9a-f]{8,}|[0-9]+|[0-9a-f]{4})$")


def name_stem(name: str, prefixes: Sequence[str] = DEFAULT_PREFIXES) -> str:
    """The family a name belongs to. Dash-separated record names (``ast-activation-AlexNet-
    <hash>``, ``FractalNet-<uuid>``, ``rag-<hash>``) lose hash and number parts and their
    cosmetic prefix: the last capitalised part wins, else the first part. Identifiers lose
    cosmetic prefixes and a trailing number or dimension (``Conv2d`` -> ``Conv``)."""
    base = name.rsplit("/", 1)[-1]
    base = base.removesuffix(".py")
    if "-" in base:
        parts = [p for p in base.split("-") if p and not _HASHY.match(p)]
        if not parts:
            return base.split("-", 1)[0] or base
        caps = [p for p in parts if p[0].isupper()]
        base = caps[-1] if caps else parts[0]
    stem = strip_prefixes(base, prefixes)
    stem = re.sub(r"(?:_?\d+[dD]?|V\d+)$", "", stem) or stem
    return stem


# -- canonical form and fingerprints ---------------------------------------------------------
@dataclass
class Fingerprint:
    exact: str  # hash of the canonical AST (docstrings, comments, formatting gone)
    lexical: Any  # sorted unique uint32 shingle hashes (numpy)
    structural: Any  # sorted unique uint32 (feature, occurrence) hashes (numpy)
    shape: str  # hash of the whole normalised tree: equal shapes are structural clones
    tokens: int
    lex_minhash: Any = None  # MinHash hash values (numpy), datasketch's permutations
    struct_minhash: Any = None
    error: str | None = None


def canonical_source(text: str, prefixes: Sequence[str] = DEFAULT_PREFIXES) -> str:
    """The canonical form exact dedup compares, as text: parsed and unparsed (comments and
    formatting gone), docstrings and ``__all__`` removed, names the item defines stripped of
    cosmetic prefixes. Raises SyntaxError for text that does not parse."""
    tree, _, _ = _canonical_tree(text, prefixes)
    return ast.unparse(tree)


def _canonical_tree(text: str, prefixes: Sequence[str]
                    ) -> tuple[ast.Module, dict[str, str], list[ast.Constant]]:
    """The parsed text with docstrings and ``__all__`` removed and defined names stripped of
    cosmetic prefixes; also the renames made and the docstring nodes removed."""
    if text[:1] in (" ", "\t"):
        text = textwrap.dedent(text)
    tree = ast.parse(text)
    docs: list[ast.Constant] = []
    _strip_docstrings(tree, docs)
    tree.body = [st for st in tree.body if not _is_dunder_all(st)] or [ast.Pass()]
    defs = [st for st in tree.body
            if isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    defs += [c for st in defs if isinstance(st, ast.ClassDef)
             for c in st.body if isinstance(c, ast.ClassDef)]
    renames = {}
    for d in defs:
        new = strip_prefixes(d.name, prefixes)
        if new != d.name:
            renames[d.name] = new
    if renames:
        for d in defs:
            d.name = renames.get(d.name, d.name)
        for node in treewalk.walk(tree):
            if isinstance(node, ast.Name) and node.id in renames:
                node.id = renames[node.id]
    return tree, renames, docs


def _is_dunder_all(st: ast.stmt) -> bool:
    targets = st.targets if isinstance(st, ast.Assign) else [getattr(st, "target", None)]
    return isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


_DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _strip_docstrings(node: ast.AST, docs: list) -> None:
    """Removes docstrings, visiting statements only (expressions cannot hold one)."""
    if isinstance(node, _DOC_OWNERS):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(
                body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docs.append(body[0].value)
            node.body = body[1:] or [ast.Pass()]
    for fname in _BODIES:
        for st in getattr(node, fname, None) or ():
            if isinstance(st, (ast.stmt, ast.excepthandler, ast.match_case)):
                _strip_docstrings(st, docs)


# lexical tokens ------------------------------------------------------------------------------
# Comments and strings are matched whole (a '#' inside a string is not a comment); comments are
# dropped, a string keeps its body without prefix and quotes, so quoting style does not count.
_TOKEN = re.compile(
    r"(?P<c>#[^\n]*)"
    r"|(?P<s>[rRbBuUfF]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:[^'\\\n]|\\.)*'"
    r"|\"(?:[^\"\\\n]|\\.)*\"))"
    r"|(?P<t>[A-Za-z_]\w*|\d[\w.]*|\*\*|//|->|[<>=!]=|\S)")
_STRING_BODY = re.compile(r"^[rRbBuUfF]{0,2}('''|\"\"\"|'|\")([\s\S]*)\1$")
_TOKEN_IDS: dict[str, int] = {}


def _token_ids(text: str, renames: dict[str, str], docs: list[ast.Constant]) -> list[int]:
    """The text's tokens as stable ints: comments and docstrings dropped, strings unquoted,
    cosmetic prefixes of defined names stripped. Formatting cannot change them."""
    if docs:
        text = _blank_docstrings(text, docs)
    ids = _TOKEN_IDS
    out: list[int] = []
    append = out.append
    for comment, string, tok in _TOKEN.findall(text):
        if tok:
            if renames and tok in renames:
                tok = renames[tok]
        elif string:
            body = _STRING_BODY.match(string)
            tok = "\x02" + (body.group(2) if body else string)
        else:
            continue
        v = ids.get(tok)
        if v is None:
            v = ids[tok] = zlib.crc32(tok.encode("utf-8", "surrogatepass")) or 1
        append(v)
    return out


def _blank_docstrings(text: str, docs: list[ast.Constant]) -> str:
    """``text`` with the docstrings' spans replaced by spaces (ast columns are UTF-8 byte
    offsets; they are converted per line)."""
    lines = source_lines(text, keepends=True)
    if text[:1] in (" ", "\t"):
        # the tree was parsed from the dedented text: columns are relative to that
        lines = source_lines(textwrap.dedent(text), keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    joined = "".join(lines)
    chars = list(joined)

    def offset(lineno: int, col: int) -> int:
        line = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
        return starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", "ignore"))

    for d in docs:
        if d.end_lineno is None or d.end_col_offset is None:
            continue
        a, b = offset(d.lineno, d.col_offset), offset(d.end_lineno, d.end_col_offset)
        for k in range(a, min(b, len(chars))):
            if chars[k] != "\n":
                chars[k] = " "
    return "".join(chars)


def _shingles(ids: list[int], k: int):
    """Sorted unique 32-bit hashes of every k-token window (a rolling polynomial hash)."""
    import numpy as np

    a = np.asarray(ids, dtype=np.uint64)
    if a.size == 0:
        return np.zeros(0, dtype=np.uint32)
    k = min(k, a.size)
    n = a.size - k + 1
    h = np.zeros(n, dtype=np.uint64)
    mult = np.uint64(0x100000001B3)
    with np.errstate(over="ignore"):
        for j in range(k):
            h = h * mult + a[j:j + n]
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return np.unique((h & np.uint64(0xFFFFFFFF)).astype(np.uint32))


# structural fingerprints ---------------------------------------------------------------------
_LABEL_IDS: dict[str, int] = {}
_CTX = frozenset({ast.Load, ast.Store, ast.Del})
_NO_FEATURE = frozenset(c for c in vars(ast).values() if isinstance(c, type) and issubclass(
    c, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.arg, ast.arguments, ast.alias,
        ast.keyword)))
_SPECIAL = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.keyword, ast.alias,
                      ast.ImportFrom})
# per node class: (fields, shape label, exact label, order-free bodies, is a feature)
_INFO: dict[type, tuple[tuple[str, ...], int, int, bool, bool]] = {}


def _label(text: str) -> int:
    """A stable 64-bit id for a label (the same in every process, unlike ``hash(str)``)."""
    v = _LABEL_IDS.get(text)
    if v is None:
        v = _LABEL_IDS[text] = int.from_bytes(hashlib.blake2b(
            text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
    return v


def _info(cls: type) -> tuple[tuple[str, ...], int, int, bool, bool]:
    hit = _INFO.get(cls)
    if hit is None:
        label = _label(cls.__name__)
        fields = tuple(getattr(cls, "_fields", ()))
        hit = _INFO[cls] = (fields, label, label, cls in (ast.Module, ast.ClassDef),
                            cls not in _NO_FEATURE)
    return hit


class _Walk:
    """One pass over a canonical tree giving two hashes per node: ``exact`` (every name and
    literal as written, bodies in order) and ``shape`` (bound names and literals normalised,
    class and module bodies order-free), and the structural features (the shape hash of every
    statement and non-leaf expression, plus consecutive-statement pairs inside functions and
    other ordered bodies)."""

    def __init__(self, bound_names: frozenset[str]) -> None:
        self.bound = bound_names  # names the item binds: normalised (free names are kept)
        self.features: list[int] = []

    def walk(self, node: ast.AST) -> tuple[int, int]:
        cls = node.__class__
        if cls is ast.Name:
            ident = node.id  # type: ignore[attr-defined]
            exact = _label("N:" + ident)
            return (_label("N:_") if ident in self.bound else exact), exact
        if cls is ast.Constant:
            v = node.value  # type: ignore[attr-defined]
            exact = _label(f"C:{v.__class__.__name__}:{v!r}")
            if v is None or v is Ellipsis or v is True or v is False:
                return exact, exact
            return _label("C:str" if isinstance(v, (str, bytes)) else "C:num"), exact
        if cls is ast.Attribute:
            value = node.value  # type: ignore[attr-defined]
            vs, ve = self.walk(value)
            attr = _label("A:" + node.attr)  # type: ignore[attr-defined]
            own = value.__class__ is ast.Name and value.id in ("self", "cls")
            s = hash((_label("A:_") if own else attr, vs))
            self.features.append(s)
            return s, hash((attr, ve))
        fields, slabel, elabel, order_free, feature = _info(cls)
        if not fields:  # operators, contexts
            return slabel, elabel
        if cls in _SPECIAL:
            slabel = _special_label(node, cls)
        sparts: list[int] = [slabel]
        eparts: list[int] = [elabel]
        walk = self.walk
        for fname in fields:
            value = getattr(node, fname, None)
            if value is None:
                continue
            vcls = value.__class__
            if vcls is list:
                ss, es = [], []
                for v in value:
                    if isinstance(v, ast.AST):
                        s, e = walk(v)
                        ss.append(s)
                        es.append(e)
                    elif v is not None:  # e.g. the names of ``global a, b``
                        es.append(_label(f"{fname}={v!r}"))
                if fname in _BODIES:
                    if order_free:
                        ss.sort()
                    elif len(ss) > 1:
                        self.features.extend(hash(p) for p in itertools.pairwise(ss))
                sparts.append(hash(tuple(ss)))
                eparts.append(hash(tuple(es)))
            elif vcls in _CTX:
                continue
            elif isinstance(value, ast.AST):
                s, e = walk(value)
                sparts.append(s)
                eparts.append(e)
            else:
                eparts.append(_label(f"{fname}={value!r}"))
        s = hash(tuple(sparts))
        if feature:
            self.features.append(s)
        return s, hash(tuple(eparts))


def _special_label(node: ast.AST, cls: type) -> int:
    """The shape label of nodes whose names are API rather than bindings of the item:
    ``forward``/dunder method names, keyword argument names, imports."""
    if cls is ast.keyword:
        return _label(f"kw:{node.arg or '**'}")  # type: ignore[attr-defined]
    if cls is ast.alias:
        return _label(f"alias:{node.name}:{node.asname or ''}")  # type: ignore[attr-defined]
    if cls is ast.ImportFrom:
        return _label(f"from:{node.module}:{node.level}")  # type: ignore[attr-defined]
    n = node.name  # type: ignore[attr-defined]
    keep = n in KEEP_FUNCTION_NAMES or (n.startswith("__") and n.endswith("__"))
    return _label(f"{cls.__name__}:{n if keep else '_'}")


_NAMED_BINDERS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                            ast.ExceptHandler, ast.MatchAs, ast.MatchStar})


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the code binds itself (assignment and loop targets, parameters, ``def`` and
    ``class`` names, ``except ... as``, match captures); names bound by imports are not
    among them: they stay as written, like builtins and every other free name."""
    out: set[str] = set()
    stack: list[ast.AST] = [tree]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        cls = node.__class__
        if cls is ast.Name:
            if node.ctx.__class__ is not ast.Load:  # type: ignore[attr-defined]
                out.add(node.id)  # type: ignore[attr-defined]
            continue
        if cls is ast.Constant:
            continue
        if cls is ast.arg:
            out.add(node.arg)  # type: ignore[attr-defined]
        elif cls in _NAMED_BINDERS:
            name = node.name  # type: ignore[attr-defined]
            if name:
                out.add(name)
        elif cls is ast.Global or cls is ast.Nonlocal:
            out.update(node.names)  # type: ignore[attr-defined]
        for fname in _info(cls)[0]:
            value = getattr(node, fname, None)
            if value is None:
                continue
            if value.__class__ is list:
                for v in value:
                    if isinstance(v, ast.AST):
                        push(v)
            elif isinstance(value, ast.AST) and value.__class__ not in _CTX:
                push(value)
    return out


def _multiset_hashes(features: list[int]):
    """The multiset as a set: the k-th occurrence of a feature is its own element, so the
    Jaccard of two such sets is the weighted Jaccard of the multisets."""
    import numpy as np

    if not features:
        return np.zeros(0, dtype=np.uint32)
    f = np.asarray(features, dtype=np.int64).view(np.uint64)
    order = np.argsort(f, kind="stable")
    s = f[order]
    n = s.size
    pos = np.arange(n)
    starts = np.ones(n, dtype=bool)
    starts[1:] = s[1:] != s[:-1]
    k = pos - np.maximum.accumulate(np.where(starts, pos, 0))  # occurrence index in its run
    with np.errstate(over="ignore"):
        h = s * np.uint64(0x9E3779B97F4A7C15) + k.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
        h ^= h >> np.uint64(31)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(29)
    return np.unique((h & np.uint64(0xFFFFFFFF)).astype(np.uint32))


def fingerprint(text: str, options: DedupOptions = DedupOptions(), *,
                minhash: bool = True) -> Fingerprint:
    """Everything the three levels compare, for one text. Text that does not parse is
    compared by its tokens (exact and lexical levels only).

    The work is done per top-level statement group and memoised on its text (many corpora
    repeat the same helper classes in file after file); the result is the same as walking the
    whole module at once, which is what happens when the text cannot be split cleanly."""
    import numpy as np

    if text[:1] in (" ", "\t"):
        text = textwrap.dedent(text)
    error = None
    fresh: dict[str, ast.Module] = {}  # trees parsed by this call, walked once
    try:
        segs = _segments(text)
        metas = [_segment_meta(s, fresh) for s in segs]
        if any(m is None for m in metas):  # a split inside a string or brackets: no split
            segs = [text.rstrip()]
            whole = _segment_meta(segs[0], fresh)
            if whole is None:
                ast.parse(text)  # raises the SyntaxError to report
                raise SyntaxError("unparsable")
            metas = [whole]
        parts = _combine(segs, metas, options.prefixes, fresh)  # type: ignore[arg-type]
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        error = f"{type(exc).__name__}: {getattr(exc, 'msg', exc)}"
        parts = None
    if parts is not None:
        top_shape, top_exact, features, ids = parts
        structural = _multiset_hashes(features)
        shape_hash = f"{top_shape & 0xFFFFFFFFFFFFFFFF:016x}"
        exact = f"ast:{top_exact & 0xFFFFFFFFFFFFFFFF:016x}"
    else:
        ids = _token_ids(text, {}, [])
        structural = np.zeros(0, dtype=np.uint32)
        shape_hash = ""
        exact = "tok:" + hashlib.sha256(np.asarray(ids, dtype=np.uint64).tobytes()).hexdigest()
    lexical = _shingles(ids, options.shingle)
    fp = Fingerprint(exact, lexical, structural, shape_hash, len(ids), error=error)
    if minhash:
        fp.lex_minhash = _minhash_values(lexical, options.num_perm)
        fp.struct_minhash = _minhash_values(structural, options.num_perm)
    return fp


_SPLIT = re.compile(r"\n(?=[A-Za-z_@])")
_CONTINUES = re.compile(r"(?:else|elif|except|finally)\b")
_CACHE_LIMIT = 200_000


@dataclass(frozen=True)
class _Meta:
    """What a statement group tells about its module: names it defines (top-level, and
    classes nested in its classes), names its imports bind, whether it opens with a string."""

    defs: tuple[str, ...]
    bound: frozenset[str]  # every name bound outside imports: variables, parameters, defs
    opens_with_string: bool


_META: dict[str, _Meta | None] = {}
_RESULTS: dict[tuple, tuple[list[tuple[int, int]], list[int], list[int]]] = {}


def _segments(text: str) -> list[str]:
    """The text cut before every line that starts a statement at column 0 (decorators stay
    with their definition, ``else``/``except``/... with their statement)."""
    out: list[str] = []
    for part in _SPLIT.split(text):
        if out and (_CONTINUES.match(part) or out[-1].rstrip().rsplit("\n", 1)[-1][:1] == "@"):
            out[-1] += "\n" + part
        else:
            out.append(part)
    return [s.rstrip() for s in out if s.strip()]


def _segment_meta(seg: str, fresh: dict[str, ast.Module]) -> _Meta | None:
    if seg in _META:
        return _META[seg]
    try:
        tree = ast.parse(seg)
    except (SyntaxError, ValueError):
        meta = None
    else:
        fresh[seg] = tree
        defs: list[str] = []
        for st in tree.body:
            if isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                defs.append(st.name)
                if isinstance(st, ast.ClassDef):
                    defs.extend(c.name for c in st.body if isinstance(c, ast.ClassDef))
        first = tree.body[0] if tree.body else None
        meta = _Meta(tuple(defs), frozenset(_bound_names(tree)),
                     isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                     and isinstance(first.value.value, str))
    if len(_META) > _CACHE_LIMIT:
        _META.clear()
    _META[seg] = meta
    return meta


def _combine(segs: list[str], metas: list[_Meta], prefixes: Sequence[str],
             fresh: dict[str, ast.Module]):
    """Module-level hashes, features and tokens from the statement groups."""
    renames: dict[str, str] = {}
    bound: set[str] = set()
    for m in metas:
        bound |= m.bound
        for d in m.defs:
            new = strip_prefixes(d, prefixes)
            if new != d:
                renames[d] = new
    bound_names = frozenset(renames.get(n, n) for n in bound)
    rkey = tuple(sorted(renames.items()))
    kkey = hash(tuple(sorted(bound_names)))
    hashes: list[tuple[int, int]] = []
    features: list[int] = []
    ids: list[int] = []
    for n, seg in enumerate(segs):
        drop_doc = n == 0 and metas[0].opens_with_string
        key = (seg, kkey, rkey, drop_doc)
        hit = _RESULTS.get(key)
        if hit is None:
            hit = _walk_segment(seg, bound_names, renames, drop_doc, fresh.pop(seg, None))
            if len(_RESULTS) > _CACHE_LIMIT:
                _RESULTS.clear()
            _RESULTS[key] = hit
        hashes.extend(hit[0])
        features.extend(hit[1])
        ids.extend(hit[2])
    shape = hash((_label("Module"), hash(tuple(sorted(s for s, _ in hashes)))))
    exact = hash((_label("Module"), hash(tuple(e for _, e in hashes))))
    features.append(shape)
    return shape, exact, features, ids


def _walk_segment(seg: str, bound_names: frozenset[str], renames: dict[str, str],
                  drop_doc: bool, tree: ast.Module | None = None
                  ) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    if tree is None:
        tree = ast.parse(seg)
    body = tree.body
    docs: list[ast.Constant] = []
    if drop_doc and body:
        docs.append(body[0].value)  # type: ignore[attr-defined]
        body = body[1:]
    for st in body:
        _strip_docstrings(st, docs)
    body = [st for st in body if not _is_dunder_all(st)]
    if renames:
        for st in body:
            if isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                st.name = renames.get(st.name, st.name)
                if isinstance(st, ast.ClassDef):
                    for c in st.body:
                        if isinstance(c, ast.ClassDef):
                            c.name = renames.get(c.name, c.name)
            for node in treewalk.walk(st):
                if isinstance(node, ast.Name) and node.id in renames:
                    node.id = renames[node.id]
    walker = _Walk(bound_names)
    hashes = [walker.walk(st) for st in body]
    return hashes, walker.features, _token_ids(seg, renames, docs)


_MH: dict[int, Any] = {}


def _minhash_template(num_perm: int):
    """One reusable datasketch MinHash per permutation count (its permutations are fixed by
    the seed, so every process computes the same signatures)."""
    t = _MH.get(num_perm)
    if t is None:
        from datasketch import MinHash

        t = _MH[num_perm] = MinHash(num_perm=num_perm, seed=1, hashfunc=int)
    return t


def _minhash_values(values, num_perm: int):
    if len(values) == 0:
        return None
    m = _minhash_template(num_perm)
    m.clear()
    m.update_batch(values.tolist())
    return m.hashvalues.copy()


def _to_minhash(values, num_perm: int):
    from datasketch import LeanMinHash

    t = _minhash_template(num_perm)
    return LeanMinHash(seed=t.seed, hashvalues=values, scheme=t.scheme)


def jaccard(a, b) -> float:
    """Exact Jaccard of two sorted unique numpy arrays."""
    import numpy as np

    if len(a) == 0 and len(b) == 0:
        return 1.0
    if len(a) == 0 or len(b) == 0:
        return 0.0
    if a.size > b.size:
        a, b = b, a
    pos = np.searchsorted(b, a)
    pos[pos == b.size] = 0
    inter = int(np.count_nonzero(b[pos] == a))
    return inter / (a.size + b.size - inter)


def _fp_worker(args: tuple[str, DedupOptions]) -> Fingerprint:
    text, options = args
    return fingerprint(text, options)


def fingerprints(texts: Sequence[str], options: DedupOptions = DedupOptions(),
                 progress: Callable[[int, int], None] | None = None) -> list[Fingerprint]:
    """Fingerprints of many texts; identical texts are computed once, and large inputs in a
    process pool (``options.workers``, default up to 2)."""
    unique: dict[str, int] = {}
    order: list[int] = []
    for t in texts:
        order.append(unique.setdefault(t, len(unique)))
    todo = list(unique)
    workers = options.workers or min(2, os.cpu_count() or 1)
    _minhash_template(options.num_perm)  # import datasketch before forking
    results: list[Fingerprint]
    if workers > 1 and len(todo) >= _PARALLEL_MIN:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        chunk = max(8, min(256, len(todo) // (workers * 8) or 1))
        results = []
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            for i, fp in enumerate(pool.map(_fp_worker, ((t, options) for t in todo),
                                            chunksize=chunk)):
                results.append(fp)
                if progress and (i + 1) % 500 == 0:
                    progress(i + 1, len(todo))
    else:
        results = []
        for i, t in enumerate(todo):
            results.append(fingerprint(t, options))
            if progress and (i + 1) % 500 == 0:
                progress(i + 1, len(todo))
    if progress:
        progress(len(todo), len(todo))
    return [results[i] for i in order]


# -- results ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Removal:
    """A removed member: the level that removed it, the kept member it matched and how
    similar they are (1.0 for exact)."""

    id: str
    level: str
    similarity: float
    matched: str


@dataclass(frozen=True)
class TopUp:
    """A member given back to its family by the diversity top-up."""

    id: str
    family: str
    lexical: float  # its highest lexical similarity to what was kept when it came back
    structural: float


@dataclass
class Cluster:
    representative: str
    members: list[Removal] = field(default_factory=list)

    @property
    def size(self) -> int:
        return 1 + len(self.members)


@dataclass
class DedupReport:
    items: list[DedupItem]
    fingerprints: list[Fingerprint]
    options: DedupOptions
    removed: dict[str, Removal]
    topups: list[TopUp]
    families: dict[str, str]  # id -> family
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # -- derived ---------------------------------------------------------------------------
    @property
    def kept(self) -> list[str]:
        return [it.id for it in self.items if it.id not in self.removed]

    def counts(self) -> dict[str, int]:
        by_level = Counter(r.level for r in self.removed.values())
        return {"total": len(self.items), "exact": by_level["exact"],
                "lexical": by_level["lexical"], "structural": by_level["structural"],
                "topup": len(self.topups), "unique": len(self.items) - len(self.removed)}

    def representative(self, item_id: str) -> str:
        seen = set()
        cur = item_id
        while cur in self.removed and cur not in seen:
            seen.add(cur)
            cur = self.removed[cur].matched
        return cur

    def clusters(self) -> list[Cluster]:
        """Every kept item with the removed members that lead to it; largest first."""
        by_rep: dict[str, Cluster] = {i: Cluster(i) for i in self.kept}
        for it in self.items:
            r = self.removed.get(it.id)
            if r is not None:
                by_rep.setdefault(self.representative(it.id),
                                  Cluster(self.representative(it.id))).members.append(r)
        order = {it.id: i for i, it in enumerate(self.items)}
        return sorted(by_rep.values(), key=lambda c: (-c.size, order.get(c.representative, 0)))

    def table(self) -> list[dict]:
        """The uniqueness table (the paper's Table 4): per family, then the total."""
        rows: dict[str, Counter] = defaultdict(Counter)
        topped = {t.id for t in self.topups}
        for it in self.items:
            fam = self.families.get(it.id, "")
            c = rows[fam]
            c["total"] += 1
            r = self.removed.get(it.id)
            if r is None:
                c["unique"] += 1
                if it.id in topped:
                    c["topup"] += 1
            else:
                c[r.level] += 1
        out = []
        for fam in sorted(rows, key=lambda f: (-rows[f]["total"], f)):
            out.append(_row(fam or "-", rows[fam]))
        total: Counter = Counter()
        for c in rows.values():
            total.update(c)
        out.append(_row("total", total))
        return out

    def name(self, item_id: str) -> str:
        it = self._by_id().get(item_id)
        return (it.name or it.id) if it else item_id

    def _by_id(self) -> dict[str, DedupItem]:
        cache = getattr(self, "_ids", None)
        if cache is None:
            cache = {it.id: it for it in self.items}
            self._ids = cache
        return cache

    def as_dict(self, members: bool = True) -> dict:
        o = self.options
        d: dict = {
            "options": {"tau": o.tau, "kappa": o.kappa, "shingle": o.shingle,
                        "num_perm": o.num_perm, "family": o.family,
                        "min_support": o.min_support, "topup_scope": o.topup_scope,
                        "prefixes": list(o.prefixes), "prefer": list(o.prefer)},
            "counts": self.counts(),
            "table": self.table(),
            "seconds": round(self.seconds, 3),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "notes": self.notes,
            "topups": [{"id": t.id, "name": self.name(t.id), "family": t.family,
                        "lexical": round(t.lexical, 4), "structural": round(t.structural, 4)}
                       for t in self.topups],
        }
        if members:
            d["clusters"] = [{
                "representative": c.representative, "name": self.name(c.representative),
                "family": self.families.get(c.representative, ""), "size": c.size,
                "members": [{"id": m.id, "name": self.name(m.id), "level": m.level,
                             "similarity": round(m.similarity, 4), "matched": m.matched}
                            for m in c.members]} for c in self.clusters()]
            errors = [{"id": it.id, "error": fp.error}
                      for it, fp in zip(self.items, self.fingerprints) if fp.error]
            d["unparsable"] = errors
        return d

    def markdown(self) -> str:
        lines = ["| family | total | exact | lexical | structural | top-up | unique | unique % |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in self.table():
            fam = f"**{r['family']}**" if r["family"] == "total" else r["family"]
            lines.append(f"| {fam} | {r['total']} | {r['exact']} | {r['lexical']} | "
                         f"{r['structural']} | {r['topup']} | {r['unique']} | "
                         f"{r['unique_pct']:.1f} |")
        return "\n".join(lines) + "\n"


def _row(family: str, c: Counter) -> dict:
    total = c["total"]
    return {"family": family, "total": total, "exact": c["exact"], "lexical": c["lexical"],
            "structural": c["structural"], "topup": c["topup"], "unique": c["unique"],
            "unique_pct": round(100.0 * c["unique"] / total, 2) if total else 0.0}


# -- the protocol ----------------------------------------------------------------------------
ProgressFn = Callable[[str, int, int], None]


def deduplicate(items: Sequence[DedupItem], options: DedupOptions = DedupOptions(),
                progress: ProgressFn | None = None) -> DedupReport:
    """Runs the four steps over ``items`` (ids must be unique) and returns the report."""
    options.check()
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        dup = next(i for i, c in Counter(ids).items() if c > 1)
        raise DedupError(f"item ids must be unique; {dup!r} appears more than once")
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    fps = fingerprints([it.text for it in items], options,
                       (lambda d, n: progress("fingerprint", d, n)) if progress else None)
    timings["fingerprint"] = time.perf_counter() - t0
    order = sorted(range(len(items)), key=lambda i: _preference(items[i], i, options))
    removed: dict[str, Removal] = {}

    # 1. exact
    t = time.perf_counter()
    first: dict[str, int] = {}
    for i in order:
        rep = first.setdefault(fps[i].exact, i)
        if rep != i:
            removed[items[i].id] = Removal(items[i].id, "exact", 1.0, items[rep].id)
    timings["exact"] = time.perf_counter() - t

    # 2. lexical, 3. structural
    t = time.perf_counter()
    alive = [i for i in order if items[i].id not in removed]
    lex_index = _Level("lexical", options.tau, options, lambda fp: fp.lex_minhash,
                       lambda fp: fp.lexical)
    alive = lex_index.run(alive, items, fps, removed)
    timings["lexical"] = time.perf_counter() - t
    t = time.perf_counter()
    struct_index = _Level("structural", options.kappa, options, lambda fp: fp.struct_minhash,
                          lambda fp: fp.structural, shape=True)
    alive = struct_index.run(alive, items, fps, removed)
    timings["structural"] = time.perf_counter() - t

    # 4. diversity top-up
    t = time.perf_counter()
    families = assign_families(items, options)
    notes: list[str] = []
    topups = _topup(items, fps, order, removed, families, options, lex_index, struct_index)
    timings["topup"] = time.perf_counter() - t
    bad = sum(1 for fp in fps if fp.error)
    if bad:
        notes.append(f"{bad} item(s) did not parse: compared at the exact and lexical levels "
                     "only (see 'unparsable')")
    return DedupReport(list(items), fps, options, removed, topups, families,
                       time.perf_counter() - t0, timings, notes)


def _preference(item: DedupItem, index: int, options: DedupOptions) -> tuple:
    rank = len(options.prefer)
    low = item.name.lower()
    for k, p in enumerate(options.prefer):
        if low.startswith(p.lower()):
            rank = k
            break
    return (item.validated is not True, rank, index)


def lsh_params(threshold: float, num_perm: int, recall: float = 0.999) -> tuple[int, int]:
    """LSH bands and rows: the most rows per band (fewest false candidates) that still retrieve
    a pair at exactly ``threshold`` with probability ``recall``. (datasketch's own choice
    balances false positives and negatives and misses ~7% of pairs at the threshold.)"""
    for r in range(num_perm // 2, 0, -1):  # datasketch wants two bands at least
        b = num_perm // r
        if 1.0 - (1.0 - threshold ** r) ** b >= recall:
            return b, r
    return num_perm, 1


class _Level:
    """Greedy near-duplicate removal at one level over an LSH of the kept items."""

    def __init__(self, level: str, threshold: float, options: DedupOptions,
                 minhash_of: Callable[[Fingerprint], Any], values_of: Callable[[Fingerprint], Any],
                 shape: bool = False) -> None:
        self.level = level
        self.threshold = threshold
        self.options = options
        self.minhash_of = minhash_of
        self.values_of = values_of
        self.use_shape = shape
        self.lsh = None
        self.minhashes: dict[int, Any] = {}
        self.shapes: dict[str, int] = {}
        self.inserted: set[int] = set()

    def _lsh(self):
        if self.lsh is None:
            from datasketch import MinHashLSH

            self.lsh = MinHashLSH(num_perm=self.options.num_perm,
                                  params=lsh_params(self.threshold, self.options.num_perm))
        return self.lsh

    def minhash(self, i: int, fps: Sequence[Fingerprint]):
        m = self.minhashes.get(i)
        if m is None:
            values = self.minhash_of(fps[i])
            if values is None:
                return None
            m = self.minhashes[i] = _to_minhash(values, self.options.num_perm)
        return m

    def best_match(self, i: int, fps: Sequence[Fingerprint],
                   among: Callable[[int], bool] | None = None) -> tuple[int | None, float]:
        """The kept item most similar to ``i`` and their exact similarity. LSH candidates are
        verified in the order of their MinHash estimates, down to the retrieval threshold
        (at 128 permutations a true match at the threshold lies ~4 standard deviations above
        it); the first that verifies at the threshold is the match. Below the threshold the
        highest verified similarity is returned (0.0 when no candidate was close)."""
        import numpy as np

        if self.use_shape and fps[i].shape:
            j = self.shapes.get(fps[i].shape)
            if j is not None and j != i and (among is None or among(j)):
                return j, 1.0
        m = self.minhash(i, fps)
        if m is None or self.lsh is None:
            return None, 0.0
        cands = [j for j in self.lsh.query(m) if j != i and (among is None or among(j))]
        if not cands:
            return None, 0.0
        est = (self._signatures(cands) == m.hashvalues).mean(axis=1)
        floor = self.threshold - self.options.lsh_margin
        best, best_sim = None, 0.0
        mine = self.values_of(fps[i])
        for k in np.lexsort((np.asarray(cands), -est))[:VERIFY_MAX]:
            if est[k] < floor and best is not None:
                break
            j = cands[k]
            sim = jaccard(mine, self.values_of(fps[j]))
            if sim > best_sim:
                best, best_sim = j, sim
                if sim >= self.threshold:
                    break  # matched: the first verified in estimate order
        return best, best_sim

    def _signatures(self, idx: list[int]):
        import numpy as np

        return np.stack([self.minhashes[j].hashvalues for j in idx])

    def add(self, i: int, fps: Sequence[Fingerprint]) -> None:
        if i in self.inserted:
            return
        self.inserted.add(i)
        m = self.minhash(i, fps)
        if m is not None:
            self._lsh().insert(i, m)
        if self.use_shape and fps[i].shape:
            self.shapes.setdefault(fps[i].shape, i)

    def run(self, alive: list[int], items: Sequence[DedupItem], fps: Sequence[Fingerprint],
            removed: dict[str, Removal]) -> list[int]:
        kept: list[int] = []
        for i in alive:
            if len(self.values_of(fps[i])) == 0:
                kept.append(i)  # nothing to compare (e.g. did not parse): stays
                continue
            j, sim = self.best_match(i, fps)
            if j is not None and sim >= self.threshold:
                removed[items[i].id] = Removal(items[i].id, self.level, sim, items[j].id)
            else:
                kept.append(i)
                self.add(i, fps)
        return kept


def family_mode(items: Sequence[DedupItem], options: DedupOptions) -> str:
    """``auto`` is ``category`` when the items carry categories (index, registry), else
    ``none``: name stems of arbitrary files are only families when asked for."""
    if options.family == "auto":
        return "category" if any(it.family for it in items) else "none"
    return options.family


def assign_families(items: Sequence[DedupItem], options: DedupOptions) -> dict[str, str]:
    mode = family_mode(items, options)
    if mode == "none":
        return {it.id: "" for it in items}
    if mode == "category":
        return {it.id: it.family or "(none)" for it in items}
    return {it.id: name_stem(it.name or Path(it.id).stem, options.prefixes) for it in items}


def _topup(items: Sequence[DedupItem], fps: Sequence[Fingerprint], order: list[int],
           removed: dict[str, Removal], families: dict[str, str], options: DedupOptions,
           lex: _Level, struct: _Level) -> list[TopUp]:
    if options.min_support <= 0 or family_mode(items, options) == "none":
        return []
    kept_by_family: dict[str, list[int]] = defaultdict(list)
    pool_by_family: dict[str, list[int]] = defaultdict(list)
    for i in order:
        fam = families[items[i].id]
        (pool_by_family if items[i].id in removed else kept_by_family)[fam].append(i)
    kept_hashes = {fps[i].exact for members in kept_by_family.values() for i in members}
    out: list[TopUp] = []

    def is_kept(j: int) -> bool:
        return items[j].id not in removed

    for fam in sorted(pool_by_family):
        kept = kept_by_family[fam]
        pool = [i for i in pool_by_family[fam] if fps[i].exact not in kept_hashes]
        while len(kept) < options.min_support and pool:
            scored = []
            for rank, i in enumerate(pool):
                if options.topup_scope == "family":
                    ls = max((jaccard(fps[i].lexical, fps[j].lexical) for j in kept), default=0.0)
                    ss = max((jaccard(fps[i].structural, fps[j].structural)
                              for j in kept if len(fps[i].structural)), default=0.0)
                else:  # the lexical index still holds items removed at the structural level
                    ls = lex.best_match(i, fps, among=is_kept)[1]
                    ss = struct.best_match(i, fps, among=is_kept)[1] \
                        if len(fps[i].structural) else 0.0
                if ls < options.tau and ss < options.kappa:
                    scored.append((max(ls, ss), rank, i, ls, ss))
            if not scored:
                break
            _, _, i, ls, ss = min(scored)
            del removed[items[i].id]
            kept.append(i)
            kept_hashes.add(fps[i].exact)
            pool.remove(i)
            lex.add(i, fps)
            struct.add(i, fps)
            out.append(TopUp(items[i].id, fam, ls, ss))
    return out


# -- loaders ---------------------------------------------------------------------------------
def items_from_paths(paths: Iterable[str | os.PathLike[str]]) -> list[DedupItem]:
    """Every ``.py`` file under the given files and folders (``__pycache__`` skipped)."""
    out: list[DedupItem] = []
    seen: set[str] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*.py") if "__pycache__" not in f.parts)
            base = p
        elif p.is_file():
            files, base = [p], p.parent
        else:
            raise DedupError(f"no such file or folder: {p}")
        for f in files:
            key = str(f)
            if key in seen:
                continue
            seen.add(key)
            try:
                text = f.read_bytes().decode("utf-8", "replace")
            except OSError as exc:
                raise DedupError(f"cannot read {f}: {exc.strerror or exc}") from None
            out.append(DedupItem(id=key, text=text, name=f.stem, origin=str(base)))
    return out


def block_source(block, roots: dict[str, dict], cache: dict | None = None) -> str:
    """The upstream text of a block's class (decorators included), dedented."""
    cache = {} if cache is None else cache
    key = (block.source, block.relpath)
    lines = cache.get(key)
    if lines is None:
        root = roots.get(block.source, {}).get("root")
        if not root:
            raise DedupError(f"{block.source}: source root unknown; run `nnrag index`")
        try:
            data = (Path(root) / block.relpath).read_bytes()
        except OSError as exc:
            raise DedupError(f"cannot read {block.relpath}: {exc.strerror or exc}") from None
        lines = cache[key] = source_lines(data.decode("utf-8", "replace"), keepends=True)
    return textwrap.dedent("".join(lines[block.line - 1:block.end_line]))


def items_from_index(extractor, *, extracted: bool = False, category: str | None = None,
                     repo: str | None = None, match: str | None = None,
                     progress: ProgressFn | None = None) -> tuple[list[DedupItem], list[str]]:
    """The index's blocks: their upstream class text, or (``extracted``) their regenerated
    standalone files. Returns the items and notes about blocks that fell back or failed."""
    blocks = extractor.blocks(category=category, repo=repo, match=match)
    roots = extractor.store.source_roots()
    cache: dict = {}
    notes: list[str] = []
    items: list[DedupItem] = []
    resolver = extractor.resolver() if extracted else None
    for n, b in enumerate(blocks):
        text = None
        if resolver is not None:
            from nnrag_tui.engine.generate import regenerate

            try:
                text = regenerate(resolver, b, roots)[1].code
            except (NnragError, SyntaxError, RecursionError, ValueError) as exc:
                notes.append(f"{b.source}:{b.key}: not extracted ({type(exc).__name__}: "
                             f"{exc}); its class text is compared instead")
        if text is None:
            try:
                text = block_source(b, roots, cache)
            except DedupError as exc:
                notes.append(f"{b.source}:{b.key}: skipped ({exc})")
                continue
        items.append(DedupItem(id=f"{b.source}:{b.key}", text=text, name=b.name,
                               family=b.category, origin=b.source))
        if progress and (n + 1) % 100 == 0:
            progress("load", n + 1, len(blocks))
    return items, notes


def items_from_registry(registry) -> tuple[list[DedupItem], list[str]]:
    """The latest version of every saved block (duck-typed ``Registry``: ``list()`` rows with
    ``name``/``category``/``repo``/``validated``, ``show(name).code_path``)."""
    items: list[DedupItem] = []
    notes: list[str] = []
    for row in registry.list():
        try:
            path = Path(registry.show(row.name).code_path)
            text = path.read_text(encoding="utf-8")
        except (NnragError, OSError) as exc:
            notes.append(f"{row.name}: skipped ({exc})")
            continue
        items.append(DedupItem(id=row.name, text=text, name=row.name,
                               family=getattr(row, "category", None) or "",
                               origin=getattr(row, "repo", None) or "registry",
                               validated=getattr(row, "validated", None)))
    return items, notes


def load_registry(data_dir):
    """The registry at ``data_dir``, or a clear error when this installation has none."""
    try:
        from nnrag_tui.engine.registry import Registry
    except ImportError:
        raise DedupError("the registry is not available in this installation "
                         "(nnrag_tui.engine.registry is missing)") from None
    return Registry(data_dir)


def with_options(options: DedupOptions, **changes) -> DedupOptions:
    """``options`` with the given fields changed (``None`` values ignored)."""
    return replace(options, **{k: v for k, v in changes.items() if v is not None})


def similarity(a: str, b: str, options: DedupOptions = DedupOptions()) -> dict[str, float]:
    """Lexical and structural similarity of two texts, and whether they are exact copies
    (handy in tests and for explaining a cluster)."""
    fa, fb = fingerprint(a, options, minhash=False), fingerprint(b, options, minhash=False)
    return {"exact": float(fa.exact == fb.exact), "lexical": jaccard(fa.lexical, fb.lexical),
            "structural": (1.0 if fa.shape and fa.shape == fb.shape else
                           jaccard(fa.structural, fb.structural))}


__all__ = [
    "DEFAULT_PREFIXES", "Cluster", "DedupError", "DedupItem", "DedupOptions", "DedupReport",
    "Fingerprint", "Removal", "TopUp", "assign_families", "block_source", "canonical_source",
    "deduplicate", "fingerprint", "fingerprints", "items_from_index", "items_from_paths",
    "items_from_registry", "jaccard", "load_registry", "name_stem", "similarity",
    "strip_prefixes", "with_options",
]
