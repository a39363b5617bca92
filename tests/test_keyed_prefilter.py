"""A registration under a string key, in a module upstream imports along with the block's
(engine.side_effects.add_keyed_registrations), is looked for only in the modules whose text
has a call with that string as its first argument (``Resolver.passes_literal``): the test
must let every spelling of such a call through, and keep out the modules that only name the
string otherwise, which were each parsed before."""

from __future__ import annotations

import pytest
from helpers import path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor

SETTINGS = (
    "from importlib import import_module\n\n_REGISTRY = {}\n\n\n"
    "def get(alias):\n    module, deepname = _REGISTRY[alias]\n"
    "    return getattr(import_module(module), deepname)\n\n\n"
    "def register(alias, modulename, deepname):\n"
    "    _REGISTRY[alias] = modulename, deepname\n")
NET = (
    "from torch import nn\n\nimport kpkg\n\n\nclass Net(nn.Module):\n"
    "    def forward(self, x):\n        if kpkg.settings.get('double'):\n"
    "            x = 2 * x\n        return x\n")
# modules that name 'double' without passing it first to a call
ELSEWHERE = ("CFG = dict(mode='double', names={'double': 1})\n\n\n"
             "def f(x, mode='double'):\n    return g(x, 'double')\n")


def _extract(tmp_path, registration: str):
    root = write_tree(tmp_path / "repo", {
        "kpkg/__init__.py": "from kpkg import checks, other, settings  # noqa: F401\n",
        "kpkg/settings.py": SETTINGS,
        "kpkg/checks.py": f"from kpkg import settings\n\n_DOUBLE = True\n\n{registration}\n",
        "kpkg/other.py": ELSEWHERE,
        "kpkg/net.py": NET,
    })
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        result = ex.extract_single_block("Net")
        parsed = {key[1] for key in ex.resolver()._sources}
    assert result.ok, result.error
    return result.generated.code, parsed


@pytest.mark.parametrize("registration", [
    'settings.register("double", __name__, "_DOUBLE")',
    "settings.register(\n    'double', __name__, '_DOUBLE')",
    "settings.register(  # the first check\n    r'double', __name__, '_DOUBLE')",
    'settings.register("""double""", __name__, "_DOUBLE")',
])
def test_the_registration_is_found_however_the_call_is_spelled(tmp_path, registration):
    code, _ = _extract(tmp_path, registration)
    assert "_DOUBLE = True" in code
    assert "'double'" in code or '"double"' in code


def test_a_module_naming_the_key_only_otherwise_is_not_parsed(tmp_path):
    code, parsed = _extract(tmp_path, 'settings.register("double", __name__, "_DOUBLE")')
    assert "_DOUBLE = True" in code
    assert "kpkg.checks" in parsed
    assert "kpkg.other" not in parsed
    assert "CFG" not in code
