"""The block library: repositories and categories on the left; search, status filter and
results in the middle; below them (beside them on wide terminals) the highlighted block's
regenerated source, its dependency tree and the validation log, one tab each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, Vertical
from textual.dom import DOMNode
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Header, Input, Select, TabbedContent, TabPane

from nnrag_tui.engine.facts import Block
from nnrag_tui.tui import history as hist
from nnrag_tui.tui.blockview import BlockView
from nnrag_tui.tui.messages import Corpus
from nnrag_tui.tui.search import BlockSearch
from nnrag_tui.tui.widgets.categories import CategoryList
from nnrag_tui.tui.widgets.deptree import DependencyPane
from nnrag_tui.tui.widgets.footer import QuietFooter
from nnrag_tui.tui.widgets.index_status import IndexStatus
from nnrag_tui.tui.widgets.preview import GENERATED, BlockPreview
from nnrag_tui.tui.widgets.results import ResultsTable
from nnrag_tui.tui.widgets.sources import ALL, Scope, SourcesTree
from nnrag_tui.tui.widgets.validation_log import ValidationLog

if TYPE_CHECKING:
    from nnrag_tui.tui.app import NnragApp

SEARCH_DELAY = 0.15  # seconds of quiet after a keystroke before the results are refiltered
EXTRACT_DELAY = 0.08  # the cursor rests this long before the block is regenerated
STATUS_FILTERS = (("any status", "any"), ("validated", hist.VALIDATED),
                  ("failed", hist.FAILED), ("not run", hist.NOT_RUN))
TABS = {"source": "tab-source", "deps": "tab-deps", "log": "tab-log"}


def merge_sources(configured: Sequence[str], indexed: Sequence[dict]) -> list[dict]:
    """One row per configured source, in configuration order: the index's row when it has
    one, a placeholder otherwise."""
    by_name = {r["name"]: r for r in indexed}
    return [by_name.get(n, {"name": n, "state": "not indexed yet"}) for n in configured]


def status_matches(status: str, wanted: str) -> bool:
    if wanted == "any":
        return True
    if wanted == hist.FAILED:
        return status in (hist.FAILED, hist.IGNORED)
    if wanted == hist.NOT_RUN:
        return status in (hist.NOT_RUN, "queued", "running")
    return status == wanted


class LibraryScreen(Screen[None]):
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012  (Textual declares it on Screen)
        (0, "-narrow"), (100, "-normal"), (170, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_search", "Search", key_display="/", id="search",
                tooltip="Jump to the search box (enter or escape returns to the results)"),
        Binding("j", "cursor_down", "Next", show=False, id="results.next",
                tooltip="Next block in the results"),
        Binding("k", "cursor_up", "Previous", show=False, id="results.previous",
                tooltip="Previous block in the results"),
        Binding("escape", "back_to_results", "Results", show=False, id="results.back",
                tooltip="Back to the results (from the search box or a pane)"),
        Binding("down", "leave_search", "Results", show=False, id="search.to_results",
                tooltip="From the search box, move down into the results"),
        Binding("v", "validate", "Validate", id="validate",
                tooltip="Validate the marked blocks, or the highlighted one, in the sandbox"),
        Binding("V", "validate_shown", "Validate all", show=False, id="validate.shown",
                tooltip="Validate every block the results list"),
        Binding("s", "save", "Save", id="save",
                tooltip="Save the marked blocks, or the highlighted one, to the registry"),
        Binding("u", "toggle_source", "Upstream", show=False, id="preview.toggle",
                tooltip="Switch the source between the regenerated file and the upstream "
                        "definition"),
        Binding("c", "copy_source", "Copy", show=False, id="copy",
                tooltip="Copy the source on show to the clipboard"),
        Binding("p", "show_tab('source')", "Source", show=False, id="tab.source",
                tooltip="Show the source pane"),
        Binding("d", "show_tab('deps')", "Deps", show=False, id="tab.deps",
                tooltip="Show the dependency tree"),
        Binding("l", "show_tab('log')", "Log", show=False, id="tab.log",
                tooltip="Show the validation log"),
        Binding("z", "zoom", "Zoom", show=False, id="zoom",
                tooltip="Fill the screen with the focused pane (again to restore)"),
        Binding("ctrl+u", "clear_marks", "Unmark", show=False, id="marks.clear",
                tooltip="Unmark every marked block"),
    ]

    def __init__(self, configured: Sequence[str] = ()) -> None:
        super().__init__()
        self.configured = tuple(configured)
        self.search = BlockSearch(())
        self.corpus = Corpus()
        self.roots: dict[str, dict] = {}
        self.query_text = ""
        self.category: str | None = None
        self.scope: Scope = ALL
        self.status_filter = "any"
        self._search_timer: Timer | None = None
        self._extract_timer: Timer | None = None
        self._no_block = True

    @property
    def nnrag(self) -> NnragApp:
        return cast("NnragApp", self.app)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield SourcesTree(id="sources")
                yield CategoryList(id="categories")
            with Container(id="main-area"):
                with Vertical(id="browse"):
                    with Horizontal(id="search-row"):
                        yield Input(placeholder="Search blocks  (/)", id="search")
                        yield Select(STATUS_FILTERS, value="any", allow_blank=False,
                                     id="status-filter", compact=True)
                    yield ResultsTable(id="results")
                with TabbedContent(id="detail", initial=TABS["source"]):
                    with TabPane("Source", id=TABS["source"]):
                        yield BlockPreview(id="preview")
                    with TabPane("Dependencies", id=TABS["deps"]):
                        yield DependencyPane(id="deps")
                    with TabPane("Validation", id=TABS["log"]):
                        yield ValidationLog(id="log")
        yield IndexStatus(id="index-status")
        yield QuietFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one(SourcesTree).set_sources(merge_sources(self.configured, ()))
        results = self.results
        results.border_title = "Blocks"
        results.empty_text = "No blocks yet: indexing…"
        results.status_of = self.status_of
        self.log_pane.border_title = "Validation log"
        self._log_subtitle()
        results.focus()
        self.nnrag.library_mounted()

    # -- parts -----------------------------------------------------------------------------
    @property
    def results(self) -> ResultsTable:
        return self.query_one(ResultsTable)

    @property
    def preview(self) -> BlockPreview:
        return self.query_one(BlockPreview)

    @property
    def deps(self) -> DependencyPane:
        return self.query_one(DependencyPane)

    @property
    def log_pane(self) -> ValidationLog:
        return self.query_one(ValidationLog)

    @property
    def status(self) -> IndexStatus:
        return self.query_one(IndexStatus)

    @property
    def tab(self) -> str:
        active = self.query_one(TabbedContent).active
        return next((k for k, v in TABS.items() if v == active), "source")

    def status_of(self, block: Block) -> str:
        bid = hist.block_id(block)
        pending = self.nnrag.pending.get(bid)
        return pending or self.nnrag.history.status(bid)

    # -- data ------------------------------------------------------------------------------
    def load_corpus(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.search = BlockSearch(corpus.blocks)
        self.roots = corpus.roots
        self.query_one(SourcesTree).set_sources(
            merge_sources(self.configured, corpus.sources), corpus.blocks, corpus.failures)
        known = {hist.block_id(b) for b in corpus.blocks}
        self.results.marked &= known
        self.refilter(reset_widths=True)
        self.preview.invalidate()  # re-read the source: re-indexing may have changed it
        self._show(self.results.cursor_block)

    def refilter(self, reset_widths: bool = False) -> None:
        """Applies the search text, category, scope and status filter to the results."""
        if self._search_timer is not None:
            self._search_timer.stop()
            self._search_timer = None
        scope = self.scope
        admit = None if scope.module is None else scope.admits
        found = self.search.search(self.query_text, scope.repo, admit)
        self.query_one(CategoryList).set_counts(found.counts)
        rows = self.search.select(found, self.category)
        if self.status_filter != "any":
            rows = [b for b in rows if status_matches(self.status_of(b), self.status_filter)]
        results = self.results
        results.empty_text = ("No blocks match." if len(self.search)
                              else "No blocks in the index.")
        results.set_blocks(rows, reset_widths=reset_widths)
        self._results_subtitle()

    def _results_subtitle(self) -> None:
        results = self.results
        text = f"{len(results.blocks):,} of {len(self.search):,}"
        if results.marked:
            text = f"{len(results.marked):,} marked · " + text
        results.border_subtitle = text

    def statuses_changed(self) -> None:
        """Validation outcomes changed: redraw the status column (and refilter on status)."""
        if self.status_filter != "any":
            self.refilter()
        else:
            self.results.refresh()

    def marked_blocks(self) -> list[Block]:
        marked = self.results.marked
        return [b for b in self.search.blocks if hist.block_id(b) in marked]

    def targets(self) -> list[Block]:
        """What validate and save act on: the marked blocks, else the highlighted one."""
        marked = self.marked_blocks()
        if marked:
            return marked
        block = self.results.cursor_block
        return [block] if block is not None else []

    def reveal(self, block: Block) -> bool:
        """Puts the cursor on ``block``, clearing filters that hide it; False when the index
        no longer has it."""
        same = (block.source, block.key)
        if not any((b.source, b.key) == same for b in self.search.blocks):
            return False
        if not any((b.source, b.key) == same for b in self.results.blocks):
            self.query_text = ""
            self.query_one("#search", Input).value = ""
            self.category = None
            self.query_one(CategoryList).select_category(None)
            self.scope = ALL
            self.query_one(SourcesTree).select_scope(ALL)
            self.status_filter = "any"
            self.query_one("#status-filter", Select).value = "any"
            self.refilter()
        row = next(i for i, b in enumerate(self.results.blocks) if (b.source, b.key) == same)
        self.results.move_cursor(row)
        self._show(self.results.cursor_block)
        return True

    # -- the highlighted block -------------------------------------------------------------
    def _show(self, block: Block | None) -> None:
        if block is None:
            self.preview.clear("No block matches." if len(self.search) else "No blocks yet.")
            self.deps.show_view(None, "No block selected.")
            return
        if not self.preview.show(block, self.roots):
            return
        view = self.nnrag.views.get(block)
        if view is not None:
            self.show_view(view)
            return
        self.deps.show_view(None, "Regenerating…")
        if self._extract_timer is not None:
            self._extract_timer.stop()
        self._extract_timer = self.set_timer(EXTRACT_DELAY, lambda: self._request(block))

    def _request(self, block: Block) -> None:
        self._extract_timer = None
        if self.preview.block == block:
            self.nnrag.request_view(block)

    def show_view(self, view: BlockView) -> None:
        if view.block != self.preview.block:
            return
        self.preview.set_view(view)
        self.deps.show_view(view)

    def extraction_waiting(self, block: Block) -> None:
        self.preview.set_waiting(block)
        if self.preview.block == block:
            self.deps.show_view(None, "Waiting for indexing to finish…")

    def extraction_unavailable(self, block: Block, why: str) -> None:
        self.preview.set_unavailable(block, why)
        if self.preview.block == block:
            self.deps.show_view(None, why)

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

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id != "status-filter":
            return
        event.stop()
        value = event.value if isinstance(event.value, str) else "any"
        if value != self.status_filter:
            self.status_filter = value
            self.refilter()

    def on_category_list_changed(self, event: CategoryList.Changed) -> None:
        self.category = event.category
        self.refilter()

    def on_sources_tree_changed(self, event: SourcesTree.Changed) -> None:
        self.scope = event.scope
        self.refilter()

    def on_results_table_highlighted(self, event: ResultsTable.Highlighted) -> None:
        self._show(event.block)
        if (event.block is None) != self._no_block:
            self._no_block = event.block is None
            self.refresh_bindings()  # validate and save need a block (the footer dims them)

    def on_results_table_selected(self, event: ResultsTable.Selected) -> None:
        self._show(event.block)
        self.action_show_tab("source")

    def on_results_table_marks_changed(self, event: ResultsTable.MarksChanged) -> None:
        self._results_subtitle()

    def on_validation_log_filter_changed(self, event: ValidationLog.FilterChanged) -> None:
        self._log_subtitle()

    def _log_subtitle(self) -> None:
        self.log_pane.border_subtitle = f"showing {self.log_pane.verdict} · f filters"

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_search":
            return isinstance(self.focused, Input)
        if action == "back_to_results":
            focused = self.focused
            return focused is not None and focused is not self.results and not isinstance(
                focused, Select)
        if action == "copy_source":
            return True if self.preview.source_text is not None else None
        if action in ("validate", "save", "toggle_source"):
            return True if self.results.cursor_block is not None or self.results.marked \
                else None
        if action == "validate_shown":
            return bool(self.results.blocks)
        return True

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_leave_search(self) -> None:
        self.refilter()
        self.results.focus()

    def action_back_to_results(self) -> None:
        if isinstance(self.focused, Input):
            self.refilter()
        if self.maximized is not None:
            self.minimize()
        self.results.focus()

    def action_cursor_down(self) -> None:
        self.results.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.results.action_cursor_up()

    def action_validate(self) -> None:
        blocks = self.targets()
        if blocks:
            self.nnrag.validate_blocks(blocks)

    def action_validate_shown(self) -> None:
        blocks = list(self.results.blocks)
        if not blocks:
            return
        if len(blocks) <= 20:
            self.nnrag.validate_blocks(blocks)
            return
        from nnrag_tui.tui.screens.dialogs import ConfirmScreen

        def go(yes: bool | None) -> None:
            if yes:
                self.nnrag.validate_blocks(blocks)

        self.app.push_screen(ConfirmScreen(
            f"Validate all {len(blocks):,} blocks in the results?",
            "Each takes a few seconds in the sandbox; escape cancels the rest.",
            yes="Validate"), go)

    def action_save(self) -> None:
        blocks = self.targets()
        if blocks:
            self.nnrag.request_save(blocks)

    def action_toggle_source(self) -> None:
        mode = self.preview.toggle()
        self.show_tab("source")
        self.notify("Showing the regenerated file." if mode == GENERATED else
                    "Showing the upstream definition.", timeout=2)

    def action_show_tab(self, name: str) -> None:
        """Shows a pane of the detail tabs and moves the focus into it."""
        self.show_tab(name)
        target = {"source": "#preview-scroll", "deps": "#deps-tree", "log": "#log"}[name]
        self.query_one(target).focus()

    def show_tab(self, name: str) -> None:
        self.query_one(TabbedContent).active = TABS[name]

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        # the pane around the focus: the source (with its header), the dependency pane (tree
        # and source), the log, the results...
        node: DOMNode | None = self.focused
        while node is not None and node is not self:
            if isinstance(node, (BlockPreview, DependencyPane, ValidationLog, ResultsTable,
                                 SourcesTree, CategoryList)):
                self.maximize(node, container=False)
                return
            node = node.parent

    def action_clear_marks(self) -> None:
        self.results.clear_marks()

    def action_copy_source(self) -> None:
        preview = self.preview
        text = preview.source_text
        if text is None or preview.block is None:
            return
        self.app.copy_to_clipboard(text)
        lines = text.count("\n") + 1
        what = ("regenerated file" if preview.snippet is None and preview.mode == GENERATED
                else "upstream definition" if preview.snippet is None else "source")
        self.notify(f"Copied the {what} of {preview.block.name} ({lines} lines) to the "
                    "clipboard.", timeout=3, markup=False)
