"""``NnragApp``: owns the engine (one ``BlockExtractor``, the validator, the registry) and the
workers that use it; screens show what the engine returns. ``run_app`` is what ``nnrag`` with
no command runs.

Workers (threads; results come back as messages, one handler turns failures into
notifications):

- ``index``: indexing, exclusive, cancellable (escape), progress merged to 20 messages a second;
- ``extract``: the highlighted block's regenerated file and closure, exclusive (the latest
  highlight wins);
- ``validate``: drains the validation queue one block at a time, cancellable between blocks;
- ``save``: saves to the registry.

The extractor is used by one thread at a time (``_engine_lock``); indexing holds it throughout,
so an extraction asked for meanwhile says that it waits.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from functools import partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.theme import Theme
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from nnrag_tui.engine.errors import NnragError
from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.facts import Block, IndexReport
from nnrag_tui.engine.progress import Cancelled, Progress
from nnrag_tui.tui import history as hist
from nnrag_tui.tui.blockview import BlockView, ViewCache, extract
from nnrag_tui.tui.messages import (
    BlockExtracted,
    BlocksSaved,
    Corpus,
    CorpusLoaded,
    ExtractionWaiting,
    IndexProgress,
    ValidationFinished,
    ValidationIdle,
    ValidationNote,
    ValidationStage,
    ValidationStarted,
)
from nnrag_tui.tui.screens.help import HelpScreen
from nnrag_tui.tui.screens.library import LibraryScreen
from nnrag_tui.tui.settings import Settings, config_dir
from nnrag_tui.tui.themes import DEFAULT_THEME, load_themes, theme_dirs
from nnrag_tui.tui.validation import Job, SandboxValidation, Validation, ValidationQueue
from nnrag_tui.tui.widgets.validation_log import LogEntry, ms, stage_entry

if TYPE_CHECKING:
    from nnrag_tui.engine.registry import Registry

EXIT_ERROR = 2
PROGRESS_INTERVAL = 0.05  # at most 20 progress messages a second
HISTORY_SAVE_DELAY = 0.5
INCOMPLETE = ("The index is incomplete (indexing was cancelled or failed). r finishes it; then "
              "the regenerated file is shown. u shows the upstream definition now.")
# bindings that only move a cursor: not worth a command-palette entry
PALETTE_SKIP = {"results.down", "results.up", "results.page_down", "results.page_up",
                "results.first", "results.last", "results.next", "results.previous",
                "search.to_results", "triage.next", "triage.previous", "registry.next",
                "registry.previous", "results.back", "dialog.no", "dialog.yes", "help.close",
                "prompt.cancel"}


class _Throttle:
    """The engine's progress callback: posts at most one message per interval, but always the
    first of a phase and the last of a source, so the bar never stops short."""

    def __init__(self, post: Callable[[Progress], None]) -> None:
        self.post = post
        self.phase = ""
        self.last = 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if (p.phase == self.phase and p.done != p.total
                and now - self.last < PROGRESS_INTERVAL):
            return
        self.phase, self.last = p.phase, now
        self.post(p)


def start_resource_tracker() -> None:
    """Starts multiprocessing's resource tracker now, while ``sys.stderr`` is the real one.

    The engine parses in a process pool (forkserver, as the app has threads). Starting a pool
    starts the tracker, which hands ``sys.stderr.fileno()`` to its child; inside a running
    Textual app that is -1 and the pool dies with "bad value(s) in fds_to_keep"."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


SHOW_SECONDS_FROM = 1.0  # an index run at least this long shows its duration in the summary


def summary(report: IndexReport) -> str:
    text = (f"{report.blocks:,} blocks · {report.files:,} files: {report.parsed:,} parsed, "
            f"{report.cached:,} unchanged")
    if report.failed:
        text += f", {report.failed:,} failed to parse"
    if report.removed:
        text += f", {report.removed:,} removed"
    if report.seconds >= SHOW_SECONDS_FROM:
        text += f" · {report.seconds:.1f} s"
    return text


def while_mounted(handler: Callable) -> Callable:
    """For message handlers that update the library: a worker's message that arrives while
    the app is shutting down (the panes already gone) is dropped."""

    @wraps(handler)
    def guarded(self, message):
        try:
            return handler(self, message)
        except NoMatches:
            if self.library.children:  # the panes are there: a real bug
                raise
            return None

    return guarded


def all_binding_ids() -> set[str]:
    """Every binding id the app's screens and widgets define (what a keymap may name)."""
    from nnrag_tui.tui.screens.dialogs import ConfirmScreen, PromptScreen
    from nnrag_tui.tui.screens.registry import RegistryScreen
    from nnrag_tui.tui.screens.stats import StatsScreen
    from nnrag_tui.tui.screens.triage import TriageScreen
    from nnrag_tui.tui.widgets.results import ResultsTable
    from nnrag_tui.tui.widgets.validation_log import ValidationLog

    ids = set()
    for owner in (NnragApp, LibraryScreen, TriageScreen, RegistryScreen, StatsScreen,
                  HelpScreen, ConfirmScreen, PromptScreen, ResultsTable, ValidationLog):
        for b in owner.BINDINGS:
            if isinstance(b, Binding) and b.id:
                ids.add(b.id)
    return ids


class NnragApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute, so subclasses elsewhere work
    TITLE = "nnrag"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "triage", "Triage", id="triage",
                tooltip="Failed validations grouped by cause"),
        Binding("g", "registry", "Registry", id="registry",
                tooltip="The saved blocks"),
        Binding("S", "stats", "Stats", show=False, id="stats",
                tooltip="Blocks per repository and category, validation pass rates"),
        Binding("r", "reindex", "Re-index", id="reindex",
                tooltip="Re-scan the configured repositories and update the index"),
        Binding("escape", "cancel", "Cancel", id="cancel",
                tooltip="Stop indexing and the validations still waiting; what was done "
                        "stays"),
        Binding("f1,question_mark", "help", "Help", key_display="F1",
                id="help", tooltip="Show the keys and how search works"),
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit nnrag"),
    ]

    def __init__(self, config: str | Path | None = None, *, cache_dir: str | Path | None = None,
                 data_dir: str | Path | None = None, extractor: BlockExtractor | None = None,
                 notices: Iterable[str] = (), validation: Validation | None = None,
                 settings_dir: str | Path | None = None) -> None:
        """Raises ``NnragError`` (a ``ConfigError``) for a bad configuration, before the app
        starts; engine errors after that become notifications."""
        super().__init__()
        self.extractor = extractor or BlockExtractor(config, cache_dir=cache_dir,
                                                     data_dir=data_dir)
        self.notices = list(notices)  # warnings, shown once the app is up
        self.sub_title = self.extractor.config.origin
        self.library = LibraryScreen([s.name for s in self.extractor.config.sources])
        self.corpus = Corpus()
        self.indexing = False
        self.cancelling = False
        self.index_complete = False
        self.history = hist.ValidationHistory(self.extractor.data_dir)
        if self.history.problem:
            self.notices.append(self.history.problem)
        self.views = ViewCache()
        self.pending: dict[str, str] = {}  # block id -> "queued" | "running"
        self.queue = ValidationQueue()
        self.validation: Validation = validation or SandboxValidation()
        self.validating = False
        self._block_registry: Registry | None = None
        self._run = 0
        self._index_worker: Worker[None] | None = None
        self._engine_lock = threading.Lock()  # one thread at a time uses the extractor
        self._save_timer: Timer | None = None
        self._extracting: Block | None = None
        self._status: Progress | str = ""
        self._setup_settings(settings_dir)
        start_resource_tracker()

    # -- settings, themes, keys ------------------------------------------------------------
    def _setup_settings(self, settings_dir: str | Path | None) -> None:
        self.config_dir = config_dir(settings_dir)
        self.settings = Settings.load(self.config_dir)
        if self.settings.problem:
            self.notices.append(self.settings.problem)
        themes, problems = load_themes(theme_dirs(self.config_dir))
        self.notices.extend(problems)
        for theme in themes:
            self.register_theme(theme)
        wanted = self.settings.theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            if self.settings.theme:
                self.notices.append(f"theme {wanted!r} (from {self.settings.path}) is not "
                                    "available; using the default")
            wanted = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = wanted
        keymap = self.settings.keymap
        unknown = sorted(set(keymap) - all_binding_ids()) if keymap else []
        if unknown:
            self.notices.append(f"{self.settings.path}: no binding has the id "
                                f"{', '.join(map(repr, unknown))} (F1 lists the ids)")
        self.set_keymap({k: v for k, v in keymap.items() if k not in unknown})

    def _remember_theme(self, theme: Theme) -> None:
        if self.settings.theme != theme.name:
            self.settings.theme = theme.name
            self.settings.save()

    @property
    def registry(self) -> Registry:
        if self._block_registry is None:
            from nnrag_tui.engine.registry import Registry

            self._block_registry = Registry(self.extractor.data_dir)
        return self._block_registry

    # -- screens ---------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return self.library

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        # the index worker reads the cached index while the first frame is drawn
        self.start_index(show_cached=True)

    def on_ready(self) -> None:
        for text in self.notices:
            self.notify(text, title="Configuration", severity="warning", timeout=10,
                        markup=False)

    def _screen(self, name: str) -> Screen:
        """The triage or registry screen, made the first time it is shown (their modules are
        imported then too: they are not needed for the first frame)."""
        if not self.is_screen_installed(name):
            if name == "triage":
                from nnrag_tui.tui.screens.triage import TriageScreen

                self.install_screen(TriageScreen(), name)
            elif name == "stats":
                from nnrag_tui.tui.screens.stats import StatsScreen

                self.install_screen(StatsScreen(), name)
            else:
                from nnrag_tui.tui.screens.registry import RegistryScreen

                self.install_screen(RegistryScreen(), name)
        return self.get_screen(name)

    def show_screen(self, name: str) -> None:
        """The library, or one screen (triage, registry) on top of it."""
        target = None if name == "library" else self._screen(name)
        if target is not None and self.screen is target:
            return
        while len(self.screen_stack) > 1:
            self.pop_screen()
        if target is not None:
            self.push_screen(target)

    # -- indexing --------------------------------------------------------------------------
    def start_index(self, policy: str = "missing", show_cached: bool = False) -> None:
        self._run += 1
        self.indexing = True
        self.cancelling = False
        self.refresh_bindings()
        self._show_progress(Progress("fetch", "", 0, 0, "starting…"))
        self._index_worker = self._index(self._run, policy, show_cached)

    @work(thread=True, exclusive=True, group="index", exit_on_error=False,
          description="indexing")
    def _index(self, run: int, policy: str, show_cached: bool) -> None:
        worker = get_current_worker()

        def post(p: Progress) -> None:
            self.post_message(IndexProgress(run, p))

        if not self._engine_lock.acquire(blocking=False):
            post(Progress("wait", "", 0, 0, "waiting for the previous run to stop…"))
            self._engine_lock.acquire()
        try:
            ex = self.extractor
            if worker.is_cancelled:
                self.post_message(CorpusLoaded(run, self._read(ex), cancelled=True))
                return
            if show_cached:
                cached = self._read(ex)
                if cached.blocks:
                    self.post_message(CorpusLoaded(run, cached, final=False))
            try:
                report = ex.index(
                    policy, progress=_Throttle(post), cancel=lambda: worker.is_cancelled,
                    on_wait=lambda: post(Progress(
                        "wait", "", 0, 0,
                        "waiting for another nnrag process that is indexing this cache…")))
            except Cancelled:
                self.post_message(CorpusLoaded(run, self._read(ex), cancelled=True))
                return
            self.post_message(CorpusLoaded(run, self._read(ex), report))
        finally:
            self._engine_lock.release()

    def _show_progress(self, p: Progress) -> None:
        self._status = p
        if self.library.is_mounted:
            self.library.status.show_progress(p)

    def _show_status(self, text: str) -> None:
        self._status = text
        if self.library.is_mounted:
            self.library.status.show_message(text)

    def library_mounted(self) -> None:
        """The library is up: show what the workers reported before it was."""
        if isinstance(self._status, Progress):
            self.library.status.show_progress(self._status)
        elif self._status:
            self.library.status.show_message(self._status)
        if self.corpus.blocks or self.corpus.sources:
            self.library.load_corpus(self.corpus)

    @staticmethod
    def _read(ex: BlockExtractor) -> Corpus:
        return Corpus(tuple(ex.blocks()), tuple(ex.sources()), ex.store.source_roots(),
                      tuple(ex.store.failures()))

    @while_mounted
    def on_index_progress(self, message: IndexProgress) -> None:
        if message.run == self._run and self.indexing and not self.cancelling:
            self._show_progress(message.progress)

    @while_mounted
    def on_corpus_loaded(self, message: CorpusLoaded) -> None:
        if message.run != self._run:
            return  # a run that was replaced by a newer one
        self.corpus = message.corpus
        if message.final:
            self.views.clear()
            self.index_complete = message.report is not None
        if self.library.is_mounted:
            self.library.load_corpus(message.corpus)
        if not message.final:
            return
        self.indexing = False
        self.refresh_bindings()
        if message.cancelled:
            self._show_status(
                f"Indexing cancelled · {len(message.corpus.blocks):,} blocks indexed so far · "
                "r indexes the rest")
            return
        report = message.report
        if report is None:
            return
        self._show_status(summary(report))
        failed = [s for s in report.sources if s.get("error")]
        for s in failed:
            self.notify(s["error"], title=f"{s['name']}: not indexed",
                        severity="error" if len(failed) == len(report.sources) else "warning",
                        timeout=10, markup=False)

    @while_mounted
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place where a failed worker becomes a notification."""
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        if isinstance(error, NnragError):
            text = str(error)
        else:
            text = f"{type(error).__name__}: {error} (this is a bug in nnrag)"
        if worker is self._index_worker:
            self.indexing = False
            self.refresh_bindings()
            self._show_status(f"Indexing failed: {text}")
            self.notify(text, title="Indexing failed", severity="error", timeout=15,
                        markup=False)
            return
        if worker.group == "validate":
            self.on_validation_idle(ValidationIdle(cancelled=False))
        if worker.group == "extract" and self._extracting is not None:
            self.library.extraction_unavailable(self._extracting, f"Cannot regenerate: {text}")
        self.notify(text, title=f"{worker.description or worker.name} failed",
                    severity="error", timeout=15, markup=False)

    # -- the engine from worker threads ----------------------------------------------------
    def _acquire_engine(self, on_wait: Callable[[], object]) -> bool:
        """Takes the extractor for this worker; False when the worker was cancelled while
        waiting (indexing holds it for as long as it runs)."""
        if self._engine_lock.acquire(blocking=False):
            return True
        on_wait()
        worker = get_current_worker()
        while not worker.is_cancelled:
            if self._engine_lock.acquire(timeout=0.05):
                return True
        return False

    def _view(self, block: Block) -> BlockView | str | None:
        """``block``'s view, from the cache or the engine (in a worker); a string says why
        there is none; None: the worker was cancelled."""
        view = self.views.get(block)
        if view is not None:
            return view
        if not self._acquire_engine(lambda: self.post_message(ExtractionWaiting(block))):
            return None
        try:
            if not self.index_complete:
                return INCOMPLETE
            view = extract(self.extractor, block)
        finally:
            self._engine_lock.release()
        self.views.put(view)
        return view

    # -- extraction ------------------------------------------------------------------------
    def request_view(self, block: Block) -> None:
        """Regenerates ``block`` for the preview and the dependency tree (in a worker)."""
        view = self.views.get(block)
        if view is not None:
            self.library.show_view(view)
        elif not self.index_complete and not self.indexing:
            self.library.extraction_unavailable(block, INCOMPLETE)
        else:
            self._extracting = block
            self._extract(block)

    @work(thread=True, exclusive=True, group="extract", exit_on_error=False,
          description="regenerating")
    def _extract(self, block: Block) -> None:
        view = self._view(block)
        if isinstance(view, str):
            self.post_message(ExtractionWaiting(block, view))
        elif view is not None:
            self.post_message(BlockExtracted(view))

    @while_mounted
    def on_block_extracted(self, message: BlockExtracted) -> None:
        self.library.show_view(message.view)

    @while_mounted
    def on_extraction_waiting(self, message: ExtractionWaiting) -> None:
        if message.why:
            self.library.extraction_unavailable(message.block, message.why)
        else:
            self.library.extraction_waiting(message.block)

    # -- validation ------------------------------------------------------------------------
    def validate_blocks(self, blocks: Iterable[Block]) -> list[Job]:
        """Queues ``blocks`` for validation (each at most once) and starts the worker."""
        jobs = self.queue.add(blocks)
        for job in jobs:
            self.pending[hist.block_id(job.block)] = "queued"
        log = self.library.log_pane
        if not jobs:
            self.notify("Already waiting for validation.", timeout=3)
            return jobs
        if len(jobs) > 1:
            log.write(LogEntry("note", f"· queued {len(jobs)} blocks"))
        self.library.show_tab("log")
        self._statuses_changed()
        if not self.validating:
            self.validating = True
            self._validate()
            self.refresh_bindings()  # escape now cancels
        return jobs

    def retry(self, ids: Iterable[str]) -> None:
        """Validates again the blocks with these ids (from the triage screen)."""
        blocks, missing = [], []
        by_id = {hist.block_id(b): b for b in self.corpus.blocks}
        for bid in ids:
            block = by_id.get(bid)
            if block is None:
                missing.append(bid.split("|", 1)[-1])
            else:
                blocks.append(block)
        if missing:
            self.notify(f"No longer in the index: {', '.join(missing[:5])}"
                        + (" …" if len(missing) > 5 else ""), severity="warning", timeout=6,
                        markup=False)
        if blocks:
            jobs = self.validate_blocks(blocks)
            if jobs:
                self.notify(f"Validating {len(jobs)} block{'s' if len(jobs) > 1 else ''} "
                            "again.", timeout=3)

    @work(thread=True, exclusive=True, group="validate", exit_on_error=False,
          description="validation")
    def _validate(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled:
            job = self.queue.next()
            if job is None:
                break
            self.post_message(ValidationStarted(job, len(self.queue)))
            try:
                self._validate_one(job)
            finally:
                self.queue.done()
        self.post_message(ValidationIdle(cancelled=worker.is_cancelled))

    def _validate_one(self, job: Job) -> None:
        view = self._view(job.block)
        if view is None:
            self.post_message(ValidationFinished(job, error="cancelled"))
            return
        if isinstance(view, str):
            self.post_message(ValidationFinished(job, error=view))
            return
        g = view.extraction.generated
        if g is None:
            self.post_message(ValidationFinished(job, error=f"not extracted: {view.error}",
                                                 view=view))
            return
        try:
            report = self.validation.validate(
                g.code, g.name, g.spec, block=job.block,
                on_stage=lambda v: self.post_message(ValidationStage(job, v)),
                on_note=lambda t: self.post_message(ValidationNote(job, t)),
                call_sites=lambda: self._call_sites(view.extraction), files=g.files(),
                imported=g.imported_packages)
        except NnragError as exc:
            self.post_message(ValidationFinished(job, error=str(exc), view=view))
            return
        except Exception as exc:  # noqa: BLE001  (one block must not stop the queue)
            self.post_message(ValidationFinished(
                job, error=f"{type(exc).__name__}: {exc} (this is a bug in nnrag)", view=view))
            return
        self.post_message(ValidationFinished(job, report, g.code, view=view))

    def _call_sites(self, extraction) -> list[dict]:
        """The corpus's constructor calls for a block being validated (engine time: taken
        only when guessed arguments failed)."""
        if not self._acquire_engine(lambda: None):
            return []
        try:
            return self.extractor.call_sites(extraction) if self.index_complete else []
        finally:
            self._engine_lock.release()

    @while_mounted
    def on_validation_started(self, message: ValidationStarted) -> None:
        b = message.job.block
        self.pending[hist.block_id(b)] = "running"
        more = f"  ({message.waiting} waiting)" if message.waiting else ""
        self.library.log_pane.write(LogEntry("start", f"▶ {b.name}  {b.source} · {b.key}{more}",
                                             block=b.name))
        self._statuses_changed()

    @while_mounted
    def on_validation_stage(self, message: ValidationStage) -> None:
        self.library.log_pane.write(stage_entry(message.job.block.name, message.verdict))

    @while_mounted
    def on_validation_note(self, message: ValidationNote) -> None:
        self.library.log_pane.write(LogEntry("note", f"  · {message.text}"))

    @while_mounted
    def on_validation_finished(self, message: ValidationFinished) -> None:
        b = message.job.block
        bid = hist.block_id(b)
        self.pending.pop(bid, None)
        log = self.library.log_pane
        report = message.report
        if report is None:
            if message.error == "cancelled":
                log.write(LogEntry("note", f"■ {b.name}: cancelled"))
            else:
                log.write(LogEntry("error", f"■ {b.name}: could not be validated: "
                                   f"{message.error}", "fail", b.name))
                self.notify(message.error or "", title=f"{b.name}: not validated",
                            severity="error", timeout=8, markup=False)
        else:
            outcome = self.history.record(b, report, message.code or "")
            if outcome.validated:
                log.write(LogEntry("done", f"■ {b.name}: validated · level {outcome.level} · "
                                   f"{ms(outcome.seconds)}", "pass", b.name))
            else:
                log.write(LogEntry("done", f"■ {b.name}: not validated · {outcome.cause} · "
                                   f"{outcome.cause_summary or ''}", "fail", b.name))
            self.history_changed()
        self._statuses_changed()

    @while_mounted
    def on_validation_idle(self, message: ValidationIdle) -> None:
        self.validating = False
        for job in self.queue.clear() if message.cancelled else ():
            self.pending.pop(hist.block_id(job.block), None)
        if len(self.queue):
            self.validating = True
            self._validate()
        self._statuses_changed()
        self.refresh_bindings()

    def cancel_validation(self) -> None:
        dropped = self.queue.clear()
        for job in dropped:
            self.pending.pop(hist.block_id(job.block), None)
        self.workers.cancel_group(self, "validate")
        running = self.queue.current
        text = f"· cancelled: {len(dropped)} waiting block{'s' if len(dropped) != 1 else ''}"
        text += " dropped" + (f"; {running.block.name} finishes first" if running else "")
        self.library.log_pane.write(LogEntry("note", text))
        self._statuses_changed()
        self.refresh_bindings()

    def _statuses_changed(self) -> None:
        self.library.statuses_changed()
        triage = self._installed("triage")
        if triage is not None and triage.is_current:
            triage.pending_changed()  # type: ignore[attr-defined]

    def history_changed(self) -> None:
        """The validation history changed: redraw, and save it shortly."""
        self.library.statuses_changed()
        triage = self._installed("triage")
        if triage is not None and triage.is_mounted:
            triage.refresh_outcomes()  # type: ignore[attr-defined]
        if self._save_timer is not None:
            self._save_timer.stop()
        self._save_timer = self.set_timer(HISTORY_SAVE_DELAY, self.save_history)

    def save_history(self) -> None:
        self._save_timer = None
        if not self.history.dirty:
            return
        try:
            self.history.save()
        except OSError as exc:
            self.notify(f"cannot save the validation history {self.history.path}: "
                        f"{exc.strerror or exc}", severity="error", timeout=10, markup=False)

    def _installed(self, name: str) -> Screen | None:
        return self.get_screen(name) if self.is_screen_installed(name) else None

    def open_in_library(self, bid: str) -> None:
        """Shows the block with this id in the library (source tab, cursor on it)."""
        block = next((b for b in self.corpus.blocks if hist.block_id(b) == bid), None)
        if block is None:
            self.notify("That block is no longer in the index.", severity="warning",
                        timeout=5)
            return
        self.show_screen("library")
        self.library.reveal(block)
        self.library.show_tab("source")
        self.library.results.focus()

    # -- saving ----------------------------------------------------------------------------
    def request_save(self, blocks: list[Block]) -> None:
        """Asks, showing where; then saves in a worker."""
        root = self.registry.root
        states = [self.history.status(hist.block_id(b)) for b in blocks]
        unvalidated = [b.name for b, s in zip(blocks, states) if s != hist.VALIDATED]
        names = ", ".join(b.name for b in blocks[:6]) + (" …" if len(blocks) > 6 else "")
        title = (f"Save {blocks[0].name} to the registry?" if len(blocks) == 1 else
                 f"Save {len(blocks)} blocks to the registry?")
        body = [f"{names}\n→ {root}/<name>/v<N>/"]
        if unvalidated:
            body.append(f"Not validated: {', '.join(unvalidated[:6])}"
                        + (" …" if len(unvalidated) > 6 else "")
                        + " (saved as unvalidated; v validates first)")
        else:
            body.append("Validated: the validation run is recorded in the provenance.")
        outcomes = {hist.block_id(b): self.history.get(hist.block_id(b)) for b in blocks}

        def answer(yes: bool | None) -> None:
            if yes:
                self._save(blocks, outcomes)

        from nnrag_tui.tui.screens.dialogs import ConfirmScreen

        self.push_screen(ConfirmScreen(title, "\n".join(body), yes="Save"), answer)

    @work(thread=True, group="save", exit_on_error=False, description="saving")
    def _save(self, blocks: list[Block], outcomes: dict[str, hist.Outcome | None]) -> None:
        saved, failed = [], []
        for block in blocks:
            view = self._view(block)
            if view is None:
                break
            if isinstance(view, str) or not view.ok:
                failed.append((block, view if isinstance(view, str) else view.error or "?"))
                continue
            outcome = outcomes.get(hist.block_id(block))
            report = None
            if outcome is not None and view.code is not None and \
                    outcome.code_sha == hist.code_digest(view.code):
                report = hist.report_of(outcome)
            try:
                saved.append((block, self.registry.save(view.extraction, report,
                                                        sources=view.extraction.sources)))
            except NnragError as exc:
                failed.append((block, str(exc)))
            except OSError as exc:
                failed.append((block, f"cannot write the registry: {exc.strerror or exc}"))
        self.post_message(BlocksSaved(saved, failed))

    @while_mounted
    def on_blocks_saved(self, message: BlocksSaved) -> None:
        for block, res in message.saved:
            what = "Saved" if res.created else ("Already saved; validation recorded" if
                                                res.updated else "Already saved")
            self.notify(f"{res.file}", title=f"{what}: {res.name} {res.version}", timeout=8,
                        markup=False)
        for block, why in message.failed:
            self.notify(why, title=f"{block.name}: not saved", severity="error", timeout=10,
                        markup=False)
        registry = self._installed("registry")
        if registry is not None and registry.is_mounted:
            registry.load()  # type: ignore[attr-defined]

    def close_engine(self, timeout: float = 30.0) -> None:
        """Stops the workers, saves the history, closes the sandbox and the index once no
        worker thread uses them."""
        self.queue.clear()
        for group in ("index", "validate", "extract"):
            self.workers.cancel_group(self, group)
        if self.history.dirty:
            with contextlib.suppress(OSError):
                self.history.save()
        with contextlib.suppress(Exception):  # closing the sandbox must not fail the exit
            self.validation.close()
        if self._engine_lock.acquire(timeout=timeout):
            try:
                self.extractor.close()
            finally:
                self._engine_lock.release()

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.indexing or bool(len(self.queue)) or self.validating
        if action == "reindex":
            return None if self.indexing else True
        return True

    def action_reindex(self) -> None:
        if not self.indexing:
            self.start_index()

    def action_cancel(self) -> None:
        if self.indexing:
            self.action_cancel_index()
        if len(self.queue) or self.validating:
            self.cancel_validation()

    def action_cancel_index(self) -> None:
        if not self.indexing:
            return
        self.cancelling = True
        self.workers.cancel_group(self, "index")
        self._show_progress(Progress("wait", "", 0, 0, "cancelling…"))

    def action_triage(self) -> None:
        self.show_screen("triage")

    def action_registry(self) -> None:
        self.show_screen("registry")

    def action_stats(self) -> None:
        self.show_screen("stats")

    def action_library(self) -> None:
        self.show_screen("library")

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        keys, seen = [], set()
        # the footer's keys first, then the others (moving the cursor last)
        actives = sorted(self.screen.active_bindings.values(),
                         key=lambda a: (not a.binding.show, a.binding.id in PALETTE_SKIP))
        for active in actives:
            b = active.binding
            if b.id and b.id not in seen:
                seen.add(b.id)
                keys.append((self.get_key_display(b), b.description, b.tooltip, b.id))
        settings = (f"Settings: {self.settings.path} (theme: {self.theme}). Remap a key with "
                    '"keymap": {"<id>": "<keys>"} using the ids in brackets. Themes: '
                    f"{self.config_dir / 'themes'}.")
        self.push_screen(HelpScreen(keys, settings))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands (theme, keys, screenshot, quit), then every action that has a
        key where the palette was opened, then the ones that have none."""
        yield from super().get_system_commands(screen)
        seen = set()
        for active in screen.active_bindings.values():
            b = active.binding
            if not b.id or b.id in PALETTE_SKIP or b.id in seen or b.action == "quit":
                continue
            if not active.enabled:
                continue
            seen.add(b.id)
            key = self.get_key_display(b)
            yield SystemCommand(b.description, f"{b.tooltip}  ({key})",
                                partial(self.call_later, self.run_action, b.action,
                                        active.node))
        if screen is not self.library and not isinstance(screen, HelpScreen):
            yield SystemCommand("Library", "Back to the block library", self.action_library)
        if screen is self.library:
            if "validate.shown" not in seen and self.library.results.blocks:
                yield SystemCommand("Validate all shown", "Validate every block the results "
                                    "list", self.library.action_validate_shown)
            if self.library.results.marked:
                yield SystemCommand("Unmark all", "Unmark every marked block",
                                    self.library.action_clear_marks)
            for name, label in (("source", "Source"), ("deps", "Dependencies"),
                                ("log", "Validation log")):
                if f"tab.{name}" not in seen:
                    yield SystemCommand(f"Show {label}", f"Switch to the {label.lower()} pane",
                                        partial(self.library.action_show_tab, name))
        yield SystemCommand("Settings file", f"Where settings are kept: {self.settings.path}",
                            self._show_settings_path)

    def _show_settings_path(self) -> None:
        self.notify(f"{self.settings.path}\nthemes: {self.config_dir / 'themes'}",
                    title="Settings", timeout=10, markup=False)


def run_app(config: str | Path | None = None, cache_dir: str | Path | None = None,
            data_dir: str | Path | None = None) -> int:
    """Runs the app; a configuration error is one line on stderr and exit code 2 before the
    screen is taken over."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            extractor = BlockExtractor(config, cache_dir=cache_dir, data_dir=data_dir)
        except NnragError as exc:
            print(f"nnrag: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
    app = NnragApp(extractor=extractor, notices=[str(w.message) for w in caught])
    try:
        app.run()
    finally:
        app.close_engine()
    return app.return_code or 0

