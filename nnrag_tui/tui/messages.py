"""Messages the index worker posts to the app. Each carries the ``run`` number of the indexing
run that sent it, so the app can ignore a run it has already replaced or cancelled."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from nnrag_tui.engine.facts import Block, IndexReport
from nnrag_tui.engine.indexer import Progress


class IndexProgress(Message):
    """One progress event. Floods merge: a queued one is replaced by the next."""

    def __init__(self, run: int, progress: Progress) -> None:
        super().__init__()
        self.run = run
        self.progress = progress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, IndexProgress)


@dataclass(frozen=True)
class Corpus:
    """A consistent read of the index: blocks, sources and where each source's files live."""

    blocks: tuple[Block, ...] = ()
    sources: tuple[dict, ...] = ()
    roots: dict[str, dict] = field(default_factory=dict)


class CorpusLoaded(Message):
    """The index as it is now. ``report`` is None for a read without indexing (the cached
    index shown at start-up) and for a cancelled run (``cancelled`` is then true)."""

    def __init__(self, run: int, corpus: Corpus, report: IndexReport | None = None,
                 cancelled: bool = False, final: bool = True) -> None:
        super().__init__()
        self.run = run
        self.corpus = corpus
        self.report = report
        self.cancelled = cancelled
        self.final = final
