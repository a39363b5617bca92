"""How a failed stage is reported: the exception as plain data (type, message, frames, the
traceback's tail), every text bounded so that a hostile ``__str__`` cannot flood the report."""

from __future__ import annotations

import traceback


class StageFailed(Exception):
    def __init__(self, error: dict, detail: dict) -> None:
        super().__init__(error.get("message", ""))
        self.error = error
        self.detail = detail


def safe_str(obj, limit: int = 2000) -> str:
    try:
        s = str(obj)
    except BaseException:  # noqa: BLE001
        s = f"<unprintable {type(obj).__name__}>"
    return s if len(s) <= limit else s[:limit] + "..."


def describe(exc: BaseException) -> dict:
    t = type(exc)
    d: dict = {"type": t.__name__ if t.__module__ == "builtins" else
               f"{t.__module__}.{t.__qualname__}",
               "message": safe_str(exc)}
    mro = [c.__name__ for c in t.__mro__]
    d["bases"] = mro[:6]
    if isinstance(exc, ImportError):
        d["module"] = exc.name
    if isinstance(exc, NameError):
        d["name"] = getattr(exc, "name", None)
    if isinstance(exc, SystemExit):
        d["code"] = safe_str(exc.code, 200)
    if isinstance(exc, KeyError) and exc.args:
        d["key"] = safe_str(exc.args[0], 200)
    if isinstance(exc, SyntaxError):
        d["line"] = exc.lineno
        d["text"] = safe_str(exc.text, 300)
    try:
        frames = traceback.extract_tb(exc.__traceback__)
        d["frames"] = [{"file": f.filename, "line": f.lineno, "func": f.name,
                        "code": (f.line or "")[:200]} for f in frames[-12:]]
        tb = "".join(traceback.format_exception(t, exc, exc.__traceback__))
        d["traceback"] = tb[-6000:]
    except BaseException:  # noqa: BLE001
        d["frames"] = []
        d["traceback"] = ""
    return d


def short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
