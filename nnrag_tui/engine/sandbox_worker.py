"""The sandbox worker: a long-lived interpreter that has imported torch once and forks one child
per job. The child contains itself (see ``_contain``), runs the requested stages on the block
file (import, instantiate, forward) and reports each stage as a JSON line on a pipe; this
worker enforces the wall-clock limit per stage, keeps a bounded copy of the child's output,
reaps it and answers the caller with one JSON line.

Run as ``python -I sandbox_worker.py`` by ``nnrag_tui.engine.sandbox.Sandbox``, never imported
by the engine: it depends on the standard library and torch only, so it can run under any
interpreter that has torch, and the engine process never imports torch.

Protocol (one JSON object per line): the first line on stdin is the worker configuration; the
worker answers ``{"ready": true, ...}``. Each later line is a job; each answer is one line.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import faulthandler
import gc
import importlib.abc
import importlib.util
import inspect
import io
import json
import math
import os
import re
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

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

MODULE_NAME = "nnrag_block"
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
        return events, check.proceed and any(s in _STAGES for s in stages)

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


def _hidden_roots(home: str | None) -> list[tuple[str, list[str]]]:
    """Directories to cover with an empty tmpfs in the child (home directories and any
    directory the sandbox user could not traverse), each with the interpreter directories
    below it that must be bound back so that imports keep working."""
    needed = {os.path.realpath(p) for p in
              (sys.prefix, sys.exec_prefix, sys.base_prefix, *sys.path) if p and os.path.isdir(p)}
    needed_sorted = sorted(needed)
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
        inside = [p for p in needed_sorted if p == r or p.startswith(r + "/")]
        if r in inside:
            continue  # the interpreter itself lives here: cannot hide it
        binds = [p for p in inside if not any(p != q and p.startswith(q + "/") for q in inside)]
        out.append((r, binds))
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
        emit({"ev": "setup_failed", "error": _describe(exc)})
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
    if uid is not None:
        for p in (work, path):
            os.chown(p, uid, gid)
    os.chmod(work, 0o700)
    os.chdir(work)
    # environment: nothing of the caller's, only what a process needs
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": work,
                       "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1",
                       "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    # resource limits (set while still privileged: an unprivileged process can only lower)
    cpu = int(math.ceil(float(lim.get("cpu", 30))))
    limits = {
        "RLIMIT_AS": int(lim.get("memory", 4 << 30)),
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


def _private_mounts(job: dict, worker: Worker, prot: dict, in_pidns: bool) -> str | None:
    """In the child's own mount namespace: every file system read-only, home directories
    hidden (the interpreter bound back), fresh tmpfs on /tmp and /dev/shm, a /proc of the
    child's PID namespace. Returns the block directory, or None when /tmp could not be had."""
    lim = job.get("limits", {})
    mounts = _mountinfo()
    # bind sources must be opened before they get covered
    bind_fds = []
    for hidden, binds in worker.hidden:
        fds = []
        for b in binds:
            try:
                fds.append((b, os.open(b, os.O_PATH | os.O_DIRECTORY)))
            except OSError:
                pass
        bind_fds.append((hidden, fds))
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
                target = path
                os.makedirs(target, mode=0o755, exist_ok=True)
                _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
                _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
            _mount(None, hidden, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            prot["hidden"].append(hidden)
        except OSError as exc:
            prot["notes"].append(f"{hidden} not hidden: {exc.strerror}")
        for _, fd in fds:
            os.close(fd)
    work = None
    try:
        size = int(lim.get("tmpfs", 256 << 20))
        _mount("tmpfs", SANDBOX_TMP, "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={size},mode=755")
        os.mkdir(WORKDIR, 0o700)
        work = WORKDIR
        prot["private_tmp"] = True
    except OSError as exc:
        prot["notes"].append(f"no private /tmp: {exc.strerror}")
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
    stages = [s for s in job.get("stages", ["import"]) if s in _STAGES]
    code = job.get("code_object")
    state: dict = {}
    first = code[0][0] if isinstance(code, list) and code else code
    if first is not None and first.co_filename == os.path.abspath(BLOCK_FILE):
        state["code_object"] = code  # compiled by the worker's compile stage, this file
    perf = time.perf_counter
    for stage in stages:
        fn = _STAGES[stage]
        emit({"ev": "start", "stage": stage})
        t = perf()
        try:
            detail = fn(job, state)
            emit({"ev": "end", "stage": stage, "ok": True, "seconds": perf() - t,
                  "detail": detail})
        except _StageFailed as exc:
            emit({"ev": "end", "stage": stage, "ok": False, "seconds": perf() - t,
                  "error": exc.error, "detail": exc.detail})
            break
        except BaseException as exc:  # noqa: BLE001  (SystemExit, KeyboardInterrupt too)
            emit({"ev": "end", "stage": stage, "ok": False, "seconds": perf() - t,
                  "error": _describe(exc), "detail": {}})
            break
    emit({"ev": "done"})


class _StageFailed(Exception):
    def __init__(self, error: dict, detail: dict) -> None:
        super().__init__(error.get("message", ""))
        self.error = error
        self.detail = detail


def _safe_str(obj, limit: int = 2000) -> str:
    try:
        s = str(obj)
    except BaseException:  # noqa: BLE001
        s = f"<unprintable {type(obj).__name__}>"
    return s if len(s) <= limit else s[:limit] + "..."


def _describe(exc: BaseException) -> dict:
    t = type(exc)
    d: dict = {"type": t.__name__ if t.__module__ == "builtins" else
               f"{t.__module__}.{t.__qualname__}",
               "message": _safe_str(exc)}
    mro = [c.__name__ for c in t.__mro__]
    d["bases"] = mro[:6]
    if isinstance(exc, ImportError):
        d["module"] = exc.name
    if isinstance(exc, NameError):
        d["name"] = getattr(exc, "name", None)
    if isinstance(exc, SystemExit):
        d["code"] = _safe_str(exc.code, 200)
    if isinstance(exc, KeyError) and exc.args:
        d["key"] = _safe_str(exc.args[0], 200)
    if isinstance(exc, SyntaxError):
        d["line"] = exc.lineno
        d["text"] = _safe_str(exc.text, 300)
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


# -- stage: import ---------------------------------------------------------------------------
def _stage_import(job: dict, state: dict) -> dict:
    path = os.path.abspath(BLOCK_FILE)
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = mod  # dataclasses and pickling look modules up here
    code = state.get("code_object")
    if isinstance(code, list):  # the file's chunks, compiled by the compile stage, in order
        namespace = mod.__dict__
        for part, restore_doc in code:
            doc = namespace.get("__doc__")
            exec(part, namespace)  # noqa: S102
            if restore_doc:  # a string opening a later chunk is no module docstring
                namespace["__doc__"] = doc
    elif code is not None:  # compiled by the compile stage from this very file
        exec(code, mod.__dict__)  # noqa: S102
    else:
        spec.loader.exec_module(mod)
    state["module"] = mod
    return {}


# -- stage: instantiate ----------------------------------------------------------------------
def _target(job: dict, state: dict):
    mod = state["module"]
    name = job.get("name")
    if name and hasattr(mod, name):
        return getattr(mod, name)
    exported = getattr(mod, "__all__", None)
    if name:
        raise _StageFailed({"type": "NameError", "name": name,
                            "message": f"the file defines no {name!r} at module level",
                            "frames": []}, {})
    if exported:
        return getattr(mod, exported[0])
    raise _StageFailed({"type": "LookupError", "message": "no class to instantiate "
                        "(no name given and no __all__)", "frames": []}, {})


SIZES = (64, 96, 32)


def _stage_instantiate(job: dict, state: dict) -> dict:
    from torch import nn

    cls = _target(job, state)
    if not isinstance(cls, type):
        raise _StageFailed({"type": "TypeError", "message": f"{job.get('name')} is not a "
                            f"class", "frames": []}, {})
    try:
        sig = inspect.signature(cls)
        params = [p for p in sig.parameters.values()]
    except (TypeError, ValueError):
        params = []
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    attempts: list[dict] = []
    budget = float(job.get("timeouts", {}).get("instantiate", 10.0)) * 0.6
    t0 = time.perf_counter()
    candidates: list[tuple[tuple, dict, dict, dict]] = []
    if job.get("call_sites"):
        # the caller's guesses failed: the arguments the corpus itself passes, evaluated in
        # the block's module (see engine.callsites)
        candidates = _call_site_candidates(job["call_sites"], params, required,
                                           vars(state["module"]))
        if not candidates:
            raise _StageFailed({"type": "NeedsArguments", "message": "none of the "
                                f"{len(job['call_sites'])} argument sets seen in the corpus "
                                "could be evaluated in the file", "frames": []},
                               {"required": [p.name for p in required]})
    elif not required:
        candidates.append(((), {}, {}, {"C": None}))
    else:
        seen = set()
        # scalars first; then sequences where a scalar was refused ("'int' object is not
        # subscriptable", "depth needs to be tuple"): sizes alone (input_resolution=(16, 16)
        # beside dim=64), then the per-stage counts alone (depth=(1, 1, 1, 1)), then every
        # integer
        # a parameter annotated with a config class: an instance of it first, then the
        # guessed stand-in
        namespace = vars(state["module"])
        unguessed: str | None = None
        for seq in SEQ_LEVELS:
            for c in SIZES:
                for real in (True, False):
                    try:
                        args, kwargs, shown = _assign(required, c, seq, namespace, real)
                    except _NoGuess as exc:
                        unguessed = unguessed or exc.args[0]
                        continue
                    except (MemoryError, KeyboardInterrupt, SystemExit):
                        raise
                    except Exception:  # noqa: BLE001  (the config class refused its guesses)
                        continue
                    key = repr(shown)
                    if key not in seen:
                        seen.add(key)
                        candidates.append((args, kwargs, shown, {"C": c, "seq": seq}))
        if not candidates:
            raise _StageFailed({"type": "NeedsArguments",
                                "message": f"cannot infer a value for parameter {unguessed!r}"
                                if unguessed else "no guess of the arguments could be made",
                                "param": unguessed, "frames": []},
                               {"required": [p.name for p in required]})
    last_exc: BaseException | None = None
    wants_seq = False
    for args, kwargs, shown, hints in candidates:
        if attempts and time.perf_counter() - t0 > budget:
            break
        if hints.get("seq") and not wants_seq:
            continue
        try:
            obj = cls(*args, **kwargs)
        except (MemoryError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001
            last_exc = exc
            attempts.append({"args": shown, "error": f"{type(exc).__name__}: "
                                                      f"{_safe_str(exc, 300)}"})
            wants_seq = wants_seq or _wants_sequence(exc)
            continue
        for k, v in kwargs.items():
            if isinstance(v, GuessedConfig):
                shown[k] = repr(v)  # the fields the block read, with their guesses
        state["instance"] = obj
        state["hints"] = hints
        state["ctor"] = shown
        detail = {"args": shown, "attempts": len(attempts) + 1,
                  "required": [p.name for p in required]}
        if hints.get("call_site"):
            detail["call_site"] = hints["call_site"]
        if isinstance(obj, nn.Module):
            try:
                detail["parameters"] = sum(p.numel() for p in obj.parameters())
            except Exception:  # noqa: BLE001
                pass
        else:
            detail["not_a_module"] = type(obj).__name__
        return detail
    assert last_exc is not None
    err = _describe(last_exc)
    err["required"] = [p.name for p in required]
    raise _StageFailed(err, {"attempts": attempts, "required": [p.name for p in required]})


class _NoGuess(Exception):
    pass


def _call_site_candidates(sets: list[dict], params, required, namespace: dict):
    """(args, kwargs, shown, hints) for each argument set whose expressions evaluate in the
    block's module; an argument that does not is left out (a positional one ends the
    positional run), and required parameters still missing get the usual guesses."""
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    out = []
    for cs in sets[:16]:
        args: list = []
        shown: dict = {}
        for p, text in zip(positional, cs.get("args") or []):
            try:
                args.append(eval(text, dict(namespace)))  # noqa: S307  (sandboxed corpus code)
            except Exception:  # noqa: BLE001
                break
            shown[p.name] = _short(text)
        kwargs: dict = {}
        for k, text in (cs.get("kwargs") or {}).items():
            if k in shown:
                continue
            try:
                kwargs[k] = eval(text, dict(namespace))  # noqa: S307
            except Exception:  # noqa: BLE001
                continue
            shown[k] = _short(text)
        if not shown:
            continue
        missing = [p for p in required if p.name not in shown]
        try:
            more_args, more_kwargs, more_shown = _assign(missing, SIZES[0])
        except _NoGuess:
            continue
        if more_args:  # a positional-only parameter the call site did not fill
            continue
        kwargs.update(more_kwargs)
        shown.update(more_shown)
        out.append((tuple(args), kwargs, shown, {"C": None, "call_site": cs.get("where")}))
    return out


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CHANNEL_TOKENS = frozenset({
    "channels", "channel", "chans", "chan", "chs", "ch", "dim", "dims", "features", "feature",
    "feat", "feats", "planes", "plane", "width", "hidden", "embed", "emb", "inp", "oup",
    "units", "filters", "model", "c", "d", "nc", "inplanes", "outplanes", "ni", "nf", "nin",
    "nout", "channels1", "channels2", "c1", "c2", "hid", "latent"})
_TOKEN_COUNTS = frozenset({"seq_len", "max_len", "num_tokens", "num_patches", "max_seq_len",
                           "n_tokens", "length", "seq_length", "num_positions",
                           "max_position_embeddings", "n_ctx", "context_length", "n"})
_SUBMODULE_NAMES = frozenset({
    "block", "module", "fn", "layer", "net", "model", "m", "submodule", "body", "sublayer",
    "func", "function", "backbone", "encoder", "decoder", "inner", "wrapped", "base",
    "residual", "branch", "op", "operation", "transform", "main"})
_UNGUESSABLE = frozenset({"params", "name", "mode", "type", "kind", "block_args", "arch",
                          "path", "file", "filename", "url"})


_SEQ_WANTED = re.compile(r"not subscriptable|not iterable|has no len|cannot unpack|"
                         r"must be a tuple|must be a list")
_SEQ_ASKED = re.compile(r"\b(tuple|list|sequence)\b", re.IGNORECASE)
_SCALAR_NAMES = frozenset({"kernel_size", "stride", "padding", "dilation", "groups",
                           "num_classes", "eps", "p", "drop", "dropout"})


def _wants_sequence(exc: BaseException) -> bool:
    """Whether a refused guess asked for a sequence: "'int' object is not iterable", or a
    check of the block's own ("depth needs to be tuple if integers ...", MaxViT)."""
    text = _safe_str(exc, 300)
    if isinstance(exc, TypeError):
        return _SEQ_WANTED.search(text) is not None
    return isinstance(exc, (AssertionError, ValueError)) and _SEQ_ASKED.search(text) is not None


# which of the guessed integers become sequences: none; sizes alone, as pairs; the per-stage
# counts alone (depth=(1, 1, 1, 1) beside dim=64); every integer
SEQ_LEVELS = (False, "sizes", "counts", True)
_SIZE_WORDS = ("size", "shape", "resolution")
_COUNT_NAMES = frozenset({"depth", "depths", "layers", "num_layers", "n_layers", "num_blocks",
                          "n_blocks", "blocks", "repeats", "num_repeats", "layer_nums",
                          "stage_blocks", "block_nums"})


def _assign(required, c: int, seq: bool | str = False, namespace: dict | None = None,
            real_config: bool = False):
    """Guessed values for the required parameters, with channel count ``c``; ``seq`` is one of
    SEQ_LEVELS: which integers are passed as sequences (a size as a pair, a count as four).
    ``real_config``: a parameter annotated with a config class that ``namespace`` (the
    block's module) binds gets an instance of it (see _config_instance); otherwise config
    parameters get a GuessedConfig."""
    from torch import nn

    args: list = []
    kwargs: dict = {}
    shown: dict = {}
    for p in required:
        cls = None
        if real_config:
            cls = _config_class(p.annotation, namespace, nn)
            if cls is None and p.annotation is inspect.Parameter.empty and _is_config_name(p.name):
                cls = _module_config_class(namespace, nn)
        if cls is not None:
            value, text = _config_instance(cls, c, nn)
        else:
            value, text = _guess(p.name, p.annotation, c, nn)
        is_size = any(w in p.name for w in _SIZE_WORDS)
        is_count = p.name in _COUNT_NAMES
        if (seq is True or (seq == "sizes" and is_size) or (seq == "counts" and is_count)) \
                and type(value) is int \
                and p.name not in _SCALAR_NAMES:
            n = 2 if is_size else 4
            value, text = (value,) * n, repr((value,) * n)
        shown[p.name] = text
        if p.kind == p.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    return tuple(args), kwargs, shown


def _annotation_text(annotation) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    return getattr(annotation, "__name__", None) or str(annotation)


# a config object: these names, and any name with a word cfg or config (model_cfg, ...)
_CONFIG_NAMES = frozenset({"cfg", "config", "conf", "hparams", "hp", "opt", "opts", "args",
                           "settings"})


class GuessedConfig:
    """A stand-in for a config object (nanoGPT's ``Block(config)``, ``cfg["dim"]``): every
    field read gets the guess its name would get as a parameter (``config.n_embd`` 64,
    ``config.n_head`` 4, ``config.dropout`` 0.0), and a field no name can tell is missing
    (``getattr(config, "mode", default)`` gives the default). Its repr lists what was read."""

    def __init__(self, c: int) -> None:
        object.__setattr__(self, "_c", c)
        object.__setattr__(self, "_fields", {})

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_c", "_fields"):
            raise AttributeError(name)
        fields = self._fields
        if name not in fields:
            from torch import nn

            try:
                fields[name] = _guess(name, inspect.Parameter.empty, self._c, nn)[0]
            except _NoGuess:
                raise AttributeError(f"the guessed config has no field {name!r}") from None
        return fields[name]

    def __setattr__(self, name: str, value) -> None:
        self._fields[name] = value

    def __getitem__(self, name):
        try:
            return self.__getattr__(name)
        except AttributeError:
            raise KeyError(name) from None

    def get(self, name, default=None):
        return self._fields[name] if name in self._fields else getattr(self, name, default)

    def __repr__(self) -> str:
        return "config(" + ", ".join(f"{k}={_short(repr(v), 40)}"
                                     for k, v in self._fields.items()) + ")"


_CONFIG_CLASS_NAME = re.compile(r"(Config|Cfg|Args|Params|Options|Settings|Hparams)$")
# integer fields of a config class made small when a name tells what they are; the others
# (token ids, channel counts of the input) keep their defaults
_SHRINK_WORDS = _CHANNEL_TOKENS | {"size", "layers", "layer", "heads", "head", "depth",
                                   "vocab", "embeddings", "positions", "intermediate", "blocks",
                                   "embd", "ctx"}


def _config_class(annotation, namespace: dict | None, nn):
    """The config class a parameter is annotated with (``config: LlamaConfig``, ``args:
    ModelArgs``, a string under ``from __future__ import annotations``), as the block's own
    module binds that name: a dataclass or a class named ``...Config``/``...Args``, not a
    module. None when there is none."""
    if annotation is inspect.Parameter.empty:
        return None
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    cls = (namespace or {}).get(name) if isinstance(name, str) and name.isidentifier() else None
    if cls is None and isinstance(annotation, type):
        cls = annotation
    if not isinstance(cls, type) or issubclass(cls, nn.Module) \
            or cls.__module__ in ("builtins", "typing", "collections"):
        return None
    import dataclasses

    if dataclasses.is_dataclass(cls) or _CONFIG_CLASS_NAME.search(cls.__name__):
        return cls
    return None


def _module_config_class(namespace: dict | None, nn):
    """The one config class the block's module binds, for an unannotated ``config``
    parameter (transformers' ``GPT2Block(config, layer_idx=None)`` beside ``GPT2Config``):
    the most derived of the classes named ``...Config`` (not their base
    ``PreTrainedConfig``). None when there is not exactly one."""
    found = list({id(v): v for k, v in (namespace or {}).items()  # aliases are one class
                  if isinstance(v, type) and k.endswith("Config")
                  and _config_class(v, None, nn)}.values())
    leaves = [a for a in found if not any(b is not a and issubclass(b, a) for b in found)]
    return leaves[0] if len(leaves) == 1 else None


def _is_config_name(name: str) -> bool:
    n = name.lower()
    return n in _CONFIG_NAMES or bool({"cfg", "config"} & set(n.split("_")))


def _config_instance(cls, c: int, nn):
    """An instance of a config class with its own defaults, where each integer field a name
    can tell is made small (transformers' ``LlamaConfig(hidden_size=64, num_hidden_layers=1,
    num_attention_heads=4, ...)`` instead of a 4096-wide, 32-layer model) and each required
    field guessed. Raises _NoGuess when a required field cannot be guessed."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        params = []
    kwargs: dict = {}
    # a vocabulary keeps room for the token ids the config names (GPT-2's eos 50256)
    ids = [p.default for p in params if p.name.endswith("token_id") and type(p.default) is int]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            continue
        if p.default is inspect.Parameter.empty:
            kwargs[p.name] = _guess(p.name, p.annotation, c, nn)[0]
        elif type(p.default) is int and _SHRINK_WORDS & set(p.name.lower().split("_")):
            try:
                value = _guess_scalar(p.name, p.annotation, c, nn)[0]
            except _NoGuess:
                continue
            if "vocab" in p.name.lower() and ids:
                value = max(value, max(ids) + 1)
            if type(value) is int and 0 < value < p.default:
                kwargs[p.name] = value
    text = f"{cls.__name__}(" + ", ".join(f"{k}={_short(repr(v), 40)}"
                                          for k, v in kwargs.items()) + ")"
    return cls(**kwargs), text


def _guess(name: str, annotation, c: int, nn):
    """A value for a required constructor parameter, from its name and annotation (a
    sequence where the annotation asks for one); a config gets a GuessedConfig. Raises
    _NoGuess for parameters no name can tell (paths, modes)."""
    if _is_config_name(name):
        return GuessedConfig(c), "config()"
    value, text = _guess_scalar(name, annotation, c, nn)
    ann = _annotation_text(annotation).replace("typing.", "")
    if type(value) is int and re.match(r"(Tuple|List|Sequence|tuple|list)\b", ann):
        n = 2 if "size" in name or re.match(r"(Tuple|tuple)\[int, ?int\]$", ann) else 4
        return (value,) * n, repr((value,) * n)
    return value, text


def _guess_scalar(name: str, annotation, c: int, nn):
    n = name.lower()
    tokens = set(n.split("_"))
    ann = _annotation_text(annotation).replace("typing.", "")
    if n in _UNGUESSABLE:
        raise _NoGuess(name)
    # a compound name is what its last word says: cls_depth and cross_attn_depth are counts,
    # cross_attn_heads a head count, image_patch_size a patch size
    last = n.rsplit("_", 1)[-1]
    if n.endswith("patch_size"):
        return 4, "4"
    if last in ("idx", "index") and last != n:  # layer_idx: a position, not a layer
        return 0, "0"
    if last != n and last in ("depth", "layers"):
        return 1, "1"
    if last != n and last == "heads":
        return 4, "4"
    if n in ("num_heads", "heads", "n_heads", "nhead", "n_head", "num_attention_heads",
             "attn_heads", "num_head", "nheads"):
        return 4, "4"
    if n in ("head_dim", "dim_head", "head_size", "d_head", "d_k", "d_v", "head_channels"):
        return c // 4, str(c // 4)
    if n in ("num_classes", "n_classes", "classes", "num_class", "n_class", "nclass",
             "num_labels", "out_classes"):
        return 10, "10"
    if n in ("kernel_size", "kernel", "k", "ksize", "kernel_sizes", "filter_size"):
        return 3, "3"
    if n in ("stride", "s", "dilation", "groups", "g", "num_layers", "depth", "n_layers",
             "layers", "num_blocks", "n_blocks", "upscale_factor", "factor", "repeats",
             "num_repeats", "n_layer"):
        return 1, "1"
    if n in ("padding", "pad"):
        return 1, "1"
    if n in ("num_groups", "n_groups", "reduction", "reduction_ratio", "rd_ratio", "r",
             "ratio", "expansion", "expand_ratio", "mlp_ratio", "window_size", "patch_size",
             "pool_size", "scale_factor", "downsample_factor", "scale", "rd_divisor"):
        if "ratio" in tokens and "float" in ann:
            return 4.0, "4.0"
        return (2.0, "2.0") if n == "scale_factor" else (4, "4")
    if n in ("img_size", "image_size", "input_size", "resolution", "input_resolution",
             "size", "feat_size", "grid_size", "output_size", "img_shape"):
        return 16, "16"
    if n in _TOKEN_COUNTS:
        return 16, "16"
    if n in ("num_embeddings", "vocab_size", "n_vocab", "vocab"):
        return 100, "100"
    if n in ("eps", "epsilon", "norm_eps", "layer_norm_eps"):
        return 1e-5, "1e-05"
    if tokens & {"drop", "dropout", "prob", "pdrop"} or n in ("p", "attn_drop", "proj_drop"):
        return 0.0, "0.0"
    if n in ("normalized_shape", "num_features", "embedding_dim", "in_features",
             "out_features"):
        return c, str(c)
    if tokens & {"layer", "cls", "class"} or n in ("act", "activation", "norm", "act_fn",
                                                    "norm_fn", "act_type", "norm_type"):
        return nn.Identity, "nn.Identity"  # accepts and ignores any arguments
    if n in _SUBMODULE_NAMES or "Module" in ann:
        return nn.Identity(), "nn.Identity()"
    if n in ("bias", "affine", "elementwise_affine", "batch_first"):
        return True, "True"
    if ann == "bool" or n.startswith(("use_", "is_", "has_", "with_", "enable", "return_")):
        return False, "False"
    if ann == "float":
        return 1.0, "1.0"
    if tokens & _CHANNEL_TOKENS or n.startswith(("in_", "out_", "num_", "n_")):
        return c, str(c)
    if ann == "str" or "Callable" in ann:
        raise _NoGuess(name)
    return c, str(c)


# -- stage: forward --------------------------------------------------------------------------
def _first_layer(module, nn):
    """(kind, channels) of the first parameterised layer, the usual entry point."""
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.conv import _ConvNd

    for m in module.modules():
        if isinstance(m, _ConvNd):
            nd = len(m.kernel_size)
            if m.in_channels:
                return ({1: "ncl", 2: "nchw", 3: "ncdhw"}.get(nd, "nchw"), m.in_channels)
        elif isinstance(m, nn.Linear) and m.in_features:
            return ("tokens", m.in_features)
        elif isinstance(m, nn.LayerNorm) and m.normalized_shape:
            return ("tokens", int(m.normalized_shape[-1]))
        elif isinstance(m, nn.Embedding):
            return ("index", m.num_embeddings)
        elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)) and m.num_features:
            return ("nchw", m.num_features)
        elif isinstance(m, nn.BatchNorm1d) and m.num_features:
            return ("nc", m.num_features)
        elif isinstance(m, (nn.BatchNorm3d, nn.InstanceNorm3d)) and m.num_features:
            return ("ncdhw", m.num_features)
        elif isinstance(m, _BatchNorm) and m.num_features:
            return ("nchw", m.num_features)
        elif isinstance(m, nn.GroupNorm):
            return ("nchw", m.num_channels)
    return None


def _shapes(kind: str, c: int, h: int) -> list[tuple]:
    n = 16
    return {
        "nchw": [(2, c, h, h)],
        "tokens": [(2, n, c)],
        "nc": [(2, c), (2, c, n)],
        "ncl": [(2, c, n)],
        "ncdhw": [(2, c, 4, h, h)],
        "nhwc": [(2, h, h, c)],
        "index": [(2, n)],
    }[kind]


_MAX_PROBES = 12
_FIRST_PROBE_MAX_PIXELS = 384 * 384
_IMAGE_SIZE_ATTRS = ("img_size", "image_size", "input_size", "pretrain_img_size")


def _declared_image_size(module) -> tuple[int, int] | None:
    """(H, W) a network declares it was built for (timm's ``img_size``, a patch embedding's
    ``img_size``), looked up on the module itself, then on its direct children in definition
    order (deeper layers' sizes are feature sizes); None when nothing declares one."""
    for m in (module, *module.children()):
        for attr in _IMAGE_SIZE_ATTRS:
            value = m.__dict__.get(attr)
            if isinstance(value, int) and not isinstance(value, bool):
                value = (value, value)
            if isinstance(value, (tuple, list)) and len(value) == 3:
                value = tuple(value)[1:]  # (C, H, W)
            if (isinstance(value, (tuple, list)) and len(value) == 2
                    and all(type(v) is int and 8 <= v <= 1024 for v in value)):
                return int(value[0]), int(value[1])
    return None


def _probes(state: dict, module, nn) -> list[tuple[str, tuple, int]]:
    """Plausible inputs (kind, shape, channels), most likely first, no duplicates: one image of
    the size the network declares (a ViT built for 224 px asserts it; a large one is tried
    late), then the first
    parameterised layer's expectation at several sizes (odd ones for Inception-style blocks,
    224 px last for whole networks), then the sizes used at construction in other layouts,
    then the usual 3-channel image and 64-channel feature shapes."""
    out: list[tuple[str, tuple, int]] = []

    def add(kind, c, h=32):
        if not c or c <= 0:
            return
        for s in _shapes(kind, int(c), h):
            if all(sh != s or (k == "index") != (kind == "index") for k, sh, _ in out):
                out.append((kind, s, int(c)))

    first = _first_layer(module, nn) if isinstance(module, nn.Module) else None
    c_used = state.get("hints", {}).get("C")
    declared = _declared_image_size(module) if first and first[0] == "nchw" else None
    if declared and declared[0] * declared[1] <= _FIRST_PROBE_MAX_PIXELS:
        out.append(("nchw", (1, first[1], *declared), first[1]))
    if first:
        kind, c = first
        if kind == "nchw":
            for h in (32, 16, 35, 17, 8):
                add("nchw", c, h)
        elif kind == "tokens":
            add("tokens", c)
            add("nc", c)
            add("nhwc", c, 8)
            add("nchw", c, 8)
        else:
            add(kind, c, 32)
    for c in [x for x in (c_used, first[1] if first and first[0] != "index" else None, 3, 64)
              if x]:
        for kind in ("nchw", "tokens", "nc", "ncl", "nhwc"):
            add(kind, c, 32)
    if first and first[0] == "nchw":
        add("nchw", first[1], 224)
    elif not first:
        add("nchw", 3, 224)
    if declared and declared[0] * declared[1] > _FIRST_PROBE_MAX_PIXELS:
        # a large input (SAM's 1024 px) can take longer than the forward timeout: the small
        # sizes first, then this one while it is still among the inputs tried
        out.insert(min(len(out), _MAX_PROBES - 1), ("nchw", (1, first[1], *declared), first[1]))
    return out


_SPATIAL_INT = {"h", "w", "height", "width", "H", "W"}
_SPATIAL_TUPLE = {"hw_shape", "feat_size", "size", "shape", "input_size", "hw", "x_size",
                  "spatial_shape", "resolution", "hw_size", "feat_shape", "image_size"}
_TARGET_NAMES = {"target", "targets", "label", "labels", "y", "gt", "y_true"}


def _forward_args(sig_params, x, kind, torch):
    """Arguments for forward given the probe tensor; None when a parameter has no guess."""
    args = []
    for p in sig_params:
        n = p.name
        if n in _SPATIAL_INT or n.lower() in _SPATIAL_INT:
            args.append(x.shape[2] if kind == "nchw" else math.isqrt(x.shape[1]))
        elif n in _SPATIAL_TUPLE:
            if kind == "nchw":
                args.append((x.shape[2], x.shape[3]))
            else:
                s = math.isqrt(x.shape[1])
                args.append((s, s))
        elif n.lower() in ("mask", "attn_mask", "attention_mask", "key_padding_mask"):
            args.append(None)
        elif n.lower() in _TARGET_NAMES:
            args.append(torch.rand_like(x) if x.is_floating_point() else x)
        else:
            args.append(x)
    return args


def _forward_required(module) -> list[inspect.Parameter]:
    """The positional parameters ``module``'s forward needs (``*args`` alone counts as one)."""
    fwd = getattr(module, "forward", module)
    try:
        params = list(inspect.signature(fwd).parameters.values())
    except (TypeError, ValueError):
        params = []
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not required and any(p.kind == p.VAR_POSITIONAL for p in params):
        required = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY)]
    return required


def _optional_input(module) -> list[inspect.Parameter]:
    """The first positional parameter of a forward whose parameters are all optional
    (transformers' ``forward(self, input_ids=None, attention_mask=None, ...)``), as the one
    to feed when a call without arguments fails."""
    try:
        params = list(inspect.signature(getattr(module, "forward", module)).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:1]


def _stage_forward(job: dict, state: dict) -> dict:
    import torch
    from torch import nn

    module = state["instance"]
    if not callable(module):
        raise _StageFailed({"type": "NotCallable", "message": f"a {type(module).__name__} "
                            "instance is not callable: not a module", "frames": []}, {})
    required = _forward_required(module)
    if isinstance(module, nn.Module):
        try:
            module.eval()
        except Exception:  # noqa: BLE001
            pass
    attempts: list[dict] = []
    budget = float(job.get("timeouts", {}).get("forward", 10.0)) * 0.6
    t0 = time.perf_counter()
    if not required:
        probes = [("none", (), 0)]
        required = _optional_input(module)
        if required:  # no arguments first; then the probes, as the first parameter
            probes += _probes(state, module, nn)[:_MAX_PROBES]
    else:
        probes = _probes(state, module, nn)[:_MAX_PROBES]
    first_exc = None
    for kind, shape, c in probes:
        if attempts and time.perf_counter() - t0 > budget:
            break
        if kind == "none":
            x, args = None, []
        elif kind == "index":
            x = torch.randint(0, max(1, c), shape)
            args = _forward_args(required, x, kind, torch)
        else:
            x = torch.randn(*shape)
            args = _forward_args(required, x, kind, torch)
        variants = [args]
        targets = [i for i, p in enumerate(required) if p.name.lower() in _TARGET_NAMES]
        if targets and x is not None and x.dim() == 2:
            alt = list(args)
            for i in targets:
                alt[i] = torch.randint(0, x.shape[1], (x.shape[0],))
            variants.append(alt)
        for a in variants:
            try:
                with torch.no_grad():
                    out = module(*a)
            except (MemoryError, KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001
                first_exc = first_exc or exc  # the most plausible input's error is reported
                attempts.append({"input": list(shape), "error": f"{type(exc).__name__}: "
                                                                f"{_safe_str(exc, 300)}"})
                if _not_about_shapes(exc) and kind != "none":
                    raise _StageFailed(_describe(exc), {"attempts": attempts,
                                                        "probes": len(attempts)}) from None
                continue
            return {"input": [list(shape)] if shape else [], "input_kind": kind,
                    "args": len(a), "output": _out_shapes(out, torch),
                    "attempts": len(attempts) + 1}
    if first_exc is None:
        raise _StageFailed({"type": "ProbeShape", "message": "no probe input to try",
                            "frames": []}, {"attempts": attempts})
    err = _describe(first_exc)
    raise _StageFailed(err, {"attempts": attempts, "probes": len(attempts)})


def _not_about_shapes(exc: BaseException) -> bool:
    """Errors that another input shape cannot fix: stop probing."""
    if isinstance(exc, (NameError, ImportError, NotImplementedError, SyntaxError,
                        RecursionError, UnboundLocalError)):
        return True
    msg = _safe_str(exc, 500)
    return any(w in msg for w in ("CUDA", "cuda", "NVIDIA", "torch.ops", "No such operator",
                                  "can't allocate memory"))


def _out_shapes(out, torch, depth: int = 0) -> list:
    if isinstance(out, torch.Tensor):
        return [list(out.shape)]
    if depth > 3:
        return []
    res: list = []
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        for o in out[:8]:
            res.extend(_out_shapes(o, torch, depth + 1))
    return res[:8]


_STAGES = {"import": _stage_import, "instantiate": _stage_instantiate,
           "forward": _stage_forward}


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's
    Worker({}).serve()
    os._exit(0)  # no interpreter teardown: nothing to flush, and torch's takes a second


if __name__ == "__main__":
    main()
