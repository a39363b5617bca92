"""A function or class named ``top``: CPython's ``symtable`` before 3.13 takes any table of
that name for the module's, and reported the names such a function binds as module-level
names (nni's ``ContextStack.top(cls, key)``: ``cls`` and ``key`` reported as unresolved).
engine.scopes answers from the symbol's flags there."""

import ast

from nnrag_tui.engine.modsource import compute_uses


def _uses(src: str):
    return compute_uses(src, ast.parse(src).body[0])


def test_a_method_named_top_reads_its_own_parameters_and_the_module_s_names():
    u = _uses("class Stack:\n    @classmethod\n    def top(cls, key):\n"
              "        global hits\n        hits = 1\n        return cls.d[key] + size\n")
    assert u.lazy == {"size"} and u.load == {"classmethod"}
    assert u.assigned_global == {"hits"}


def test_a_class_named_top_encloses_no_method():
    u = _uses("class top:\n    a = 1\n\n    def f(self):\n        return a + len(self.b)\n")
    assert u.lazy == {"a", "len"} and u.load == set() and not u.assigned_global


def test_a_rename_of_a_module_level_name_leaves_the_parameter_of_top(tmp_path):
    """Two modules bind ``key``, so one is renamed in the file (``key_other``); the parameter
    ``key`` of the method ``top`` keeps its reads (the rename had reached them, so ``top``
    read the module-level string instead of its argument), and nothing is unresolved (the
    parameter ``x`` had been reported)."""
    from helpers import path_config, write_tree

    from nnrag_tui.engine.extractor import BlockExtractor

    root = write_tree(tmp_path / "repo", {
        "apkg/__init__.py": "",
        "apkg/other.py": ('key = "other"\n\n\nclass Picker:\n    def top(self, x, key):\n'
                          "        return x * len(key)\n\n    def default(self):\n"
                          "        return len(key)\n"),
        "apkg/stack.py": ("from torch import nn\n\nfrom .other import Picker\n\n"
                          'key = "stack"\n\n\nclass Stack(nn.Module):\n'
                          "    def forward(self, x):\n"
                          "        return Picker().top(x, key) + Picker().default()\n"),
    })
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        res = ex.extract_single_block("Stack")
    code = res.generated.code
    assert 'key_other = "other"' in code
    assert "    def top(self, x, key):\n        return x * len(key)\n" in code
    assert not res.generated.unresolved
    namespace: dict = {}
    exec(compile(code, "Stack.py", "exec"), namespace)
    assert namespace["Picker"]().top(2, "abcd") == 8
    assert namespace["Stack"]()(1) == len("stack") + len("other")


def test_super_outside_a_class_reads_no_module_level_class_name():
    """CPython's compiler has every function that names ``super`` read ``__class__``; outside
    a class that is no name of the module (orb-models' ``load_forcefield_state_dict`` calls
    ``super(type(model), model)``, and ``__class__`` was reported as unresolved). A function
    that reads ``__class__`` itself still does."""
    u = _uses("def load(model, sd):\n    return super(type(model), model).load_state_dict(sd)\n")
    assert u.lazy == {"super", "type"}
    assert _uses("def which():\n    return __class__\n").lazy == {"__class__"}


def test_read_lines_from_the_module_s_tree_match_those_of_the_statement_s_own_text():
    # the statement as parsed in its module (decorated, below other statements) spares a
    # second parse; a method's parameter of the same name is another variable either way
    from nnrag_tui.engine.modsource import ModuleSource
    from nnrag_tui.engine.scopes import global_read_lines

    ms = ModuleSource("import torch\n\n\n"
                      "@register(Norm)\n"
                      "class Block:\n"
                      "    def a(self, Norm):\n"
                      "        return Norm\n"
                      "\n"
                      "    def b(self):\n"
                      "        return [Norm for _ in range(2)]\n"
                      "    c = lambda self: Norm\n")
    st = ms.stmts[1]
    text = ms.stmt_text(st)
    assert global_read_lines(text, "Norm") == [1, 7, 8]
    assert global_read_lines(text, "Norm", st.node, st.line) == [1, 7, 8]
