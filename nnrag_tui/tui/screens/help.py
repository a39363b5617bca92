"""F1 help: the keys that work where the user pressed F1, and how search matches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

SEARCH_HELP = (
    "Search matches the class name and the qualified name (pkg.module.Class): exact names "
    "first, then prefixes, substrings, and letters in order (mha finds MultiheadAttention). "
    "Several words must all match; a word with a dot or colon is a path (timm.layers)."
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f1,q", "dismiss", "Close", id="help.close",
                tooltip="Close the help screen"),
    ]

    def __init__(self, keys: Sequence[tuple[str, str, str]]) -> None:
        """``keys``: (key as displayed, what it does, longer explanation)."""
        super().__init__()
        self.keys = tuple(keys)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body") as body:
            body.border_title = "Keys"
            body.border_subtitle = "escape closes"
            yield Static(self._table(), id="help-keys")
            yield Static(Content.styled(SEARCH_HELP, "$foreground-muted"), id="help-search")

    def _table(self) -> Content:
        width = max((len(k) for k, _, _ in self.keys), default=4) + 2
        rows = []
        for key, description, tooltip in self.keys:
            rows.append(Content.assemble((f"{key:>{width}}  ", "$text-accent bold"),
                                         (f"{description:<16}", "bold"), "  ",
                                         (tooltip, "$foreground-muted")))
        return Content("\n").join(rows)
