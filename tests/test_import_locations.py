"""engine.import_locations: the lists of module names a module-level call hands a definition
that imports them later, found from the AST and made empty in place."""

from __future__ import annotations

import ast

from nnrag_tui.engine.import_locations import callee, emptied, module_name_lists


def _lists(text: str) -> list[tuple[str, ...]]:
    return [names for _, names in module_name_lists(ast.parse(text).body[0])]


def test_the_lists_are_strings_shaped_like_module_names_in_a_module_level_call():
    assert _lists("MODELS = Registry('model', parent=ROOT, locations=['mmdet.models'])") == \
        [("mmdet.models",)]
    assert _lists("register(('a.b', 'c'), names=['not a module'], n=[1, 2])") == [("a.b", "c")]
    assert _lists("x = ['mmdet.models']") == []  # not handed to anything
    assert _lists("def f(locations=['a.b']): pass") == []
    assert callee(ast.parse("MODELS = Registry('m', locations=['a'])").body[0]) == "Registry"
    assert callee(ast.parse("MODELS = mmengine.Registry('m')").body[0]) is None


def test_only_the_named_lists_are_emptied_and_the_rest_is_byte_for_byte():
    text = ("MODELS = Registry(  # the model registry\n"
            "    'model', parent=ROOT,\n"
            "    locations=['pkg.models',\n"
            "               'pkg.heads'], other=('pkg.keep',))\n")
    out, log = emptied(text, {("pkg.models", "pkg.heads")})
    assert out == ("MODELS = Registry(  # the model registry\n"
                   "    'model', parent=ROOT,\n"
                   "    locations=[], other=('pkg.keep',))\n")
    assert log == [("`['pkg.models', 'pkg.heads']` -> `[]` (modules imported by name when first "
                    "used; what the block needs of them is inlined)")]
    out, log = emptied(text, {("pkg.keep",)})
    assert out.endswith("other=())\n") and "'pkg.models'" in out and len(log) == 1
    assert emptied(text, {("pkg.other",)}) == (text, [])


def test_text_before_the_list_that_is_not_ascii_keeps_its_place():
    text = "MODELS = Registry('modèle', locations=['pkg.models'])  # é\n"
    out, _ = emptied(text, {("pkg.models",)})
    assert out == "MODELS = Registry('modèle', locations=[])  # é\n"
