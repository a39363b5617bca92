"""Statistics: bar charts of the blocks per repository and per category, and the validation
pass rate by category (with its Wilson 95% interval) from this app's validation results.

Everything is computed from what the app already holds (the corpus it loaded, its validation
history), so opening the screen touches neither the index nor the registry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Static

from nnrag_tui.engine import stats

if TYPE_CHECKING:
    from nnrag_tui.tui.app import NnragApp

EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(fraction: float, width: int) -> str:
    """A horizontal bar ``fraction`` (0..1) of ``width`` cells, in eighths of a cell."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    return "█" * full + (EIGHTHS[part] if part else "")


class BarChart(Widget):
    """Labelled horizontal bars; each row is (label, fraction of the longest bar, value
    text). Bars take the width that is left once labels and values are laid out."""

    DEFAULT_CSS = """
    BarChart {
        height: auto;
        border: round $border-blurred;
        padding: 0 1;
        margin: 0 0 1 0;
    }
    """

    def __init__(self, title: str, rows: Sequence[tuple[str, float, str]] = (), *,
                 style: str = "$primary", id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = title
        self.rows = list(rows)
        self.bar_style = style

    def set_rows(self, rows: Sequence[tuple[str, float, str]], subtitle: str = "") -> None:
        self.rows = list(rows)
        self.border_subtitle = subtitle
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self.rows))

    def render(self) -> Content:
        if not self.rows:
            return Content.styled("nothing to show yet", "$text-muted")
        label_w = max(len(r[0]) for r in self.rows)
        value_w = max(len(r[2]) for r in self.rows)
        width = max(4, self.content_size.width - label_w - value_w - 4)
        lines = []
        for label, fraction, value in self.rows:
            b = bar(fraction, width)
            lines.append(Content.assemble(
                (f"{label:<{label_w}}  ", "bold"), (b, self.bar_style),
                " " * (width - len(b) + 1), (f"{value:>{value_w}}", "$text-muted")))
        return Content("\n").join(lines)


class StatsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Library", id="stats.close",
                tooltip="Back to the block library"),
        Binding("r", "refresh", "Refresh", id="stats.refresh",
                tooltip="Count again (after indexing or validating)"),
        Binding("j", "scroll_down", "Down", show=False, id="stats.down",
                tooltip="Scroll down"),
        Binding("k", "scroll_up", "Up", show=False, id="stats.up", tooltip="Scroll up"),
    ]

    DEFAULT_CSS = """
    StatsScreen #stats-summary { padding: 0 1 1 1; }
    """

    @property
    def nnrag(self) -> NnragApp:
        return cast("NnragApp", self.app)

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="stats-body"):
            yield Static(id="stats-summary", markup=False)
            yield BarChart("Blocks per repository", id="stats-repos")
            yield BarChart("Blocks per category", id="stats-categories", style="$secondary")
            yield BarChart("Validation pass rate by category", id="stats-pass",
                           style="$success")
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def action_close(self) -> None:
        self.nnrag.show_screen("library")

    def action_scroll_down(self) -> None:
        self.query_one("#stats-body", VerticalScroll).scroll_down()

    def action_scroll_up(self) -> None:
        self.query_one("#stats-body", VerticalScroll).scroll_up()

    def action_refresh(self) -> None:
        rep = self.report()
        self.show(rep)

    def report(self) -> stats.StatsReport:
        """The app's corpus with its latest validation outcomes (history ids are
        ``repo|module:Qual``)."""
        app = self.nnrag
        corpus = app.corpus
        validations = {}
        history = getattr(app, "history", None)
        if history is not None:
            from nnrag_tui.tui.history import block_id

            for b in corpus.blocks:
                outcome = history.get(block_id(b))
                if outcome is not None:
                    validations[f"{b.source}:{b.key}"] = outcome
        return stats.report_for(corpus.blocks, corpus.sources, validations=validations)

    def show(self, rep: stats.StatsReport) -> None:
        d = rep.as_dict()
        total = d["blocks"]
        repos = d["repositories"]
        cats = d["categories"]
        top = max((r["blocks"] for r in repos), default=0) or 1
        self.query_one("#stats-repos", BarChart).set_rows(
            [(r["name"], r["blocks"] / top, f"{r['blocks']} ({_pct(r['blocks'], total)})")
             for r in repos], f"{total} blocks")
        top = max((c["blocks"] for c in cats), default=0) or 1
        self.query_one("#stats-categories", BarChart).set_rows(
            [(c["name"], c["blocks"] / top, f"{c['blocks']} ({_pct(c['blocks'], total)})")
             for c in cats], f"{len(cats)} categories")
        rows = []
        for c in cats:
            r = rep.validation_rate(category=c["name"])
            if r.n:
                lo, hi = r.ci
                rows.append((c["name"], r.k / r.n, (f"{r.k}/{r.n} {100 * r.k / r.n:.0f}% "
                             f"[{100 * lo:.0f}-{100 * hi:.0f}]")))
        overall = rep.validation_rate()
        self.query_one("#stats-pass", BarChart).set_rows(
            rows, f"all: {overall.text()}" if overall.n else "no validations yet")
        n = len(repos)
        lines = [f"{total} block{'s' * (total != 1)} in {n} repositor{'y' if n == 1 else 'ies'}"]
        if d["upstream_lines_per_block"]:
            u = d["upstream_lines_per_block"]
            lines.append(f"upstream lines per block: median {u['median']:g}, "
                         f"mean {u['mean']:.0f}, max {u['max']:g}")
        if overall.n:
            lines.append(f"validated: {overall.text()}")
            causes = rep.validation_causes()
            if causes:
                lines.append("failure causes: " + ", ".join(
                    f"{k} {n}" for k, n in causes.most_common(6)))
        else:
            lines.append("validated: none yet (validate blocks in the library)")
        self.query_one("#stats-summary", Static).update("\n".join(lines))


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}%" if n else "-"
