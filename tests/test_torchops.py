"""Which operators a statement registers with torch, and which it reads (engine.torchops)."""

from __future__ import annotations

import ast

from nnrag_tui.engine.torchops import (
    MAY_REGISTER,
    NamespaceHelper,
    built_namespaces,
    may_register,
    module_registrations,
    namespace_helper_calls,
    namespace_parameter,
    op_reads,
    registered_ops,
    registration_kinds,
    string_constants,
    torch_defines,
)


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


def test_namespaces_torch_shares_with_corpora_are_read_and_torch_s_where_none_defines():
    # torchao defines ``ao::mslk_quantize_nvfp4`` in a namespace torch uses too: the read is
    # followed; one no statement defines (``symm_mem::all_to_all_vdev``) is torch's
    text = "y = torch.ops.ao.mslk_quantize_nvfp4(x) + torch.ops.symm_mem.all_to_all_vdev(x)"
    assert op_reads(_stmt(text)) == {"ao::mslk_quantize_nvfp4", "symm_mem::all_to_all_vdev"}
    assert torch_defines("symm_mem::all_to_all_vdev")
    assert torch_defines("fsdp::split_with_sizes_copy")
    # fbgemm's ``triton::quantize_fp8_row``, an extension's ``torchvision::nms``: not torch's
    assert not torch_defines("triton::quantize_fp8_row")
    assert not torch_defines("torchvision::nms")


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


def _module(text: str) -> list[ast.stmt]:
    return ast.parse(text).body


def test_a_name_built_from_a_module_constant_is_the_operator_s_name():
    body = _module('_NS = "tg"\n'
                   'OP: str = _NS + "::permute"\n'
                   '@torch.library.custom_op(f"{_NS}::countsort", mutates_args=())\n'
                   'def countsort(x):\n    return x\n'
                   'torch.library.register_autograd(OP, bw)\n'
                   'torch.library.define(f"{_NS}::gemm(Tensor a) -> Tensor")\n')
    assert string_constants(body) == {"_NS": "tg", "OP": "tg::permute"}
    assert module_registrations(body) == [
        {}, {}, {"tg::countsort": True}, {"tg::permute": False}, {"tg::gemm": True}]


def test_a_constant_bound_twice_or_not_a_string_names_nothing():
    body = _module('A = "x"\nA = "y"\nB = "z"\nfor B in ():\n    pass\n'
                   'C = "c"\ndef f():\n    C = "local"\n'
                   'D = f"{E}"\nimport F as G\nG = "g"\nH = "h"\ndel H\n')
    # ``C`` is bound once at the top level (the function's ``C`` is its local)
    assert string_constants(body) == {"C": "c"}
    assert registered_ops(_stmt('custom_op(f"{A!r}::op")'), {"A": "x"}) == {}
    assert registered_ops(_stmt('custom_op(f"{UNKNOWN}::op")'), {}) == {}


def test_what_an_operator_s_own_methods_register_is_for_that_operator():
    body = _module('@torch.library.custom_op("ns::twice", mutates_args=())\n'
                   'def twice(x):\n    return x\n'
                   '@twice.register_fake\ndef _(x):\n    return x\n'
                   '@twice.register_kernel("cpu")\ndef _cpu(x):\n    return x\n'
                   'twice.register_autograd(bw, setup_context=sc)\n'
                   'halve = torch.library.custom_op("ns::halve", _h, mutates_args=())\n'
                   'halve.register_fake(_fake)\n'
                   'other.register_fake(_fake)\n'
                   'twice = None\n'
                   'twice.register_fake(_fake)\n')
    assert module_registrations(body) == [
        {"ns::twice": True}, {"ns::twice": False}, {"ns::twice": False}, {"ns::twice": False},
        {"ns::halve": True}, {"ns::halve": False}, {}, {}, {}]


def test_the_prefilter_finds_names_built_from_constants():
    assert may_register(b'_NS = "tg"\n@torch.library.custom_op(f"{_NS}::permute", m=())')
    assert may_register(b'torch.library.register_autograd(_NS + "::twice", bw)')
    assert may_register(b'OP = "ns::op"\ncustom_op(OP, mutates_args=())')
    # a call of that shape in a file with no operator name in it
    assert not may_register(b"self.impl(x)\nregister_fake(fn)")


def test_what_a_library_object_defines_and_registers_is_in_its_namespace():
    body = _module('_NS = "lib"\n'
                   '_lib = torch.library.Library(_NS, "DEF")\n'
                   '_lib.define("scale(Tensor x) -> Tensor")\n'
                   '_lib.impl("scale", _scale_cpu, "CPU")\n'
                   '@impl(_lib, "shift", "CPU")\ndef _shift(x):\n    return x\n'
                   'torch.library.impl(_lib, "shift", "Meta")(_shift_meta)\n'
                   '_lib.define("other::qualified(Tensor x) -> Tensor")\n'
                   'other_lib.define("scale(Tensor x) -> Tensor")\n'
                   '_lib = None\n'
                   '_lib.define("after(Tensor x) -> Tensor")\n')
    assert module_registrations(body) == [
        {}, {}, {"lib::scale": True}, {"lib::scale": False}, {"lib::shift": False},
        {"lib::shift": False}, {"other::qualified": True}, {}, {}, {}]
    assert may_register(b'_lib = Library("lib", "DEF")\n_lib.define("scale(Tensor x) -> T")')
    # torchrec's pallas/ops.py annotates its library
    assert module_registrations(_module(
        'lib: torch.library.Library = torch.library.Library("torchrec", "FRAGMENT")\n'
        'lib.define("embedding_lookup(Tensor indices) -> Tensor")\n')) == [
        {}, {"torchrec::embedding_lookup": True}]


def test_what_a_module_level_if_try_with_or_for_registers_is_that_statement_s():
    # unsloth's ``if _TRACEABLE:`` holds an operator, its gradient and a later one; a ``try``
    # falls back to another library; bitsandbytes' CPU kernels sit under an ``if``
    body = _module('if _TRACEABLE:\n'
                   '    @torch.library.triton_op("unsloth::rope", mutates_args=())\n'
                   '    def _rope_op(q):\n        return q\n'
                   '    _rope_op.register_autograd(bw, setup_context=sc)\n'
                   'else:\n'
                   '    torch.library.define("unsloth::plain(Tensor x) -> Tensor")\n'
                   '_rope_op.register_fake(_fake)\n'
                   'try:\n'
                   '    _lib = torch.library.Library("tv", "DEF")\n'
                   'except RuntimeError:\n'
                   '    _lib = torch.library.Library("tv", "FRAGMENT")\n'
                   'finally:\n'
                   '    pass\n'
                   'with warnings.catch_warnings():\n'
                   '    _lib.define("nms(Tensor x) -> Tensor")\n'
                   'for _key in ("CPU", "Meta"):\n'
                   '    if HAS_KERNEL:\n'
                   '        _lib.impl("nms", _nms, _key)\n'
                   'def f():\n'
                   '    torch.library.define("unsloth::inside(Tensor x) -> Tensor")\n'
                   'class C:\n'
                   '    torch.library.define("unsloth::in_class(Tensor x) -> Tensor")\n')
    assert module_registrations(body) == [
        {"unsloth::rope": True, "unsloth::plain": True}, {"unsloth::rope": False}, {},
        {"tv::nms": True}, {"tv::nms": False}, {}, {}]


def test_a_registration_applied_to_a_function_by_a_second_call_counts():
    # bitsandbytes' backends/default/ops.py
    assert registered_ops(_stmt('register_kernel("bitsandbytes::gemm_4bit", "default")'
                                '(_gemm_4bit_default_impl)')) == {"bitsandbytes::gemm_4bit": False}
    assert registered_ops(_stmt('torch.library.register_fake("ns::op")(_fake)')) == {
        "ns::op": False}
    assert module_registrations(_module(
        '@torch.library.custom_op("ns::twice", mutates_args=())\ndef twice(x):\n    return x\n'
        'twice.register_fake(_fake)\n')) == [{"ns::twice": True}, {"ns::twice": False}]


def test_a_name_bound_to_a_torch_library_function_registers_as_it_does():
    # flash-attn's flash_attn_interface.py: the aliases under a version check, a no-op in the
    # ``else`` (the branch an old torch takes)
    text = ('if torch.__version__ >= "2.4.0":\n'
            '    _torch_custom_op_wrapper = torch.library.custom_op\n'
            '    _torch_register_fake_wrapper = torch.library.register_fake\n'
            'else:\n'
            '    _torch_custom_op_wrapper = noop_custom_op_wrapper\n'
            '    _torch_register_fake_wrapper = noop_register_fake_wrapper\n'
            '@_torch_custom_op_wrapper("flash_attn::_fwd", mutates_args=(), device_types="cuda")\n'
            'def _fwd(q):\n    return q\n'
            '@_torch_register_fake_wrapper("flash_attn::_fwd")\n'
            'def _fwd_fake(q):\n    return q\n'
            '_torch_register_fake_wrapper = None\n'
            '@_torch_register_fake_wrapper("flash_attn::_bwd")\n'
            'def _bwd_fake(q):\n    return q\n')
    assert module_registrations(_module(text)) == [
        {}, {"flash_attn::_fwd": True}, {"flash_attn::_fwd": False}, {}, {}]
    assert may_register(text.encode())
    # a name bound to something else, or an alias in a file naming no operator
    assert not may_register(b'wrap = functools.wraps\n@wrap("ns::op")\ndef f():\n    pass\n')
    assert not may_register(b"_wrap = torch.library.custom_op\n")


def test_what_a_registration_adds_to_its_operator():
    # bitsandbytes' CUDA kernels, a fake through the operator's own method, a gradient under an
    # `if`, a kernel for each dispatch key in a loop, a registration through the module's alias
    assert registration_kinds(_stmt(
        '@register_kernel("bitsandbytes::gemm_4bit", "cuda")\ndef _(A, B):\n    pass\n')) == {
        "kernel"}
    assert registration_kinds(_stmt("@halve.register_fake\ndef _(x):\n    pass\n")) == {"fake"}
    assert registration_kinds(_stmt(
        'if ok:\n    torch.library.register_autograd("ns::halve", backward)\n')) == {"gradient"}
    assert registration_kinds(_stmt(
        'for key in ("CPU", "Meta"):\n    _lib.impl("shift", _shift, key)\n')) == {"kernel"}
    assert registration_kinds(_stmt(
        '@_torch_register_fake_wrapper("flash_attn::fwd")\ndef _(q):\n    pass\n')) == {
        "registration"}


def test_a_helper_that_defines_operators_in_the_namespace_it_is_given():
    # spikingjelly's ``_register_dispatch(namespace, cpu, selection)``: a Library of the
    # namespace, operators defined under ``f"{namespace}::{direction}"``
    dispatch = _stmt(
        "def _register_dispatch(namespace, cpu, selection):\n"
        '    library = torch.library.Library(namespace, "FRAGMENT")\n'
        '    for direction in ("forward", "backward"):\n'
        '        definition = torch.library.triton_op(f"{namespace}::{direction}", impl)\n'
        '        library.impl(direction, reference, "CPU")\n'
        "    return library\n")
    assert namespace_parameter(dispatch) == (0, "namespace", True)
    # one that imports a module by a name it computes runs where that name's last part is
    # spelled out, as spikingjelly's is (``importlib.import_module(f"{cpu.__package__}.
    # autograd")``): the modules it may be are held in the file (engine.computed_imports);
    # not where the whole name is computed
    computed = ast.parse(ast.unparse(dispatch)).body[0]
    computed.body.insert(0, _stmt('validation = importlib.import_module(f"{cpu.__package__}.v")'))
    assert namespace_parameter(computed) == (0, "namespace", True)
    computed.body.insert(0, _stmt("other = importlib.import_module(name)"))
    assert namespace_parameter(computed) == (0, "namespace", False)
    # ``define`` on a Library made of a parameter; a name built with ``+``
    assert namespace_parameter(_stmt(
        "def make(doc, ns):\n    lib = Library(ns, 'DEF')\n    lib.define('halve(Tensor x) -> "
        "Tensor')\n")) == (1, "ns", True)
    assert namespace_parameter(_stmt(
        "def make(ns):\n    torch.library.define(ns + '::halve', '(Tensor x) -> Tensor')\n"
    )) == (0, "ns", True)
    # what defines nothing in a namespace it is given: a Library it only registers kernels
    # in, a name of its own, a namespace that is not a parameter, a class
    for text in ("def f(ns):\n    lib = Library(ns, 'IMPL')\n    lib.impl('op', g, 'CPU')\n",
                 "def f(ns):\n    torch.library.define('mine::op', '(Tensor x) -> Tensor')\n",
                 "def f(x):\n    torch.library.custom_op(f'{NS}::op', g)\n",
                 "def f(ns):\n    torch.library.custom_op(f'x{ns}::op', g)\n",
                 "class C:\n    lib = Library(NS, 'DEF')\n"):
        assert namespace_parameter(_stmt(text)) is None, text
    # its call defines every operator of the namespace passed, by position, keyword or a
    # module constant; not one it cannot tell
    helpers = {"_register_dispatch": NamespaceHelper(0, "namespace", True),
               "ops.make": NamespaceHelper(1, "ns", True)}
    body = ast.parse(
        '_NS = "sj_if"\n'
        '_dispatch = _register_dispatch("sj_lif", _cpu, _selection)\n'
        '_register_dispatch(namespace="sj_plif", cpu=_cpu, selection=_s)\n'
        "ops.make(doc, _NS)\n"
        "for ns in NAMES:\n    _register_dispatch(ns, _cpu, _s)\n"
        "_register_dispatch(*args)\n").body
    assert module_registrations(body, helpers) == [
        {}, {"sj_lif::*": True}, {"sj_plif::*": True}, {"sj_if::*": True}, {}, {}]
    assert module_registrations(body) == [{}] * 6
    # where a file cannot run the helper, the calls that define operators upstream
    assert namespace_helper_calls(body, helpers) == [
        (1, "sj_lif", "_register_dispatch"), (2, "sj_plif", "_register_dispatch"),
        (3, "sj_if", "ops.make")]
    assert namespace_helper_calls(body, {}) == []


def test_a_loop_over_a_literal_defines_each_namespace_its_passes_build():
    # spikingjelly's ``_ops/tempotron/__init__.py``: each pass builds a namespace from the
    # loop's variable and passes it to the helper, inside another call
    helpers = {"_register_dispatch": NamespaceHelper(0, "namespace", True)}
    body = ast.parse(
        "_dispatches = []\n"
        'for _operation, _environment in (("roots", "SJ_R"), ("states", "SJ_S")):\n'
        '    _namespace = f"sj_tempotron_{_operation}"\n'
        "    _dispatches.append(_register_dispatch(_namespace, _cpu, _selection))\n"
        # a pass's name is what it was bound to last, before the call; also in the
        # statement that binds it again
        'for _kind in ("a", "b"):\n'
        '    _ns = "first"\n'
        '    _ns = f"x_{_kind}"\n'
        "    _register_dispatch(_ns, _cpu, _s)\n"
        "    _ns = _register_dispatch(_ns + '_again', _cpu, _s)\n"
        '    _ns = "after"\n'
        # a part of the target that is no string, a name the loop binds otherwise, a loop
        # over what is no literal, a lambda's call that runs later: nothing is told
        'for _kind, _n in ((1, "b"),):\n    _register_dispatch(_kind, _cpu, _s)\n'
        'for _kind in ("c",):\n    _ns = "c0"\n    for _ns in make():\n'
        '        _register_dispatch(_ns, _cpu, _s)\n'
        "for _kind in NAMES:\n    _register_dispatch(f'y_{_kind}', _cpu, _s)\n"
        'for _kind in ("d",):\n    hooks.append(lambda: _register_dispatch(_kind, _cpu, _s))\n'
    ).body
    assert module_registrations(body, helpers) == [
        {}, {"sj_tempotron_roots::*": True, "sj_tempotron_states::*": True},
        {"x_a::*": True, "x_b::*": True, "x_a_again::*": True, "x_b_again::*": True},
        {}, {}, {}, {}]
    assert namespace_helper_calls(body, helpers) == [
        (1, "sj_tempotron_roots", "_register_dispatch"),
        (1, "sj_tempotron_states", "_register_dispatch"),
        (2, "x_a", "_register_dispatch"), (2, "x_a_again", "_register_dispatch"),
        (2, "x_b", "_register_dispatch"), (2, "x_b_again", "_register_dispatch")]
    # torch.library's own functions, by a name a literal loop builds
    assert module_registrations(ast.parse(
        'for _op in ("halve", "double"):\n'
        '    torch.library.define(f"ns::{_op}", "(Tensor x) -> Tensor")\n').body) == [
        {"ns::halve": True, "ns::double": True}]
