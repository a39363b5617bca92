"""The function that runs a lazily imported module's code is named after the module, and two
modules of the same name (peft's ``lora/bnb.py`` and ``adalora/bnb.py``) get names a reader
can tell apart. The golden case ``deferred_code`` covers the whole file."""

from nnrag_tui.engine.deferred import _names


def test_the_runner_is_named_after_its_module_and_clashes_take_the_package():
    assert _names("peft.tuners.lora.bnb", set()) == ("_run_bnb", "_bnb_ran")
    taken = {"_run_bnb", "_bnb_ran"}
    assert _names("peft.tuners.adalora.bnb", taken) == ("_run_adalora_bnb", "_adalora_bnb_ran")
    taken |= {"_run_adalora_bnb"}
    assert _names("peft.tuners.adalora.bnb", taken) == ("_run_adalora_bnb_2",
                                                        "_adalora_bnb_2_ran")
    # a name the file already uses for something else is never taken
    assert _names("pkg._private", {"_run_private"}) == ("_run_pkg_private", "_pkg_private_ran")
    assert _names("top", {"_run_top"}) == ("_run_top_2", "_top_2_ran")
