"""Source text cut into lines as Python's parser cuts it.

``str.splitlines`` also ends a line at a form feed, a vertical tab, the separators
``\\x1c``-``\\x1e``, ``\\x85`` and ``\\u2028``/``\\u2029``; Python's parser ends one only at
``\\n``, ``\\r\\n`` and ``\\r``. A form feed is whitespace to it (a page break, ``^L``, between
definitions in older code) and the others may sit in a string or a comment. Split with
``str.splitlines``, every line number ``ast`` gives after the first such character pointed a
line too high: a module with a form feed above its block gave the statement's text cut at the
wrong lines, and the extraction failed with a SyntaxError. (``ast.get_source_segment`` splits
the same way as this module, for the same reason.)
"""

from __future__ import annotations

import re

# what str.splitlines ends a line at that Python's parser does not
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def source_lines(text: str, keepends: bool = False) -> list[str]:
    """``text.splitlines(keepends)``, but ending lines where Python's parser ends them."""
    if _OTHER_BREAKS.search(text) is None:
        return text.splitlines(keepends)
    lines = _LINE.findall(text)
    return lines if keepends else [ln.rstrip("\r\n") for ln in lines]
