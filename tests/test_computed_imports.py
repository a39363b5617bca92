"""What a computed module name may be, which imports read the module they import, and which
functions read a module's ``__package__`` or ``__file__`` from a parameter
(engine.computed_imports)."""

from __future__ import annotations

import ast

from nnrag_tui.engine.computed_imports import (
    NameShape,
    computed_module_imports,
    module_name_compares,
    name_shape,
    parameter_dunders,
    resolvable,
    table_text,
)


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def test_a_name_built_from_a_module_s_own_is_read_with_its_spelled_out_parts():
    # spikingjelly's: a given module's package, then one of a conditional's literals
    assert name_shape(_expr("f\"{cpu.__package__}.{'autograd' if trainable else "
                            "'validation'}\"")) == NameShape(
        "__package__", False, (".autograd", ".validation"))
    # the same built with ``+``; the calling module's own name
    assert name_shape(_expr('cpu.__name__ + ".impl" + (".a" if x else ".b")')) == NameShape(
        "__name__", False, (".impl.a", ".impl.b"))
    assert name_shape(_expr('f"{__package__}.kernels.cpu"')) == NameShape(
        "__package__", True, (".kernels.cpu",))
    # what each is for a module and a package
    shape = NameShape("__package__", False, (".x",))
    assert shape.base("a.b.c", False) == "a.b" and shape.base("a.b", True) == "a.b"
    assert NameShape("__name__", False, (".x",)).base("a.b.c", False) == "a.b.c"


def test_a_name_computed_otherwise_has_no_shape():
    # mmengine's ``f"{self.scope}.utils"``, a registry's scope; a name computed to its end;
    # relative names; a part not spelled out; a formatted piece; no tail
    for text in ('f"{self.scope}.utils"', 'f".{name}"', 'f"models.{name}"', "name",
                 'f"{cpu.__package__}.{kind}"', 'f"{cpu.__package__}.a_{kind}"',
                 'f"{cpu.__package__}"', '"a.b"', 'f"{cpu.__package__}."',
                 'f"{cpu.__package__}.a-b"', 'f"{cpu.__package__}_x"',
                 'f"{cpu.__package__!r}.autograd"', 'f"{a.b.__package__}.x"',
                 'f"{cpu.__file__}.x"', 'cpu.__package__ + f"{n:>3}"'):
        assert name_shape(_expr(text)) is None, text


def test_only_imports_whose_module_is_read_inside_functions_count():
    stmt = ast.parse(
        "def f(cpu, scope):\n"
        "    validation = importlib.import_module(f'{cpu.__package__}.autograd')\n"
        "    import_module(f'{cpu.__package__}.registry')\n"  # for what it registers
        "    return import_module(f'{cpu.__package__}.' + 'validation').check\n"
        "    importlib.import_module(name)\n"
        "    other.import_module(f'{cpu.__package__}.autograd')\n").body[0]
    found = [(how, line) for how, _, line in computed_module_imports(stmt)]
    assert found == [("importlib.import_module", 2), ("import_module", 4)]
    # at module level, the registries' rule sees it (engine.dynimport)
    top = ast.parse("mod = importlib.import_module(f'{__package__}.autograd')\n").body[0]
    assert computed_module_imports(top) == ()


def test_a_function_can_run_where_each_computed_import_has_a_shape():
    ok = ast.parse("def f(cpu):\n    return importlib.import_module("
                   "f'{cpu.__package__}.autograd')\n").body[0]
    assert resolvable(ok)
    loose = ast.parse("def f(cpu, name):\n    a = importlib.import_module("
                      "f'{cpu.__package__}.autograd')\n"
                      "    return importlib.import_module(f'{name}.utils')\n").body[0]
    assert not resolvable(loose)
    assert resolvable(ast.parse("def f():\n    return importlib.import_module('a.b')\n").body[0])


def test_a_function_importing_a_shaped_name_only_to_run_the_module_cannot_run():
    # the table answers only imports whose module is read; one run for what the module
    # registers would import upstream's module, which is not installed
    alone = ast.parse("def f(cpu):\n    importlib.import_module("
                      "f'{cpu.__package__}.autograd')\n").body[0]
    assert computed_module_imports(alone) == ()
    assert not resolvable(alone)


def test_a_function_s_decorators_and_defaults_are_outside_it_and_nested_calls_count_once():
    stmt = ast.parse(
        "@hook(importlib.import_module(f'{__package__}.a'))\n"
        "def f(m=importlib.import_module(f'{__package__}.b')):\n"
        "    def g(cpu):\n"
        "        return importlib.import_module(f'{cpu.__package__}.c')\n"
        "    return g\n").body[0]
    found = [(shape.tails, line) for _, shape, line in computed_module_imports(stmt)]
    assert found == [((".c",), 4)]


def test_reads_of_a_module_s_package_or_file_from_a_parameter():
    stmt = ast.parse(
        "def f(namespace, cpu, selection):\n"
        "    v = importlib.import_module(f'{cpu.__package__}.autograd')\n"
        "    if Path(cpu.__file__).with_name('reference.py').is_file():\n"
        "        library.impl('forward', f, 'AutogradCPU')\n"
        "    here = Path(__file__).with_name('layout.py')\n"  # its own module's: not a parameter
        "    return selection.__file__\n"
        "def g(x):\n"
        "    return other.__package__\n").body
    reads = parameter_dunders(stmt[0])
    assert [(a, line) for a, line, _ in reads] == [
        ("__package__", 2), ("__file__", 3), ("__file__", 6)]
    # the literals of the statement reading it, not of the statements it holds
    assert reads[1][2] == {"reference.py"}
    assert "AutogradCPU" not in reads[1][2]
    assert parameter_dunders(stmt[1]) == ()


def test_the_table_returns_what_it_holds_and_imports_the_rest():
    text = table_text(["sj.a", "sj.b"]).replace("__nnrag_held_0__", "A").replace(
        "__nnrag_held_1__", "B")
    ns: dict = {"A": object(), "B": object()}
    exec("import importlib\n" + text, ns)
    load = ns["_import_module"]
    assert load("sj.a") is ns["A"] and load("sj.b") is ns["B"]
    assert load("json").__name__ == "json"
    assert load(".decoder", "json").__name__ == "json.decoder"


def test_comparisons_of_a_class_s_module_with_a_module_s_name():
    stmt = ast.parse(
        "def spec(function, other):\n"
        "    from pkg import surrogate as surrogate_module\n"
        "    if type(function).__module__ != surrogate_module.__name__:\n"
        "        return None\n"
        "    same = other.__name__ is function.__class__.__module__\n"
        # not a test of equality; not a module's name; a name read otherwise
        "    a = type(function).__module__ in other.__name__\n"
        "    b = type(function).__module__ == 'pkg.surrogate'\n"
        "    c = type(function).__name__ == other.__name__\n"
        "    return surrogate_module.__name__\n").body[0]
    assert module_name_compares(stmt) == (("surrogate_module", 3), ("other", 5))
