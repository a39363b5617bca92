"""engine.flow: the names a module-level compound statement reads only after binding them
itself. A name wrongly counted there loses the statement that really binds it (an undefined
name in the generated file), so each verdict here is the conservative one Python requires."""

from __future__ import annotations

import ast
import textwrap

import pytest

from nnrag_tui.engine.flow import definitely_bound, reads_after_own_binding


def own(code: str) -> frozenset[str]:
    return reads_after_own_binding(ast.parse(textwrap.dedent(code)).body[0])


@pytest.mark.parametrize("code, expected", [
    # each handler reads its own ``as`` name (torch_geometric.typing, diffusers)
    ("try:\n    import fast\nexcept ImportError as e:\n    REASON = str(e)\n", {"e"}),
    # the try body's own import, then its use
    ("try:\n    import fast\n    KIND = fast.kind\nexcept ImportError:\n    KIND = None\n",
     {"fast"}),
    # bound on both arms of an if: read after it, but inside the if only after its own arm
    ("if FLAG:\n    X = 1\n    Y = X\nelse:\n    X = 2\n", {"X"}),
    # a loop target inside the loop
    ("for i in range(3):\n    TABLE[i] = i\n", {"i"}),
    # a with target inside the with
    ("with open(P) as f:\n    DATA = f.read()\n", {"f"}),
    # bound by the try body and by its handler: bound after the try
    (("if FLAG:\n    try:\n        import fast\n    except ImportError:\n        fast = None\n"
      "    KIND = fast\n"), {"fast"}),
    # the arm that raises never reaches the read
    ("if FLAG:\n    if A:\n        X = 1\n    else:\n        raise ValueError\n    Y = X\n",
     {"X"}),
])
def test_reads_after_the_statements_own_binding(code, expected):
    assert own(code) == expected


@pytest.mark.parametrize("code", [
    # read before it is bound: the earlier binding elsewhere is what it reads
    "if FLAG:\n    X = X + 1\n",
    "try:\n    X += 1\nexcept NameError:\n    X = 0\n",
    # the handler may run before the try body bound it
    "try:\n    import fast\nexcept ImportError:\n    print(fast)\n",
    # bound on one arm only, read after the if (inside a later nested statement)
    "if FLAG:\n    if A:\n        X = 1\n    print(X)\n",
    # read inside a function: runs later, any statement may have rebound it
    ("try:\n    import fast\n    def go():\n        return fast.run()\nexcept ImportError:\n"
     "    pass\n"),
    # after a loop that may not run
    "if FLAG:\n    for i in range(N):\n        pass\n    LAST = i\n",
    # the walrus binds mid-expression: not tracked
    "if (n := 3):\n    SIZE = n\n",
    # a handler that does not bind it and goes on
    ("if FLAG:\n    try:\n        import fast\n    except ImportError:\n        pass\n"
     "    KIND = fast\n"),
])
def test_reads_that_need_another_binding(code):
    assert own(code) == frozenset()


@pytest.mark.parametrize("code, expected", [
    ("import os\nX = 1\n", {"os", "X"}),
    # both arms, or the arm that goes on
    ("if A:\n    X = 1\nelse:\n    X = 2\n", {"X"}),
    ("if A:\n    X = 1\nelse:\n    raise ImportError\n", {"X"}),
    ("if A:\n    X = 1\n", set()),
    # brevitas: bound only in a handler under an if
    (("try:\n    load()\n    OK = True\nexcept Exception as e:\n    if V:\n        msg = str(e)\n"
      "    OK = False\n"), {"OK"}),
    ("try:\n    import np\nexcept ImportError:\n    np = None\n", {"np"}),
    ("try:\n    import np\nexcept ImportError:\n    raise\n", {"np"}),
    ("try:\n    import np\nfinally:\n    DONE = 1\n", {"np", "DONE"}),
    # a loop may not run; del removes
    ("for i in range(N):\n    last = i\n", set()),
    ("X = 1\nY = 2\ndel X\n", {"Y"}),
    # a def or class binds its name; what its body binds is not the module's (its body is not
    # walked: tensordict's ten-thousand-line classes)
    ("class A:\n    X = 1\n\n\ndef f():\n    global Y\n    Y = 1\n", {"A", "f"}),
    ("if A:\n    class C:\n        pass\nelse:\n    def C():\n        pass\n", {"C"}),
    ("@register\ndef g():\n    pass\n", {"g"}),
])
def test_definitely_bound(code, expected):
    assert definitely_bound(ast.parse(code).body) == expected
