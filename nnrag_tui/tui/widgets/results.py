"""The results table: one row per block (name, category, repository, the class's own lines
upstream, validation status, module), a mark column for acting on several blocks at once.

A Line API widget that renders only the visible rows, so replacing 20k rows is a list
assignment. (Textual's DataTable measures every cell when rows change: 20k rows cost about
4 s to show and 60 ms a cursor move, which is what this widget avoids.) Columns that do not fit
are left out, module first, then repository, then lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from nnrag_tui.engine.facts import Block
from nnrag_tui.tui.history import block_id

GAP = 2
MARK_WIDTH = 2
MIN_NAME = 12
MIN_MODULE = 12
STATUS_STYLES = {"validated": "results--validated", "failed": "results--failed",
                 "ignored": "results--ignored", "running": "results--pending",
                 "queued": "results--pending", "not run": "results--not-run"}


@dataclass(frozen=True)
class Column:
    label: str
    cap: int  # widest it grows to
    right: bool = False

    def cell(self, value: str, width: int) -> str:
        if cell_len(value) > width:
            value = set_cell_size(value, width - 1) + "…"
        pad = width - cell_len(value)
        return " " * pad + value if self.right else value + " " * pad


NAME = Column("name", 30)
CATEGORY = Column("category", 17)
REPO = Column("repo", 16)
LINES = Column("lines", 6, right=True)
STATUS = Column("status", 9)
MODULE = Column("module", 200)
FIXED = (CATEGORY, REPO, LINES, STATUS)
DROP_ORDER = (REPO, LINES)  # after the module, when even the name has no room


def _value(col: Column, block: Block, status: str) -> str:
    if col is NAME:
        return block.name
    if col is CATEGORY:
        return block.category
    if col is REPO:
        return block.source
    if col is LINES:
        return str(block.lines)
    if col is STATUS:
        return status
    return block.module


class ResultsTable(ScrollView, can_focus=True):
    """Blocks, one per row, with a row cursor. Posts ``Highlighted`` when the block under the
    cursor changes, ``Selected`` on enter or a click on the highlighted row, ``MarksChanged``
    when space marks or unmarks a row."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "results--header",
        "results--cursor",
        "results--odd",
        "results--module",
        "results--empty",
        "results--mark",
        "results--validated",
        "results--failed",
        "results--ignored",
        "results--pending",
        "results--not-run",
    }

    DEFAULT_CSS = """
    ResultsTable {
        background: $surface;
        & > .results--header { color: $text-primary; text-style: bold; }
        & > .results--module { color: $text-muted; }
        & > .results--odd { background: $surface-lighten-1 20%; }
        & > .results--empty { color: $text-muted; text-style: italic; }
        & > .results--mark { color: $text-accent; text-style: bold; }
        & > .results--validated { color: $text-success; }
        & > .results--failed { color: $text-error; }
        & > .results--ignored { color: $text-muted; text-style: strike; }
        & > .results--pending { color: $text-warning; }
        & > .results--not-run { color: $text-muted; }
        & > .results--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .results--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "cursor_down", "Next", show=False, id="results.down",
                tooltip="Move to the next block"),
        Binding("up", "cursor_up", "Previous", show=False, id="results.up",
                tooltip="Move to the previous block"),
        Binding("pagedown", "page_down", "Page down", show=False, id="results.page_down",
                tooltip="Move one page down"),
        Binding("pageup", "page_up", "Page up", show=False, id="results.page_up",
                tooltip="Move one page up"),
        Binding("home", "first", "First", show=False, id="results.first",
                tooltip="Move to the first block"),
        Binding("end", "last", "Last", show=False, id="results.last",
                tooltip="Move to the last block"),
        Binding("enter", "select", "Open", show=False, id="results.select",
                tooltip="Open the highlighted block's source"),
        Binding("space", "toggle_mark", "Mark", show=False, id="results.mark",
                tooltip="Mark or unmark the block (validate and save act on marked blocks)"),
    ]

    class Highlighted(Message):
        def __init__(self, table: ResultsTable, block: Block | None) -> None:
            super().__init__()
            self.table = table
            self.block = block

        @property
        def control(self) -> ResultsTable:
            return self.table

    class Selected(Message):
        def __init__(self, table: ResultsTable, block: Block) -> None:
            super().__init__()
            self.table = table
            self.block = block

        @property
        def control(self) -> ResultsTable:
            return self.table

    class MarksChanged(Message):
        def __init__(self, table: ResultsTable) -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> ResultsTable:
            return self.table

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.blocks: tuple[Block, ...] = ()
        self.cursor_row = 0
        self.empty_text = "No blocks yet."
        self.status_of: Callable[[Block], str] = lambda block: "not run"
        self.marked: set[str] = set()  # block ids
        self._widths = self._label_widths()
        self._announced: Block | None = None

    @staticmethod
    def _label_widths() -> dict[Column, int]:
        return {c: len(c.label) for c in (NAME, *FIXED)} | {STATUS: STATUS.cap}

    # -- data ------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.blocks)

    @property
    def cursor_block(self) -> Block | None:
        if 0 <= self.cursor_row < len(self.blocks):
            return self.blocks[self.cursor_row]
        return None

    def set_blocks(self, blocks: Sequence[Block], *, reset_widths: bool = False) -> None:
        """Shows ``blocks``. The cursor stays on the same block when it is still listed."""
        rows = tuple(blocks)
        if rows == self.blocks and not reset_widths:
            return
        current = self.cursor_block
        if reset_widths:
            self._widths = self._label_widths()
        for col in (NAME, CATEGORY, REPO, LINES):
            widest = max((len(_value(col, b, "")) for b in rows), default=0)
            self._widths[col] = min(col.cap, max(self._widths[col], widest))
        self.blocks = rows
        row = 0
        if current is not None:  # the same class, even if re-indexing moved its lines
            same = (current.source, current.key)
            row = next((i for i, b in enumerate(rows) if (b.source, b.key) == same), 0)
        self.virtual_size = Size(self._min_width(), len(rows) + 1)
        self.scroll_to(y=0, animate=False, immediate=True)
        self._move(row, force_scroll=True)
        self.refresh()

    def toggle_mark(self, block: Block) -> None:
        bid = block_id(block)
        if bid in self.marked:
            self.marked.discard(bid)
        else:
            self.marked.add(bid)
        self.refresh()
        self.post_message(self.MarksChanged(self))

    def clear_marks(self) -> None:
        if self.marked:
            self.marked.clear()
            self.refresh()
            self.post_message(self.MarksChanged(self))

    # -- cursor ----------------------------------------------------------------------------
    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def move_cursor(self, row: int) -> None:
        self._move(row)

    def _move(self, row: int, force_scroll: bool = False) -> None:
        row = max(0, min(row, len(self.blocks) - 1))
        old = self.cursor_row
        self.cursor_row = row
        top = round(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + self._page:
            self.scroll_to(y=row - self._page + 1, animate=False, immediate=True)
        elif force_scroll or old != row:
            self.refresh()
        block = self.cursor_block
        if block is not self._announced:
            self._announced = block
            self.post_message(self.Highlighted(self, block))

    def action_cursor_down(self) -> None:
        self._move(self.cursor_row + 1)

    def action_cursor_up(self) -> None:
        self._move(self.cursor_row - 1)

    def action_page_down(self) -> None:
        self._move(self.cursor_row + self._page)

    def action_page_up(self) -> None:
        self._move(self.cursor_row - self._page)

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self.blocks) - 1)

    def action_select(self) -> None:
        block = self.cursor_block
        if block is not None:
            self.post_message(self.Selected(self, block))

    def action_toggle_mark(self) -> None:
        block = self.cursor_block
        if block is not None:
            self.toggle_mark(block)
            self._move(self.cursor_row + 1)

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        row = round(self.scroll_y) + offset.y - 1
        if not 0 <= row < len(self.blocks):
            return
        if offset.x + round(self.scroll_x) < MARK_WIDTH:
            self.toggle_mark(self.blocks[row])
            self._move(row)
            return
        again = row == self.cursor_row
        self._move(row)
        if again or event.chain > 1:
            self.action_select()

    # -- rendering -------------------------------------------------------------------------
    def _min_width(self) -> int:
        """The narrowest the table gets (every column but the module left out, name at its
        minimum); below that it scrolls sideways."""
        return MARK_WIDTH + min(self._widths[NAME], MIN_NAME) + GAP + self._widths[CATEGORY] \
            + GAP + self._widths[STATUS]

    def _layout(self) -> list[tuple[Column, int]]:
        """The columns that fit and their widths. Name and module share what the fixed
        columns leave, the name first (the module shows in the source pane too); with no room
        for a module, it goes, then the repository, then the lines."""
        w = self._widths
        width = self.scrollable_content_region.width - MARK_WIDTH
        fixed = list(FIXED)

        def room() -> int:
            return width - sum(w[c] + GAP for c in fixed)

        name = w[NAME]
        if room() >= min(name, MIN_NAME) + GAP + MIN_MODULE:
            name = max(min(name, MIN_NAME), min(name, room() - GAP - MIN_MODULE))
            module = max(MIN_MODULE, room() - name - GAP)
            return [(NAME, name), *((c, w[c]) for c in fixed), (MODULE, module)]
        for col in DROP_ORDER:
            if room() >= min(name, MIN_NAME):
                break
            fixed.remove(col)
        name = max(min(name, MIN_NAME), min(name, room()))
        return [(NAME, name), *((c, w[c]) for c in fixed)]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        layout = self._layout()
        if y == 0:
            style = base + self.get_component_rich_style("results--header")
            text = " " * MARK_WIDTH + (" " * GAP).join(col.cell(col.label, w)
                                                         for col, w in layout)
            return self._finish([Segment(text, style)], width, style)
        row = round(self.scroll_y) + y - 1
        if row >= len(self.blocks):
            if row == 0 and self.empty_text:
                style = base + self.get_component_rich_style("results--empty")
                return self._finish([Segment(" " * MARK_WIDTH + self.empty_text, style)],
                                    width, base, crop=False)
            return Strip.blank(width, base)
        style = base
        if row % 2:
            style += self.get_component_rich_style("results--odd")
        cursor = row == self.cursor_row
        if cursor:
            style += self.get_component_rich_style("results--cursor")
        block = self.blocks[row]
        status = self.status_of(block)
        marked = block_id(block) in self.marked
        segments = [Segment("● " if marked else "  ",
                            style + self.get_component_rich_style("results--mark"))]
        for k, (col, w) in enumerate(layout):
            cell = col.cell(_value(col, block, status), w)
            if k < len(layout) - 1:
                cell += " " * GAP
            cell_style = style
            if not cursor and col is MODULE:
                cell_style = style + self.get_component_rich_style("results--module")
            elif col is STATUS:
                cell_style = style + self.get_component_rich_style(
                    STATUS_STYLES.get(status, "results--not-run"))
            segments.append(Segment(cell, cell_style))
        return self._finish(segments, width, style)

    def _finish(self, segments: list[Segment], width: int, style: Style,
                crop: bool = True) -> Strip:
        strip = Strip(segments)
        x = round(self.scroll_x) if crop else 0
        return strip.crop_extend(x, x + width, style)
