"""engine.reach: what runs when a block is built and called, for a class statement."""

from __future__ import annotations

import ast

from nnrag_tui.engine.reach import what_runs

NET = '''
class Net(Base):
    def __init__(self):
        super().__init__()
        self.fc = Linear(8, 8)

    def build_head(self):
        return build(dict(type="Tail"))

    def load(self, path):
        return read_checkpoint(path)
'''


def _class() -> ast.stmt:
    return ast.parse(NET).body[0]


def test_a_method_runs_where_the_construction_methods_call_it_or_code_elsewhere_does():
    names, calls = what_runs(_class())
    # ``__init__`` runs; ``build_head`` is called by nothing here, ``load`` by nothing at all
    assert {"Base", "Linear"} <= names and not {"build", "read_checkpoint"} & names
    assert {"fc"} <= calls
    # a base's ``__init__`` calling ``self.build_head()`` makes the override run too
    names, _ = what_runs(_class(), frozenset({"build_head"}))
    assert "build" in names and "read_checkpoint" not in names


def test_a_function_called_through_its_module_runs_by_its_chain():
    # ``registry.get(...)`` in ``__init__``: the closure's dependency is named by the chain
    node = ast.parse("class Net(Base):\n    def __init__(self):\n"
                     "        self.act = registry.get('double')()\n"
                     "    def load(self):\n        return io.read()\n").body[0]
    names, _ = what_runs(node)
    assert {"registry", "registry.get"} <= names
    assert not {"io", "io.read"} & names
