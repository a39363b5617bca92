"""engine.membership: which registries a closure reads by identity alone, so that a class only
such a registry would bring stays out of the file (golden case ``identity_registry``)."""

from __future__ import annotations

import ast

import pytest

from nnrag_tui.engine.membership import identity_uses_only

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
