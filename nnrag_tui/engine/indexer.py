"""Turns configured sources into the SQLite index: list files, parse what changed in a process
pool, store it, then rediscover blocks. Unchanged files are never parsed twice."""

from __future__ import annotations

import fcntl
import gc
import json
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from nnrag_tui.engine.bindings import ModuleIndex
from nnrag_tui.engine.config import CorpusConfig, SourceConfig
from nnrag_tui.engine.discovery import BlockDiscovery
from nnrag_tui.engine.errors import SourceError, StoreError
from nnrag_tui.engine.facts import IndexReport, ModuleFacts
from nnrag_tui.engine.parse import failed_facts, read_facts
from nnrag_tui.engine.progress import CancelFn, Cancelled, Progress, ProgressFn
from nnrag_tui.engine.sources import RepoCache, Snapshot, checkout_packages, iter_files
from nnrag_tui.engine.store import FileIndexStore
from nnrag_tui.engine.unindexed import UnindexedModules

DISCOVERY_VERSION = "8"  # 8: a base an import binds in a try and an alias in its except
POOL_THRESHOLD = 16  # below this many files to parse, parsing in-process is faster
# With other threads alive (the TUI) the pool must use forkserver, whose start costs ~1-2 s:
# parsing in-process wins below this many files.
FORKSERVER_THRESHOLD = 400
COMMIT_EVERY = 256


# The index lock's descriptor while this process holds it: forked parse workers close their
# inherited copy, so that a worker outliving a killed indexer can never keep the lock.
_LOCK_FD: int | None = None


def _worker_init(indexer: int | None = None, start: str | None = None,
                 forked: bool = True) -> None:
    # ast trees are acyclic and die by refcount; the cyclic GC only slows parsing down 2x.
    gc.disable()
    if _LOCK_FD is not None and forked:
        try:
            os.close(_LOCK_FD)  # close only: an unlock here would unlock the parent too
        except OSError:
            pass
    if indexer is not None:
        _die_with_indexer(indexer, start, forked)


def _start_time(pid: int | str) -> str | None:
    """A process's start time (Linux), to tell it from a later process with the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2:].split()[19].decode()
    except (OSError, IndexError, ValueError):
        return None


def _indexer_alive(pid: int, start: str | None) -> bool:
    if start is not None:
        return _start_time(pid) == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _die_with_indexer(indexer: int, start: str | None, forked: bool) -> None:
    """A parse worker must not outlive the indexer that started it: after a SIGKILL the pool
    cannot shut it down, and a forked worker would keep the index lock. A forked worker has
    the kernel kill it when its parent dies (Linux); every worker, forkserver ones included
    (their parent is the forkserver, which lives as long as they do), also runs a watchdog
    thread that exits when the indexer is gone."""
    if forked:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def gone() -> bool:
        return os.getppid() != indexer if forked else not _indexer_alive(indexer, start)

    if gone():  # it died before the prctl
        os._exit(1)

    def watch() -> None:
        while not gone():
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="nnrag-orphan-watch", daemon=True).start()


def _parse_job(job: tuple[str, str, int, str | None]) -> tuple[str, ModuleFacts | None, int]:
    root, relpath, max_bytes, expected = job
    facts, mtime = read_facts(root, relpath, max_bytes, expected)
    return relpath, facts, mtime


@contextmanager
def index_lock(cache_dir: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """One indexer at a time per cache; a second one waits (and says so) instead of failing."""
    global _LOCK_FD
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fh = open(cache_dir / "index.lock", "a+")
    except OSError as exc:
        raise StoreError(f"cannot use the cache directory {cache_dir}: "
                         f"{exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait()
            fcntl.flock(fh, fcntl.LOCK_EX)
        _LOCK_FD = fh.fileno()
        yield
    finally:
        _LOCK_FD = None
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


class Indexer:
    def __init__(self, config: CorpusConfig, store: FileIndexStore, cache: RepoCache,
                 workers: int | None = None) -> None:
        self.config = config
        self.store = store
        self.cache = cache
        self.workers = workers or max(1, min(os.cpu_count() or 1, 8))
        self.max_bytes = int(config.fetch.max_file_mb * 1024 * 1024)
        self._pool: ProcessPoolExecutor | None = None

    def run(self, policy: str = "missing", progress: ProgressFn | None = None,
            cancel: CancelFn | None = None) -> IndexReport:
        t0 = time.perf_counter()
        emit = progress or (lambda p: None)
        cancelled = cancel or (lambda: False)
        totals = dict(files=0, parsed=0, cached=0, failed=0, removed=0)
        per_source: list[dict] = []
        changed = False
        try:
            with self.store.transaction():
                if self.store.drop_sources_except(s.name for s in self.config.sources):
                    self._mark_stale()
                    changed = True
            for src in self.config.sources:
                if cancelled():
                    raise Cancelled("indexing cancelled")
                emit(Progress("fetch", src.name, 0, 0, src.location))
                try:
                    snap = self.cache.materialize(src, policy)
                except SourceError as exc:
                    per_source.append({"name": src.name, "error": str(exc)})
                    with self.store.transaction():
                        if not self.store.set_source_error(src.name, str(exc)):
                            # never indexed: a row anyway, so that `sources` shows the error
                            self.store.upsert_source(src.name, src.kind, src.location, "", None,
                                                     None, src.priority, str(exc))
                    continue
                stats = self._index_source(src, snap, emit, cancelled)
                for k in totals:
                    totals[k] += stats[k]
                # a new commit may change the unindexed modules that bases live in, too
                changed |= bool(stats["parsed"] or stats["removed"] or snap.updated)
                per_source.append({"name": src.name, "origin": snap.origin,
                                   "commit": snap.commit, **stats})
        except Cancelled:
            # Batches committed before the cancel stay: make the blocks agree with them.
            self.rediscover()
            raise
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
        if changed or self.store.get_meta("discovery") != self._discovery_key():
            emit(Progress("discover", "", 0, 1))
            self.rediscover()
        blocks = self.store.counts()["blocks"]
        emit(Progress("done", "", 1, 1))
        return IndexReport(
            files=totals["files"], parsed=totals["parsed"], cached=totals["cached"],
            failed=totals["failed"], removed=totals["removed"], blocks=blocks,
            seconds=time.perf_counter() - t0, sources=tuple(per_source),
            failures=tuple(self.store.failures()),
        )

    def rediscover(self) -> int:
        sources = self.store.source_roots()
        index = ModuleIndex(self.store.load_modules(), checkout_packages(sources))
        patterns = {s.name: s.symbols for s in self.config.sources}
        roots = {name: r["root"] for name, r in sources.items()}
        rows = BlockDiscovery(index, patterns,
                              UnindexedModules(index, roots, self.max_bytes)).discover()
        with self.store.transaction():
            self.store.replace_blocks(rows)
            self.store.set_meta("discovery", self._discovery_key())
        return len(rows)

    def _mark_stale(self) -> None:
        """Called inside each transaction that changes files: the stored blocks no longer
        match them until ``rediscover`` commits, so a run killed in between rediscovers."""
        self.store.set_meta("discovery", "stale")

    def _discovery_key(self) -> str:
        """What the stored blocks depend on besides the files: the discovery rules, each
        source's priority and symbol patterns (editing them in the config must re-discover),
        and which sources are checkouts indexed as a package (``checkout_packages``)."""
        cfg = [(s.name, s.priority, s.symbols.include, s.symbols.exclude)
               for s in self.config.sources]
        checkouts = sorted(checkout_packages(self.store.source_roots()).items())
        return f"{DISCOVERY_VERSION}:{json.dumps([cfg, checkouts], sort_keys=True)}"

    def _index_source(self, src: SourceConfig, snap: Snapshot, emit: ProgressFn,
                      cancelled: CancelFn) -> dict[str, int]:
        with self.store.transaction():
            sid = self.store.upsert_source(src.name, src.kind, snap.origin, str(snap.root),
                                           snap.commit, snap.version, src.priority,
                                           prefix=snap.prefix)
        known = self.store.file_states(sid)
        listed = list(iter_files(snap, src))
        stats = dict(files=len(listed), parsed=0, cached=0, failed=0, removed=0)
        jobs: list[tuple[str, str, int, str | None]] = []
        root = str(snap.root)
        batch: list[tuple[str, ModuleFacts | None, int]] = []
        for rel, st, reason in listed:
            old = known.get(rel)
            if old is not None and old[2] == st.st_size and old[3] == st.st_mtime_ns:
                stats["cached"] += 1
            elif reason is not None:  # recorded with its reason, never read
                batch.append((rel, failed_facts(rel, reason, st.st_size), st.st_mtime_ns))
            else:
                jobs.append((root, rel, self.max_bytes, old[1] if old else None))
        gone = [known[r][0] for r in known.keys() - {rel for rel, _, _ in listed}]
        if gone:
            with self.store.transaction():
                self.store.delete_files(gone)
                self._mark_stale()
            stats["removed"] = len(gone)
        last_commit = time.perf_counter()

        def commit() -> None:
            # Parsed files are committed in batches: a cancel or a crash keeps the work done,
            # and every batch leaves the database consistent.
            nonlocal last_commit
            if not batch:
                return
            with self.store.transaction():
                if any(facts is not None for _, facts, _ in batch):
                    self._mark_stale()
                for rel, facts, mtime in batch:
                    if facts is None:  # same bytes, new mtime
                        fid, _, size, _ = known[rel]
                        self.store.touch_file(fid, size, mtime)
                        stats["cached"] += 1
                    else:
                        self.store.put_facts(sid, facts, mtime)
                        stats["parsed"] += 1
            batch.clear()
            last_commit = time.perf_counter()

        total = len(jobs)
        try:
            for done, res in enumerate(self._parse_all(jobs), start=1):
                batch.append(res)
                if len(batch) >= COMMIT_EVERY or time.perf_counter() - last_commit > 2.0:
                    commit()
                if done % 8 == 0 or done == total:
                    emit(Progress("parse", src.name, done, total, res[0]))
                    if cancelled():
                        raise Cancelled("indexing cancelled")
        finally:
            commit()
        stats["failed"] = self.store.failed_count(sid)
        return stats

    def _parse_all(self, jobs: list[tuple[str, str, int, str | None]]):
        threaded = threading.active_count() > 1
        small = len(jobs) < (FORKSERVER_THRESHOLD if threaded and self._pool is None
                             else POOL_THRESHOLD)
        if small or self.workers == 1:
            was = gc.isenabled()
            gc.disable()
            try:
                for j in jobs:
                    yield _parse_job(j)
            finally:
                if was:
                    gc.enable()
            return
        if self._pool is None:
            # fork is fastest; with other threads alive (the TUI) forking is unsafe.
            method = "forkserver" if threaded else "fork"
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context(method),
                initializer=_worker_init,
                initargs=(os.getpid(), _start_time("self"), method == "fork"))
        chunk = max(1, min(16, len(jobs) // (self.workers * 4)))
        yield from self._pool.map(_parse_job, jobs, chunksize=chunk)
