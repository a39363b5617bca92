"""Fewer cyclic garbage collections while the engine regenerates a block.

A closure allocates in bursts, and most of what it allocates survives: the resolver keeps
every parsed module (AST nodes, symbol tables) and what it worked out about it. With
CPython's default thresholds (700, 10, 10) every such burst promotes objects into the oldest
generation, and a full collection runs whenever it has grown by a quarter: tensordict's first
block, ``TensorDictModule``, ran 8 full collections (about 1.5 s of its 8.5 s) walking up to
700,000 live objects, and found next to no garbage. The engine frees its own working state by
reference counting (no reference cycles in it, see ``Resolver.closure``), so the collector
can run far less often meanwhile. mypy, which builds trees the same way, runs with the
thresholds used here for the whole process; this module sets them only for the duration and
then gives back what was there before: a program using the engine keeps its own policy.
Where uses nest or overlap across threads, the thresholds come back when the last one ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# a young collection after this many allocations (not 700); the middle and oldest
# generations after 30 collections of the one below (not 10)
THRESHOLDS = (200_000, 30, 30)

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, ...] = ()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Runs the body with the collector's thresholds at ``THRESHOLDS``; restores them
    afterwards, also when the body raises. A disabled collector stays disabled."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*THRESHOLDS)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
