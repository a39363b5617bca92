"""Runs untrusted block code in a separate process, never in the caller.

``Sandbox`` keeps one pre-warmed worker (``python -I sandbox_worker.py``, torch imported once)
and sends it jobs; the worker forks a child per job. The engine process itself never imports
torch. What contains a block (all of it in the child, before the block's first line runs):

=====================================  ==========================================  =========
protection                             how                                          needs
=====================================  ==========================================  =========
separate process, own process group    fork from the worker, ``setsid``             -
whole-tree kill on timeout             PID namespace (child is its init: when it    root
                                       dies the kernel kills every descendant) +
                                       SIGKILL to the process group
wall-clock limit per stage             the worker's ``select`` deadline             -
memory, CPU seconds (soft < hard),     ``setrlimit`` AS, CPU, FSIZE, NPROC, CORE=0,  -
file size, processes, no core dumps    NOFILE; NPROC binds because of the uid drop;
                                       AS is the size the job starts at (torch
                                       loaded) plus ``SandboxLimits.memory``
memory and processes of the whole      a cgroup v1 ``memory`` + ``pids`` pair per   root,
tree                                   job, joined by the child first thing         cgroup v1
no privileges                          ``setuid``/``setgid`` to nobody (65534),     root
                                       no supplementary groups, no_new_privs
no network                             network namespace (only a downed loopback)   root, or
                                                                                    userns
nothing written outside its dir        private mount namespace: every mount         root
                                       remounted read-only, fresh size-capped tmpfs
                                       on /tmp (block dir /tmp/block, owned by
                                       nobody) and /dev/shm; without it, only file
                                       permissions (nobody owns nothing) protect
home directories unreadable            tmpfs over /root, /home and $HOME; the        root
                                       interpreter's directories bound back
                                       read-only
no view of other processes             a /proc of the child's own PID namespace      root
no secrets from the environment        the worker starts with a minimal environment  -
                                       and the child clears it again
bounded output                         the block's sys.stdout/err keep 64 KiB;       -
                                       fd-level output is drained by the worker,
                                       which keeps head and tail
=====================================  ==========================================  =========

Every job reports which of these held (``SandboxResult.protections``). What does not hold:

- A block can read world-readable files outside the hidden directories (read-only).
- The whole process tree is bounded (memory and process count) only where the worker can
  make cgroups: as root with the cgroup v1 ``memory`` and ``pids`` controllers mounted, each
  job gets its own pair (``nnrag-sandbox-<worker>-<job>``), removed after the job, and a
  killed worker's are swept by the next one; ``protections["tree_limits"]`` lists them and
  ``exit["oom_kills"]`` counts what the kernel killed. Elsewhere (cgroup v2 only, not root)
  the limits bind each process: a block forking up to RLIMIT_NPROC children could use that
  many times the memory limit, and the notes say so.
- Without root (no CAP_SYS_ADMIN): no PID or mount namespace and no uid drop. What remains is
  the rlimits, the process-group kill, the scrubbed environment, a fresh directory, bounded
  output and, where the kernel allows unprivileged user namespaces, no network; writes
  outside the block directory are then stopped by the user's own permissions only. The
  report's ``notes`` say which applied. (CI runs as root; this path is not exercised there.)
- The block runs in the same process as the stage harness, so a block written to cheat could
  forge its own import/instantiate/forward results (never parse/compile/static, which the
  worker judges before the child exists): the sandbox protects the machine from the block,
  not the verdict from a cheat.

Stages 1-3 (parse, compile, static; ``validate.source_stages``) run in the worker itself when
``nnrag_tui`` and pyflakes import there (``info["source_stages"]``): they never execute the
block, and their per-chunk cache lives as long as the worker.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from nnrag_tui.engine.errors import NnragError
from nnrag_tui.engine.extensions import builds_at_import

WORKER = Path(__file__).with_name("sandbox_worker.py")
SANDBOX_STAGES = ("import", "instantiate", "forward")
STAGES = ("parse", "compile", "static", "import", "instantiate", "forward")
NOBODY = 65534
# Environment variables the worker may inherit: none that could carry a secret.
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


class SandboxError(NnragError):
    """The sandbox worker could not be started (no torch in the interpreter, say)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-job limits. Times in seconds, sizes in bytes. ``memory`` is what a block may map
    beyond what the worker maps when the job starts (torch and the interpreter), whichever
    build of torch that is."""

    memory: int = 4 << 30
    fsize: int = 64 << 20
    nproc: int = 64
    output: int = 64 << 10
    tmpfs: int = 256 << 20
    import_timeout: float = 20.0
    instantiate_timeout: float = 20.0
    forward_timeout: float = 20.0
    setup_timeout: float = 10.0
    source_timeout: float = 20.0  # each of parse, compile, static
    # the least time for the import of a file that builds a C++ extension as it imports
    # (``extensions.builds_at_import``): easyocr's deformable convolutions compile theirs in
    # 36-80 s here
    build_timeout: float = 300.0

    def timeouts(self) -> dict[str, float]:
        return {"setup": self.setup_timeout, "parse": self.source_timeout,
                "compile": self.source_timeout, "static": self.source_timeout,
                "import": self.import_timeout, "instantiate": self.instantiate_timeout,
                "forward": self.forward_timeout}


@dataclass
class SandboxResult:
    """What the worker saw of one job: the child's stage events, how it ended, its output."""

    events: list[dict]
    exit: dict
    killed: dict | None
    output: str
    output_bytes: int
    output_truncated: bool
    wall: float
    protections: dict = field(default_factory=dict)
    error: str | None = None
    t_exit: float | None = None  # the worker's monotonic clock when the child ended

    def stage_events(self) -> dict[str, dict]:
        """The ``end`` event of each stage that finished, by stage."""
        return {e["stage"]: e for e in self.events
                if e.get("ev") == "end" and e.get("stage") in STAGES}

    def started(self) -> list[str]:
        return [e["stage"] for e in self.events
                if e.get("ev") == "start" and e.get("stage") in STAGES]

    def as_dict(self) -> dict:
        return {"exit": self.exit, "killed": self.killed, "output": self.output,
                "output_bytes": self.output_bytes, "output_truncated": self.output_truncated,
                "wall": self.wall, "protections": self.protections, "error": self.error}


class Sandbox:
    """A pre-warmed worker process that runs block code in contained children.

    ``with Sandbox() as sb: sb.run(code, "Name")``. The worker starts on first use (about
    1.5-3 s: importing torch) and is restarted transparently if it dies. One job at a time per
    sandbox (a lock serialises callers); use several sandboxes to validate in parallel.
    """

    def __init__(self, *, limits: SandboxLimits | None = None, python: str | None = None,
                 uid: int | None = NOBODY, network: bool = False, mounts: bool = True,
                 pid_namespace: bool = True, deny_imports: tuple[str, ...] = (),
                 warm: tuple[str, ...] = ("numpy",), start_timeout: float = 120.0) -> None:
        self.limits = limits or SandboxLimits()
        self.python = python or sys.executable
        self.uid = uid
        self.network = network
        self.mounts = mounts
        self.pid_namespace = pid_namespace
        self.deny_imports = tuple(deny_imports)
        self.warm = tuple(warm)
        self.start_timeout = start_timeout
        self.info: dict = {}
        self.restarts = 0
        self.jobs = 0
        self._proc: subprocess.Popen | None = None
        self._lock = threading.RLock()
        self._ids = 0
        self._finalizer = None

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def worker_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> dict:
        """Starts the worker if it is not running; returns its ready message."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return self.info
            self._spawn()
            return self.info

    def _spawn(self) -> None:
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2",
                    "PYTHONDONTWRITEBYTECODE": "1"})
        try:
            proc = subprocess.Popen(
                [self.python, "-I", str(WORKER)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd="/",
                start_new_session=True, close_fds=True)
        except OSError as exc:
            raise SandboxError(f"cannot start the sandbox worker ({self.python}): "
                               f"{exc.strerror or exc}") from None
        self._proc = proc
        self._finalizer = weakref.finalize(self, _terminate, proc)
        config = {"warm": list(self.warm), "home": os.path.expanduser("~")}
        try:
            ready = self._exchange(config, self.start_timeout)
        except SandboxError:
            _terminate(proc)
            self._proc = None
            raise
        if not ready.get("ready"):
            _terminate(proc)
            self._proc = None
            raise SandboxError(f"the validation sandbox cannot start: {ready.get('error', ready)}"
                               " (install torch, e.g. `pip install torch==2.13.0`)")
        self.info = ready

    def close(self) -> None:
        """Stops the worker. A worker still starting (in another thread) is killed outright
        rather than waited for."""
        if not self._lock.acquire(timeout=0.05):
            proc = self._proc
            if proc is not None and proc.poll() is None:
                _kill(proc)
            self._lock.acquire()
        try:
            if self._proc is not None:
                _terminate(self._proc)
                self._proc = None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
        finally:
            self._lock.release()

    # -- jobs ------------------------------------------------------------------------------
    def run(self, code: str, name: str | None = None, stages=SANDBOX_STAGES, *,
            timeouts: dict[str, float] | None = None, limits: SandboxLimits | None = None,
            keep_going: bool = True, call_sites: list[dict] | None = None,
            files: dict[str, bytes] | None = None) -> SandboxResult:
        """Runs ``stages`` on the block file ``code`` whose target class is ``name``: import,
        instantiate, forward, and (when the worker can, ``info["source_stages"]``) parse,
        compile and static before them. With ``call_sites`` (``engine.callsites`` argument
        sets) instantiate tries those instead of guessing. ``files`` (path from the block
        file's folder -> content) are put beside the block file, as upstream has them beside
        its module (``GeneratedBlock.files``). Never raises for anything the block does."""
        lim = limits or self.limits
        tmo = lim.timeouts()
        if timeouts:
            tmo.update(timeouts)
        if "import" in stages and builds_at_import(code) is not None:
            tmo["import"] = max(tmo["import"], lim.build_timeout)
        stages = [s for s in STAGES if s in set(stages)]
        cpu = sum(tmo[s] for s in stages) + 2.0
        job = {
            "code": code, "name": name, "stages": stages, "timeouts": tmo,
            "keep_going": keep_going,
            "limits": {"memory": lim.memory, "fsize": lim.fsize, "nproc": lim.nproc,
                       "output": lim.output, "tmpfs": lim.tmpfs, "cpu": cpu},
            "isolate": {"network": not self.network, "mounts": self.mounts,
                        "pid": self.pid_namespace, "uid": self.uid},
            "deny_imports": list(self.deny_imports),
        }
        if call_sites:
            job["call_sites"] = list(call_sites)
        if files:
            job["files"] = {rel: base64.b64encode(data).decode("ascii")
                            for rel, data in files.items()}
        # the worker kills a stuck stage itself; this is the backstop for a stuck worker
        backstop = sum(tmo[s] for s in stages) + tmo["setup"] + 30.0
        with self._lock:
            for attempt in (0, 1):
                if self._proc is None or self._proc.poll() is not None:
                    if self._proc is not None:
                        self.restarts += 1
                    self._spawn()
                self._ids += 1
                job["id"] = self._ids
                try:
                    reply = self._exchange(job, backstop)
                except SandboxError as exc:
                    _terminate(self._proc)
                    if attempt == 1:
                        return SandboxResult([], {"code": None, "signal": None}, None, "", 0,
                                             False, 0.0, error=str(exc))
                    continue
                self.jobs += 1
                return _result(reply)
        raise AssertionError("unreachable")

    def _exchange(self, obj: dict, timeout: float) -> dict:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(obj) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise SandboxError(f"the sandbox worker is gone ({exc})") from None
        line = _readline(proc, timeout)
        if not line:
            try:  # an end of the stream is a worker that is exiting: give it a moment
                code = proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                code = None
            raise SandboxError(f"the sandbox worker died (exit code {code})" if code is not None
                               else f"the sandbox worker did not answer in {timeout:.0f} s")
        try:
            return json.loads(line)
        except ValueError:
            raise SandboxError(f"garbled answer from the sandbox worker: {line[:200]!r}"
                               ) from None


def _readline(proc: subprocess.Popen, timeout: float) -> bytes:
    """One line from the worker, or b"" when it dies or the time is up."""
    import select

    fd = proc.stdout.fileno()
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b""
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return b""
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b""
        buf += chunk
        if buf.endswith(b"\n"):
            return bytes(buf)


def _result(reply: dict) -> SandboxResult:
    events = reply.get("events") or []
    prot = next((e.get("protections", {}) for e in events if e.get("ev") == "setup"), {})
    return SandboxResult(
        events=events,
        exit=reply.get("exit") or {"code": None, "signal": None},
        killed=reply.get("killed"),
        output=reply.get("output", ""),
        output_bytes=reply.get("output_bytes", 0),
        output_truncated=reply.get("output_truncated", False),
        wall=reply.get("wall", 0.0),
        protections=prot,
        error=reply.get("error"),
        t_exit=reply.get("t_exit"),
    )


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _terminate(proc: subprocess.Popen | None) -> None:
    """Ends the worker: EOF on its stdin first, SIGKILL to its group if it lingers."""
    if proc is None or proc.poll() is not None:
        return
    try:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=2)
    except (OSError, subprocess.TimeoutExpired):
        _kill(proc)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    finally:
        for s in (proc.stdout,):
            try:
                if s:
                    s.close()
            except OSError:
                pass
