"""FileIndexStore: the SQLite index (WAL mode) and the one place that maps facts to rows.

Files are keyed by source and path, carry the SHA-1 of their bytes and a size+mtime fast path.
Each index run writes a source's changes in one transaction, so a crash leaves the previous
consistent state. A schema version mismatch rebuilds the database from scratch.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Iterator

from nnrag_tui.engine.errors import StoreError
from nnrag_tui.engine.facts import (
    GETATTR,
    IMPORT_MODULE,
    Block,
    Guard,
    ImportRecord,
    ModuleFacts,
    Symbol,
)

SCHEMA_VERSION = 23  # 7: files.namespace_writes; 8: symbols.alias; 9: no script-only
# symbols; 10: an ``if TYPE_CHECKING:`` under a ``try``/``if`` guards as type_checking;
# 11: a computed ``__all__`` leaves all_names unknown; 12: files.path_inserts; 13: not those of
# a script run; 14: symbols.call_runs; 15: a module ``__getattr__``'s imports (the imports
# table's rows of guard kind "getattr": ModuleFacts.lazy_imports); 16: those a table-driven
# ``__getattr__`` makes (engine.lazyeval); 17: namespace_writes has the module-level calls of
# the module's functions that store into ``globals()`` (engine.namespace); 18: a block named for a
# whole network (``Generator``, ``Discriminator``) is an architecture (engine.discovery); 19: a
# subclass of a framework's module class (``PreTrainedModel``, ``LightningModule``) is a block;
# 20: a ``...Model`` is an architecture, and so is a subclass of one named for a whole network;
# 21: symbols.builds, a class a size-variant function builds is an architecture; 22: path_inserts
# keeps a literal relative folder, marked ``cwd:`` (engine.syspath); 23: the imports table's rows
# of guard kind "import_module", a module-level ``name = importlib.import_module("a.b")``
# (ModuleFacts.module_imports)
BUSY_TIMEOUT_MS = 60_000

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sources (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    origin TEXT NOT NULL,
    root TEXT NOT NULL,
    prefix TEXT NOT NULL DEFAULT '',
    commit_sha TEXT,
    version TEXT,
    priority INTEGER NOT NULL DEFAULT 1,
    indexed_at REAL,
    error TEXT
);
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    relpath TEXT NOT NULL,
    module TEXT NOT NULL,
    is_package INTEGER NOT NULL,
    sha1 TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    lines INTEGER NOT NULL DEFAULT 0,
    all_names TEXT,
    error TEXT,
    namespace_writes TEXT NOT NULL DEFAULT '[]',
    path_inserts TEXT NOT NULL DEFAULT '[]',
    UNIQUE (source_id, relpath)
);
CREATE INDEX files_module ON files(module);
CREATE TABLE symbols (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    qualname TEXT NOT NULL,
    kind TEXT NOT NULL,
    line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    col INTEGER NOT NULL, end_col INTEGER NOT NULL, def_line INTEGER NOT NULL,
    bases TEXT NOT NULL, keywords TEXT NOT NULL, decorators TEXT NOT NULL,
    methods TEXT NOT NULL, abstract_methods TEXT NOT NULL,
    forward_raises INTEGER NOT NULL, calls TEXT NOT NULL, doc TEXT NOT NULL,
    guard TEXT NOT NULL, parent TEXT, alias TEXT NOT NULL DEFAULT '',
    call_runs INTEGER NOT NULL DEFAULT 0, builds TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX symbols_file ON symbols(file_id);
CREATE INDEX symbols_name ON symbols(name);
CREATE TABLE imports (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    bound TEXT NOT NULL, module TEXT NOT NULL, name TEXT, asname TEXT,
    level INTEGER NOT NULL, target TEXT NOT NULL,
    line INTEGER NOT NULL, end_line INTEGER NOT NULL, guard TEXT NOT NULL
);
CREATE INDEX imports_file ON imports(file_id);
CREATE TABLE blocks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    source TEXT NOT NULL,
    module TEXT NOT NULL,
    qualname TEXT NOT NULL,
    name TEXT NOT NULL,
    relpath TEXT NOT NULL,
    line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    category TEXT NOT NULL, rule TEXT NOT NULL,
    bases TEXT NOT NULL, doc TEXT NOT NULL, guard TEXT NOT NULL
);
CREATE INDEX blocks_name ON blocks(name);
CREATE INDEX blocks_category ON blocks(category);
"""


def _j(v) -> str:
    return json.dumps(v, separators=(",", ":"))


def _guard_json(g: Guard) -> str:
    return "" if not g.kind else _j([g.kind, g.line, g.end_line, g.test])


def _guard(s: str) -> Guard:
    if not s:
        return Guard()
    k, a, b, t = json.loads(s)
    return Guard(k, a, b, t)


class FileIndexStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000,
                                      isolation_level=None, check_same_thread=False)
            self.db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._ensure_schema()
        except sqlite3.DatabaseError as exc:
            hint = ""
            if "not a database" in str(exc) or "malformed" in str(exc):
                hint = " (the index is only a cache: delete it and run `nnrag index` again)"
            raise StoreError(f"cannot open the index {self.path}: {exc}{hint}") from None
        except OSError as exc:
            raise StoreError(f"cannot create the index at {self.path}: {exc}") from None

    def close(self) -> None:
        self.db.close()

    def _ensure_schema(self) -> None:
        with self.transaction():
            has_meta = self.db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            version = None
            if has_meta:
                row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                version = int(row[0]) if row else None
            if version == SCHEMA_VERSION:
                return
            # Unknown or old layout: the index is a cache, rebuild it from scratch.
            tables = [r[0] for r in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
            for t in tables:
                self.db.execute(f'DROP TABLE IF EXISTS "{t}"')
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    self.db.execute(stmt)
            self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))

    def transaction(self):
        return _Tx(self.db)

    # -- sources ---------------------------------------------------------------------------
    def upsert_source(self, name: str, kind: str, origin: str, root: str, commit: str | None,
                      version: str | None, priority: int, error: str | None = None,
                      prefix: str = "") -> int:
        """``root`` is the import root on disk; ``prefix`` is where it lies in the repository
        (``src`` for a src layout), so that a file's path in the repository is prefix/relpath."""
        row = self.db.execute("SELECT id FROM sources WHERE name=?", (name,)).fetchone()
        if row:
            self.db.execute(
                "UPDATE sources SET kind=?, origin=?, root=?, prefix=?, commit_sha=?, version=?,"
                " priority=?, indexed_at=?, error=? WHERE id=?",
                (kind, origin, root, prefix, commit, version, priority, time.time(), error,
                 row[0]))
            return int(row[0])
        cur = self.db.execute(
            "INSERT INTO sources(name, kind, origin, root, prefix, commit_sha, version, priority,"
            " indexed_at, error) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (name, kind, origin, root, prefix, commit, version, priority, time.time(), error))
        return int(cur.lastrowid)

    def set_source_error(self, name: str, error: str | None) -> bool:
        """Records why a source could not be indexed; False when the source has no row yet."""
        return self.db.execute("UPDATE sources SET error=? WHERE name=?",
                               (error, name)).rowcount > 0

    def drop_sources_except(self, names: Iterable[str]) -> int:
        keep = list(names)
        q = "DELETE FROM sources WHERE name NOT IN (%s)" % ",".join("?" * len(keep))
        return self.db.execute(q, keep).rowcount

    def sources(self) -> list[dict]:
        cur = self.db.execute(
            "SELECT s.name, s.kind, s.origin, s.root, s.prefix, s.commit_sha, s.version,"
            " s.priority, s.indexed_at, s.error,"
            " (SELECT COUNT(*) FROM files f WHERE f.source_id=s.id),"
            " (SELECT COUNT(*) FROM files f WHERE f.source_id=s.id AND f.error IS NOT NULL),"
            " (SELECT COUNT(*) FROM blocks b WHERE b.source=s.name)"
            " FROM sources s ORDER BY s.priority, s.name")
        keys = ("name", "kind", "origin", "root", "import_root", "commit", "version", "priority",
                "indexed_at", "error", "files", "failed", "blocks")
        return [dict(zip(keys, r)) for r in cur]

    # -- files -----------------------------------------------------------------------------
    def file_states(self, source_id: int) -> dict[str, tuple[int, str, int, int]]:
        """relpath -> (file id, sha1, size, mtime_ns)."""
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in self.db.execute(
            "SELECT relpath, id, sha1, size, mtime_ns FROM files WHERE source_id=?",
            (source_id,))}

    def touch_file(self, file_id: int, size: int, mtime_ns: int) -> None:
        self.db.execute("UPDATE files SET size=?, mtime_ns=? WHERE id=?",
                        (size, mtime_ns, file_id))

    def delete_files(self, file_ids: Iterable[int]) -> None:
        self.db.executemany("DELETE FROM files WHERE id=?", [(i,) for i in file_ids])

    def put_facts(self, source_id: int, facts: ModuleFacts, mtime_ns: int) -> int:
        db = self.db
        db.execute("DELETE FROM files WHERE source_id=? AND relpath=?",
                   (source_id, facts.relpath))
        cur = db.execute(
            "INSERT INTO files(source_id, relpath, module, is_package, sha1, size, mtime_ns,"
            " lines, all_names, error, namespace_writes, path_inserts)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (source_id, facts.relpath, facts.module, int(facts.is_package), facts.sha1,
             facts.size, mtime_ns, facts.lines,
             _j(list(facts.all_names)) if facts.all_names is not None else None, facts.error,
             _j(list(facts.namespace_writes)), _j(list(facts.path_inserts))))
        fid = int(cur.lastrowid)
        db.executemany(
            "INSERT INTO symbols(file_id, name, qualname, kind, line, end_line, col, end_col,"
            " def_line, bases, keywords, decorators, methods, abstract_methods, forward_raises,"
            " calls, doc, guard, parent, alias, call_runs, builds)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(fid, s.name, s.qualname, s.kind, s.line, s.end_line, s.col, s.end_col, s.def_line,
              _j(s.bases), _j(s.keywords), _j(s.decorators), _j(s.methods),
              _j(s.abstract_methods), int(s.forward_raises), _j(s.calls), s.doc,
              _guard_json(s.guard), s.parent, s.alias, int(s.call_runs), _j(s.builds))
             for s in facts.symbols])
        db.executemany(
            "INSERT INTO imports(file_id, bound, module, name, asname, level, target, line,"
            " end_line, guard) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(fid, i.bound, i.module, i.name, i.asname, i.level, i.target, i.line, i.end_line,
              _guard_json(i.guard))
             for i in (*facts.imports, *facts.lazy_imports, *facts.module_imports)])
        return fid

    def failed_count(self, source_id: int) -> int:
        return int(self.db.execute(
            "SELECT COUNT(*) FROM files WHERE source_id=? AND error IS NOT NULL", (source_id,)
        ).fetchone()[0])

    def failures(self) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self.db.execute(
            "SELECT s.name, f.relpath, f.error FROM files f JOIN sources s ON s.id=f.source_id"
            " WHERE f.error IS NOT NULL ORDER BY s.name, f.relpath")]

    def counts(self) -> dict[str, int]:
        one = lambda q: int(self.db.execute(q).fetchone()[0])  # noqa: E731
        return {
            "files": one("SELECT COUNT(*) FROM files"),
            "failed": one("SELECT COUNT(*) FROM files WHERE error IS NOT NULL"),
            "symbols": one("SELECT COUNT(*) FROM symbols"),
            "imports": one("SELECT COUNT(*) FROM imports"),
            "blocks": one("SELECT COUNT(*) FROM blocks"),
        }

    # -- whole-index reads -----------------------------------------------------------------
    def load_modules(self) -> Iterator[tuple[str, int, int, ModuleFacts]]:
        """Yields (source name, source priority, file id, facts) for every indexed file, all
        read from one snapshot of the database (another process may be indexing)."""
        if self.db.in_transaction:
            yield from self._load_modules()
            return
        self.db.execute("BEGIN")
        try:
            rows = self._load_modules()
        finally:
            self.db.execute("COMMIT")
        yield from rows

    def _load_modules(self) -> list[tuple[str, int, int, ModuleFacts]]:
        syms: dict[int, list[Symbol]] = {}
        for r in self.db.execute(
            "SELECT file_id, name, qualname, kind, line, end_line, col, end_col, def_line, bases,"
            " keywords, decorators, methods, abstract_methods, forward_raises, calls, doc, guard,"
            " parent, alias, call_runs, builds FROM symbols ORDER BY id"
        ):
            syms.setdefault(r[0], []).append(Symbol(
                r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], tuple(json.loads(r[9])),
                tuple(json.loads(r[10])), tuple(json.loads(r[11])), tuple(json.loads(r[12])),
                tuple(json.loads(r[13])), bool(r[14]), tuple(json.loads(r[15])), r[16],
                _guard(r[17]), r[18], r[19], bool(r[20]), tuple(json.loads(r[21]))))
        imps: dict[int, list[ImportRecord]] = {}
        lazy: dict[int, list[ImportRecord]] = {}
        by_call: dict[int, list[ImportRecord]] = {}
        rows_of = {GETATTR: lazy, IMPORT_MODULE: by_call}
        for r in self.db.execute(
            "SELECT file_id, bound, module, name, asname, level, target, line, end_line, guard"
            " FROM imports ORDER BY id"
        ):
            rec = ImportRecord(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], _guard(r[9]))
            rows_of.get(rec.guard.kind, imps).setdefault(r[0], []).append(rec)
        out = []
        for r in self.db.execute(
            "SELECT s.name, s.priority, f.id, f.relpath, f.module, f.is_package, f.sha1, f.size,"
            " f.lines, f.all_names, f.error, f.namespace_writes, f.path_inserts FROM files f"
            " JOIN sources s ON s.id=f.source_id"
            " ORDER BY s.priority, s.name, f.relpath"
        ):
            fid = r[2]
            out.append((r[0], r[1], fid, ModuleFacts(
                r[3], r[4], bool(r[5]), r[6], r[7], tuple(syms.pop(fid, ())),
                tuple(imps.pop(fid, ())), tuple(json.loads(r[9])) if r[9] else None, r[10],
                r[8], tuple(json.loads(r[11])), tuple(json.loads(r[12])),
                tuple(lazy.pop(fid, ())), tuple(by_call.pop(fid, ())))))
        return out

    def source_roots(self) -> dict[str, dict]:
        return {r[0]: {"root": r[1], "origin": r[2], "commit": r[3], "kind": r[4],
                       "priority": r[5], "version": r[6], "import_root": r[7]}
                for r in self.db.execute(
                    "SELECT name, root, origin, commit_sha, kind, priority, version, prefix"
                    " FROM sources")}

    def replace_blocks(self, rows: list[tuple[int, Block]]) -> None:
        self.db.execute("DELETE FROM blocks")
        self.db.executemany(
            "INSERT INTO blocks(file_id, source, module, qualname, name, relpath, line, end_line,"
            " category, rule, bases, doc, guard) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(fid, b.source, b.module, b.qualname, b.name, b.relpath, b.line, b.end_line,
              b.category, b.rule, _j(b.bases), b.doc, b.guard) for fid, b in rows])

    def blocks(self, *, category: str | None = None, repo: str | None = None,
               name: str | None = None) -> list[Block]:
        q = ("SELECT b.source, b.module, b.qualname, b.relpath, b.line, b.end_line, b.category,"
             " b.rule, b.bases, b.doc, b.guard FROM blocks b JOIN sources s ON s.name=b.source"
             " WHERE 1=1")
        args: list = []
        if category:
            q += " AND b.category=?"
            args.append(category)
        if repo:
            q += " AND b.source=?"
            args.append(repo)
        if name:
            q += " AND b.name=?"
            args.append(name)
        q += " ORDER BY s.priority, b.source, b.module, b.qualname"
        return [Block(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], tuple(json.loads(r[8])),
                      r[9], r[10]) for r in self.db.execute(q, args)]

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


class _Tx:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolls back on any exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.db.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")
        return False
