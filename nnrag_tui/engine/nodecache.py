"""Facts of a syntax-tree node, computed once per node.

A module's tree lives as long as the index keeps the module, and each closure of its package
asks again about the same statements: which names a method reads (engine.reach), where a
statement uses a registry's name (engine.membership), which string literals it holds
(engine.modulefiles). Walked anew each time, the 571 blocks of mmpretrain, mmengine, deepspeed
and PennyLane took 128 s; most of it went into ``ast.walk``.

``per_node`` keeps a function's answer in a weak dictionary keyed by the node, so it goes with
the tree. The answer must not be changed by its users, and must not hold the node itself: a
value that refers to its key keeps the key alive, and the entry with it.
"""

from __future__ import annotations

import ast
import functools
import weakref
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def per_node(fn: Callable[[ast.AST], T]) -> Callable[[ast.AST], T]:
    """``fn``, answering once per node (see the module docstring)."""
    cache: weakref.WeakKeyDictionary[ast.AST, T] = weakref.WeakKeyDictionary()

    @functools.wraps(fn)
    def cached(node: ast.AST) -> T:
        try:
            return cache[node]
        except KeyError:
            hit = cache[node] = fn(node)
            return hit

    return cached
