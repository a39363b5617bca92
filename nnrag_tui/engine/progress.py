"""What a long engine run (indexing) tells its caller, and how the caller stops it. Kept apart
from the indexer so that front ends can name these types without importing the indexer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nnrag_tui.engine.errors import NnragError


@dataclass(frozen=True)
class Progress:
    """One progress event: ``phase`` is ``fetch``, ``parse``, ``discover`` or ``done`` (and
    ``wait`` when another process holds the cache's index lock, see ``BlockExtractor.index``)."""

    phase: str
    source: str
    done: int
    total: int
    current: str = ""


ProgressFn = Callable[[Progress], None]
CancelFn = Callable[[], bool]


class Cancelled(NnragError):
    """The caller asked to stop; everything committed so far stays consistent."""
