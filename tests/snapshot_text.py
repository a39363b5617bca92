"""A failed screenshot, said in the test's own output: the rows of the screen whose text
differs, or, where every row reads the same, the rows whose colours differ.

pytest-textual-snapshot writes its comparison to an HTML report on the machine that ran the
tests; a CI log shows only "assert False". This reads the data the plugin leaves for that
report and turns the two SVG screens back into text.
"""
from __future__ import annotations

import difflib
import html
import pickle
import re
from pathlib import Path

_TEXT = re.compile(r'<text class="([^"]*)" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>')


def screen_rows(svg: str) -> list[tuple[str, str]]:
    """Each row of the screen, top to bottom: (its text, its text with each run's style
    class in front of it)."""
    rows: dict[float, list[tuple[float, str, str]]] = {}
    for m in _TEXT.finditer(svg):
        rows.setdefault(float(m[3]), []).append((float(m[2]), m[1], html.unescape(m[4])))
    out = []
    for y in sorted(rows):
        runs = sorted(rows[y])
        out.append(("".join(t for _, _, t in runs),
                    "".join(f"[{c}]{t}" for _, c, t in runs)))
    return out


def mismatch(report_data: Path, limit: int = 40) -> str:
    """What differs between the expected and the actual screen of the comparison whose data
    the plugin wrote to ``report_data``."""
    try:
        data = pickle.loads(report_data.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        return f"(no comparison data at {report_data}: {exc})"
    expected, actual = screen_rows(data[1] or ""), screen_rows(data[2] or "")
    if not expected:
        return "no snapshot on disk yet (run pytest --snapshot-update after a look)"
    which = 0 if [r[0] for r in expected] != [r[0] for r in actual] else 1
    said = "text" if which == 0 else "colours only (the text is the same)"
    diff = list(difflib.unified_diff([r[which] for r in expected], [r[which] for r in actual],
                                     "expected", "actual", n=1, lineterm=""))
    more = f"\n... {len(diff) - limit} more lines" if len(diff) > limit else ""
    return f"the screens differ in {said}:\n" + "\n".join(diff[:limit]) + more
