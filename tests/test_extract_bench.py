"""bench/extract_bench's checks of a generated file, which the issue's figures come from."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.extract_bench import has_star_import  # noqa: E402


def test_a_star_import_named_in_a_header_note_is_no_star_import():
    """icevision's files say where a name is assumed from, ``from fastcore.foundation import
    *``, in a comment; the bench counted 9 star imports that no file has."""
    note = ("# note: `Optional`: no corpus module binds them, assumed from `from "
            "fastcore.foundation import *`\n\nimport torch\n")
    assert not has_star_import(note)
    assert has_star_import(note + "from fastcore.foundation import *\n")
    assert has_star_import("def f():\n    pass\n\n\nif True:\n    from a import *\n")
