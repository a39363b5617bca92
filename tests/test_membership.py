"""engine.membership: which registries a closure reads by identity alone, so that a class only
such a registry would bring stays out of the file (golden case ``identity_registry``)."""

from __future__ import annotations

import ast

import pytest

from nnrag_tui.engine.membership import (
    identity_uses_only,
    only_called,
    runs_at_load_only,
    write_only_uses,
)

PERSISTENCE = '''
def persistent_class(orig_class):
    class Decorator(orig_class):
        pass

    _decorators.add(Decorator)
    return Decorator


def is_persistent(obj):
    return obj in _decorators or type(obj) not in _decorators


def register(cls):
    _decorators.append(cls)
    return cls
'''


def test_stylegan_s_persistence_reads_its_set_by_identity_alone():
    tree = ast.parse(PERSISTENCE)
    for fn in tree.body:
        assert identity_uses_only(fn, "_decorators"), fn.name


@pytest.mark.parametrize("code", [
    "def count():\n    return len(_decorators)\n",  # its size depends on every filler
    "def each():\n    for d in _decorators:\n        d()\n",
    "def named(cls):\n    _decorators.add(cls.__name__)\n    return cls\n",  # a string
    "def renamed(cls):\n    cls = cls.__name__\n    _decorators.add(cls)\n    return cls\n",
    "def keyed(name):\n    return name in _decorators.keys()\n",
    "_decorators.add(Tool)\n",  # at module level: an object others can hold
    "def other(cls, extra):\n    _decorators.add(extra)\n    return cls\n",
])
def test_any_other_use_needs_every_filler(code):
    assert not identity_uses_only(ast.parse(code), "_decorators")


REFUSING = '''
def register_model(cls=None, *, name=None):
    def _register(cls):
        local_name = cls.__name__ if name is None else name
        if local_name in _MODELS:
            raise ValueError(f"Already registered model with name: {local_name}")
        assert local_name not in _MODELS, local_name
        if local_name in _MODELS and not force:
            raise KeyError(local_name)
        _MODELS[local_name] = cls
        _MODELS.append(cls)
        return cls
    return _register
'''


def test_score_sde_s_register_model_only_stores_and_refuses():
    assert write_only_uses(ast.parse(REFUSING), "_MODELS")


@pytest.mark.parametrize("code", [
    "def get_model(name):\n    return _MODELS[name]\n",  # a lookup by name
    "def warn(name):\n    if name in _MODELS:\n        print('overwriting', name)\n",
    "def either(name):\n    if name in _MODELS:\n        raise KeyError(name)\n"
    "    else:\n        return 1\n",
    "def any_(name):\n    if name in _MODELS or name == 'x':\n        raise KeyError(name)\n",
    "def kept(cls):\n    return _MODELS.append(cls)\n",  # the call's value is read
    "def many():\n    return len(_MODELS)\n",
    "def drop(name):\n    del _MODELS[name]\n",
    "def look(name):\n    return name in _MODELS\n",
])
def test_a_registry_read_for_what_it_holds_is_not_write_only(code):
    assert not write_only_uses(ast.parse(code), "_MODELS")


@pytest.mark.parametrize("code,at_load", [
    ("@register_model(name='small')\nclass Small:\n    pass\n", True),
    ("@register_model\ndef small():\n    pass\n", True),
    ("def f(x=register_model(Other)):\n    pass\n", True),  # a default: evaluated at load
    ("class Net:\n    kind = register_model(Other)\n", True),  # a class body runs at load
    ("class Late:\n    def __init__(self):\n        register_model(name='late')(Other)\n",
     False),
    ("make = lambda: register_model(Other)\n", False),
    ("def build():\n    return register_model(Other)\n", False),
])
def test_which_uses_run_only_while_the_module_loads(code, at_load):
    tree = ast.parse(code).body[0]
    assert runs_at_load_only(
        tree, lambda n: isinstance(n, ast.Name) and n.id == "register_model") is at_load


@pytest.mark.parametrize("code,called", [
    ("@register_model(name='small')\nclass Small:\n    pass\n", True),
    ("@register_model\nclass Small:\n    pass\n", True),
    ("kind = register_model(Other)\n", True),
    ("reg = register_model\n", False),  # handed on: its later calls go unseen
    ("fns = [register_model]\n", False),
])
def test_a_function_handed_on_is_not_only_called(code, called):
    tree = ast.parse(code).body[0]
    assert only_called(
        tree, lambda n: isinstance(n, ast.Name) and n.id == "register_model") is called
