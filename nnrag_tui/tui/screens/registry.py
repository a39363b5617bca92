"""The registry: the blocks saved so far (newest version of each), with the highlighted one's
file below. Open shows the file; remove (confirmed), export to a folder, copy the path.
Registry reads and writes run in a worker; errors come back as notifications."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer, Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static
from textual.worker import Worker

from nnrag_tui.engine.registry import Registry, RegistryError, SavedBlock
from nnrag_tui.tui.screens.dialogs import ConfirmScreen, PromptScreen
from nnrag_tui.tui.widgets.footer import QuietFooter
from nnrag_tui.tui.widgets.preview import numbered

if TYPE_CHECKING:
    from nnrag_tui.tui.app import NnragApp

COLUMNS = ("name", "version", "category", "repo", "validation", "saved")


def saved_age(stamp: str, now: float | None = None) -> str:
    """``saved_at`` (ISO 8601) as an age: "just now", "5 min ago", "3 days ago"."""
    try:
        t = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return stamp or "?"
    s = max(0.0, (now or time.time()) - t)
    if s < 60:
        return "just now"
    if s < 3600:
        return f"{int(s // 60)} min ago"
    if s < 86400:
        return f"{int(s // 3600)} h ago"
    return f"{int(s // 86400)} days ago"


def validation_text(row: SavedBlock) -> str:
    if row.validated is None:
        return "not validated"
    return f"validated ({row.level})" if row.validated else f"failed ({row.level})"


class RegistryScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Library", id="registry.close",
                tooltip="Back to the block library"),
        Binding("o", "open", "Open", id="registry.open",
                tooltip="Show the saved file (enter does the same)"),
        Binding("x,delete", "remove", "Remove", id="registry.remove",
                tooltip="Remove the saved block, every version (asks first)"),
        Binding("e", "export", "Export", id="registry.export",
                tooltip="Copy the saved block's files into a folder"),
        Binding("c", "copy_path", "Copy path", id="registry.copy_path",
                tooltip="Copy the saved file's path to the clipboard"),
        Binding("ctrl+r", "reload", "Reload", show=False, id="registry.reload",
                tooltip="Read the registry again"),
        Binding("j", "cursor_down", "Next", show=False, id="registry.next",
                tooltip="Next saved block"),
        Binding("k", "cursor_up", "Previous", show=False, id="registry.previous",
                tooltip="Previous saved block"),
    ]

    class Listed(Message):
        def __init__(self, rows: list[SavedBlock], root: Path) -> None:
            super().__init__()
            self.rows = rows
            self.root = root

    class Opened(Message):
        def __init__(self, name: str, version: str, path: Path, code: str) -> None:
            super().__init__()
            self.block_name = name
            self.version = version
            self.path = path
            self.code = code

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[SavedBlock] = []
        self.opened: str | None = None
        self.opened_path: Path | None = None

    @property
    def nnrag(self) -> NnragApp:
        return cast("NnragApp", self.app)

    @property
    def registry(self) -> Registry:
        return self.nnrag.registry

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="registry-body"):
            yield DataTable(id="registry-table", cursor_type="row", zebra_stripes=True)
            with Vertical(id="registry-file"):
                yield Static(id="registry-meta", markup=False)
                with ScrollableContainer(id="registry-scroll"):
                    yield Static(id="registry-code")
        yield QuietFooter()

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    def on_mount(self) -> None:
        table = self.table
        table.border_title = "Saved blocks"
        for c in COLUMNS:
            table.add_column(c, key=c)
        self.query_one("#registry-file").border_title = "File"
        self.load()
        table.focus()

    def on_screen_resume(self) -> None:
        self.load()

    # -- workers ---------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="registry", exit_on_error=False,
          description="reading the registry")
    def load(self) -> None:
        registry = self.registry
        self.post_message(self.Listed(registry.list(), registry.root))

    @work(thread=True, exclusive=True, group="registry-open", exit_on_error=False,
          description="opening a saved block")
    def _open(self, name: str) -> None:
        saved = self.registry.show(name)
        code = saved.code_path.read_text(encoding="utf-8", errors="replace")
        self.post_message(self.Opened(saved.name, saved.version, saved.code_path, code))

    @work(thread=True, group="registry-write", exit_on_error=False,
          description="removing a saved block")
    def _remove(self, name: str) -> None:
        gone = self.registry.remove(name)
        self.app.call_from_thread(
            self.notify, f"Removed {name} ({', '.join(gone)}).", timeout=4, markup=False)
        self.load()

    @work(thread=True, group="registry-write", exit_on_error=False,
          description="exporting a saved block")
    def _export(self, name: str, dest: str, force: bool) -> None:
        try:
            written = self.registry.export(name, dest, force=force)
        except RegistryError as exc:
            if not force and str(exc).startswith("refusing to overwrite"):
                self.app.call_from_thread(self._confirm_overwrite, name, dest, str(exc))
                return
            raise
        self.app.call_from_thread(
            self.notify, f"Exported {name}: " + ", ".join(str(p) for p in written[:1])
            + (f" and {len(written) - 1} more files" if len(written) > 1 else ""),
            title="Exported", timeout=8, markup=False)

    # -- messages --------------------------------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker messages do not bubble: the app's one handler reports failures."""
        self.nnrag.on_worker_state_changed(event)

    def on_registry_screen_listed(self, message: Listed) -> None:
        self.rows = message.rows
        table = self.table
        current = self.current()
        table.clear()
        for row in message.rows:
            table.add_row(row.name, f"{row.latest}" + (f" ({len(row.versions)})"
                                                       if len(row.versions) > 1 else ""),
                          row.category or "", row.repo or "", validation_text(row),
                          saved_age(row.saved_at), key=row.name)
        table.border_subtitle = f"{len(message.rows)} saved · {message.root}"
        if current is not None and current.name in {r.name for r in message.rows}:
            table.move_cursor(row=table.get_row_index(current.name))
        if not message.rows:
            self.query_one("#registry-meta", Static).update(
                Content.styled(f"Nothing saved yet. In the library, s saves the highlighted "
                               f"block to {message.root}.", "$text-muted"))
            self.query_one("#registry-code", Static).update("")
            self.opened = None
        else:
            self._open_current()

    def on_registry_screen_opened(self, message: Opened) -> None:
        current = self.current()
        if current is None or current.name != message.block_name:
            return
        self.opened = message.block_name
        self.opened_path = message.path
        self.query_one("#registry-file").border_title = f"{message.block_name} {message.version}"
        self.query_one("#registry-file").border_subtitle = str(message.path)
        self.query_one("#registry-meta", Static).update(
            f"{current.key} · {current.repo or '?'} · {validation_text(current)} · "
            f"versions: {', '.join(current.versions)}")
        self.query_one("#registry-code", Static).update(numbered(message.code.rstrip("\n"), 1))
        self.query_one("#registry-scroll", ScrollableContainer).scroll_home(animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._open_current()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def current(self) -> SavedBlock | None:
        table = self.table
        if not self.rows or table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001  (no row under the cursor)
            return None
        return next((r for r in self.rows if r.name == key), None)

    def _open_current(self) -> None:
        row = self.current()
        if row is not None and row.name != self.opened:
            self._open(row.name)

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("open", "remove", "export", "copy_path"):
            return True if self.current() is not None else None
        return True

    def action_close(self) -> None:
        self.nnrag.show_screen("library")

    def action_cursor_down(self) -> None:
        self.table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.table.action_cursor_up()

    def action_reload(self) -> None:
        self.opened = None
        self.load()

    def action_open(self) -> None:
        row = self.current()
        if row is None:
            return
        self.opened = None
        self._open(row.name)
        self.query_one("#registry-scroll", ScrollableContainer).focus()

    def action_remove(self) -> None:
        row = self.current()
        if row is None:
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.opened = None
                self._remove(row.name)

        versions = ", ".join(row.versions)
        self.app.push_screen(ConfirmScreen(
            f"Remove {row.name}?", f"Every saved version ({versions}) in {row.path.parent} "
            "is deleted.", yes="Remove", danger=True), answer)

    def action_export(self) -> None:
        row = self.current()
        if row is None:
            return

        def answer(dest: str | None) -> None:
            if dest:
                self._export(row.name, os.path.expanduser(dest), False)

        self.app.push_screen(PromptScreen(
            f"Export {row.name} {row.latest}", f"Writes {row.name}.py, its spec, provenance "
            "and requirements into this folder:", value=str(Path.cwd()), ok="Export"), answer)

    def _confirm_overwrite(self, name: str, dest: str, why: str) -> None:
        def answer(yes: bool | None) -> None:
            if yes:
                self._export(name, dest, True)

        self.app.push_screen(ConfirmScreen(f"Overwrite in {dest}?", why.split(" (use")[0],
                                           yes="Overwrite", danger=True), answer)

    def action_copy_path(self) -> None:
        row = self.current()
        if row is None:
            return
        path = str(self.opened_path if self.opened == row.name and self.opened_path
                   else row.path)
        self.app.copy_to_clipboard(path)
        self.notify(f"Copied {path}", timeout=4, markup=False)
