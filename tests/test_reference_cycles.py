"""An extraction leaves no reference cycles behind: what a closure and its file allocate is
freed by reference counting as soon as they are built, so the cyclic garbage collector, which
engine.gcpolicy runs less often meanwhile, has nothing of the engine's to find."""

from __future__ import annotations

import gc

from helpers import path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor

NET = {
    "pkg/__init__.py": "",
    "pkg/net.py": "from torch import nn\n\n\nclass Net(nn.Module):\n"
                  "    def forward(self, x):\n        return x\n",
}

# what the closure, the emission order and the rewrite walk: a metaclass and a base's
# __init_subclass__ (the makers of a class), a guarded import the rewrite drops, bindings in
# a loop and a try, an import inside a function, a name no module binds, a read inside a
# function through a module __getattr__ that imports as it is asked
ENTANGLED = {
    "pkg/lazy/__init__.py": (
        "def __getattr__(name):\n    if name == 'Thing':\n"
        "        from .impl import Thing\n        return Thing\n"
        "    raise AttributeError(name)\n"),
    "pkg/lazy/impl.py": "class Thing:\n    scale = 2\n",
    "pkg/__init__.py": "",
    "pkg/other.py": NET["pkg/net.py"].replace("Net", "Other"),
    "pkg/base.py": (
        "REG = {}\n\n\nclass Meta(type):\n    def __new__(mcs, name, bases, ns):\n"
        "        return super().__new__(mcs, name, bases, ns)\n\n\n"
        "class Base(metaclass=Meta):\n    def __init_subclass__(cls, **kw):\n"
        "        REG[cls.__name__] = cls\n"),
    "pkg/net.py": (
        "from torch import nn\n\nfrom . import lazy\n\ntry:\n    from .base import Base\nexcept ImportError:\n"
        "    Base = object\n\nfor _k in ('a', 'b'):\n    pass\n\ntry:\n    LIMIT = 3\n"
        "except Exception as err:\n    LIMIT = None\n\n\n"
        "class Net(nn.Module, Base):\n    def forward(self, x):\n"
        "        import math\n        return lazy.Thing.scale * x * math.pi + LIMIT + [y for y in (_k,)][0] \\\n"
        "            + missing_name\n"),
}


def test_an_extraction_leaves_no_reference_cycles_behind(tmp_path):
    """Everything a closure and its file allocate is freed by reference counting: with the
    collector off, a collection after the extraction finds nothing to collect."""
    root = write_tree(tmp_path / "repo", ENTANGLED)
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        # loads the index and the resolver, but parses neither net.py nor base.py
        assert ex.extract_single_block("Other").ok
        gc.collect()
        gc.disable()
        try:
            result = ex.extract_single_block("Net")
            found = gc.collect()
        finally:
            gc.enable()
    assert result.ok
    assert found == 0
