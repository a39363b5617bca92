"""Shared helpers for the reliability tests (``test_reliability_*.py``): real modules to break,
the ways to break them, running the real CLI in a subprocess, and process bookkeeping.

Imported as ``reliability_helpers`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import codecs
import ctypes
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Self-contained enough that every nn.Module subclass in them is discovered on its own.
GOOD_TIMM = ("activations.py", "cbam.py", "config.py", "create_act.py", "drop.py", "eca.py",
             "format.py", "grn.py", "helpers.py", "mlp.py", "squeeze_excite.py")


# -- real modules ----------------------------------------------------------------------------
def timm_layers(timm_source: Path) -> Path:
    """timm's ``layers`` (69 modules) in the folder the ``timm_source`` fixture gives."""
    return timm_source / "timm" / "layers"


def real_modules(timm_source: Path) -> dict[str, bytes]:
    """``name.py`` -> bytes of the self-contained timm layers (``GOOD_TIMM``)."""
    d = timm_layers(timm_source)
    return {n: (d / n).read_bytes() for n in GOOD_TIMM}


def write_package(dest: Path, files: dict[str, bytes]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "__init__.py").write_bytes(b"")
    for name, data in files.items():
        (dest / name).write_bytes(data)
    return dest


def path_config_file(path: Path, root: Path, name: str = "corpus", **extra) -> Path:
    spec = {"path": str(root), **extra}
    path.write_text(json.dumps({name: spec}), encoding="utf-8")
    return path


# -- ways to break a file (each: bytes in, bytes out) ----------------------------------------
def truncate(data: bytes, frac: float) -> bytes:
    return data[: int(len(data) * frac)]


def flip_bytes(data: bytes, rng: random.Random, n: int) -> bytes:
    b = bytearray(data)
    for _ in range(n):
        if b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def python2(data: bytes) -> bytes:
    """Python 2 idioms inside otherwise real code: a SyntaxError in Python 3."""
    return (b"# converted badly\nprint 'loading'\ntry:\n    import cPickle\nexcept ImportError, e:"
            b"\n    pass\n" + data + b"\nprint >>sys.stderr, 'done'\nexec 'x = 1'\n")


def mixed_tabs(data: bytes) -> bytes:
    """Every other indented line indented with a tab: inconsistent (a TabError)."""
    out = []
    for i, line in enumerate(data.split(b"\n")):
        if i % 2 and line.startswith(b"        "):
            line = b"\t" + line[8:] if i % 4 == 1 else b"    \t" + line[8:]
        out.append(line)
    return b"\n".join(out)


def latin1(data: bytes, cookie: bool) -> bytes:
    """A latin-1 comment and string (bytes 0xe9, 0xfc): undecodable as UTF-8 unless a coding
    cookie says latin-1 (then it is valid Python)."""
    text = data.decode("utf-8").replace("\n", "\n# caf\u00e9 na\u00efve \u00fcber\n", 1)
    text += "\nGREETING = 'gr\u00fc\u00df dich'\n"
    head = "# -*- coding: latin-1 -*-\n" if cookie else ""
    return (head + text).encode("latin-1", errors="replace")


def bom(data: bytes) -> bytes:
    return codecs.BOM_UTF8 + data


def bom_with_conflicting_cookie(data: bytes) -> bytes:
    return codecs.BOM_UTF8 + b"# -*- coding: latin-1 -*-\n" + data


def unknown_cookie(data: bytes) -> bytes:
    return b"# -*- coding: klingon -*-\n" + data


def utf16(data: bytes) -> bytes:
    return data.decode("utf-8").encode("utf-16")


def nul_byte(data: bytes, at: float = 0.5) -> bytes:
    i = int(len(data) * at)
    return data[:i] + b"\0" + data[i:]


def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def cr_only(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r")


DEEP = 10_000


def deep_nesting() -> dict[str, bytes]:
    """Ten-thousand-deep nesting of every kind the parser meets."""
    d = DEEP
    return {
        "deep_parens.py": b"x = " + b"(" * d + b"1" + b")" * d + b"\n",
        "deep_lists.py": b"x = " + b"[" * d + b"]" * d + b"\n",
        # 1,000 levels (the parser's limit is 100); 10,000 would be a 50 MB file
        "deep_indent.py": b"".join(b" " * i + b"if x:\n" for i in range(1000)) + b" " * 1000
                          + b"pass\n",
        "deep_binop.py": b"x = " + b" + ".join([b"1"] * d) + b"\n",
        "deep_attr.py": b"x = a" + b".b" * d + b"\n",
        "deep_calls.py": b"x = f" + b"()" * d + b"\n",
        "deep_not.py": b"x = " + b"not " * d + b"1\n",
        "deep_lambda.py": b"x = " + b"lambda: " * d + b"1\n",
        "deep_class_bases.py": b"import torch.nn as nn\nclass Deep(nn.Module if " + b" + ".join(
            [b"1"] * 800) + b" else object):\n    def forward(self, x):\n        return x\n",
    }


# -- capabilities: make chmod 000 mean something to root ------------------------------------
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
PR_CAPBSET_DROP = 24


def drop_file_caps() -> None:
    """``preexec_fn``: as root, drop the capabilities that let root read any file from the
    bounding set, so the exec'd program gets EACCES on a ``chmod 000`` file like any user."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


# -- the real CLI in a subprocess ------------------------------------------------------------
def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NNRAG_", "PYTEST_", "COV_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def nnrag_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "nnrag_tui", *args]


def run_cli(args: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 120,
            cwd: Path | None = None, preexec_fn: Callable[[], None] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(nnrag_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          env=env or cli_env(), cwd=cwd or ROOT, preexec_fn=preexec_fn,
                          input=input, check=False)


def refused(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """A refused input: a non-zero exit, no traceback, and ``nnrag: error:`` lines (or
    argparse's ``nnrag CMD: error:``) of which one names the problem; returns the last."""
    err = proc.stderr
    assert "Traceback" not in err, err
    assert proc.returncode != 0, (proc.returncode, proc.stdout, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("nnrag") and ": error:" in ln]
    assert lines, err
    for needle in needles:
        assert any(needle in ln for ln in lines), f"{needle!r} not in {lines}"
    return lines[-1]


# A one-block package for the CLI tests.
FIXPKG = {
    "fixpkg/__init__.py": "",
    "fixpkg/blocks.py": "import torch.nn as nn\n\n\nclass Tiny(nn.Module):\n"
                        "    def forward(self, x):\n        return x\n",
}


def private_env(tmp_path: Path) -> dict[str, str]:
    """The CLI's environment with a private cache and data directory under ``tmp_path``."""
    return cli_env(NNRAG_CACHE_DIR=str(tmp_path / "cache"), NNRAG_DATA_DIR=str(tmp_path / "data"))


def one_block_config(tmp_path: Path) -> Path:
    """A configuration of one local source holding ``FIXPKG``."""
    root = tmp_path / "repo"
    for rel, text in FIXPKG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    cfg = tmp_path / "good.json"
    cfg.write_text(json.dumps({"fix": {"path": str(root / "fixpkg")}}))
    return cfg


# -- the index database ----------------------------------------------------------------------
def file_rows(db_path: Path) -> dict[str, str | None]:
    """relpath -> error (None when indexed) for every row of ``files``."""
    db = sqlite3.connect(str(db_path))
    try:
        return {r[0]: r[1] for r in db.execute("SELECT relpath, error FROM files")}
    finally:
        db.close()


def check_database(db_path: Path) -> None:
    """The index file is a sound SQLite database with no dangling references."""
    db = sqlite3.connect(str(db_path), timeout=60)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        for table in ("symbols", "imports", "blocks"):
            orphans = db.execute(f"SELECT COUNT(*) FROM {table} WHERE file_id NOT IN "
                                 "(SELECT id FROM files)").fetchone()[0]
            assert orphans == 0, f"{orphans} {table} rows without a file"
    finally:
        db.close()


# -- processes -------------------------------------------------------------------------------
def _live_processes() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, session id) of every live, non-zombie process (from /proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if fields[0] != b"Z":
            yield int(entry), int(fields[1]), int(fields[3])


def descendants(pid: int) -> set[int]:
    """Every live process whose ancestry leads to ``pid``."""
    parent = {p: pp for p, pp, _ in _live_processes()}
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= frontier
    return out


def processes_in_session(sid: int) -> set[int]:
    """Live (non-zombie) processes of session ``sid``: a killed command's leftovers."""
    return {p for p, _, s in _live_processes() if s == sid}


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    """The pids still alive after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if _alive(p)}
        if alive:
            time.sleep(0.05)
    return alive


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


def kill_session(sid: int) -> None:
    """SIGKILL whatever is left of a session we started (our own test processes only)."""
    for pid in processes_in_session(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- SIGKILL loops ---------------------------------------------------------------------------
def spawn_cli(args: Sequence[str], env: dict[str, str], stdout: bool = False
              ) -> subprocess.Popen:
    """The real CLI in its own session (so its leftovers can be found), stderr piped (and
    stdout, when ``stdout``)."""
    return subprocess.Popen(nnrag_cmd(*args),
                            stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT, start_new_session=True)


def read_until(proc: subprocess.Popen, needle: bytes, timeout: float) -> bytes:
    """stderr read so far, once ``needle`` shows up (or at EOF or after ``timeout``)."""
    import select

    fd = proc.stderr.fileno()
    got = b""
    deadline = time.monotonic() + timeout
    while needle not in got:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        got += chunk
    return got


def sigkill(proc: subprocess.Popen, leftovers_timeout: float = 10.0) -> tuple[int, set[int]]:
    """SIGKILL the main process only, as ``kill -9 PID`` would; returns its exit status and
    the processes it had started that are still alive ``leftovers_timeout`` s later (they are
    killed then, so that a failing test leaks nothing)."""
    family = descendants(proc.pid)
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    family |= processes_in_session(proc.pid)
    left = wait_gone(family, leftovers_timeout)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, left


def finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    """Waits for a spawned CLI; returns all of its stderr."""
    err = b""
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (err or b"").decode("utf-8", "replace")
