"""engine.nodecache and the per-statement facts kept with it: asked again for each block of a
package, each answer is worked out once, the same as worked out anew, and goes with its tree."""

from __future__ import annotations

import ast
import gc
import weakref

import pytest

from nnrag_tui.engine.membership import parents_of, uses_of, write_only_uses
from nnrag_tui.engine.modsource import ModuleSource, rebound_beside
from nnrag_tui.engine.nodecache import per_node


def test_an_answer_is_worked_out_once_per_node_and_goes_with_its_tree():
    calls = []

    @per_node
    def names(node):
        calls.append(node)
        return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))

    tree = ast.parse("x = y + z\n")
    assert names(tree) == {"x", "y", "z"}
    assert names(tree) == {"x", "y", "z"}
    assert len(calls) == 1
    other = ast.parse("a = b\n")
    assert names(other) == {"a", "b"}
    assert len(calls) == 2
    # the answer does not keep its tree alive: the tree goes when nothing else holds it
    held = ast.parse("q = 1\n")
    assert names(held) == {"q"}
    alive = weakref.ref(held)
    del held, calls[:]
    gc.collect()
    assert alive() is None


def test_the_parents_kept_on_a_node_go_with_its_tree():
    tree = ast.parse("REG[k] = v\n")
    assert parents_of(tree)  # (the map holds the tree itself, as a parent)
    alive = weakref.ref(tree)
    del tree
    gc.collect()
    assert alive() is None


def test_parents_and_uses_answer_alike_when_asked_again():
    stmt = ast.parse("if k in REG:\n    raise ValueError(k)\nREG[k] = v\n").body
    module = ast.Module(body=stmt, type_ignores=[])
    first = write_only_uses(module, "REG")
    assert first is True
    assert write_only_uses(module, "REG") is True
    assert [type(parents_of(module)[u]).__name__ for u in uses_of(module, "REG")] == \
        ["Compare", "Subscript"]
    assert uses_of(module, "absent") == []
    # a dotted chain is a use of the chain only
    call = ast.parse("register.layer_dict['x'] = f\n")
    assert len(uses_of(call, "register.layer_dict")) == 1
    assert uses_of(call, "layer_dict") == []


def _scope_and_import(code: str, name: str):
    fn = ast.parse(code).body[0]
    imp = next(n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))
               and any((a.asname or a.name.split(".")[0]) == name for a in n.names))
    return fn, imp


@pytest.mark.parametrize("code, name, rebound", [
    # ``if fast: from .fast import impl`` beside ``else: impl = slow``
    (("def f(fast):\n    if fast:\n        from .fast import impl\n    else:\n"
      "        impl = slow\n    return impl\n"), "impl", True),
    ("def f():\n    from .fast import impl\n    return impl\n", "impl", False),
    # the same import twice binds the same
    (("def f(a):\n    if a:\n        from .fast import impl\n    else:\n"
      "        from .fast import impl\n    return impl\n"), "impl", False),
    # an import of something else under the name
    (("def f(a):\n    if a:\n        from .fast import impl\n    else:\n"
      "        from .slow import impl\n    return impl\n"), "impl", True),
    # a parameter, a nested def, ``except ... as``, ``global``
    ("def f(impl):\n    from .fast import impl\n    return impl\n", "impl", True),
    ("def f():\n    from .fast import impl\n    def impl():\n        pass\n", "impl", True),
    (("def f():\n    try:\n        from .fast import impl\n    except ImportError as impl:\n"
      "        pass\n"), "impl", True),
    ("def f():\n    global impl\n    from .fast import impl\n", "impl", True),
    # a comprehension's target is its own, and a nested function's locals are not the scope's
    ("def f(xs):\n    from .fast import impl\n    return [impl for impl in xs]\n", "impl",
     False),
    ("def f():\n    from .fast import impl\n    def g():\n        impl = 1\n    return impl\n",
     "impl", False),
    # ``import a.b`` binds ``a``
    ("def f():\n    import a.b\n    a = 1\n", "a", True),
])
def test_rebound_beside(code, name, rebound):
    fn, imp = _scope_and_import(code, name)
    assert rebound_beside(fn, imp, name) is rebound
    assert rebound_beside(fn, imp, name) is rebound  # asked again, from the kept answer


@pytest.mark.parametrize("body, name, mentioned", [
    ("    from .fast import impl\n    return impl()\n", "impl", True),
    # only on the import's own lines, or as part of a longer word: not a mention
    ("    from .fast import impl\n    return impl_x + x_impl + impl2\n", "impl", False),
    ("    from .fast import (\n        impl,\n    )\n    return 1\n", "impl", False),
    # a string or a comment mentions it too (a cautious test of use)
    ("    from .fast import impl\n    return 'impl'\n", "impl", True),
    ("    from .fast import impl  # noqa\n    pass  # impl registers itself\n", "impl", True),
])
def test_a_name_mentioned_outside_the_imports_of_a_statement(body, name, mentioned):
    ms = ModuleSource("import os\n\n\ndef f():\n" + body)
    st = ms.stmts[-1]
    assert ms.mentions_outside_imports(st, name) is mentioned
    assert ms.mentions_outside_imports(st, name) is mentioned
    assert ms.mentions_outside_imports(st, "os") is False
