"""What the app remembers about validation between sessions: each block's latest outcome (for
the results' status column and the triage screen) and which failures the user ignores.

Kept as one JSON file in the data directory (``validations.json``, beside the registry), written
atomically. Pure Python, no Textual: the app changes it on the UI thread and saves it after a
short delay. Outcomes hold the validator's report as a dict; ``report_of`` turns one back into
a ``ValidationReport`` for the registry's provenance.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnrag_tui.engine.facts import Block
from nnrag_tui.engine.lines import source_lines

HISTORY_FILE = "validations.json"
FORMAT = 1
CONTEXT = 2  # lines shown either side of the offending line
MAX_OUTPUT = 4000  # characters of sandbox output kept per outcome

VALIDATED, FAILED, IGNORED, NOT_RUN = "validated", "failed", "ignored", "not run"


def block_id(block: Block) -> str:
    """A block's identity across sessions: its repository and ``module:Qual``."""
    return f"{block.source}|{block.key}"


def code_digest(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Outcome:
    """A block's latest validation."""

    id: str
    name: str
    source: str
    key: str
    validated: bool
    level: str
    cause: str | None
    cause_summary: str | None
    at: float
    seconds: float
    code_sha: str
    report: dict[str, Any]
    offending: dict[str, Any] | None = None  # {"line": n, "context": [[n, text], ...]}

    @property
    def stages(self) -> list[dict[str, Any]]:
        return list(self.report.get("stages") or [])

    @property
    def failed_stage(self) -> dict[str, Any] | None:
        return next((s for s in self.stages if not s.get("ok")), None)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "source": self.source, "key": self.key,
                "validated": self.validated, "level": self.level, "cause": self.cause,
                "cause_summary": self.cause_summary, "at": self.at, "seconds": self.seconds,
                "code_sha": self.code_sha, "report": self.report, "offending": self.offending}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(str(d["id"]), str(d["name"]), str(d["source"]), str(d["key"]),
                   bool(d["validated"]), str(d.get("level") or "none"), d.get("cause"),
                   d.get("cause_summary"), float(d.get("at") or 0.0),
                   float(d.get("seconds") or 0.0), str(d.get("code_sha") or ""),
                   dict(d.get("report") or {}), d.get("offending"))


class ValidationHistory:
    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.path = Path(data_dir) / HISTORY_FILE
        self.outcomes: dict[str, Outcome] = {}
        self.ignored: set[str] = set()
        self.problem: str | None = None
        self.dirty = False
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self.problem = f"cannot read the validation history {self.path}: {exc}"
            return
        try:
            for d in data.get("outcomes", []):
                o = Outcome.from_dict(d)
                self.outcomes[o.id] = o
            self.ignored = {str(i) for i in data.get("ignored", [])}
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            self.problem = f"the validation history {self.path} is damaged ({exc}); " \
                           "starting a new one"
            self.outcomes, self.ignored = {}, set()

    def save(self) -> None:
        """Raises ``OSError`` when the file cannot be written."""
        data = {"format": FORMAT, "ignored": sorted(self.ignored),
                "outcomes": [o.as_dict() for o in self.outcomes.values()]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.path)
        self.dirty = False

    # -- reading ---------------------------------------------------------------------------
    def get(self, bid: str) -> Outcome | None:
        return self.outcomes.get(bid)

    def status(self, bid: str) -> str:
        o = self.outcomes.get(bid)
        if o is None:
            return NOT_RUN
        if o.validated:
            return VALIDATED
        return IGNORED if bid in self.ignored else FAILED

    def failures(self, *, ignored: bool | None = False) -> list[Outcome]:
        """Blocks whose latest validation failed; ``ignored``: only those the user ignores
        (True), only the others (False) or all (None)."""
        out = [o for o in self.outcomes.values() if not o.validated]
        if ignored is not None:
            out = [o for o in out if (o.id in self.ignored) == ignored]
        return out

    # -- changing --------------------------------------------------------------------------
    def record(self, block: Block, report: Any, code: str) -> Outcome:
        """Keeps ``report`` (a ValidationReport) as ``block``'s latest outcome."""
        d = report.as_dict()
        sandbox = d.get("sandbox") or {}
        if isinstance(sandbox.get("output"), str) and len(sandbox["output"]) > MAX_OUTPUT:
            sandbox["output"] = "…" + sandbox["output"][-MAX_OUTPUT:]
        bid = block_id(block)
        o = Outcome(bid, block.name, block.source, block.key, bool(report.validated),
                    str(report.level), report.cause, report.cause_summary, time.time(),
                    float(report.seconds), code_digest(code), d,
                    None if report.validated else offending(d, code))
        self.outcomes[bid] = o
        self.dirty = True
        return o

    def set_ignored(self, bid: str, ignored: bool) -> None:
        if ignored:
            self.ignored.add(bid)
        else:
            self.ignored.discard(bid)
        self.dirty = True

    def forget(self, bid: str) -> None:
        self.outcomes.pop(bid, None)
        self.ignored.discard(bid)
        self.dirty = True


# -- the offending line ----------------------------------------------------------------------
_LINE_RE = re.compile(r"\bline (\d+)")


def offending_line(report: dict[str, Any]) -> int | None:
    """The line of the generated file a failed validation points at, if it names one: the
    syntax error's line, the first undefined name, the innermost traceback frame in the
    block's file."""
    detail = report.get("cause_detail") or {}
    if isinstance(detail.get("line"), int):
        return detail["line"]
    where = detail.get("where")
    if isinstance(where, list) and where and isinstance(where[0], dict):
        line = where[0].get("line")
        if isinstance(line, int) and line > 0:
            return line
    failed = next((s for s in report.get("stages") or [] if not s.get("ok")), None)
    if failed is not None:
        err = (failed.get("detail") or {}).get("error") or {}
        frames = err.get("frames") if isinstance(err, dict) else None
        mine = [f for f in frames or [] if isinstance(f, dict)
                and str(f.get("file", "")).endswith("block.py")]
        if mine and isinstance(mine[-1].get("line"), int):
            return mine[-1]["line"]
        undefined = (failed.get("detail") or {}).get("undefined")
        if isinstance(undefined, list) and undefined and isinstance(undefined[0], dict):
            line = undefined[0].get("line")
            if isinstance(line, int) and line > 0:
                return line
    if isinstance(where, str):
        m = _LINE_RE.search(where)
        if m:
            return int(m.group(1))
    return None


def offending(report: dict[str, Any], code: str) -> dict[str, Any] | None:
    line = offending_line(report)
    lines = source_lines(code)
    if line is None or not 1 <= line <= len(lines):
        return None
    first, last = max(1, line - CONTEXT), min(len(lines), line + CONTEXT)
    return {"line": line, "context": [[n, lines[n - 1]] for n in range(first, last + 1)]}


def report_of(outcome: Outcome) -> Any:
    """The outcome's report as the engine's ``ValidationReport`` (for the registry)."""
    from nnrag_tui.engine.validate import StageVerdict, ValidationReport

    d = outcome.report
    stages = tuple(StageVerdict(str(s.get("stage")), bool(s.get("ok")),
                                float(s.get("seconds") or 0.0), str(s.get("diagnostics") or ""),
                                dict(s.get("detail") or {}))
                   for s in d.get("stages") or [])
    return ValidationReport(str(d.get("name") or outcome.name), stages, bool(d.get("validated")),
                            str(d.get("level") or "none"), d.get("cause"),
                            d.get("cause_summary"), dict(d.get("cause_detail") or {}),
                            float(d.get("seconds") or 0.0), dict(d.get("sandbox") or {}))
