"""The block library: repositories and categories on the left, search and results in the middle,
the highlighted block's source below them (beside them on wide terminals)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, Input

from nnrag_tui.tui.messages import Corpus
from nnrag_tui.tui.search import BlockSearch
from nnrag_tui.tui.widgets.categories import CategoryList
from nnrag_tui.tui.widgets.index_status import IndexStatus
from nnrag_tui.tui.widgets.preview import BlockPreview
from nnrag_tui.tui.widgets.results import ResultsTable
from nnrag_tui.tui.widgets.sources import SourcesList

SEARCH_DELAY = 0.15  # seconds of quiet after a keystroke before the results are refiltered


def merge_sources(configured: Sequence[str], indexed: Sequence[dict]) -> list[dict]:
    """One row per configured source, in configuration order: the index's row when it has
    one, a placeholder otherwise."""
    by_name = {r["name"]: r for r in indexed}
    return [by_name.get(n, {"name": n, "state": "not indexed yet"}) for n in configured]


class LibraryScreen(Screen[None]):
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [
        (0, "-narrow"), (100, "-normal"), (170, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_search", "Search", key_display="/", id="search",
                tooltip="Jump to the search box (enter or escape returns to the results)"),
        Binding("j", "cursor_down", "Next", show=False, id="results.next",
                tooltip="Next block in the results"),
        Binding("k", "cursor_up", "Previous", show=False, id="results.previous",
                tooltip="Previous block in the results"),
        Binding("escape", "back_to_results", "Results", show=False, id="results.back",
                tooltip="Back to the results (from the search box or the source)"),
        Binding("down", "leave_search", "Results", show=False, id="search.to_results",
                tooltip="From the search box, move down into the results"),
        Binding("c", "copy_source", "Copy", id="copy",
                tooltip="Copy the highlighted block's source to the clipboard"),
    ]

    def __init__(self, configured: Sequence[str] = ()) -> None:
        super().__init__()
        self.configured = tuple(configured)
        self.search = BlockSearch(())
        self.roots: dict[str, dict] = {}
        self.query_text = ""
        self.category: str | None = None
        self.repo: str | None = None
        self._search_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield SourcesList(id="sources")
                yield CategoryList(id="categories")
            with Container(id="main-area"):
                with Vertical(id="browse"):
                    yield Input(placeholder="Search blocks: name or qualified name  (/)",
                                id="search")
                    yield ResultsTable(id="results")
                yield BlockPreview(id="preview")
        yield IndexStatus(id="index-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(SourcesList).set_sources(merge_sources(self.configured, ()))
        results = self.query_one(ResultsTable)
        results.border_title = "Blocks"
        results.empty_text = "No blocks yet: indexing…"
        results.focus()

    # -- data ------------------------------------------------------------------------------
    @property
    def results(self) -> ResultsTable:
        return self.query_one(ResultsTable)

    @property
    def preview(self) -> BlockPreview:
        return self.query_one(BlockPreview)

    @property
    def status(self) -> IndexStatus:
        return self.query_one(IndexStatus)

    def load_corpus(self, corpus: Corpus) -> None:
        self.search = BlockSearch(corpus.blocks)
        self.roots = corpus.roots
        self.query_one(SourcesList).set_sources(merge_sources(self.configured, corpus.sources))
        self.refilter(reset_widths=True)
        self.preview.invalidate()  # re-read the source: re-indexing may have changed it
        if self.results.cursor_block is not None:
            self.preview.show(self.results.cursor_block, self.roots)

    def refilter(self, reset_widths: bool = False) -> None:
        """Applies the search text, category and repository to the results."""
        if self._search_timer is not None:
            self._search_timer.stop()
            self._search_timer = None
        found = self.search.search(self.query_text, self.repo)
        self.query_one(CategoryList).set_counts(found.counts)
        rows = self.search.select(found, self.category)
        results = self.results
        results.empty_text = ("No blocks match." if len(self.search)
                              else "No blocks in the index.")
        results.set_blocks(rows, reset_widths=reset_widths)
        results.border_subtitle = f"{len(rows):,} of {len(self.search):,}"

    # -- events ----------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "search":
            return
        self.query_text = event.value
        if self._search_timer is not None:
            self._search_timer.stop()
        self._search_timer = self.set_timer(SEARCH_DELAY, self.refilter)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "search":
            return
        self.query_text = event.value
        self.refilter()
        self.results.focus()

    def on_category_list_changed(self, event: CategoryList.Changed) -> None:
        self.category = event.category
        self.refilter()

    def on_sources_list_changed(self, event: SourcesList.Changed) -> None:
        self.repo = event.repo
        self.refilter()

    def on_results_table_highlighted(self, event: ResultsTable.Highlighted) -> None:
        if event.block is None:
            self.preview.clear("No block matches." if len(self.search) else
                               "No blocks yet.")
        else:
            self.preview.show(event.block, self.roots)
        self.refresh_bindings()  # copy is available only with a source on show

    def on_results_table_selected(self, event: ResultsTable.Selected) -> None:
        self.preview.show(event.block, self.roots)
        self.query_one("#preview-scroll").focus()

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_search":
            return isinstance(self.focused, Input)
        if action == "back_to_results":
            focused = self.focused
            return isinstance(focused, Input) or (
                focused is not None and focused.id == "preview-scroll")
        if action == "copy_source":
            return True if self.preview.source_text is not None else None
        return True

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_leave_search(self) -> None:
        self.refilter()
        self.results.focus()

    def action_back_to_results(self) -> None:
        if isinstance(self.focused, Input):
            self.refilter()
        self.results.focus()

    def action_cursor_down(self) -> None:
        self.results.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.results.action_cursor_up()

    def action_copy_source(self) -> None:
        preview = self.preview
        if preview.source_text is None or preview.block is None:
            return
        self.app.copy_to_clipboard(preview.source_text)
        lines = preview.source_text.count("\n") + 1
        self.notify(f"Copied {preview.block.name} ({lines} lines) to the clipboard.",
                    timeout=3, markup=False)
