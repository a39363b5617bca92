"""The engine's front door: ``BlockExtractor`` ties configuration, cache, index and discovery
together. The CLI, the TUI and Python users all go through it."""

from __future__ import annotations

import fnmatch
import json
import os
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nnrag_tui.engine import paths
from nnrag_tui.engine.config import CorpusConfig, default_config, load_config
from nnrag_tui.engine.errors import BlockNotFound, NnragError, StoreError
from nnrag_tui.engine.facts import Block, IndexReport
from nnrag_tui.engine.modulefiles import is_plain_relative
from nnrag_tui.engine.progress import CancelFn, Progress, ProgressFn
from nnrag_tui.engine.store import FileIndexStore

if TYPE_CHECKING:  # the indexer, resolver and generator load on first use: a front end that
    # only lists blocks (the app's first paint) starts without them
    from nnrag_tui.engine.closure import Closure
    from nnrag_tui.engine.generate import GeneratedBlock
    from nnrag_tui.engine.resolve import Resolver

INDEX_FILE = "index.sqlite3"


class BlockExtractor:
    """``BlockExtractor(config=path_or_CorpusConfig_or_None)``; ``None`` is the built-in default
    corpus (the installed torch's ``torch/nn/modules`` plus timm/torchvision when installed)."""

    def __init__(self, config: CorpusConfig | str | Path | None = None, *,
                 cache_dir: str | Path | None = None, data_dir: str | Path | None = None,
                 workers: int | None = None) -> None:
        if config is None:
            self.config = default_config()
        elif isinstance(config, CorpusConfig):
            self.config = config
        else:
            self.config = load_config(config)
        self.cache_dir = paths.cache_dir(cache_dir)
        self.data_dir = paths.data_dir(data_dir)
        self.workers = workers
        self._store: FileIndexStore | None = None
        self._indexed = False
        self._resolver: Resolver | None = None
        self._call_sites = None  # CallSites over the current resolver
        # the resolver's caches are not thread-safe: extraction and call-site lookups (which a
        # validation thread may ask for) take turns
        self._resolve_lock = threading.RLock()

    @property
    def store(self) -> FileIndexStore:
        if self._store is None:
            self._store = FileIndexStore(self.cache_dir / INDEX_FILE)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> BlockExtractor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def index(self, policy: str = "missing", progress: ProgressFn | None = None,
              cancel: CancelFn | None = None, on_wait=None) -> IndexReport:
        """Brings the index up to date with the configured sources. When another process is
        indexing the same cache this waits for it, and says so through ``on_wait`` (or, when
        none is given, a ``Progress`` event of phase ``wait``)."""
        from nnrag_tui.engine.indexer import Indexer, index_lock
        from nnrag_tui.engine.sources import RepoCache

        cache = RepoCache(self.cache_dir, self.config.fetch)
        if on_wait is None and progress is not None:
            report_to = progress

            def on_wait() -> None:
                report_to(Progress("wait", "", 0, 0,
                                   "another nnrag process is indexing this cache"))
        with index_lock(self.cache_dir, on_wait):
            report = Indexer(self.config, self.store, cache, self.workers).run(
                policy, progress, cancel)
        self._indexed = True
        self._resolver = None
        self._call_sites = None
        return report

    def warm_index_once(self, policy: str = "missing", progress: ProgressFn | None = None,
                        on_wait=None) -> IndexReport | None:
        """Indexes on first use in this process; later calls are free."""
        if self._indexed:
            return None
        return self.index(policy, progress, on_wait=on_wait)

    def blocks(self, *, category: str | None = None, repo: str | None = None,
               match: str | None = None) -> list[Block]:
        """Discovered blocks, filtered. ``match`` is a glob on the class name or the qualified
        name (``*Attention*``, ``timm.layers.*``)."""
        found = self.store.blocks(category=category, repo=repo)
        if match:
            found = [b for b in found if fnmatch.fnmatchcase(b.name, match)
                     or fnmatch.fnmatchcase(b.full_name, match)
                     or fnmatch.fnmatchcase(b.key, match)]
        return found

    def find_block(self, name: str, repo: str | None = None) -> tuple[Block, list[Block]]:
        """One block by ``Name``, ``pkg.mod.Name`` or ``pkg.mod:Name``; returns the pick and the
        other candidates. Several with the same name are decided by repository priority;
        ``repo`` (a configured source name) takes that repository's alone: forks and vendored
        copies share module paths (clip-anytorch and openai-clip both have ``clip.model:CLIP``),
        where even ``pkg.mod:Name`` names one block in each."""
        problem = self.unknown_repo(repo)
        if problem:
            raise BlockNotFound(problem)
        if ":" in name:
            module, qual = name.split(":", 1)
            cands = [b for b in self.store.blocks(name=qual.rsplit(".", 1)[-1], repo=repo)
                     if b.module == module and b.qualname == qual]
        elif "." in name:
            cands = [b for b in self.store.blocks(name=name.rsplit(".", 1)[-1], repo=repo)
                     if b.full_name == name]
        else:
            cands = self.store.blocks(name=name, repo=repo)
        if not cands:
            where = f" of repository {repo!r}" if repo is not None else " in the index"
            raise BlockNotFound(f"no block named {name!r}{where} (try `nnrag blocks "
                                f"--match '*{name.rsplit('.', 1)[-1]}*'`)")
        return cands[0], cands[1:]

    def unknown_repo(self, repo: str | None) -> str | None:
        """What is wrong with ``repo`` as a repository to take blocks from: None for none given
        or a configured one."""
        names = [s.name for s in self.config.sources]
        if repo is None or repo in names:
            return None
        return f"no repository named {repo!r} in {self.config.origin} (configured: " \
               f"{', '.join(names)})"

    def sources(self) -> list[dict]:
        return self.store.sources()

    # -- extraction ------------------------------------------------------------------------
    def resolver(self) -> Resolver:
        """The resolver over the current index, built once per index state."""
        if self._resolver is None:
            from nnrag_tui.engine.bindings import ModuleIndex
            from nnrag_tui.engine.extensions import Extensions
            from nnrag_tui.engine.resolve import Resolver
            from nnrag_tui.engine.sources import checkout_packages

            self.warm_index_once()
            sources = self.store.source_roots()
            index = ModuleIndex(self.store.load_modules(), checkout_packages(sources),
                                Extensions(r["root"] for r in sources.values()))
            roots = {k: v["root"] for k, v in sources.items()}
            self._resolver = Resolver(index, roots, self.external_packages(index))
        return self._resolver

    def external_packages(self, index) -> frozenset[str]:
        """The packages every block imports instead of inlining: torch, and the top-level
        packages of the sources marked ``"external": true`` (``index``: a ModuleIndex)."""
        from nnrag_tui.engine.closure import ALWAYS_EXTERNAL

        marked = self.config.external_sources
        return ALWAYS_EXTERNAL | {e.facts.module.split(".")[0]
                                  for e in index.entries.values() if e.source in marked}

    def extract_single_block(self, name: str, out_dir: str | Path | None = None,
                             names: OutputNames | None = None, repo: str | None = None
                             ) -> Extraction:
        """Extracts one block by ``Name``, ``pkg.mod.Name`` or ``pkg.mod:Name`` (of repository
        ``repo`` alone, when given). Never raises for a block that cannot be extracted: the
        failure is in the result. ``names``: the file names already written in this run (see
        ``OutputNames``)."""
        try:
            block, others = self.find_block(name, repo)
        except BlockNotFound as exc:
            return Extraction(name, None, None, error=str(exc))
        notes = []
        if others:
            notes.append(f"{len(others) + 1} blocks are named {name!r}; took {block.key} "
                         f"({block.source}, priority {self._priority(block.source)}); others: "
                         + ", ".join(f"{o.key} ({o.source})" for o in others))
        result, _ = self.extract_block(block, requested=name, notes=notes)
        if out_dir is not None and result.ok:
            stem, note = (names or OutputNames()).claim(result)
            if note:
                result.notes.append(note)
            try:
                result.write(Path(out_dir), stem)
            except OSError as exc:  # a full disk, a read-only or vanished folder
                return Extraction(name, block, None, notes=result.notes,
                                  error=f"cannot write {exc.filename or out_dir}: "
                                        f"{exc.strerror or exc}")
        return result

    def extract_block(self, block: Block, *, requested: str | None = None,
                      notes: list[str] | None = None) -> tuple[Extraction, Closure | None]:
        """Extracts exactly ``block`` (as found by ``blocks``/``find_block``) and returns the
        result with the closure it came from (None when it failed). Never raises for a block
        that cannot be extracted: the failure is in the result. A broken index raises
        ``StoreError``."""
        from nnrag_tui.engine.generate import regenerate

        requested = requested or block.key
        notes = list(notes or ())
        try:
            with self._resolve_lock:
                closure, gen = regenerate(self.resolver(), block, self.store.source_roots())
        except StoreError:
            raise  # the index, not this block: the caller reports it
        except (NnragError, SyntaxError, RecursionError, ValueError) as exc:
            return Extraction(requested, block, None, error=f"{type(exc).__name__}: {exc}",
                              notes=notes), None
        except MemoryError:
            raise
        except sqlite3.Error as exc:
            raise StoreError(f"the index {self.store.path}: {exc}") from None
        except Exception as exc:  # noqa: BLE001  (a per-block failure never aborts a batch)
            return Extraction(requested, block, None, notes=notes,
                              error=f"internal error (please report): {type(exc).__name__}: "
                                    f"{exc}"), None
        return Extraction(requested, block, gen, notes=notes + gen.notes,
                          sources=self.store.source_roots()), closure

    def call_sites(self, extraction: Extraction) -> list[dict]:
        """Constructor arguments the block's repository itself uses (see
        ``engine.callsites``), for the validator to try when guessed arguments fail. Empty
        for a failed extraction or when nothing usable is found; never raises for a block."""
        if not extraction.ok or extraction.block is None:
            return []
        from nnrag_tui.engine.callsites import CallSites, file_names

        g = extraction.generated
        try:
            names = file_names(g.code, g.definitions)
            with self._resolve_lock:
                resolver = self.resolver()
                if self._call_sites is None or self._call_sites.resolver is not resolver:
                    self._call_sites = CallSites(resolver)
                sets = self._call_sites.for_block(extraction.block, names,
                                                  g.spec.get("constructor") or [])
        except (NnragError, SyntaxError, RecursionError, ValueError, OSError, sqlite3.Error):
            return []
        return [s.as_dict() for s in sets]

    def extract_multiple_blocks(self, names, out_dir: str | Path | None = None,
                                repo: str | None = None) -> list[Extraction]:
        written = OutputNames()
        return [self.extract_single_block(n, out_dir, written, repo) for n in names]

    def extract_blocks_from_file(self, path: str | Path, limit: int | None = None,
                                 start_from: str | None = None,
                                 out_dir: str | Path | None = None,
                                 repo: str | None = None) -> list[Extraction]:
        return self.extract_multiple_blocks(
            read_block_names(path, limit=limit, start_from=start_from), out_dir, repo)

    def _priority(self, source: str) -> int:
        for s in self.config.sources:
            if s.name == source:
                return s.priority
        return 0


def read_block_names(path: str | Path, limit: int | None = None,
                     start_from: str | None = None) -> list[str]:
    """A JSON list of names, or one name per line (``#`` comments and blank lines skipped)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise NnragError(f"cannot read block list {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise NnragError(f"cannot read block list {p}: not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start})") from None
    names: list[str]
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NnragError(f"{p}: not a valid JSON list ({exc.msg}, line {exc.lineno})"
                             ) from None
        except RecursionError:
            raise NnragError(f"{p}: not a valid JSON list (nested too deeply)") from None
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise NnragError(f"{p}: a JSON block list must be a list of names")
        names = data
    else:
        names = [ln.strip() for ln in text.splitlines()
                 if ln.strip() and not ln.strip().startswith("#")]
    if start_from is not None:
        if start_from not in names:
            raise NnragError(f"{p}: --start-from {start_from!r} is not in the list")
        names = names[names.index(start_from):]
    if limit is not None:
        names = names[:limit]
    return names


@dataclass
class Extraction:
    """The outcome of extracting one requested name."""

    requested: str
    block: Block | None
    generated: GeneratedBlock | None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    sources: dict = field(default_factory=dict)  # source name -> root, origin, commit, ...

    @property
    def ok(self) -> bool:
        return self.generated is not None

    def write(self, out_dir: Path, stem: str | None = None) -> None:
        """Writes ``out_dir/STEM.py`` and ``STEM.spec.json``; STEM defaults to the name."""
        assert self.generated is not None
        out_dir.mkdir(parents=True, exist_ok=True)
        name = stem or safe_filename(self.generated.name)
        py = out_dir / f"{name}.py"
        spec = out_dir / f"{name}.spec.json"
        atomic_write(py, self.generated.code)
        atomic_write(spec, json.dumps(self.generated.spec, indent=2) + "\n")
        self.paths = [str(py), str(spec)]
        self.paths += write_module_files(out_dir, self.generated.files(), self.notes)

    def report(self) -> dict:
        d: dict = {"requested": self.requested, "ok": self.ok}
        if self.block is not None:
            d.update(name=self.block.name, key=self.block.key, repo=self.block.source,
                     category=self.block.category, path=self.block.relpath,
                     line=self.block.line)
        if self.generated is not None:
            g = self.generated
            d.update(lines=g.lines, definitions=len(g.definitions), externals=g.externals,
                     rewrites=g.rewrites,
                     unresolved=[{"name": n, "where": w} for n, w in g.unresolved])
        if self.error:
            d["error"] = self.error
        if self.notes:
            d["notes"] = self.notes
        if self.paths:
            d["files"] = self.paths
        return d


class OutputNames:
    """File names for one run's extractions: ``NAME`` for a block, or, when ``NAME`` was
    already written in this run for another block of that name (timm has 13 classes named
    ``Attention``), ``NAME__module`` and then ``NAME__package_module``: one run never
    overwrites its own output. The same block asked for twice keeps its name."""

    def __init__(self) -> None:
        self._owner: dict[str, str] = {}  # stem (case-folded) -> block key

    def claim(self, result: Extraction) -> tuple[str, str | None]:
        """(stem, note): the note says why a block was not written under its own name."""
        assert result.block is not None and result.generated is not None
        key = result.block.key
        name = safe_filename(result.generated.name)
        parts = result.block.module.split(".")
        candidates = [name, *(safe_filename(f"{name}__{'_'.join(parts[-i:])}")
                              for i in range(1, len(parts) + 1))]
        for stem in candidates:
            owner = self._owner.setdefault(stem.casefold(), key)
            if owner == key:
                if stem == name:
                    return stem, None
                first = self._owner[name.casefold()]
                return stem, (f"written as {stem}.py: {name}.py holds {first} from this run")
        stem = f"{candidates[-1]}_{len(self._owner)}"  # same module path twice: never seen
        self._owner[stem.casefold()] = key
        return stem, f"written as {stem}.py"


def safe_filename(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-." else "_" for c in name).strip("._")
    return cleaned or "block"


def write_module_files(folder: Path, files: dict[str, bytes], notes: list[str]) -> list[str]:
    """Writes the files a generated block finds beside itself (``GeneratedBlock.files``)
    into ``folder``; an existing file with other content is kept, and ``notes`` says so.
    Returns the paths written or found in place."""
    out: list[str] = []
    for rel, data in sorted(files.items()):
        if not is_plain_relative(rel):
            continue
        dest = folder / rel
        if dest.is_file():
            if dest.read_bytes() != data:
                notes.append(f"kept the existing {dest}, which differs from the upstream file "
                             "this block reads there")
                continue
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, dest)
        out.append(str(dest))
    return out


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
