"""A name a module provides through its ``__getattr__`` (PEP 562): PennyLane's
``capture/__init__.py`` declares ``QpPrimitive: "Type[...]"`` with no value and imports the class
in ``__getattr__`` when asked for it. The declaration binds nothing; the import does."""

import torch
from helpers import extract_tree

from nnrag_tui.engine.parse import parse_bytes

GETATTR_MODULE = '''\
from typing import Type

Scale: "Type[object]"
Shift: type
Made: type
Checked: type
Loaded: type
Bound = 3


def __getattr__(key):
    """Lazily provides what needs the heavy modules."""
    if key == "Scale":
        from .heavy import Scale

        return Scale
    elif key == "Shift":
        from .heavy import Shift as _Shift
        return _Shift
    if key == "Made":
        from .heavy import make
        return make()
    if key == "Checked":
        require("heavy")
        from .heavy import Scale
        return Scale
    if key == "Bound":
        from .heavy import Scale as Bound
        return Bound
    raise AttributeError(key)
'''


def test_the_index_records_the_imports_a_module_getattr_answers_with():
    facts = parse_bytes(GETATTR_MODULE.encode(), "apkg/__init__.py")
    found = {r.bound: (r.target, r.name, r.asname, r.line) for r in facts.lazy_imports}
    # a value it computes, or code it runs first, is recorded with no import to follow (at
    # the line of its branch); a name the module binds by a statement is that statement's
    assert found == {"Scale": ("apkg.heavy", "Scale", None, 14),
                     "Shift": ("apkg.heavy", "Shift", "_Shift", 18),
                     "Made": ("", None, None, 20), "Checked": ("", None, None, 23),
                     # declared, and made by no branch of that shape: at the function's line
                     "Loaded": ("", None, None, 11)}
    assert all(r.guard.kind == "getattr" for r in facts.lazy_imports)
    # none of them is an import of the module's top level
    assert not {r.bound for r in facts.imports} & set(found)


def _extract(tmp_path, files: dict[str, str], name: str = "Net") -> str:
    result = extract_tree(tmp_path, files, name)
    assert result.generated.unresolved == []
    return result.generated.code


LAZY_PACKAGE = {
    "apkg/__init__.py": GETATTR_MODULE,
    "apkg/heavy.py": ("import os\n\nif os.sep:\n    FACTOR = 2.0\n\n\nclass Scale:\n"
                      "    factor = FACTOR\n\n\nclass Shift:\n    by = 1.0\n\n\n"
                      "def make():\n    return Scale\n"),
}


def test_a_read_through_module_getattr_gets_the_class_and_runs_its_module_then(tmp_path):
    """``apkg.Scale`` in a method: upstream's ``__getattr__`` imports ``apkg.heavy`` as the
    method reads it. The file has the class, and the module's code runs right before that
    read, not as the file is imported (before, ``apkg.Scale`` led to the declaration, which
    binds nothing)."""
    code = _extract(tmp_path, {**LAZY_PACKAGE, "apkg/net.py": (
        "import apkg\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        y = x + 0\n        return y * apkg.Scale.factor\n")})
    assert "class Scale:" in code and "Type[object]" not in code
    assert "        y = x + 0\n        _run_heavy()\n        return y * Scale.factor\n" in code
    assert ("apkg/net.py:5: calls `_run_heavy()` first, which runs the module-level code of "
            "the module upstream's module `__getattr__` imports as the line reads a name from "
            "it") in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)
    assert "FACTOR" not in namespace  # (nothing of apkg.heavy ran as the file loaded)
    assert namespace["Net"]()(torch.ones(2)).tolist() == [2.0, 2.0]
    assert namespace["FACTOR"] == 2.0


def test_an_import_from_a_module_getattr_at_load_is_an_import_of_what_it_imports(tmp_path):
    """``from apkg import Shift`` at a module's top level runs ``__getattr__`` as that module
    loads: the file has the class ``heavy`` defines, under the name the import binds."""
    code = _extract(tmp_path, {**LAZY_PACKAGE, "apkg/net.py": (
        "from apkg import Shift\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        return x + Shift.by\n")})
    assert "class Shift:\n    by = 1.0\n" in code and "Shift: type" not in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)
    assert namespace["Net"]()(torch.zeros(1)).tolist() == [1.0]


def test_a_name_a_module_getattr_computes_is_reported_unresolved(tmp_path):
    """``apkg.Made`` is what ``__getattr__`` returns from a call: not followed, so the header
    says it is unresolved and where it is read, instead of the declaration ``Made: type``
    standing for it unsaid. The file reads it from the module object, and has no undefined
    name."""
    result = extract_tree(tmp_path, {**LAZY_PACKAGE, "apkg/net.py": (
        "import apkg\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        return x * apkg.Made().factor\n")})
    why = "made by apkg's module `__getattr__` when asked for, which is not followed"
    # line 7 reads it (the class starts at line 5)
    assert result.generated.unresolved == [("apkg.Made", f"apkg.net:7, {why}")]
    code = result.generated.code
    assert f"# unresolved: apkg.Made (apkg.net:7, {why})" in code and "Made: type" not in code
    # nor does the module object hold what ``__getattr__`` imports when asked: that would run
    # apkg.heavy as the file loads
    assert "apkg = types.ModuleType" in code and "class Scale" not in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)  # (it loads)


def test_a_guarded_import_through_module_getattr_fails_as_upstream_without_the_package(
        tmp_path):
    """PennyLane's ``allocation.py`` has ``try: import jax; from pennylane.capture import
    QpPrimitive`` / ``except ImportError: ...``, and the module ``__getattr__`` imports needs
    jax; methods elsewhere read ``capture.QpPrimitive`` too. The module runs in a function of
    its own that the ``try`` calls where upstream's import is: without the package the file
    still imports and the fallback holds, as upstream's module does; with it, the class is
    there."""
    import sys
    import types

    code = _extract(tmp_path, {
        "apkg/__init__.py": GETATTR_MODULE,
        "apkg/heavy.py": ("import nnrag_missing_jax as jax\n\n\nclass Scale:\n"
                          "    factor = jax.FACTOR\n"),
        "apkg/alloc.py": ("try:\n    from apkg import Scale\nexcept ImportError:\n"
                          "    Scale = None\n"),
        "apkg/net.py": ("import apkg\nfrom apkg.alloc import Scale as Found\nfrom torch import nn"
                        "\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
                        "        if Found is None:\n            return x\n"
                        "        return x * apkg.Scale.factor\n"),
    })
    assert "\nimport nnrag_missing_jax" not in code  # (not at the top: in the function)
    assert "apkg/alloc.py:1: guarded import calls `_run_heavy()` first" in code
    assert ("apkg/heavy.py is imported only inside functions and in a `try` that catches "
            "ImportError upstream (apkg/alloc.py:2 and 1 more)") in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)
    assert namespace["Net"]()(torch.ones(1)).tolist() == [1.0]
    sys.modules["nnrag_missing_jax"] = types.SimpleNamespace(FACTOR=3.0)
    try:
        namespace = {}
        exec(compile(code, "Net.py", "exec"), namespace)
        assert namespace["Net"]()(torch.ones(1)).tolist() == [3.0]
    finally:
        del sys.modules["nnrag_missing_jax"]


def test_the_call_goes_above_the_reading_statement_also_where_it_holds_an_import():
    """A read on a line whose import makes no call of its own (``if apkg.X: import foo``, on
    one line) still gets the call above it; a plain statement gets it at its indentation."""
    from nnrag_tui.engine.rewrite import ImportEdits, rewrite_statement

    runs = ImportEdits(runs={2: ("_run_heavy",)})
    out, log = rewrite_statement("def f():\n    if apkg.X: import foo\n    return 1\n", {},
                                 {"apkg.X": "X"}, runs, {}, None)
    assert out == "def f():\n    _run_heavy()\n    if X: import foo\n    return 1\n"
    assert any(line.startswith("calls `_run_heavy()` first") for line in log)
    out, _ = rewrite_statement("def f(y):\n    z = y\n    return apkg.X(z)\n", {},
                               {"apkg.X": "X"}, ImportEdits(runs={3: ("_run_heavy",)}), {}, None)
    assert out == "def f(y):\n    z = y\n    _run_heavy()\n    return X(z)\n"


TABLE_MODULE = '''\
from importlib import import_module

_EXPORTS = {
    "Scale": ("apkg.heavy", "Scale"),
    "Moved": ("apkg.heavy", "Shift"),
    "Gone": ("apkg.missing", "Gone"),
}
_SUBMODULES = ("heavy",)
_RENAMED = {"Old": "heavy"}


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    new = _RENAMED.get(name)
    if new is not None:
        return getattr(import_module("." + new, __name__), "Scale")
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError as exc:
        raise AttributeError(name) from exc
    value = getattr(import_module(module_name), attribute)
    globals()[name] = value
    return value
'''


def test_the_index_runs_a_table_driven_module_getattr_for_each_name():
    """boxmot's packages hand out their classes from a table (``_EXPORTS = {"BotSort":
    ("boxmot.trackers.botsort.botsort", "BotSort"), ...}`` and ``getattr(import_module(
    module_name), attr_name)``), PennyLane's ``qnn`` from ``importlib.import_module("." +
    class_map[name], __name__)``. Each name of the tables is recorded as the import the
    function amounts to for it; before, none was, and a read of one was unresolved."""
    facts = parse_bytes(TABLE_MODULE.encode(), "apkg/__init__.py")
    found = {r.bound: (r.target, r.name, r.asname) for r in facts.lazy_imports}
    assert found == {"heavy": ("apkg.heavy", None, "heavy"),
                     "Old": ("apkg.heavy", "Scale", "Old"),
                     "Scale": ("apkg.heavy", "Scale", None),
                     "Moved": ("apkg.heavy", "Shift", "Moved"),
                     "Gone": ("apkg.missing", "Gone", None)}
    # a table the module changes as it loads is not one the index can read
    changed = parse_bytes((TABLE_MODULE + '_EXPORTS.update(Extra=("apkg.x", "Extra"))\n')
                          .encode(), "apkg/__init__.py")
    assert {r.bound for r in changed.lazy_imports} == {"heavy", "Old"}


def test_a_read_through_a_table_driven_module_getattr_gets_the_class(tmp_path):
    """``apkg.Moved`` in a method and ``from apkg import Scale`` at load, through a
    ``__getattr__`` that looks both up in a table: the file has both classes and runs as
    upstream's module does."""
    code = _extract(tmp_path, {**LAZY_PACKAGE, "apkg/__init__.py": TABLE_MODULE,
                               "apkg/net.py": (
        "import apkg\nfrom apkg import Scale\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        return x * Scale.factor + apkg.Moved.by\n")})
    assert "class Scale:" in code and "class Shift:" in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)
    assert namespace["Net"]()(torch.ones(2)).tolist() == [3.0, 3.0]
