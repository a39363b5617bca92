"""F1 (or ?) help: the keys that work where the user asked, with the binding ids a settings file
remaps them by, how search matches, and where the settings live."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

SEARCH_HELP = (
    "Search matches the class name and the qualified name (pkg.module.Class): exact names "
    "first, then prefixes, substrings, and letters in order (mha finds MultiheadAttention). "
    "Several words must all match; a word with a dot or colon is a path (timm.layers)."
)
TABLE_HELP = (
    "The table's lines are the class's own lines upstream. The regenerated file, the class with "
    "every definition it needs and the provenance header, is longer: its size is under the "
    "preview."
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f1,q,question_mark", "dismiss", "Close", id="help.close",
                tooltip="Close the help screen"),
    ]

    def __init__(self, keys: Sequence[tuple[str, str, str, str]], settings: str = "") -> None:
        """``keys``: (key as displayed, what it does, longer explanation, binding id);
        ``settings``: where the settings file is, and what it holds."""
        super().__init__()
        self.keys = tuple(keys)
        self.settings = settings

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body") as body:
            body.border_title = "Keys"
            body.border_subtitle = "escape closes"
            with Grid(id="help-keys"):
                for key, description, tooltip, bid in self.keys:
                    yield Static(Content.styled(key, "$text-accent bold"), classes="help-key")
                    text = Content.assemble((description, "bold"), (f"  {bid}",
                                                                    "$text-secondary"))
                    if tooltip and tooltip != description:
                        text += Content.assemble("\n", (tooltip, "$foreground-muted"))
                    yield Static(text, classes="help-text")
            yield Static(Content.styled(SEARCH_HELP, "$foreground-muted"), id="help-search")
            yield Static(Content.styled(TABLE_HELP, "$foreground-muted"), id="help-table")
            if self.settings:
                yield Static(Content.styled(self.settings, "$foreground-muted"),
                             id="help-settings")

    @property
    def text(self) -> str:
        """The keys as plain text (for tests and copying)."""
        return "\n".join(f"{k}  {d}  {b}  {t}" for k, d, t, b in self.keys)
