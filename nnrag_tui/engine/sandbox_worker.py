"""The sandbox worker: a long-lived interpreter that has imported torch once and forks one child
per job. The child contains itself (see ``_contain``), runs the requested stages on the block
file (import, instantiate, forward: ``blockrun``) and reports each stage as a JSON line on a
pipe; this worker enforces the wall-clock limit per stage, keeps a bounded copy of the child's
output, reaps it and answers the caller with one JSON line.

Run as ``python -I sandbox_worker.py`` by ``nnrag_tui.engine.sandbox.Sandbox``, never imported
by the engine: it depends on the standard library, torch and the ``blockrun`` package beside
it only, so it can run under any interpreter that has torch, and the engine process never
imports torch.

Protocol (one JSON object per line): the first line on stdin is the worker configuration; the
worker answers ``{"ready": true, ...}``. Each later line is a job; each answer is one line.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import faulthandler
import gc
import importlib.abc
import importlib.util
import io
import json
import math
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time

# -- constants -------------------------------------------------------------------------------
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

SOURCE_STAGES = ("parse", "compile", "static")
BLOCK_FILE = "block.py"
SANDBOX_TMP = "/tmp"
WORKDIR = "/tmp/block"
# Mounts that are not plain file trees: left alone by the read-only remount.
SPECIAL_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue", "securityfs",
    "debugfs", "tracefs", "pstore", "bpf", "fusectl", "configfs", "hugetlbfs", "autofs",
    "binfmt_misc", "efivarfs", "rpc_pipefs", "nsfs"})
SPECIAL_TREES = ("/proc", "/sys", "/dev")
# Never hidden behind a tmpfs, whatever $HOME says.
SYSTEM_DIRS = ("/", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
               "/opt", "/var", "/tmp", "/dev", "/proc", "/sys", "/run", "/srv", "/mnt",
               "/media", "/nix", "/snap")
MAX_EVENT_BYTES = 1 << 20  # a child cannot make the worker hold more than this of results

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _load_blockrun():
    """The stages that run a block (``nnrag_tui/engine/blockrun``, beside this file), loaded
    by path under a private name: run as ``python -I``, this file's folder is not on
    sys.path, and the interpreter may have torch but not nnrag."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "blockrun")
    spec = importlib.util.spec_from_file_location(
        "_nnrag_blockrun", os.path.join(here, "__init__.py"), submodule_search_locations=[here])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    return package


_blockrun = _load_blockrun()
STAGES = _blockrun.stages.STAGES
StageFailed = _blockrun.errors.StageFailed
describe = _blockrun.errors.describe


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    _check(_libc.mount(src.encode() if src else None, target.encode(),
                       fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                       data.encode() if data else None), f"mount {target}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl")


# == the worker ==============================================================================
class Worker:
    def __init__(self, config: dict) -> None:
        self.config = config
        self.out = None  # the protocol stream (set in serve)
        self.pidns_fd: int | None = None
        self.source = None
        self.static_cache = None
        self.pending: list[tuple[int, _TreeLimits]] = []  # said done, not reaped yet
        self.jobs = 0
        self.hidden: list[tuple[str, list[str]]] = []
        self.tmp_binds: list[str] = []  # interpreter directories the private /tmp would hide

    def warm(self) -> dict:
        t = time.perf_counter()
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        try:
            import torch  # (the point of the worker)
        except Exception as exc:  # noqa: BLE001  (said to the caller, who names the fix)
            return {"ready": False, "error": f"torch cannot be imported by {sys.executable}: "
                                             f"{type(exc).__name__}: {exc}"}
        torch.set_num_threads(1)
        # Seeding once here costs ~10 ms (it visits every device backend); each forked
        # child inherits the seeded generators and starts from the same state.
        torch.manual_seed(0)

        for name in self.config.get("warm", []):
            try:
                __import__(name)
            except Exception:  # noqa: BLE001  (a missing optional package is fine)
                pass
        try:  # the source stages (parse, compile, static) of the engine, when importable
            import pyflakes.checker  # noqa: F401

            from nnrag_tui.engine import validate as source_module

            self.source = source_module
            self.static_cache = source_module.StaticCache()
        except Exception:  # noqa: BLE001
            self.source = None
        try:
            self.pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY)
        except OSError:
            self.pidns_fd = None
        self.hidden = _hidden_roots(self.config.get("home"))
        self.tmp_binds = _topmost_inside(os.path.realpath(SANDBOX_TMP), _interpreter_dirs())
        # Everything imported so far is permanent: the children's garbage collector never
        # walks it, so it never writes to (and copies) the parent's pages.
        gc.collect()
        gc.freeze()
        return {"ready": True, "pid": os.getpid(), "python": sys.version.split()[0],
                "torch": torch.__version__, "euid": os.geteuid(),
                "warm_seconds": round(time.perf_counter() - t, 3),
                "source_stages": self.source is not None,
                "hidden": [h for h, _ in self.hidden]}

    def serve(self) -> None:
        # The protocol keeps a private copy of fd 1; fd 1 itself goes to stderr so that stray
        # prints (of torch, say) cannot corrupt it.
        proto_fd = os.dup(1)
        os.dup2(2, 1)
        self.out = os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8")
        stdin = sys.stdin.buffer
        line = stdin.readline()
        if not line:
            return
        self.config = json.loads(line)
        _TreeLimits.sweep()
        ready = self.warm()
        self._send(ready)
        if not ready.get("ready"):
            return
        while True:
            line = stdin.readline()
            if not line:
                self.reap(block=True)
                return  # the caller went away
            try:
                job = json.loads(line)
            except ValueError as exc:
                self._send({"id": None, "error": f"bad job: {exc}"})
                continue
            if job.get("op") == "ping":
                self._send({"id": job.get("id"), "pong": True})
                continue
            try:
                reply = self.run_job(job)
            except Exception as exc:  # noqa: BLE001  (the worker must survive its own bugs)
                reply = {"id": job.get("id"), "error": f"worker: {type(exc).__name__}: {exc}"}
            self._send(reply)

    def _send(self, obj: dict) -> None:
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    # -- one job ---------------------------------------------------------------------------
    def run_job(self, job: dict) -> dict:
        self.reap(block=len(self.pending) > 8)
        t0 = time.perf_counter()
        # A directory on the real file system, used only when the child cannot have a
        # private /tmp; made and removed here, so no path the child reports is ever trusted.
        fallback = tempfile.mkdtemp(prefix="nnrag-sandbox-")
        try:
            return self._run_job(job, t0, fallback)
        finally:
            shutil.rmtree(fallback, ignore_errors=True)

    def _source_stages(self, job: dict, fallback: str) -> tuple[list[dict], bool]:
        """Parse, compile and static check, here in the worker: they never execute the
        block, and here the per-statement static cache lasts from job to job. The code
        object goes to the child, compiled under the path the child will import from."""
        events: list[dict] = []
        stages = job.get("stages", [])
        source = [s for s in stages if s in SOURCE_STAGES]
        if not source:
            return events, True
        if self.source is None:
            events.append({"ev": "error", "message": "the source stages are not available "
                           "in this worker (nnrag_tui or pyflakes not importable)"})
            return events, False
        private = job.get("isolate", {}).get("mounts", True) and os.geteuid() == 0
        path = os.path.join(WORKDIR if private else fallback, BLOCK_FILE)
        check = self.source.source_stages(
            job.get("code", ""), path, upto=source[-1], keep_going=job.get("keep_going", True),
            cache=self.static_cache,
            on_start=lambda st: events.append({"ev": "start", "stage": st,
                                               "t": time.monotonic()}),
            on_end=lambda v: events.append({"ev": "end", "stage": v.stage, "ok": v.ok,
                                            "seconds": v.seconds, "verdict": v.as_dict(),
                                            "t": time.monotonic()}))
        job["code_object"] = check.code_object
        if not job.get("name"):
            job["name"] = check.target
        return events, check.proceed and any(s in STAGES for s in stages)

    def _run_job(self, job: dict, t0: float, fallback: str) -> dict:
        pre, go_on = self._source_stages(job, fallback)
        if not go_on:
            return {"id": job.get("id"), "events": pre + [{"ev": "done"}],
                    "exit": {"code": None, "signal": None, "done": True}, "killed": None,
                    "output": "", "output_bytes": 0, "output_truncated": False,
                    "wall": round(time.perf_counter() - t0, 4), "t_exit": time.monotonic()}
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        new_pidns = False
        if job.get("isolate", {}).get("pid", True) and self.pidns_fd is not None:
            try:
                _unshare(CLONE_NEWPID)  # the next child is PID 1 of a fresh namespace
                new_pidns = True
            except OSError:
                new_pidns = False
        lim = job.get("limits", {})
        self.jobs += 1
        tree = _TreeLimits(f"nnrag-sandbox-{os.getpid()}-{self.jobs}",
                           int(lim.get("memory", 4 << 30)), int(lim.get("nproc", 64)))
        t_fork = time.monotonic()
        try:
            pid = os.fork()
        except OSError:
            tree.close()
            raise
        if pid == 0:  # the child never returns
            try:
                os.close(res_r)
                os.close(out_r)
                job["_tree"] = (tree.join(), tree.problem)
                _child(job, res_w, out_w, self, new_pidns, fallback)
            finally:
                os._exit(70)
        if new_pidns:
            _check(_libc.setns(ctypes.c_int(self.pidns_fd), ctypes.c_int(CLONE_NEWPID)),
                   "setns")
        os.close(res_w)
        os.close(out_w)
        try:
            reply = self._watch(job, pid, res_r, out_r, t0, tree)
            reply["t_fork"] = t_fork
            reply["events"] = pre + reply["events"]
            return reply
        finally:
            for fd in (res_r, out_r):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _watch(self, job: dict, pid: int, res_r: int, out_r: int, t0: float,
               tree: _TreeLimits) -> dict:
        """Follows the child until it reports ``done``, dies or overruns a stage's deadline.
        After ``done`` the answer goes out at once: the child's exit (tearing down its
        namespaces takes milliseconds) is reaped later, off the caller's clock."""
        timeouts = job.get("timeouts", {})
        out = _Capture(int(job.get("limits", {}).get("output", 64 << 10)))
        res = _Events()
        stage = "setup"
        deadline = time.monotonic() + float(timeouts.get("setup", 10.0))
        killed = None
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        open_fds = {res_r, out_r}
        exited = done = False
        while not (exited or done):
            now = time.monotonic()
            if now >= deadline:
                killed = {"reason": "timeout", "stage": stage,
                          "after": float(timeouts.get(stage, timeouts.get("setup", 10.0)))}
                break
            wait = deadline - now if pidfd is not None else min(deadline - now, 0.02)
            watch = list(open_fds) + ([pidfd] if pidfd is not None else [])
            try:
                ready, _, _ = select.select(watch, [], [], wait)
            except InterruptedError:
                continue
            for fd in ready:
                if fd == pidfd:
                    exited = True
                    continue
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    open_fds.discard(fd)
                elif fd == out_r:
                    out.add(chunk)
                else:
                    for ev in res.add(chunk):
                        if ev.get("ev") == "start" and ev.get("stage") in timeouts:
                            stage = ev["stage"]
                            deadline = time.monotonic() + float(timeouts[stage])
                        elif ev.get("ev") == "end":
                            stage = "between"
                            deadline = time.monotonic() + float(timeouts.get("setup", 10.0))
                        elif ev.get("ev") == "done":
                            done = True
            if pidfd is None and not exited:
                exited = _reaped(pid) is not None
        t_exit = time.monotonic()
        _kill_tree(pid)  # a timeout, or a child that says done and lingers: it goes now
        oom = 0
        if done and not exited:
            self.pending.append((pid, tree))
            status = None
        else:
            _, status = os.waitpid(pid, 0)
            oom = tree.oom_kills()
            tree.close()
        if pidfd is not None:
            os.close(pidfd)
        # what is left in the pipes: everything the child wrote before it ended
        for fd in open_fds:
            while select.select([fd], [], [], 0)[0]:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                if fd == out_r:
                    out.add(chunk)
                else:
                    res.add(chunk)
        res.add(b"\n")
        exit_info: dict = {"code": None, "signal": None}
        if status is not None and os.WIFSIGNALED(status):
            exit_info["signal"] = _signame(os.WTERMSIG(status))
        elif status is not None and os.WIFEXITED(status):
            exit_info["code"] = os.WEXITSTATUS(status)
        if done:
            exit_info["done"] = True
        elif oom:
            exit_info["oom_kills"] = oom  # the tree went over its memory limit
        return {
            "id": job.get("id"),
            "events": res.events,
            "exit": exit_info,
            "killed": killed,
            "output": out.text(),
            "output_bytes": out.total,
            "output_truncated": out.dropped > 0,
            "wall": round(time.perf_counter() - t0, 4),
            "t_exit": t_exit,
        }

    def reap(self, block: bool = False) -> None:
        """Collects children that ended after their answer went out."""
        left = []
        for pid, tree in self.pending:
            try:
                got, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                got = pid
            if got == 0:
                left.append((pid, tree))
            else:
                tree.close()
        self.pending = left


class _Capture:
    """The child's output: the first bytes and the last ones, a count of the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit = max(0, limit - limit // 8)
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            del self.tail[:-self.tail_limit]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        data = bytes(self.head)
        if self.dropped > 0:
            data += f"\n[... {self.dropped} bytes of output dropped ...]\n".encode()
        return (data + bytes(self.tail)).decode("utf-8", "replace")


class _Events:
    """JSON lines from the child's result pipe, bounded in total size."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.total = 0
        self.events: list[dict] = []

    def add(self, chunk: bytes) -> list[dict]:
        self.total += len(chunk)
        if self.total <= MAX_EVENT_BYTES:
            self.buf += chunk
        new = []
        while b"\n" in self.buf:
            line, _, rest = bytes(self.buf).partition(b"\n")
            self.buf = bytearray(rest)
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                new.append(ev)
        self.events.extend(new)
        return new


class _TreeLimits:
    """Limits on the child's whole process tree, not only on each process: a cgroup (v1
    ``memory`` and ``pids`` controllers, as root) made for one job, joined by the child before
    anything else, emptied and removed once the child is reaped. Where cgroups cannot be had
    (not root, no v1 hierarchy) ``dirs`` stays empty and the per-process rlimits stand alone."""

    ROOT = "/sys/fs/cgroup"

    def __init__(self, name: str, memory: int, pids: int) -> None:
        self.dirs: list[str] = []
        self.problem: str | None = None
        if os.geteuid() != 0:
            self.problem = "not root"
            return
        for controller, settings in (("memory", {"memory.limit_in_bytes": memory}),
                                     ("pids", {"pids.max": pids})):
            base = os.path.join(self.ROOT, controller)
            if not os.path.isfile(os.path.join(base, "cgroup.procs")):
                self.problem = f"no cgroup v1 {controller} controller"
                continue
            d = os.path.join(base, name)
            try:
                os.mkdir(d)
                for f, value in settings.items():
                    with open(os.path.join(d, f), "w") as fh:
                        fh.write(str(value))
                self.dirs.append(d)
            except OSError as exc:
                self.problem = f"cgroup {controller}: {exc.strerror}"
                self._remove(d)

    def join(self) -> list[str]:
        """In the child: moves it (and so everything it starts) into the job's cgroups."""
        joined = []
        for d in self.dirs:
            try:
                with open(os.path.join(d, "cgroup.procs"), "w") as fh:
                    fh.write(str(os.getpid()))
                joined.append(os.path.basename(os.path.dirname(d)))
            except OSError:
                pass
        return joined

    def oom_kills(self) -> int:
        for d in self.dirs:
            try:
                with open(os.path.join(d, "memory.oom_control")) as fh:
                    for line in fh:
                        if line.startswith("oom_kill "):
                            return int(line.split()[1])
            except (OSError, ValueError):
                pass
        return 0

    def close(self) -> None:
        for d in self.dirs:
            self._remove(d)
        self.dirs = []

    @classmethod
    def sweep(cls) -> None:
        """Removes the cgroups of workers that are gone (a killed worker cannot clean up)."""
        for controller in ("memory", "pids"):
            base = os.path.join(cls.ROOT, controller)
            try:
                names = [n for n in os.listdir(base) if n.startswith("nnrag-sandbox-")]
            except OSError:
                continue
            for name in names:
                try:
                    os.kill(int(name.split("-")[2]), 0)
                    continue  # its worker is alive
                except (ValueError, IndexError, ProcessLookupError):
                    cls._remove(os.path.join(base, name))
                except OSError:
                    continue

    @staticmethod
    def _remove(d: str) -> None:
        for _ in range(50):
            try:
                os.rmdir(d)
                return
            except FileNotFoundError:
                return
            except OSError:  # still has processes: they go now
                try:
                    with open(os.path.join(d, "cgroup.procs")) as fh:
                        for pid in fh.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except (OSError, ValueError):
                                pass
                except OSError:
                    return
                time.sleep(0.01)


def _kill_tree(pid: int) -> None:
    """SIGKILL the child and its process group. With a PID namespace the kernel kills every
    process of the namespace once its init (the child) dies."""
    for fn, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            fn(target, signal.SIGKILL)
        except OSError:
            pass


def _reaped(pid: int):
    """Without pidfds: has the child exited? (Peeks without reaping, via waitid WNOWAIT.)"""
    try:
        res = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return res


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _interpreter_dirs() -> list[str]:
    """Where the interpreter and its packages live (what a child must still see: it imports
    what the worker did not import before forking)."""
    return sorted({os.path.realpath(p) for p in
                   (sys.prefix, sys.exec_prefix, sys.base_prefix, *sys.path)
                   if p and os.path.isdir(p)})


def _topmost_inside(root: str, paths: list[str]) -> list[str]:
    """The paths strictly inside ``root`` that no other of them contains."""
    inside = [p for p in paths if p.startswith(root.rstrip("/") + "/")]
    return [p for p in inside if not any(p != q and p.startswith(q + "/") for q in inside)]


def _hidden_roots(home: str | None) -> list[tuple[str, list[str]]]:
    """Directories to cover with an empty tmpfs in the child (home directories and any
    directory the sandbox user could not traverse), each with the interpreter directories
    below it that must be bound back so that imports keep working."""
    needed_sorted = _interpreter_dirs()
    roots: set[str] = set()
    for cand in ("/root", "/home", home):
        if cand:
            real = os.path.realpath(cand)
            if os.path.isdir(real) and not _is_system(real):
                roots.add(real)
    for p in needed_sorted:
        parts = p.split("/")
        for i in range(2, len(parts) + 1):
            anc = "/".join(parts[:i]) or "/"
            try:
                mode = os.stat(anc).st_mode
            except OSError:
                break
            if not mode & 0o001:  # not traversable by "others"
                if not _is_system(anc):
                    roots.add(anc)
                break
    top = [r for r in sorted(roots) if not any(r != o and r.startswith(o + "/") for o in roots)]
    out = []
    for r in top:
        if r in needed_sorted:
            continue  # the interpreter itself lives here: cannot hide it
        out.append((r, _topmost_inside(r, needed_sorted)))
    return out


def _is_system(path: str) -> bool:
    return any(path == s or s.startswith(path.rstrip("/") + "/") for s in SYSTEM_DIRS)


# == the child ===============================================================================
def _child(job: dict, res_w: int, out_w: int, worker: Worker, in_pidns: bool,
           fallback: str) -> None:
    """Runs in the forked child; never returns (``os._exit``)."""
    write = os.write
    dumps = json.dumps
    monotonic = time.monotonic
    fd_res = 3

    def emit(obj: dict) -> None:
        obj["t"] = monotonic()
        data = (dumps(obj, default=repr) + "\n").encode("utf-8", "replace")
        try:
            write(fd_res, data)
        except OSError:
            pass

    # stdio and file descriptors first: nothing of the worker's must stay reachable.
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    os.dup2(res_w, fd_res)
    os.closerange(fd_res + 1, 1 << 16)
    try:
        os.setsid()
    except OSError:
        pass
    try:
        protections = _contain(job, worker, in_pidns, fallback)
    except BaseException as exc:  # noqa: BLE001
        emit({"ev": "setup_failed", "error": describe(exc)})
        os._exit(71)
    emit({"ev": "setup", "protections": protections})
    _run_stages(job, emit)
    os._exit(0)


def _contain(job: dict, worker: Worker, in_pidns: bool, fallback: str) -> dict:
    """Namespaces, mounts, limits, environment, privileges. Each protection that holds is
    recorded; one that cannot be had is recorded as False, never silently assumed."""
    iso = job.get("isolate", {})
    lim = job.get("limits", {})
    prot: dict = {"pid_namespace": in_pidns, "network_isolated": False,
                  "mount_namespace": False, "private_tmp": False, "readonly_root": False,
                  "hidden": [], "uid": os.getuid(), "no_new_privs": False, "notes": []}
    joined, problem = job.get("_tree") or ([], "not set up")
    prot["tree_limits"] = joined  # cgroup controllers bounding the whole process tree
    if len(joined) < 2:
        prot["notes"].append("memory and process limits bind each process, not the tree"
                             + (f" ({problem})" if problem else ""))
    root = os.geteuid() == 0
    t0 = time.perf_counter()
    marks = prot["setup_ms"] = {}

    def mark(what: str) -> None:
        marks[what] = round(1000 * (time.perf_counter() - t0), 2)

    # namespaces: network (no interface but a downed loopback), mounts, IPC, UTS
    if iso.get("network", True):
        try:
            _unshare(CLONE_NEWNET)
            prot["network_isolated"] = True
        except OSError as exc:
            if not root:
                try:  # an unprivileged user namespace still gives a private network
                    _unshare(CLONE_NEWUSER | CLONE_NEWNET)
                    prot["network_isolated"] = True
                except OSError as exc2:
                    prot["notes"].append(f"network not isolated: {exc2.strerror}")
            else:
                prot["notes"].append(f"network not isolated: {exc.strerror}")
    mark("network")
    work = None
    if iso.get("mounts", True) and root:
        try:
            _unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            prot["mount_namespace"] = True
        except OSError as exc:
            prot["notes"].append(f"no private mount namespace: {exc.strerror}")
    mark("unshare")
    if prot["mount_namespace"]:
        work = _private_mounts(job, worker, prot, in_pidns)
    mark("mounts")
    if work is None:  # fall back: the worker's fresh directory under the real temp dir
        work = fallback
        prot["notes"].append("no private /tmp: writes outside the block directory are "
                             "stopped by file permissions only")
    prot["workdir"] = work
    uid = iso.get("uid", 65534) if root else None
    gid = iso.get("gid", uid) if uid is not None else None
    path = os.path.join(work, BLOCK_FILE)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(job.get("code", ""))
    owned = [work, path] + _put_files(work, job.get("files") or {}, prot)
    if uid is not None:
        for p in owned:
            os.chown(p, uid, gid)
    os.chmod(work, 0o700)
    os.chdir(work)
    # environment: nothing of the caller's, only what a process needs
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": work,
                       "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1",
                       "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    # resource limits (set while still privileged: an unprivileged process can only lower).
    # The address space is what the worker already maps (torch, loaded before the fork) plus
    # the memory budget: a CUDA build of torch maps about 3.2 GB where the CPU build maps
    # 0.6 GB, and with the budget as the whole limit a block under the CUDA build had less
    # than 1 GB of its 4 GiB (a 1 GiB bytes object raised MemoryError)
    cpu = int(math.ceil(float(lim.get("cpu", 30))))
    base = _address_space()
    prot["address_space_base"] = base
    limits = {
        "RLIMIT_AS": base + int(lim.get("memory", 4 << 30)),
        "RLIMIT_CPU": (cpu, cpu + 2),
        "RLIMIT_FSIZE": int(lim.get("fsize", 64 << 20)),
        "RLIMIT_NPROC": int(lim.get("nproc", 64)),
        "RLIMIT_CORE": 0,
        "RLIMIT_NOFILE": 1024,
    }
    applied = {}
    for name, value in limits.items():
        soft, hard = value if isinstance(value, tuple) else (value, value)
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
            applied[name] = [soft, hard]
        except (ValueError, OSError) as exc:
            prot["notes"].append(f"{name} not set: {exc}")
    prot["rlimits"] = applied
    mark("files+limits")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too-big writes fail with EFBIG instead
    # threads: one, as in the validation budget
    try:
        import torch

        if torch.get_num_threads() != 1:  # set (and seeded) in the worker already
            torch.set_num_threads(1)
    except Exception as exc:  # noqa: BLE001
        prot["notes"].append(f"torch: {exc}")
    mark("torch")
    # privileges: the unprivileged uid owns the block directory and nothing else
    if uid is not None:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            prot["uid"] = os.getuid()
        except OSError as exc:
            prot["notes"].append(f"could not drop privileges: {exc.strerror}")
    elif root:
        prot["notes"].append("running as root: privileges not dropped (uid=None)")
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        prot["no_new_privs"] = True
    except OSError:
        pass
    try:  # dies with the worker (set after setuid, which clears it)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    if prot["uid"] == 0:
        prot["notes"].append("the block runs as root")
    mark("privileges")
    return prot


def _address_space() -> int:
    """The bytes of address space this process maps now (``VmSize``); 0 where /proc does not
    say."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _put_files(work: str, files: dict, prot: dict) -> list[str]:
    """Writes the files a block finds beside itself (path from its folder -> base64) under
    ``work``; a path that is absolute or climbs out with ``..`` is refused (the rule of
    ``engine.modulefiles.is_plain_relative``, which the worker does not import). Returns the
    files and folders made, for chown."""
    made: list[str] = []
    for rel, data in sorted(files.items()):
        parts = rel.replace("\\", "/").split("/")
        if not rel or rel.startswith("/") or ".." in parts or "" in parts:
            prot["notes"].append(f"refused to put {rel!r} beside the block")
            continue
        try:
            folder = work
            for part in parts[:-1]:
                folder = os.path.join(folder, part)
                if not os.path.isdir(folder):
                    os.mkdir(folder)
                    made.append(folder)
            dest = os.path.join(folder, parts[-1])
            with open(dest, "wb") as fh:
                fh.write(base64.b64decode(data))
        except (OSError, ValueError) as exc:
            prot["notes"].append(f"could not put {rel!r} beside the block: {exc}")
            continue
        made.append(dest)
    return made


def _private_mounts(job: dict, worker: Worker, prot: dict, in_pidns: bool) -> str | None:
    """In the child's own mount namespace: every file system read-only, home directories
    hidden (the interpreter bound back), fresh tmpfs on /tmp and /dev/shm, a /proc of the
    child's PID namespace. Returns the block directory, or None when /tmp could not be had."""
    lim = job.get("limits", {})
    mounts = _mountinfo()
    # bind sources must be opened before they get covered
    bind_fds = [(hidden, _open_dirs(binds)) for hidden, binds in worker.hidden]
    # read-only: / and every ordinary mount below it
    ro_ok = True
    for mnt, fstype, flags in mounts:
        if fstype in SPECIAL_FS or any(mnt == s or mnt.startswith(s + "/")
                                       for s in SPECIAL_TREES):
            continue
        try:
            _mount(None, mnt, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError as exc:
            if mnt == "/":
                ro_ok = False
            prot["notes"].append(f"{mnt} stays writable: {exc.strerror}")
    prot["readonly_root"] = ro_ok
    # home directories (and anything the sandbox user could not traverse) hidden
    for hidden, fds in bind_fds:
        try:
            _mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
            for path, fd in fds:
                _bind_back(path, fd)
            _mount(None, hidden, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            prot["hidden"].append(hidden)
        except OSError as exc:
            prot["notes"].append(f"{hidden} not hidden: {exc.strerror}")
        for _, fd in fds:
            os.close(fd)
    work = None
    # an interpreter (a venv, a checkout's .venv) under /tmp is bound back into the fresh one
    tmp_fds = _open_dirs(worker.tmp_binds)
    try:
        size = int(lim.get("tmpfs", 256 << 20))
        _mount("tmpfs", SANDBOX_TMP, "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={size},mode=755")
        os.mkdir(WORKDIR, 0o700)
        work = WORKDIR
        prot["private_tmp"] = True
        for path, fd in tmp_fds:
            try:
                _bind_back(path, fd)
            except OSError as exc:
                prot["notes"].append(f"{path} not bound back into /tmp: {exc.strerror}")
    except OSError as exc:
        prot["notes"].append(f"no private /tmp: {exc.strerror}")
    for _, fd in tmp_fds:
        os.close(fd)
    if os.path.isdir("/dev/shm"):
        try:
            _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   "size=64m,mode=1777")
        except OSError as exc:
            prot["notes"].append(f"/dev/shm shared: {exc.strerror}")
    if in_pidns:
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            prot["private_proc"] = True
        except OSError as exc:
            prot["notes"].append(f"host /proc visible: {exc.strerror}")
    return work


def _open_dirs(paths: list[str]) -> list[tuple[str, int]]:
    """Handles on directories about to be covered by a mount (bind sources must be opened
    before they are covered); one that cannot be opened is left out."""
    fds = []
    for path in paths:
        try:
            fds.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
        except OSError:
            pass
    return fds


def _bind_back(path: str, fd: int) -> None:
    """Binds the directory behind ``fd`` read-only at ``path`` inside a fresh tmpfs."""
    os.makedirs(path, mode=0o755, exist_ok=True)
    _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _mountinfo() -> list[tuple[str, str, int]]:
    """(mount point, fs type, flags to keep) for every mount of this namespace."""
    keep = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
            "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return [("/", "", 0)]
    for ln in lines:
        left, _, right = ln.partition(" - ")
        f = left.split()
        if len(f) < 6 or not right:
            continue
        mnt = f[4].encode().decode("unicode_escape")  # \040 and friends
        flags = 0
        for opt in f[5].split(","):
            flags |= keep.get(opt, 0)
        out.append((mnt, right.split()[0], flags))
    return out


# == stages (in the child, after containment) ================================================
class _Bounded(io.TextIOBase):
    """sys.stdout/sys.stderr of the block: the first ``limit`` bytes go to the fd, the rest is
    counted and dropped right here, so 100 MB of prints cost neither pipe nor memory."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd = fd
        self.left = limit
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if self.left > 0:
            data = s.encode("utf-8", "replace")[: self.left]
            self.left -= len(data)
            try:
                os.write(self.fd, data)
            except OSError:
                pass
        else:
            self.dropped += len(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fd


class _Deny(importlib.abc.MetaPathFinder):
    # taxonomy._BLOCKED_MSG recognises this wording
    def __init__(self, names) -> None:
        self.names = frozenset(names)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked in the sandbox)",
                                      name=name)


def _run_stages(job: dict, emit) -> None:
    limit = int(job.get("limits", {}).get("output", 64 << 10))
    sys.stdout = _Bounded(1, limit)
    sys.stderr = _Bounded(2, limit)
    sys.stdin = io.StringIO()
    sys.argv = [BLOCK_FILE]
    sys.dont_write_bytecode = True
    try:
        faulthandler.enable(file=2)
    except Exception:  # noqa: BLE001
        pass
    if job.get("deny_imports"):
        sys.meta_path.insert(0, _Deny(job["deny_imports"]))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tempfile.tempdir = os.getcwd()
    stages = [s for s in job.get("stages", ["import"]) if s in STAGES]
    code = job.get("code_object")
    state: dict = {"file": os.path.abspath(BLOCK_FILE)}
    first = code[0][0] if isinstance(code, list) and code else code
    if first is not None and first.co_filename == state["file"]:
        state["code_object"] = code  # compiled by the worker's compile stage, this file
    perf = time.perf_counter
    for stage in stages:
        fn = STAGES[stage]
        emit({"ev": "start", "stage": stage})
        t = perf()
        try:
            detail = fn(job, state)
            emit({"ev": "end", "stage": stage, "ok": True, "seconds": perf() - t,
                  "detail": detail})
        except StageFailed as exc:
            emit({"ev": "end", "stage": stage, "ok": False, "seconds": perf() - t,
                  "error": exc.error, "detail": exc.detail})
            break
        except BaseException as exc:  # noqa: BLE001  (SystemExit, KeyboardInterrupt too)
            emit({"ev": "end", "stage": stage, "ok": False, "seconds": perf() - t,
                  "error": describe(exc), "detail": {}})
            break
    emit({"ev": "done"})


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's
    Worker({}).serve()
    os._exit(0)  # no interpreter teardown: nothing to flush, and torch's takes a second


if __name__ == "__main__":
    main()
