"""engine.registry_scope: registries that name their scope after the module creating them
(mmengine's ``Registry``) are recognised by their shape, and the scope upstream infers is
written into the call in place."""

from __future__ import annotations

import ast

from nnrag_tui.engine.config_keys import split_scope
from nnrag_tui.engine.import_locations import emptied
from nnrag_tui.engine.registry_scope import leaves_scope_out, pinned, scope_position

MMENGINE = '''
class Registry:
    def __init__(self, name, build_func=None, parent=None, scope=None, locations=[]):
        self._scope = scope if scope is not None else self.infer_scope()

    @staticmethod
    def infer_scope():
        return inspect.getmodule(sys._getframe(2)).__name__.split('.')[0]
'''


def _class(text: str) -> ast.ClassDef:
    node = ast.parse(text).body[0]
    assert isinstance(node, ast.ClassDef)
    return node


def _call(text: str) -> ast.Call:
    node = ast.parse(text).body[0]
    assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
    return node.value


def test_a_registry_is_a_class_that_infers_its_scope_and_takes_one():
    assert scope_position(_class(MMENGINE)) == 3  # after name, build_func and parent
    assert scope_position(_class(MMENGINE.replace("parent=None, scope", "parent=None, *, scope"))) \
        == -1
    # no ``infer_scope``, or no ``scope`` to give it: nothing to write in
    assert scope_position(_class(MMENGINE.replace("def infer_scope", "def guess"))) is None
    assert scope_position(_class(MMENGINE.replace("scope=None, ", ""))) is None


def test_only_a_call_that_gives_no_scope_gets_one():
    assert leaves_scope_out(_call("M = Registry('model', parent=ROOT, locations=['a'])"), 3)
    assert not leaves_scope_out(_call("M = Registry('model', parent=ROOT, scope='x')"), 3)
    assert not leaves_scope_out(_call("M = Registry('model', build, ROOT, 'x')"), 3)
    assert leaves_scope_out(_call("M = Registry('model', build, ROOT)"), 3)
    # what ``*args`` or ``**kwargs`` hold is not known
    assert not leaves_scope_out(_call("M = Registry('model', **options)"), 3)
    assert not leaves_scope_out(_call("M = Registry(*args)"), 3)


def test_the_scope_goes_after_the_last_argument_and_the_rest_stays_byte_for_byte():
    text = ("MODELS = Registry(  # the model registry\n"
            "    \"modèle\",\n"
            "    parent=MMENGINE_MODELS,\n"
            "    locations=[\"mmdet.models\"],  # é\n"
            ")\n")
    out, log = pinned(text, "mmdet")
    assert out == text.replace('["mmdet.models"],', '["mmdet.models"], scope="mmdet",')
    assert log == [("`scope=\"mmdet\"` added (the scope upstream's registry takes from its "
                    "module's name)")]
    assert pinned("ROOT = Registry()\n", "mmengine")[0] == "ROOT = Registry(scope='mmengine')\n"


def test_a_registry_s_locations_name_builtins_in_the_quotes_of_upstream():
    text = "MODELS = Registry('model', locations=['pkg.models'])\n"
    assert emptied(text, {("pkg.models",)}, inert=True)[0] == \
        "MODELS = Registry('model', locations=['builtins'])\n"
    assert emptied(text.replace("['pkg.models']", '("pkg.models",)'), {("pkg.models",)},
                   inert=True)[0] == "MODELS = Registry('model', locations=(\"builtins\",))\n"


def test_a_key_names_a_scope_before_its_first_dot():
    assert split_scope("mmdet.CrossEntropyLoss") == ("mmdet", "CrossEntropyLoss")
    assert split_scope("CrossEntropyLoss") == (None, "CrossEntropyLoss")
