"""The category filter: "all" and the eight block categories, each with how many blocks of the
current search fall in it. The highlighted entry is the filter."""

from __future__ import annotations

from collections import Counter

from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from nnrag_tui.engine.discovery import CATEGORIES

ALL = "all"
LABEL_WIDTH = 14
LABELS = {"transformer_block": "transformer"}  # fits the narrow sidebar


def count_text(n: int) -> str:
    return f"{n:,}" if n < 10_000 else f"{n // 1000}k"


def _prompt(label: str, count: int) -> Content:
    style = "" if count else "$foreground-muted"
    return Content.assemble((f"{label:<{LABEL_WIDTH}}", style),
                            (f"{count_text(count):>5}", "$foreground-muted"))


def label(category: str) -> str:
    return LABELS.get(category, category.replace("_", " "))


class CategoryList(OptionList):
    class Changed(Message):
        """The user picked another category (``None`` is all of them)."""

        def __init__(self, category: str | None) -> None:
            super().__init__()
            self.category = category

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(*(Option(_prompt(label(c), 0), id=c)
                           for c in (ALL, *CATEGORIES)), id=id, classes=classes)
        self.category: str | None = None

    def on_mount(self) -> None:
        self.border_title = "Categories"
        self.highlighted = 0

    def set_counts(self, counts: Counter[str]) -> None:
        self.replace_option_prompt(ALL, _prompt(ALL, sum(counts.values())))
        for c in CATEGORIES:
            self.replace_option_prompt(c, _prompt(label(c), counts.get(c, 0)))

    def select_category(self, category: str | None) -> None:
        self.highlighted = self.get_option_index(category or ALL)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        picked = None if event.option_id in (None, ALL) else event.option_id
        if picked != self.category:
            self.category = picked
            self.post_message(self.Changed(picked))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
