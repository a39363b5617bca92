"""Validation commands (nnrag validate)."""

from __future__ import annotations


def register(sub) -> None:
    """Adds this module's subcommands (none yet)."""
