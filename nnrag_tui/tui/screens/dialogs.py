"""Small modal dialogs: a yes/no confirmation and a one-line prompt. Both answer through
``dismiss`` (``push_screen(dialog, callback)``); escape is always "no"."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(False)", "Cancel", id="dialog.no",
                tooltip="Close without doing it"),
        Binding("y", "answer(True)", "Yes", id="dialog.yes", tooltip="Do it"),
    ]

    def __init__(self, title: str, body: str | Content = "", *, yes: str = "OK",
                 no: str = "Cancel", danger: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.yes = yes
        self.no = no
        self.danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Static(Content.styled(self.title_text, "bold"), id="dialog-title")
            if self.body:
                yield Static(self.body, id="dialog-body", markup=False)
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.yes}  (y)", id="yes",
                             variant="error" if self.danger else "primary")
                yield Button(f"{self.no}  (esc)", id="no")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PromptScreen(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="prompt.cancel", tooltip="Close without "
                "doing it"),
    ]

    def __init__(self, title: str, body: str = "", value: str = "", *,
                 placeholder: str = "", ok: str = "OK") -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.value = value
        self.placeholder = placeholder
        self.ok = ok

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Static(Content.styled(self.title_text, "bold"), id="dialog-title")
            if self.body:
                yield Static(self.body, id="dialog-body", markup=False)
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.ok}  (enter)", id="yes", variant="primary")
                yield Button("Cancel  (esc)", id="no")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "yes":
            self.dismiss(self.query_one(Input).value.strip() or None)
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
