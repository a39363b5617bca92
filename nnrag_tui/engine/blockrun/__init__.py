"""Running a block file: the import, instantiate and forward stages of validation.

Imported by the sandbox worker, which runs them in its contained child, and by the benchmarks,
which reuse the validator's guesses. It needs the standard library and torch only (torch is
imported inside the functions that use it), because the worker may run under an interpreter
that has torch but not nnrag: the worker loads this package by its path.
"""

from __future__ import annotations

from . import arguments, errors, inputs, stages  # noqa: F401
