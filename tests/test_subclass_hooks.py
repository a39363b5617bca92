"""engine.subclass_hooks: a class registers itself as it is made, through its base's
``__init_subclass__`` or its metaclass. The classes registered so come along where the block
looks the registry up, the spec says how, and a metaclass that only fills the namespace of
the class it makes (deepspeed's ``LayerMetaclass``, ``attrs[MAPPING_KEY] = {}``) registers
nothing. A registry the block looks up through its module (``registry.get(name)``) is
looked up as the block is built: the classes filling it, by decorator or by their base's
hook, come along from the modules upstream imports with the block's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers import extract_tree

torch = pytest.importorskip("torch")

BASE = '''\
from torch import nn

ACTS = {}


class Act(nn.Module):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        ACTS[cls.__name__.lower()] = cls


class _Layout(type(nn.Module)):
    def __new__(mcs, name, bases, attrs):
        for base in bases:
            if hasattr(base, "shapes"):
                attrs.setdefault("shapes", {}).update(base.shapes)
        attrs["made"] = name
        return super().__new__(mcs, name, bases, attrs)


class Laid(nn.Module, metaclass=_Layout):
    shapes = {"x": 1}
'''

ACTS = '''\
from .base import Act, Laid


class Double(Act):
    def forward(self, x):
        return x * 2


class Wide(Laid):
    shapes = {"y": 2}

    def forward(self, x):
        return x
'''

NET = '''\
from torch import nn

from . import acts  # noqa: F401
from .base import ACTS, Laid


class Net(Laid):
    def __init__(self, act="double"):
        super().__init__()
        self.act = ACTS[act]()

    def forward(self, x):
        return self.act(x) * len(Laid.shapes) * len(self.made)
'''


def _run(code: str, path: Path):
    """``Net()(torch.ones(2))`` of the generated file ``code``, written to ``path``."""
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Net()(torch.ones(2))


def test_a_class_registered_by_its_base_comes_along_and_a_namespace_store_adds_none(
        tmp_path: Path) -> None:
    res = extract_tree(tmp_path, {"hk/__init__.py": "", "hk/base.py": BASE,
                                  "hk/acts.py": ACTS, "hk/net.py": NET})
    code = res.generated.code
    assert "class Double(Act):" in code
    # ``attrs`` is the namespace of the class being made, not a registry: ``Wide``, which
    # only derives from ``Laid``, is no part of the block
    assert "class Wide(" not in code
    deps = [d for d in res.generated.spec["dependencies"] if d["how"] == "registry"]
    assert [(d["name"], d["target"]) for d in deps] == [("ACTS", "hk.acts:4")]
    assert "`__init_subclass__` or its metaclass" in deps[0]["note"]
    # upstream: 2 * len({"x": 1}) * len("Net")
    assert _run(code, tmp_path / "hook_net.py").tolist() == [6.0, 6.0]

REGISTRY = '''\
_TABLE = {}


def add(cls):
    _TABLE[cls.__name__.lower()] = cls
    return cls


def get(name):
    return _TABLE[name]
'''

HOOKED = '''\
from torch import nn

from . import registry


class Base(nn.Module):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        registry.add(cls)
'''

MODELS = '''\
from torch import nn

from .base import Base
from .registry import add


class Double(Base):
    def forward(self, x):
        return x * 2


@add
class Triple(nn.Module):
    def forward(self, x):
        return x * 3
'''

GETTER = '''\
from torch import nn

from . import models, registry  # noqa: F401


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = registry.get("double")(), registry.get("triple")()

    def forward(self, x):
        return self.b(self.a(x))
'''


def test_a_registry_looked_up_through_its_module_has_its_registrations(tmp_path: Path) -> None:
    res = extract_tree(tmp_path, {"rg/__init__.py": "", "rg/registry.py": REGISTRY,
                                  "rg/base.py": HOOKED, "rg/models.py": MODELS,
                                  "rg/net.py": GETTER})
    code = res.generated.code
    assert "class Double(Base):" in code and "@add\nclass Triple(" in code
    assert _run(code, tmp_path / "getter_net.py").tolist() == [6.0, 6.0]


MADE = '''\
from torch import nn


class _Meta(type(nn.Module)):
    def __init__(cls, name, bases, namespace):
        super().__init__(name, bases, namespace)
        if not hasattr(cls, "registry"):
            cls.registry = {}
        else:
            cls.registry[name.lower()] = cls


class Head(nn.Module, metaclass=_Meta):
    @classmethod
    def get(cls, name):
        return cls.registry[name]


class Negate(Head):
    def forward(self, x):
        return -x
'''

MADE_NET = '''\
from torch import nn

from .heads import Head


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head.get("negate")()

    def forward(self, x):
        return self.head(x)
'''


def test_a_registry_a_metaclass_makes_is_looked_in_through_a_method_reading_it(
        tmp_path: Path) -> None:
    res = extract_tree(tmp_path, {"mm/__init__.py": "", "mm/heads.py": MADE,
                                  "mm/net.py": MADE_NET})
    code = res.generated.code
    assert "class Negate(Head):" in code
    assert _run(code, tmp_path / "made_net.py").tolist() == [-1.0, -1.0]
