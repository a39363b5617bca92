"""What engine.config_keys reads from code: the ``type`` keys configs name, and what a
statement registers through a registry object's method."""

from __future__ import annotations

import ast

from nnrag_tui.engine.config_keys import registers_own_name, registrations, type_keys


def _stmt(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


def test_type_keys_are_the_string_types_of_dicts_only():
    node = _stmt(
        "def __init__(self, act_cfg=dict(type='Swish'), norm_cfg={'type': 'BN', 'eps': 1e-5},\n"
        "             conv=dict(kind='Conv'), shape=dict(type=int), raw={'type': 3}):\n"
        "    self.pad = dict(type='Reflect', padding=1)\n"
        "    parser.add_argument('--x', type=str)\n")
    assert type_keys(node) == {"Swish", "BN", "Reflect"}


def test_a_type_set_on_a_config_already_made_is_a_key_too():
    node = _stmt(
        "def __init__(self, data_preprocessor=None, head=None):\n"
        "    data_preprocessor = data_preprocessor or {}\n"
        "    data_preprocessor.setdefault('type', 'SelfSupDataPreprocessor')\n"
        "    head['type'] = 'LinearHead'\n"
        "    head.update(type='ClsHead', loss='x')\n"
        "    kwargs.setdefault('type')\n"
        "    self.other['kind'] = 'NotAKey'\n")
    assert type_keys(node) == {"SelfSupDataPreprocessor", "LinearHead", "ClsHead"}


def test_a_computed_type_may_be_any_name_like_string_of_the_statement():
    node = _stmt(
        "class ViPNAS:\n"
        "    def __init__(self, act=['HSwish', 'ReLU'], norm_cfg=dict(type='BN')):\n"
        "        self.act = act\n"
        "        self.mode = 'a mode, not a name'\n"
        "    def layer(self, i):\n"
        "        return dict(type=self.act[i], loss='mmdet.CrossEntropyLoss')\n")
    assert type_keys(node) == {"HSwish", "ReLU", "BN", "mmdet.CrossEntropyLoss"}


def test_what_registers_under_its_own_name_keeps_it_in_a_clash():
    # the name the file gives it is the key: a clash must not rename it
    assert registers_own_name(_stmt("@MODELS.register_module()\nclass Swish: pass"))
    assert registers_own_name(_stmt("@MODELS.register_module(force=True)\ndef f(): pass"))
    assert registers_own_name(_stmt("@nn.Identity\n@MODELS.register_module()\nclass C: pass"))
    # a key given, by name or first argument, does not depend on it
    assert not registers_own_name(_stmt("@MODELS.register_module(name='SiLU')\nclass A: pass"))
    assert not registers_own_name(_stmt("@LOSSES.register('focal')\ndef focal(x): pass"))
    # a bare ``@fn.register`` is functools.singledispatch's: by the annotation's type
    assert not registers_own_name(_stmt("@bind.register\ndef _(op: Op, params): pass"))
    # nor does what registers nothing, or a statement that is no definition
    assert not registers_own_name(_stmt("@MODELS.build()\nclass Built: pass"))
    assert not registers_own_name(_stmt("@self.register\ndef f(): pass"))
    assert not registers_own_name(_stmt("class Plain: pass"))
    assert not registers_own_name(_stmt("MODELS.register_module(module=nn.ReLU)"))


def test_a_decorated_class_registers_under_the_name_given_else_its_own():
    assert registrations(_stmt("@MODELS.register_module()\nclass Swish: pass")) == \
        [("MODELS", "Swish")]
    assert registrations(_stmt("@MODELS.register_module(name='SiLU')\nclass Act: pass")) == \
        [("MODELS", "SiLU")]
    assert registrations(_stmt("@LOSSES.register('focal')\ndef focal(x): pass")) == \
        [("LOSSES", "focal")]
    # a bare decorator, a non-registering method, and a method of ``self`` register nothing
    assert registrations(_stmt("@MODELS.register_module\nclass Bare: pass")) == \
        [("MODELS", "Bare")]
    assert registrations(_stmt("@MODELS.build()\nclass Built: pass")) == []
    assert registrations(_stmt("@functools.lru_cache()\ndef cached(): pass")) == []


def test_a_call_registers_under_the_name_given_else_the_object_it_hands_over():
    assert registrations(_stmt("MODELS.register_module(name='HSwish', module=nn.Hardswish)")) \
        == [("MODELS", "HSwish")]
    assert registrations(_stmt("MODELS.register_module('BN', module=nn.BatchNorm2d)")) == \
        [("MODELS", "BN")]
    assert registrations(_stmt("MODELS.register_module(module=nn.ReLU)")) == [("MODELS", "ReLU")]
    # under a condition, as mmcv's hswish.py picks by torch version; not in a function body
    node = _stmt("if new_torch:\n    MODELS.register_module(module=nn.Hardswish, name='HSwish')\n"
                 "else:\n    MODELS.register_module(module=HSwish)\n")
    assert sorted(registrations(node)) == [("MODELS", "HSwish"), ("MODELS", "HSwish")]
    assert registrations(_stmt("def later():\n    MODELS.register_module(module=Late)")) == []
    assert registrations(_stmt("self.register_buffer('x', t)")) == []
