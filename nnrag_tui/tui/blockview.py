"""A block as the app shows it: the engine's extraction (the regenerated file, its spec and
provenance) together with the closure it came from, for the dependency tree. Made by the
app's extraction worker, kept in a small cache until the index changes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nnrag_tui.engine.extractor import BlockExtractor, Extraction
from nnrag_tui.engine.facts import Block
from nnrag_tui.tui.dependencies import DependencyGraph

if TYPE_CHECKING:
    from nnrag_tui.engine.closure import Closure
from nnrag_tui.tui.history import block_id

CACHE_SIZE = 64


@dataclass(frozen=True)
class BlockView:
    block: Block
    extraction: Extraction
    closure: Closure | None = None
    graph: DependencyGraph | None = None

    @property
    def ok(self) -> bool:
        return self.extraction.ok

    @property
    def error(self) -> str | None:
        return self.extraction.error

    @property
    def code(self) -> str | None:
        g = self.extraction.generated
        return g.code if g is not None else None


def extract(ex: BlockExtractor, block: Block) -> BlockView:
    """The regenerated file of exactly ``block`` (``extract_single_block`` takes a name and
    picks by repository priority when two repositories have the same ``module:Class``). Never
    raises for a block that cannot be extracted: the error is in the view."""
    extraction, closure = ex.extract_block(block)
    graph = DependencyGraph(closure) if closure is not None else None
    return BlockView(block, extraction, closure, graph)


class ViewCache:
    """The last few extractions, by block; emptied when the index changes. Shared by the UI
    thread and the workers."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._views: OrderedDict[str, BlockView] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, block: Block) -> BlockView | None:
        bid = block_id(block)
        with self._lock:
            view = self._views.get(bid)
            if view is None or view.block != block:
                return None
            self._views.move_to_end(bid)
            return view

    def put(self, view: BlockView) -> None:
        bid = block_id(view.block)
        with self._lock:
            self._views[bid] = view
            self._views.move_to_end(bid)
            while len(self._views) > self.size:
                self._views.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._views.clear()
