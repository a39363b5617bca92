"""The validation log: what the validation worker reports, one line per stage as it comes
(stage, verdict, time, diagnostics) between a line for each block's start and its outcome.
Filterable by verdict (all lines, passed stages, failures); renders only the visible lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

FILTERS = ("all", "passed", "failed")
STAGE_WIDTH = 12


@dataclass(frozen=True)
class LogEntry:
    kind: str  # start | stage | note | done | error
    text: str
    verdict: str | None = None  # pass | fail | None (shown only unfiltered)
    block: str = ""


def ms(seconds: float) -> str:
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"


def stage_entry(block: str, verdict) -> LogEntry:
    """A ``StageVerdict`` as a log line."""
    mark = "✓ ok  " if verdict.ok else "✗ FAIL"
    diag = " ".join(str(verdict.diagnostics or "").split())
    text = f"  {verdict.stage:<{STAGE_WIDTH}}{mark} {ms(verdict.seconds):>9}"
    if diag:
        text += f"  {diag}"
    return LogEntry("stage", text, "pass" if verdict.ok else "fail", block)


class ValidationLog(ScrollView, can_focus=True):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log--pass", "log--fail", "log--muted", "log--block", "log--empty",
    }

    DEFAULT_CSS = """
    ValidationLog {
        background: $surface;
        & > .log--pass { color: $text-success; }
        & > .log--fail { color: $text-error; }
        & > .log--muted { color: $text-muted; }
        & > .log--block { color: $text-primary; text-style: bold; }
        & > .log--empty { color: $text-muted; text-style: italic; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "cycle_filter", "Filter", id="log.filter",
                tooltip="Show all lines, only passed stages, or only failures"),
    ]

    class FilterChanged(Message):
        def __init__(self, verdict: str) -> None:
            super().__init__()
            self.verdict = verdict

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: list[LogEntry] = []
        self.verdict = "all"
        self._shown: list[LogEntry] = []
        self._width = 0

    @property
    def lines(self) -> list[str]:
        """The lines on show, as text."""
        return [e.text for e in self._shown]

    def write(self, entry: LogEntry) -> None:
        self.entries.append(entry)
        if self._admits(entry):
            self._shown.append(entry)
            self._width = max(self._width, cell_len(entry.text))
            self._resize()
            self.refresh()

    def on_mount(self) -> None:
        # Anchored: the compositor keeps the newest line in view whenever the log grows or
        # its pane is laid out again (also after being hidden), until the user scrolls up;
        # scrolling back to the end anchors it again.
        self.anchor()

    def clear(self) -> None:
        self.entries.clear()
        self._apply()

    def set_filter(self, verdict: str) -> None:
        if verdict not in FILTERS:
            raise ValueError(verdict)
        self.verdict = verdict
        self._apply()
        self.post_message(self.FilterChanged(verdict))

    def action_cycle_filter(self) -> None:
        self.set_filter(FILTERS[(FILTERS.index(self.verdict) + 1) % len(FILTERS)])

    def _admits(self, e: LogEntry) -> bool:
        if self.verdict == "all":
            return True
        return e.verdict == ("pass" if self.verdict == "passed" else "fail")

    def _apply(self) -> None:
        self._shown = [e for e in self.entries if self._admits(e)]
        self._width = max((cell_len(e.text) for e in self._shown), default=0)
        self._resize()
        self.anchor()  # a new filter shows its newest lines
        self.refresh()

    def _resize(self) -> None:
        self.virtual_size = Size(self._width + 1, len(self._shown))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        row = round(self.scroll_y) + y
        if not self._shown:
            if y == 0:
                text = ("Nothing validated yet: v validates the highlighted (or marked) blocks."
                        if not self.entries else f"No {self.verdict} lines.")
                style = base + self.get_component_rich_style("log--empty")
                return Strip([Segment(text, style)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        if row >= len(self._shown):
            return Strip.blank(width, base)
        e = self._shown[row]
        cls = {"pass": "log--pass", "fail": "log--fail"}.get(e.verdict or "")
        if e.kind == "start":
            cls = "log--block"
        elif e.kind == "note" or (cls is None and e.kind != "done"):
            cls = "log--muted"
        style = base + self.get_component_rich_style(cls) if cls else base
        x = round(self.scroll_x)
        return Strip([Segment(e.text, style)]).crop_extend(x, x + width, base)
