"""engine.treewalk: the same nodes as ``ast.walk`` and ``ast.iter_child_nodes``, in the same
order. The engine's analyses keep the first match or build ordered lists from the walk, so a
different order would change generated files, not just their speed."""

from __future__ import annotations

import ast
import gc
import weakref
from pathlib import Path

from nnrag_tui.engine import treewalk

ROOT = Path(__file__).resolve().parent.parent

# Shapes whose fields hold nodes in every way the grammar has: lists of statements, of
# expressions and of optional expressions (dict unpacking's key is None), single nodes, and
# fields that hold strings, numbers or None.
SNIPPET = '''
from __future__ import annotations
import os.path as osp, sys
from . import a as b
x: int = (y := 1) + sys.maxsize
d = {**m, "k": [i for i in range(3) if i], **{}}
f"{x!r:>{width}}", b"", ..., -1.5j
@decorate(1, *args, key=2, **kw)
async def fn(a, /, b: "T" = 1, *c, d, e=2, **f) -> None:
    global g
    async with ctx() as (p, q), other:
        async for i, (j, *k) in it:
            await i
    try:
        del x[1:2:3], y.z
    except (ValueError, TypeError) as err:
        raise RuntimeError from err
    else:
        nonlocal_ = lambda *, v=1: v
    finally:
        assert x, "message"
    match cmd:
        case {"a": 1, **rest} if rest:
            pass
        case Point(x=0, y=[1, *others]) | None as p:
            yield from others
        case [mod.HEAD, _]:
            return
class C(Base, metaclass=Meta, **opts):
    attr: list[int]
    def m(self): return -self.attr @ ~1 if not self else (1, 2)[::-1]
while True:
    break
else:
    continue_ = x if x is not None and y in z or w < 1 <= 2 else y
'''


def _trees() -> list[ast.AST]:
    """The snippet and every module of the engine itself: thousands of real statements."""
    sources = [SNIPPET, *(p.read_text() for p in sorted((ROOT / "nnrag_tui").rglob("*.py")))]
    return [ast.parse(text) for text in sources]


def test_walk_gives_ast_walks_nodes_in_its_order():
    """From every node of the snippet, and from every module and statement of the engine."""
    trees = _trees()
    assert len(trees) > 50
    starts = [*ast.walk(trees[0]), *(n for tree in trees[1:] for n in ast.walk(tree)
                                      if isinstance(n, (ast.Module, ast.stmt)))]
    assert len(starts) > 10_000
    for node in starts:
        assert [id(n) for n in treewalk.walk(node)] == [id(n) for n in ast.walk(node)]


def test_children_are_iter_child_nodes_in_its_order():
    for tree in _trees():
        for node in ast.walk(tree):
            assert [id(n) for n in treewalk.children(node)] == \
                [id(n) for n in ast.iter_child_nodes(node)]


def test_a_nodes_children_are_read_before_it_is_yielded():
    """As ``ast.walk``: a caller that replaces a node's field after seeing the node does not
    change what the walk goes on to yield."""
    tree = ast.parse("f(a, b)")
    seen = []
    for node in treewalk.walk(tree):
        seen.append(type(node).__name__)
        if isinstance(node, ast.Call):
            node.args = []
    assert seen.count("Name") == 3  # f, a and b


def test_nodes_walks_once_and_gives_the_same_order_each_time():
    tree = ast.parse(SNIPPET)
    for node in ast.walk(tree):
        expected = [id(n) for n in ast.walk(node)]
        assert [id(n) for n in treewalk.nodes(node)] == expected
        assert [id(n) for n in treewalk.nodes(node)] == expected  # from what it kept


def test_what_nodes_keeps_goes_with_the_tree_without_a_collection():
    """The kept nodes must not refer back to the node they are kept on: a tree dropped by the
    index would then wait for the cyclic collector, or live on."""
    tree = ast.parse(SNIPPET)
    for node in ast.walk(tree):
        list(treewalk.nodes(node))
    gone = weakref.ref(tree.body[-1])
    was = gc.isenabled()
    gc.disable()
    try:
        del tree, node
        assert gone() is None
    finally:
        if was:
            gc.enable()
