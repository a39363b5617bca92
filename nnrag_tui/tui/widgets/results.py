"""The results table: one row per block (name, category, repository, lines, module).

A Line API widget that renders only the visible rows, so replacing 20k rows is a list
assignment. (Textual's DataTable measures every cell when rows change: 20k rows cost about
4 s to show and 60 ms a cursor move, which is what this widget avoids.)
"""

from __future__ import annotations

from collections.abc import Sequence
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

GAP = 2
MIN_NAME = 12
MIN_MODULE = 12
MODULE_ROOM = 24  # the module column gets this much before the name column shrinks


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
MODULE = Column("module", 200)


def _cells(block: Block) -> tuple[str, str, str, str, str]:
    return (block.name, block.category, block.source, str(block.lines), block.module)


class ResultsTable(ScrollView, can_focus=True):
    """Blocks, one per row, with a row cursor. Posts ``Highlighted`` when the block under the
    cursor changes and ``Selected`` on enter or a click on the highlighted row."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "results--header",
        "results--cursor",
        "results--odd",
        "results--module",
        "results--empty",
    }

    DEFAULT_CSS = """
    ResultsTable {
        background: $surface;
        & > .results--header { color: $text-primary; text-style: bold; }
        & > .results--module { color: $text-muted; }
        & > .results--odd { background: $surface-lighten-1 20%; }
        & > .results--empty { color: $text-muted; text-style: italic; }
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

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.blocks: tuple[Block, ...] = ()
        self.cursor_row = 0
        self.empty_text = "No blocks yet."
        self._widths = {c: len(c.label) for c in (NAME, CATEGORY, REPO, LINES)}
        self._announced: Block | None = None

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
            self._widths = {c: len(c.label) for c in (NAME, CATEGORY, REPO, LINES)}
        for col, value in ((NAME, lambda b: b.name), (CATEGORY, lambda b: b.category),
                           (REPO, lambda b: b.source), (LINES, lambda b: str(b.lines))):
            widest = max((len(value(b)) for b in rows), default=0)
            self._widths[col] = min(col.cap, max(self._widths[col], widest))
        self.blocks = rows
        row = 0
        if current is not None:  # the same class, even if re-indexing moved its lines
            same = (current.source, current.key)
            row = next((i for i, b in enumerate(rows) if (b.source, b.key) == same), 0)
        self.virtual_size = Size(self._fixed_width() + MIN_MODULE, len(rows) + 1)
        self.scroll_to(y=0, animate=False, immediate=True)
        self._move(row, force_scroll=True)
        self.refresh()

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

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        row = round(self.scroll_y) + offset.y - 1
        if not 0 <= row < len(self.blocks):
            return
        again = row == self.cursor_row
        self._move(row)
        if again or event.chain > 1:
            self.action_select()

    # -- rendering -------------------------------------------------------------------------
    def _fixed_width(self) -> int:
        """The narrowest the columns get; below that the table scrolls sideways."""
        w = self._widths
        return w[CATEGORY] + w[REPO] + w[LINES] + GAP * 4 + min(w[NAME], MIN_NAME)

    def _layout(self) -> list[tuple[Column, int]]:
        """Name and module share what the fixed columns leave; the name shrinks (to
        ``MIN_NAME``) before the module drops under ``MODULE_ROOM``."""
        w = self._widths
        room = (self.scrollable_content_region.width
                - (w[CATEGORY] + w[REPO] + w[LINES] + GAP * 4))
        name = w[NAME]
        if room < name + MODULE_ROOM:
            name = max(min(name, MIN_NAME), min(name, room - MODULE_ROOM))
        module = max(MIN_MODULE, room - name)
        return [(NAME, name), (CATEGORY, w[CATEGORY]), (REPO, w[REPO]), (LINES, w[LINES]),
                (MODULE, module)]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        layout = self._layout()
        if y == 0:
            style = base + self.get_component_rich_style("results--header")
            text = (" " * GAP).join(col.cell(col.label, w) for col, w in layout)
            return self._finish([Segment(text, style)], width, style)
        row = round(self.scroll_y) + y - 1
        if row >= len(self.blocks):
            if row == 0 and self.empty_text:
                style = base + self.get_component_rich_style("results--empty")
                return self._finish([Segment(self.empty_text, style)], width, base, crop=False)
            return Strip.blank(width, base)
        style = base
        if row % 2:
            style += self.get_component_rich_style("results--odd")
        if row == self.cursor_row:
            style += self.get_component_rich_style("results--cursor")
            module_style = style
        else:
            module_style = style + self.get_component_rich_style("results--module")
        values = _cells(self.blocks[row])
        head = (" " * GAP).join(col.cell(v, w) for (col, w), v in zip(layout[:-1], values[:-1]))
        col, w = layout[-1]
        segments = [Segment(head + " " * GAP, style), Segment(col.cell(values[-1], w),
                                                              module_style)]
        return self._finish(segments, width, style)

    def _finish(self, segments: list[Segment], width: int, style: Style,
                crop: bool = True) -> Strip:
        strip = Strip(segments)
        x = round(self.scroll_x) if crop else 0
        return strip.crop_extend(x, x + width, style)
