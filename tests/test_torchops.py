"""Which operators a statement registers with torch, and which it reads (engine.torchops)."""

from __future__ import annotations

import ast

from nnrag_tui.engine.torchops import MAY_REGISTER, op_reads, registered_ops


def _stmt(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


def test_a_schema_defines_the_operator_and_an_implementation_registers_for_it():
    # optimum-quanto's library/unpack.py
    assert registered_ops(_stmt(
        'torch.library.define("quanto::unpack", "(Tensor t, int bits) -> Tensor")')) == {
        "quanto::unpack": True}
    assert registered_ops(_stmt(
        'torch.library.define("quanto::gemm(Tensor a, Tensor b) -> Tensor")')) == {
        "quanto::gemm": True}
    assert registered_ops(_stmt(
        '@torch.library.impl("quanto::unpack", "default")\ndef unpack(t, bits):\n    pass\n'
    )) == {"quanto::unpack": False}


def test_a_decorated_custom_op_with_its_fake_and_a_keyword_name():
    text = ('@torch.library.custom_op("autotp::copy", mutates_args=())\n'
            "@other_decorator\ndef copy(x):\n    return x\n")
    assert registered_ops(_stmt(text)) == {"autotp::copy": True}
    assert registered_ops(_stmt(
        '@register_fake(name="autotp::copy")\ndef copy_fake(x):\n    pass\n')) == {
        "autotp::copy": False}


def test_what_is_not_a_registration():
    assert registered_ops(_stmt('log.define("not::an op")')) == {}
    assert registered_ops(_stmt('torch.library.impl("no_namespace", "CPU")')) == {}
    assert registered_ops(_stmt('x = impl(name)')) == {}


def test_reads_of_operators_leave_torch_s_own_out():
    node = _stmt("OPS = (torch.ops.autotp.copy.default, torch.ops.aten.mm.default,\n"
                 "       torch.ops.autotp, torch.ops.quanto.unpack(t, 4))")
    assert op_reads(node) == {"autotp::copy", "quanto::unpack"}


def test_the_prefilter_finds_what_may_register():
    assert MAY_REGISTER.search(b'@torch.library.custom_op("a::b", mutates_args=())')
    assert MAY_REGISTER.search(b"register_fake( 'a::b')")
    assert not MAY_REGISTER.search(b'custom_op = "a::b"')
