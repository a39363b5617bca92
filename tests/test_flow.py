"""engine.flow: the names a module-level compound statement reads only after binding them
itself. A name wrongly counted there loses the statement that really binds it (an undefined
name in the generated file), so each verdict here is the conservative one Python requires."""

from __future__ import annotations

import ast
import textwrap

import pytest

from nnrag_tui.engine.flow import reads_after_own_binding


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
])
def test_reads_that_need_another_binding(code):
    assert own(code) == frozenset()
