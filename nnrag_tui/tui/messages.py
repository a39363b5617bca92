"""Messages the workers post to the app. The index worker's carry the ``run`` number of the
indexing run that sent them, so the app can ignore a run it has already replaced or cancelled;
the validation worker's carry their ``Job``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from nnrag_tui.engine.facts import Block, IndexReport
from nnrag_tui.engine.progress import Progress
from nnrag_tui.tui.blockview import BlockView
from nnrag_tui.tui.validation import Job


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
    failures: tuple[tuple[str, str, str], ...] = ()  # files that did not parse


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


class BlockExtracted(Message):
    """The extraction worker finished one block (``view.error`` says when it failed)."""

    def __init__(self, view: BlockView) -> None:
        super().__init__()
        self.view = view


class ExtractionWaiting(Message):
    """An extraction waits for the index (indexing holds the engine), or, with ``why``, will
    not happen (the index is incomplete)."""

    def __init__(self, block: Block, why: str | None = None) -> None:
        super().__init__()
        self.block = block
        self.why = why


class ValidationStarted(Message):
    def __init__(self, job: Job, waiting: int) -> None:
        super().__init__()
        self.job = job
        self.waiting = waiting  # jobs still queued behind this one


class ValidationStage(Message):
    """One stage's verdict (a ``StageVerdict``), as soon as it is known."""

    def __init__(self, job: Job, verdict: Any) -> None:
        super().__init__()
        self.job = job
        self.verdict = verdict


class ValidationNote(Message):
    def __init__(self, job: Job, text: str) -> None:
        super().__init__()
        self.job = job
        self.text = text


class ValidationFinished(Message):
    """``report`` is the ``ValidationReport`` of ``code``; ``error`` is set instead when the
    block could not be validated at all (not extracted, sandbox unavailable)."""

    def __init__(self, job: Job, report: Any = None, code: str | None = None,
                 error: str | None = None, view: BlockView | None = None) -> None:
        super().__init__()
        self.job = job
        self.report = report
        self.code = code
        self.error = error
        self.view = view


class ValidationIdle(Message):
    """The validation worker stopped: the queue is empty, or it was cancelled."""

    def __init__(self, cancelled: bool) -> None:
        super().__init__()
        self.cancelled = cancelled


class BlocksSaved(Message):
    """``saved``: (block, SaveResult); ``failed``: (block, why)."""

    def __init__(self, saved: list[tuple[Block, Any]], failed: list[tuple[Block, str]]) -> None:
        super().__init__()
        self.saved = saved
        self.failed = failed
