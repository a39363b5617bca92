"""The dependency pane: the block's closure as a tree (the target, what it uses, what those use
...) beside the source of the highlighted node. Each node shows what the name is, how the
resolver found it and with what confidence; external imports are grouped under one node and
unresolved names are in the error colour. Children are added when a node opens."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer
from textual.content import Content
from textual.message import Message
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from nnrag_tui.tui.blockview import BlockView
from nnrag_tui.tui.dependencies import DependencyGraph, DepNode, Snippet, confidence_text
from nnrag_tui.tui.widgets.preview import snippet_content

if TYPE_CHECKING:
    from nnrag_tui.engine.closure import NodeId


class DependencyTree(Tree[DepNode]):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "deps--kind", "deps--how", "deps--unresolved", "deps--muted", "deps--import",
    }

    DEFAULT_CSS = """
    DependencyTree {
        & > .deps--kind { color: $text-accent; }
        & > .deps--how { color: $text-muted; }
        & > .deps--unresolved { color: $text-error; text-style: bold; }
        & > .deps--muted { color: $text-muted; }
        & > .deps--import { color: $text-secondary; }
    }
    """

    class Picked(Message):
        """The highlighted node changed: its source (None when it has none)."""

        def __init__(self, snippet: Snippet | None, node: DepNode | None) -> None:
            super().__init__()
            self.snippet = snippet
            self.dep = node

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("dependencies", id=id)
        self.graph: DependencyGraph | None = None
        self.guide_depth = 2

    def show_graph(self, graph: DependencyGraph | None, message: str = "") -> None:
        self.graph = graph
        self.clear()
        if graph is None:
            self.root.set_label(Text(message or "no dependency tree"))
            self.root.data = None
            self.root.allow_expand = False
            self.post_message(self.Picked(None, None))
            return
        self.root.data = graph.root
        self.root.set_label(Text(graph.root.name))
        self.root.allow_expand = True
        self._fill(self.root)
        self.root.expand()
        self.move_cursor(self.root, animate=False)
        self.post_message(self.Picked(graph.source(graph.root), graph.root))

    def _fill(self, node: TreeNode[DepNode]) -> None:
        graph = self.graph
        data = node.data
        if graph is None or data is None or node.children:
            return
        ancestors: set[NodeId] = set()
        p: TreeNode[DepNode] | None = node
        while p is not None:
            if p.data is not None:
                ancestors.update(p.data.nodes)
            p = p.parent
        for child in graph.children(data):
            cycle = bool(child.nodes) and set(child.nodes) <= ancestors
            label = child.target if child.kind == "import" else child.name
            # only what uses something gets an arrow
            opens = child.expandable and not cycle and bool(graph.children(child))
            node.add(Text(f"{label} ↻" if cycle else label), child, allow_expand=opens)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[DepNode]) -> None:
        event.stop()
        self._fill(event.node)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[DepNode]) -> None:
        event.stop()
        data = event.node.data
        if self.graph is None or data is None:
            return
        self.post_message(self.Picked(self.graph.source(data), data))

    def on_tree_node_selected(self, event: Tree.NodeSelected[DepNode]) -> None:
        event.stop()

    def render_label(self, node: TreeNode[DepNode], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        d = node.data
        if d is None:
            return text
        if d.kind == "unresolved":
            text.stylize(self.get_component_rich_style("deps--unresolved"))
            text.append("  unresolved", self.get_component_rich_style("deps--unresolved"))
            if d.target:
                text.append(f" in {d.target}", self.get_component_rich_style("deps--muted"))
            return text
        if d.kind == "externals":
            text.append(f"  {len(d.items)} import{'s' if len(d.items) != 1 else ''}",
                        self.get_component_rich_style("deps--muted"))
            return text
        if d.kind == "import":
            text.stylize(self.get_component_rich_style("deps--import"))
        text.append(f"  {d.kind}", self.get_component_rich_style("deps--kind"))
        how = d.how + (f" {confidence_text(d.confidence)}" if d.confidence is not None
                       else "")
        text.append(f" · {how}", self.get_component_rich_style("deps--how"))
        return text


class DependencyPane(Horizontal):
    """The tree and, beside it, the highlighted node's source."""

    ALLOW_MAXIMIZE = True

    def compose(self) -> ComposeResult:
        yield DependencyTree(id="deps-tree")
        with ScrollableContainer(id="deps-scroll"):
            yield Static(id="deps-code")

    @property
    def dep_tree(self) -> DependencyTree:
        return self.query_one(DependencyTree)

    def on_mount(self) -> None:
        self.show_view(None, "Select a block to see what it depends on.")

    def show_view(self, view: BlockView | None, message: str = "") -> None:
        if view is not None and view.graph is not None:
            self.dep_tree.show_graph(view.graph)
        else:
            why = message or (view.error if view is not None else "") or ""
            self.dep_tree.show_graph(None, why)

    def on_dependency_tree_picked(self, event: DependencyTree.Picked) -> None:
        code = self.query_one("#deps-code", Static)
        scroll = self.query_one("#deps-scroll", ScrollableContainer)
        if event.snippet is None:
            scroll.border_title = ""
            scroll.border_subtitle = ""
            code.update(Content.styled("" if event.dep is None else "no source to show",
                                       "$foreground-muted"))
        else:
            scroll.border_title = event.snippet.title
            scroll.border_subtitle = event.snippet.where
            code.update(snippet_content(event.snippet))
        scroll.scroll_home(animate=False)
