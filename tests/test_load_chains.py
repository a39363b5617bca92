"""Which ``mod.X`` chains a statement reads while its module executes (engine.modsource's
``load_time_chains``). torchquantum's ``class QuantumModule`` reads ``tq.QuantumDevice`` in an
argument's annotation as it is made and ``tq.op_name_dict`` only in a method; both had been
taken as needed at load, which made the class and the package's table of gates a cycle,
broken with 60 gate classes above their base (golden case ``load_chains``)."""

import ast

from nnrag_tui.engine.modsource import all_chains, load_time_chains

SRC = '''\
@q.register(q.KIND)
class Op(q.Base, metaclass=q.Meta):
    scale = q.DEFAULT
    pick = lambda self, k=q.FALLBACK: q.table[k]
    size: q.Size = 3

    def run(self, dev: q.Device, name=q.NAME) -> q.Out:
        return q.op_table[name]

    def later(self, hint: "q.Hint"):
        return [q.item for _ in range(2)]
'''


def _chains(src: str, lazy_annotations: bool = False) -> set[str]:
    return load_time_chains(ast.parse(src).body[0], "q", lazy_annotations)


def test_bodies_of_functions_and_lambdas_are_not_read_at_load():
    assert _chains(SRC) == {"q.register", "q.KIND", "q.Base", "q.Meta", "q.DEFAULT",
                            "q.FALLBACK", "q.Size", "q.Device", "q.NAME", "q.Out"}
    # the others are chains of the statement all the same
    assert {"q.table", "q.op_table", "q.item", "q.Hint"} <= all_chains(
        ast.parse(SRC).body[0], "q")


def test_annotations_under_future_annotations_are_not_read_at_load():
    assert _chains(SRC, lazy_annotations=True) == {
        "q.register", "q.KIND", "q.Base", "q.Meta", "q.DEFAULT", "q.FALLBACK", "q.NAME"}


def test_every_prefix_of_a_chain_read_at_load_is_read_at_load():
    assert _chains("x = q.a.b.c(q.d)\n") == {"q.a.b.c", "q.a.b", "q.a", "q.d"}
    assert _chains("def f():\n    return q.a.b\n") == set()
