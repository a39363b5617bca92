"""The footer, recomposed once for a burst of binding changes.

Textual's ``Footer`` rebuilds all its keys each time the screen's bindings change, and they
change several times in a row (a focus move, a worker starting, a cursor landing on a block):
each rebuild re-styles a dozen widgets. This one waits until the burst is over.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class QuietFooter(Footer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._due: Screen | None = None

    def bindings_changed(self, screen: Screen) -> None:
        if self._due is None:
            self.call_later(self._rebuild)
        self._due = screen

    def _rebuild(self) -> None:
        screen, self._due = self._due, None
        if screen is not None:
            super().bindings_changed(screen)
