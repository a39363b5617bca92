"""Triage: the blocks whose latest validation failed, grouped by cause with counts. The
highlighted failure shows its stages, diagnostics and the offending line of its regenerated
file; a failure (or a whole group) can be validated again, opened in the library, or ignored
(remembered between sessions; ignored failures have a group of their own)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Header, Static, Tree
from textual.widgets.tree import TreeNode

from nnrag_tui.tui.history import Outcome
from nnrag_tui.tui.widgets.footer import QuietFooter
from nnrag_tui.tui.widgets.preview import numbered
from nnrag_tui.tui.widgets.validation_log import ms

if TYPE_CHECKING:
    from nnrag_tui.tui.app import NnragApp

IGNORED_GROUP = "ignored"
CAUSE_HINTS = {
    "missing_external": "an imported package is not installed here",
    "not_standalone": "imports a package of the corpus instead of inlining it",
    "native_op": "needs a compiled extension, a torch.ops kernel or CUDA",
    "unresolved_name": "a name the file uses is defined nowhere in it",
    "circular_import": "an import cycle, or a definition used before it exists",
    "dynamic_registry": "a lookup by string (registry, getattr, eval) found nothing",
    "needs_arguments": "the constructor needs arguments that could not be inferred",
    "probe_shape": "forward failed on every probe input",
    "timeout": "a stage ran out of time",
    "memory_limit": "a stage ran out of memory",
    "signal": "the process crashed (a signal)",
    "syntax_newer": "the code needs a newer Python",
    "other": "anything else",
    IGNORED_GROUP: "failures you chose to ignore (i brings one back)",
}


@dataclass(frozen=True)
class TriageEntry:
    kind: str  # group | failure
    cause: str
    ids: tuple[str, ...]  # the failures' block ids (one for a failure)


class TriageTree(Tree[TriageEntry]):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"triage--count", "triage--muted",
                                            "triage--pending"}

    DEFAULT_CSS = """
    TriageTree {
        & > .triage--count { color: $text-error; text-style: bold; }
        & > .triage--muted { color: $text-muted; }
        & > .triage--pending { color: $text-warning; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("failures", id=id)
        self.show_root = False
        self.guide_depth = 2
        self.labels: dict[str, str] = {}  # block id -> detail after the name
        self.pending: dict[str, str] = {}

    def render_label(self, node: TreeNode[TriageEntry], base_style: Style,
                     style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        d = node.data
        if d is None:
            return text
        if d.kind == "group":
            text.stylize("bold")
            text.append(f"  {len(d.ids)}", self.get_component_rich_style(
                "triage--muted" if d.cause == IGNORED_GROUP else "triage--count"))
        else:
            bid = d.ids[0]
            if d.cause == IGNORED_GROUP:
                text.stylize(self.get_component_rich_style("triage--muted"))
            text.append(f"  {self.labels.get(bid, '')}",
                        self.get_component_rich_style("triage--muted"))
            if bid in self.pending:
                text.append(f" · {self.pending[bid]}",
                            self.get_component_rich_style("triage--pending"))
        return text


class TriageScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Library", id="triage.close",
                tooltip="Back to the block library"),
        Binding("r", "retry", "Retry", id="triage.retry",
                tooltip="Validate the highlighted failure again (on a group: the whole group)"),
        Binding("R", "retry_group", "Retry group", id="triage.retry_group",
                tooltip="Validate every failure of the highlighted cause again"),
        Binding("o", "open", "Open", id="triage.open",
                tooltip="Show the block in the library (source, dependencies)"),
        Binding("i", "ignore", "Ignore", id="triage.ignore",
                tooltip="Ignore the failure, or bring an ignored one back (remembered)"),
        Binding("j", "cursor_down", "Next", show=False, id="triage.next",
                tooltip="Next entry"),
        Binding("k", "cursor_up", "Previous", show=False, id="triage.previous",
                tooltip="Previous entry"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._kind: str | None = None

    @property
    def nnrag(self) -> NnragApp:
        return cast("NnragApp", self.app)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="triage-body"):
            yield TriageTree(id="triage-tree")
            with Vertical(id="triage-detail"):
                yield Static(id="triage-summary", markup=False)
                with ScrollableContainer(id="triage-scroll"):
                    yield Static(id="triage-code")
        yield QuietFooter()

    @property
    def failures_tree(self) -> TriageTree:
        return self.query_one(TriageTree)

    def on_mount(self) -> None:
        self.failures_tree.border_title = "Failures by cause"
        self.query_one("#triage-detail").border_title = "Failure"
        self.refresh_outcomes()
        self.failures_tree.focus()

    def on_screen_resume(self) -> None:
        self.refresh_outcomes()

    # -- data ------------------------------------------------------------------------------
    def groups(self) -> dict[str, list[Outcome]]:
        """Cause -> failures, most frequent cause first; ignored failures last."""
        history = self.nnrag.history
        active = history.failures(ignored=False)
        counts = Counter(o.cause or "other" for o in active)
        out: dict[str, list[Outcome]] = {}
        for cause, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            out[cause] = sorted((o for o in active if (o.cause or "other") == cause),
                                key=lambda o: (o.name.lower(), o.id))
        ignored = sorted(history.failures(ignored=True), key=lambda o: (o.name.lower(), o.id))
        if ignored:
            out[IGNORED_GROUP] = ignored
        return out

    def refresh_outcomes(self) -> None:
        """Rebuilds the tree from the history, keeping the cursor where it was."""
        tree = self.failures_tree
        current = tree.cursor_node.data if tree.cursor_node is not None else None
        expanded = {n.data.cause for n in tree.root.children
                    if n.data is not None and n.is_expanded}
        first_time = not tree.root.children
        groups = self.groups()
        tree.pending = dict(self.nnrag.pending)
        tree.labels = {}
        with self.prevent(Tree.NodeHighlighted):
            tree.clear()
            target: TreeNode[TriageEntry] | None = None
            for cause, outcomes in groups.items():
                ids = tuple(o.id for o in outcomes)
                group = tree.root.add(Text(cause), TriageEntry("group", cause, ids))
                for o in outcomes:
                    stage = (o.failed_stage or {}).get("stage", "?")
                    tree.labels[o.id] = f"{o.source} · {stage}"
                    leaf = group.add_leaf(Text(o.name), TriageEntry("failure", cause, (o.id,)))
                    if current is not None and current.kind == "failure" and \
                            current.ids == (o.id,):
                        target = leaf
                if (first_time and cause != IGNORED_GROUP) or cause in expanded or (
                        target is not None and target.parent is group):
                    group.expand()
                if current is not None and current.kind == "group" and current.cause == cause:
                    target = group
        total = sum(len(v) for k, v in groups.items() if k != IGNORED_GROUP)
        tree.border_subtitle = f"{total} failed" + (
            f" · {len(groups[IGNORED_GROUP])} ignored" if IGNORED_GROUP in groups else "")
        if target is not None:
            self.call_after_refresh(self._restore, target)
        else:
            self.call_after_refresh(self._restore, None)

    def _restore(self, node: TreeNode[TriageEntry] | None) -> None:
        tree = self.failures_tree
        if node is not None and node.tree is tree and node.line >= 0:
            tree.move_cursor(node, animate=False)
        elif tree.root.children:
            tree.cursor_line = max(0, min(tree.cursor_line, tree.last_line))
        self._show(tree.cursor_node)

    def pending_changed(self) -> None:
        self.failures_tree.pending = dict(self.nnrag.pending)
        self.failures_tree.refresh()

    # -- the detail pane -------------------------------------------------------------------
    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[TriageEntry]) -> None:
        event.stop()
        self._show(event.node)
        kind = event.node.data.kind if event.node.data is not None else None
        if kind != self._kind:
            self._kind = kind
            self.refresh_bindings()  # open needs a failure (the footer dims it on a group)

    def on_tree_node_selected(self, event: Tree.NodeSelected[TriageEntry]) -> None:
        event.stop()
        if event.node.data is not None and event.node.data.kind == "failure":
            self.action_open()

    def _show(self, node: TreeNode[TriageEntry] | None) -> None:
        summary = self.query_one("#triage-summary", Static)
        code = self.query_one("#triage-code", Static)
        detail = self.query_one("#triage-detail")
        data = node.data if node is not None else None
        if data is None:
            detail.border_title = "Failure"
            summary.update(Content.styled(
                "No failures. Validate blocks in the library (v); the ones that fail are "
                "listed here by cause.", "$text-muted"))
            code.update("")
            return
        history = self.nnrag.history
        if data.kind == "group":
            outcomes = [o for o in (history.get(i) for i in data.ids) if o is not None]
            detail.border_title = f"{data.cause} · {len(outcomes)}"
            lines = [Content.styled(CAUSE_HINTS.get(data.cause, ""), "italic")]
            if data.cause != IGNORED_GROUP:
                lines.append(Content.styled("r or R validates the whole group again",
                                            "$text-muted"))
            summary.update(Content("\n").join(lines))
            rows = [Content.assemble((f"{o.name}", "bold"), "  ",
                                     (o.cause_summary or "", "$text-error"))
                    for o in outcomes[:200]]
            code.update(Content("\n").join(rows))
            return
        o = history.get(data.ids[0])
        if o is None:
            return
        detail.border_title = o.name
        head = [Content.assemble((o.name, "bold"), "  ", (f"{o.source} · {o.key}",
                                                        "$text-muted")),
                Content.assemble(("not validated", "$text-error bold"),
                                 (f" · level {o.level} · cause {o.cause or 'other'}",
                                  "$text-muted")),
                Content.styled(o.cause_summary or "", "$text-error")]
        if data.cause == IGNORED_GROUP:
            head.append(Content.styled("ignored (i brings it back)", "$text-muted italic"))
        summary.update(Content("\n").join(head))
        code.update(failure_detail(o))
        self.query_one("#triage-scroll", ScrollableContainer).scroll_home(animate=False)

    # -- actions ---------------------------------------------------------------------------
    def _entry(self) -> TriageEntry | None:
        node = self.failures_tree.cursor_node
        return node.data if node is not None else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        entry = self._entry()
        if action in ("retry", "retry_group", "ignore"):
            return True if entry is not None else None
        if action == "open":
            return True if entry is not None and entry.kind == "failure" else None
        return True

    def action_close(self) -> None:
        self.nnrag.show_screen("library")

    def action_cursor_down(self) -> None:
        self.failures_tree.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.failures_tree.action_cursor_up()

    def action_retry(self) -> None:
        entry = self._entry()
        if entry is not None:
            self.nnrag.retry(entry.ids)

    def action_retry_group(self) -> None:
        node = self.failures_tree.cursor_node
        if node is None or node.data is None:
            return
        group = node if node.data.kind == "group" else node.parent
        if group is not None and group.data is not None:
            self.nnrag.retry(group.data.ids)

    def action_open(self) -> None:
        entry = self._entry()
        if entry is not None and entry.kind == "failure":
            self.nnrag.open_in_library(entry.ids[0])

    def action_ignore(self) -> None:
        entry = self._entry()
        if entry is None:
            return
        history = self.nnrag.history
        unignore = entry.cause == IGNORED_GROUP
        for bid in entry.ids:
            history.set_ignored(bid, not unignore)
        self.nnrag.history_changed()
        n = len(entry.ids)
        one = history.get(entry.ids[0]) if n == 1 else None
        what = one.name if one is not None else f"{n} failures"
        self.notify(f"{'No longer ignoring' if unignore else 'Ignoring'} {what}.", timeout=3)


def failure_detail(o: Outcome) -> Content:
    """The stages with verdicts and diagnostics, then the offending line in context."""
    rows: list[Content] = [Content.styled("stages", "bold")]
    for s in o.stages:
        ok = bool(s.get("ok"))
        diag = " ".join(str(s.get("diagnostics") or "").split())
        rows.append(Content.assemble(
            (f"  {s.get('stage')!s:<12}", ""),
            ("✓ ok  " if ok else "✗ FAIL", "$text-success" if ok else "$text-error bold"),
            (f" {ms(float(s.get('seconds') or 0.0)):>9}", "$text-muted"),
            (f"  {diag}" if diag else "", "" if ok else "$text-error")))
    off = o.offending
    if off:
        rows += [Content(""), Content.styled(
            f"offending line {off['line']} of the regenerated file", "bold")]
        first = off["context"][0][0]
        text = "\n".join(t for _, t in off["context"])
        rows.append(numbered(text, first, mark=off["line"]))
    tb = _traceback(o)
    if tb:
        rows += [Content(""), Content.styled("traceback", "bold"),
                 Content.styled(tb, "$text-muted")]
    return Content("\n").join(rows)


def _traceback(o: Outcome) -> str:
    failed = o.failed_stage or {}
    tb = (failed.get("detail") or {}).get("traceback")
    if not isinstance(tb, str):
        return ""
    lines = tb.rstrip().splitlines()
    return "\n".join(lines[-15:])
