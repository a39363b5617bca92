"""Which operators a statement registers with torch, and which it reads (engine.torchops)."""

from __future__ import annotations

import ast

from nnrag_tui.engine.torchops import MAY_REGISTER, built_namespaces, op_reads, registered_ops


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


def test_an_extension_built_as_the_module_loads_defines_its_namespace():
    # SRU's ops.py, and its cuda_functional.py's build inside a ``try`` with a fallback
    assert registered_ops(_stmt(
        'load(name="sru_cpu", sources=[cpu_source], is_python_module=False)')) == {
        "sru_cpu::*": True}
    text = ("try:\n    load(name='sru_cuda', sources=s, is_python_module=False)\n"
            "except Exception:\n"
            "    torch.utils.cpp_extension.load('sru_cuda', d, is_python_module=False)\n")
    assert built_namespaces(_stmt(text)) == ["sru_cuda"]
    assert built_namespaces(_stmt(
        "if FAST:\n    load_inline(name='fast', cpp_sources=[s], is_python_module=False)\n")) \
        == ["fast"]


def test_what_builds_no_namespace():
    # a Python module (the default), a name not known before it runs, a build in a function
    assert built_namespaces(_stmt("ext = load(name='ext', sources=s)")) == []
    assert built_namespaces(_stmt("load(name=NAME, sources=s, is_python_module=False)")) == []
    assert built_namespaces(_stmt(
        "def build():\n    load(name='later', sources=s, is_python_module=False)\n")) == []
    assert built_namespaces(_stmt(
        "x = lambda: load(name='later', sources=s, is_python_module=False)")) == []
    assert MAY_REGISTER.search(b"load(name='a', sources=s, is_python_module = False)")
