"""Under ``from __future__ import annotations`` no annotation is evaluated: a name read only in
annotations is read later (lazy), never as the module runs. A name read both in an annotation
and at load time (a default, a base, a decorator, a class attribute) stays a load-time read."""

import ast

from nnrag_tui.engine.modsource import compute_uses


def _uses(src: str, lazy_annotations: bool = True):
    return compute_uses(src, ast.parse(src).body[0], lazy_annotations)


def test_names_read_only_in_annotations_are_lazy_under_the_future_import():
    src = ("class Block(Base):\n"
           "    width: Width = 4\n"
           "    def forward(self, x: Tensor, *rest: Rest, scale: Scale = default,\n"
           "                **kw: Kw) -> Out:\n"
           "        y: Inner = helper(x)\n"
           "        return y\n")
    uses = _uses(src)
    assert uses.load == {"Base", "default"}
    assert {"Width", "Tensor", "Rest", "Scale", "Kw", "Out", "helper"} <= uses.lazy
    # without the future import every one of those annotations but the local's runs
    plain = _uses(src, lazy_annotations=False)
    assert {"Width", "Tensor", "Rest", "Scale", "Kw", "Out"} <= plain.load
    assert "Inner" not in plain.load


def test_a_name_read_in_an_annotation_and_at_load_stays_a_load_time_read():
    uses = _uses("def build(layer: Norm = Norm, *, act: Act = None) -> Norm:\n"
                 "    return layer\n")
    assert "Norm" in uses.load
    assert "Act" in uses.lazy and "Act" not in uses.load


def test_a_class_body_annotation_naming_a_later_class_attribute_is_not_read_early():
    # ``def device(self) -> device``: evaluated, it reads the module's ``device`` before the
    # class binds its own (a module-level read); under the future import nothing reads it
    src = ("class Model:\n"
           "    def to(self, where: device) -> device:\n"
           "        return where\n"
           "    device = property(lambda self: None)\n")
    assert "device" in _uses(src, lazy_annotations=False).load
    uses = _uses(src)
    assert "device" not in uses.load
    assert "property" in uses.load
