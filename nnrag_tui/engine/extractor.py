"""The engine's front door: ``BlockExtractor`` ties configuration, cache, index and discovery
together. The CLI, the TUI and Python users all go through it."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from nnrag_tui.engine import paths
from nnrag_tui.engine.config import CorpusConfig, default_config, load_config
from nnrag_tui.engine.errors import BlockNotFound
from nnrag_tui.engine.facts import Block, IndexReport
from nnrag_tui.engine.indexer import CancelFn, Indexer, ProgressFn, index_lock
from nnrag_tui.engine.sources import RepoCache
from nnrag_tui.engine.store import FileIndexStore

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
        """Brings the index up to date with the configured sources."""
        cache = RepoCache(self.cache_dir, self.config.fetch)
        with index_lock(self.cache_dir, on_wait):
            report = Indexer(self.config, self.store, cache, self.workers).run(
                policy, progress, cancel)
        self._indexed = True
        return report

    def warm_index_once(self, policy: str = "missing", progress: ProgressFn | None = None
                        ) -> IndexReport | None:
        """Indexes on first use in this process; later calls are free."""
        if self._indexed:
            return None
        return self.index(policy, progress)

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

    def find_block(self, name: str) -> tuple[Block, list[Block]]:
        """One block by ``Name``, ``pkg.mod.Name`` or ``pkg.mod:Name``; returns the pick and the
        other candidates. Several with the same name are decided by repository priority."""
        if ":" in name:
            module, qual = name.split(":", 1)
            cands = [b for b in self.store.blocks(name=qual.rsplit(".", 1)[-1])
                     if b.module == module and b.qualname == qual]
        elif "." in name:
            cands = [b for b in self.store.blocks(name=name.rsplit(".", 1)[-1])
                     if b.full_name == name]
        else:
            cands = self.store.blocks(name=name)
        if not cands:
            raise BlockNotFound(f"no block named {name!r} in the index (try `nnrag blocks "
                                f"--match '*{name.rsplit('.', 1)[-1]}*'`)")
        return cands[0], cands[1:]

    def sources(self) -> list[dict]:
        return self.store.sources()
