"""The status line under the panes: indexing progress (files done/total and the current file)
while the index worker runs, a summary of the last run otherwise."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import ProgressBar, Static

from nnrag_tui.engine.progress import Progress


def describe(p: Progress) -> str:
    if p.phase == "fetch":
        return f"{p.source}: preparing {p.current}"
    if p.phase == "parse":
        return f"{p.source}: parsed {p.done:,}/{p.total:,} files · {p.current}"
    if p.phase == "discover":
        return "discovering blocks…"
    if p.phase == "wait":
        return p.current
    return "finishing…"


class IndexStatus(Horizontal):
    def compose(self) -> ComposeResult:
        yield Static(id="index-label", markup=False)
        yield ProgressBar(id="index-bar", show_eta=False)

    def on_mount(self) -> None:
        self.query_one(ProgressBar).display = False

    def show_progress(self, p: Progress) -> None:
        bar = self.query_one(ProgressBar)
        bar.display = True
        if p.phase == "parse" and p.total:
            bar.update(total=p.total, progress=p.done)
        else:
            bar.update(total=None)
        self.query_one("#index-label", Static).update(describe(p))

    def show_message(self, text: str | Content) -> None:
        self.query_one(ProgressBar).display = False
        self.query_one("#index-label", Static).update(text)

    @property
    def text(self) -> str:
        return str(self.query_one("#index-label", Static).content)
