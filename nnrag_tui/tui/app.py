"""``NnragApp``: owns the engine (one ``BlockExtractor``) and the indexing worker; screens show
what the engine returns. ``run_app`` is what ``nnrag`` with no command runs."""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from nnrag_tui.engine.errors import NnragError
from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.facts import IndexReport
from nnrag_tui.engine.indexer import Cancelled, Progress
from nnrag_tui.tui.messages import Corpus, CorpusLoaded, IndexProgress
from nnrag_tui.tui.screens.help import HelpScreen
from nnrag_tui.tui.screens.library import LibraryScreen

EXIT_ERROR = 2
PROGRESS_INTERVAL = 0.05  # at most 20 progress messages a second


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


def summary(report: IndexReport) -> str:
    text = (f"{report.blocks:,} blocks · {report.files:,} files: {report.parsed:,} parsed, "
            f"{report.cached:,} unchanged")
    if report.failed:
        text += f", {report.failed:,} failed to parse"
    if report.removed:
        text += f", {report.removed:,} removed"
    return text + f" · {report.seconds:.1f} s"


class NnragApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute, so subclasses elsewhere work
    TITLE = "nnrag"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit nnrag"),
        Binding("f1", "help", "Help", id="help", tooltip="Show the keys and how search works"),
        Binding("r", "reindex", "Re-index", id="reindex",
                tooltip="Re-scan the configured repositories and update the index"),
        Binding("escape", "cancel_index", "Cancel", id="cancel_index",
                tooltip="Stop indexing; what was indexed before stays usable"),
    ]

    def __init__(self, config: str | Path | None = None, *, cache_dir: str | Path | None = None,
                 data_dir: str | Path | None = None, extractor: BlockExtractor | None = None,
                 notices: Iterable[str] = ()) -> None:
        """Raises ``NnragError`` (a ``ConfigError``) for a bad configuration, before the app
        starts; engine errors after that become notifications."""
        super().__init__()
        self.extractor = extractor or BlockExtractor(config, cache_dir=cache_dir,
                                                     data_dir=data_dir)
        self.notices = tuple(notices)  # configuration warnings, shown once the app is up
        self.sub_title = self.extractor.config.origin
        self.library = LibraryScreen([s.name for s in self.extractor.config.sources])
        self.corpus = Corpus()
        self.indexing = False
        self.cancelling = False
        self._run = 0
        self._index_worker: Worker[None] | None = None
        self._engine_lock = threading.Lock()  # one thread at a time uses the extractor
        start_resource_tracker()

    def get_default_screen(self) -> Screen:
        return self.library

    def on_ready(self) -> None:
        for text in self.notices:
            self.notify(text, title="Configuration", severity="warning", timeout=10,
                        markup=False)
        self.start_index(show_cached=True)

    # -- indexing --------------------------------------------------------------------------
    def start_index(self, policy: str = "missing", show_cached: bool = False) -> None:
        self._run += 1
        self.indexing = True
        self.cancelling = False
        self.refresh_bindings()
        self.library.status.show_progress(Progress("fetch", "", 0, 0, "starting…"))
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

    @staticmethod
    def _read(ex: BlockExtractor) -> Corpus:
        return Corpus(tuple(ex.blocks()), tuple(ex.sources()), ex.store.source_roots())

    def on_index_progress(self, message: IndexProgress) -> None:
        if message.run == self._run and self.indexing and not self.cancelling:
            self.library.status.show_progress(message.progress)

    def on_corpus_loaded(self, message: CorpusLoaded) -> None:
        if message.run != self._run:
            return  # a run that was replaced by a newer one
        self.corpus = message.corpus
        self.library.load_corpus(message.corpus)
        if not message.final:
            return
        self.indexing = False
        self.refresh_bindings()
        if message.cancelled:
            self.library.status.show_message(
                f"Indexing cancelled · {len(message.corpus.blocks):,} blocks from the last "
                "complete index · r re-indexes")
            return
        report = message.report
        if report is None:
            return
        self.library.status.show_message(summary(report))
        failed = [s for s in report.sources if s.get("error")]
        for s in failed:
            self.notify(s["error"], title=f"{s['name']}: not indexed",
                        severity="error" if len(failed) == len(report.sources) else "warning",
                        timeout=10, markup=False)

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
            self.library.status.show_message(f"Indexing failed: {text}")
            self.notify(text, title="Indexing failed", severity="error", timeout=15,
                        markup=False)
        else:
            self.notify(text, title=f"{worker.description or worker.name} failed",
                        severity="error", timeout=15, markup=False)

    def close_engine(self, timeout: float = 30.0) -> None:
        """Stops indexing and closes the index once the worker thread has let go of it."""
        self.workers.cancel_group(self, "index")
        if self._engine_lock.acquire(timeout=timeout):
            try:
                self.extractor.close()
            finally:
                self._engine_lock.release()

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_index":
            return self.indexing
        if action == "reindex":
            return None if self.indexing else True
        return True

    def action_reindex(self) -> None:
        if not self.indexing:
            self.start_index()

    def action_cancel_index(self) -> None:
        if not self.indexing:
            return
        self.cancelling = True
        self.workers.cancel_group(self, "index")
        self.library.status.show_progress(Progress("wait", "", 0, 0, "cancelling…"))

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        keys, seen = [], set()
        for active in self.screen.active_bindings.values():
            b = active.binding
            if b.id and b.id not in seen:
                seen.add(b.id)
                keys.append((self.get_key_display(b), b.description, b.tooltip))
        self.push_screen(HelpScreen(keys))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "The keys and how search works", self.action_help)
        if self.indexing:
            yield SystemCommand("Cancel indexing", "Stop the running index",
                                self.action_cancel_index)
        else:
            yield SystemCommand("Re-index", "Re-scan the configured repositories",
                                self.action_reindex)
        if screen is self.library:
            yield SystemCommand("Search blocks", "Jump to the search box",
                                self.library.action_focus_search)
            if self.library.preview.source_text is not None:
                yield SystemCommand("Copy block source", "Copy the highlighted block's source",
                                    self.library.action_copy_source)


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
