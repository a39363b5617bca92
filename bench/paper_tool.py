"""The paper's tool, `nn-rag` 2.2.4 from PyPI, set up to run offline on local corpora.

- Its own virtual environment (bench/.work/nnrag-paper) with `nn-rag==2.2.4` and the CPU build
  `torch==2.13.0` (the tool declares only libcst and tqdm, but its validator executes the generated
  files, which import torch; pinning keeps pip from fetching a CUDA build).
- Its cache lives under ``~/.cache/nn-rag``, so every run gets ``HOME`` set to a scratch directory.
- It clones its two built-in repositories (its wheel ships no repo_config.json, so it falls back to
  timm's `timm/models`, `timm/layers` and torchvision's `torchvision/models`, `torchvision/ops`)
  with ``git clone --depth=1 --filter=blob:none`` from GitHub URLs. A ``GIT_CONFIG_GLOBAL`` file
  rewrites those URLs (``url.<base>.insteadOf``) to local bare repositories made from the unpacked
  corpora (only their ``.py`` files, which its sparse checkout keeps), which allow
  filters (``uploadpack.allowFilter``).

Used by bench/run.py; ``python bench/paper_tool.py --corpora DIR`` sets everything up and runs one
clone + cold index as a smoke test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import Measured, check, run_measured

VERSION = "2.2.4"
TORCH = "torch==2.13.0"
REPOS = {  # corpus directory name -> the GitHub URL the tool clones
    "timm": "https://github.com/huggingface/pytorch-image-models.git",
    "torchvision": "https://github.com/pytorch/vision.git",
}
CACHE_NAMES = {"timm": "huggingface_pytorch-image-models", "torchvision": "pytorch_vision"}
SUBSET = {"timm": ["timm/models", "timm/layers"],
          "torchvision": ["torchvision/models", "torchvision/ops"]}


class PaperTool:
    def __init__(self, work: Path, corpora: Path) -> None:
        self.work = work
        self.corpora = corpora
        self.venv = work / "nnrag-paper"
        self.python = self.venv / "bin" / "python"
        self.git_dir = work / "paper-git"
        self.gitconfig = work / "paper-gitconfig"

    # -- set up ----------------------------------------------------------------------------
    def installed_version(self) -> str | None:
        if not self.python.exists():
            return None
        out = subprocess.run([str(self.python), "-c",
                              "from importlib.metadata import version as v;"
                              "print(v('nn-rag'), v('torch'))"],
                             capture_output=True, text=True, check=False)
        return out.stdout.strip() if out.returncode == 0 else None

    def ensure_venv(self) -> str:
        have = self.installed_version()
        if not have or not have.startswith(VERSION + " "):
            print(f"installing nn-rag=={VERSION} into {self.venv} ...", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
            subprocess.run([str(self.python), "-m", "pip", "install", "-q",
                            f"nn-rag=={VERSION}", TORCH], check=True)
            have = self.installed_version()
        assert have, "the paper tool's venv is not usable"
        return have

    def ensure_git(self) -> None:
        """Local bare repositories of the corpora and the git config that points the tool's
        GitHub URLs at them."""
        env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
               "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
               "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
               "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
        lines = []
        for name, url in REPOS.items():
            bare = self.git_dir / f"{name}.git"
            src = self.corpora / name
            stamp = bare / "bench-source"
            if not (stamp.exists() and stamp.read_text() == str(src)):
                shutil.rmtree(bare, ignore_errors=True)
                bare.parent.mkdir(parents=True, exist_ok=True)
                git = ["git", "--git-dir", str(bare), "--work-tree", str(src)]
                subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)],
                               check=True, env=env)
                subprocess.run([*git, "add", "-f", "--", "*.py"], check=True, env=env)
                subprocess.run([*git, "commit", "-q", "-m", f"{name} sources"], check=True,
                               env=env)
                subprocess.run(["git", "--git-dir", str(bare), "config",
                                "uploadpack.allowFilter", "true"], check=True, env=env)
                subprocess.run(["git", "--git-dir", str(bare), "config",
                                "uploadpack.allowAnySHA1InWant", "true"], check=True, env=env)
                stamp.write_text(str(src))
            lines.append(f'[url "file://{bare}"]\n\tinsteadOf = {url}\n')
        lines.append("[protocol \"file\"]\n\tallow = always\n")
        lines.append("[user]\n\tname = bench\n\temail = bench@localhost\n")
        lines.append("[advice]\n\tdetachedHead = false\n")
        self.gitconfig.parent.mkdir(parents=True, exist_ok=True)
        self.gitconfig.write_text("".join(lines))

    def setup(self) -> str:
        version = self.ensure_venv()
        self.ensure_git()
        return version

    # -- running ---------------------------------------------------------------------------
    def env(self, home: Path) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTHON", "VIRTUAL_ENV", "XDG_", "GIT_", "NNRAG_"))}
        env.update(HOME=str(home), GIT_CONFIG_GLOBAL=str(self.gitconfig),
                   GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
                   PATH=f"{self.venv / 'bin'}:{os.environ.get('PATH', '')}",
                   TQDM_DISABLE="1", PYTHONHASHSEED="0")
        return env

    def cache(self, home: Path) -> Path:
        return home / ".cache" / "nn-rag"

    def db(self, home: Path) -> Path:
        return self.cache(home) / "index.db"

    def checkout(self, home: Path, corpus: str) -> Path:
        return self.cache(home) / "repo_cache" / CACHE_NAMES[corpus]

    def driver(self, home: Path, *args: str, cwd: Path | None = None) -> Measured:
        home.mkdir(parents=True, exist_ok=True)
        return run_measured([str(self.python), str(HERE / "paper_driver.py"), *args],
                            env=self.env(home), cwd=cwd or home)

    def clone(self, home: Path) -> tuple[Measured, dict]:
        m = self.driver(home, "clone")
        data = check(m, "nn-rag clone")
        if not data["ok"]:
            raise RuntimeError(f"nn-rag could not clone the local repositories: {data}")
        return m, data

    def copy_home(self, src: Path, dst: Path) -> None:
        """A second HOME with the same clones and index (the tool's cache index records
        absolute paths, so they are rewritten)."""
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
        idx = self.cache(dst) / "cache_index.json"
        if idx.exists():
            data = json.loads(idx.read_text())
            for entry in data.values():
                if isinstance(entry, dict) and "path" in entry:
                    entry["path"] = entry["path"].replace(str(src), str(dst), 1)
            idx.write_text(json.dumps(data, indent=2))

    def drop_index(self, home: Path) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):
            p = Path(str(self.db(home)) + suffix)
            if p.exists():
                p.unlink()

    def index(self, home: Path, mode: str = "missing",
              marker: tuple[str, str] | None = None) -> tuple[Measured, dict]:
        args = ["index", "--mode", mode]
        if marker:
            args += ["--marker", *marker]
        m = self.driver(home, *args)
        return m, check(m, f"nn-rag index ({mode})")

    def extract(self, home: Path, names: Path, out: Path) -> tuple[Measured, dict]:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        m = self.driver(home, "extract", "--names", str(names), "--out", str(out), cwd=out)
        return m, check(m, "nn-rag extract")

    def site_generated(self) -> Path:
        out = subprocess.run([str(self.python), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True)
        return Path(out.stdout.strip()) / "ab" / "rag" / "generated_packages"

    def cli_batch(self, home: Path, names: list[str], out: Path) -> tuple[Measured, dict]:
        """The user's way: one ``python -m ab.rag --blocks ...`` process (extract + validate),
        from a warm cache. Its files land in its own site-packages (cleared first) and, when its
        validator passes them, in ``out/blocks``."""
        gen = self.site_generated()
        shutil.rmtree(gen, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        m = run_measured([str(self.python), "-m", "ab.rag", "--blocks", *names,
                          "--project-dir", str(out)], env=self.env(home), cwd=out)
        if m.returncode != 0:
            raise RuntimeError(f"nn-rag --blocks failed:\n{m.stderr[-3000:]}")
        start = m.stdout.find("{")
        results = json.loads(m.stdout[start:]) if start >= 0 else {}
        valid = sum(1 for r in results.values()
                    if (r.get("validation") or {}).get("status") == "valid"
                    or (r.get("validation") or {}).get("valid"))
        produced = len({p.stem for p in (out / "blocks").glob("*.py")}
                       | {p.stem for p in gen.glob("*.py")})
        shutil.rmtree(gen, ignore_errors=True)
        return m, {"blocks": len(names), "produced": produced, "valid": valid}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, default=HERE / ".corpora")
    ap.add_argument("--work", type=Path, default=HERE / ".work")
    args = ap.parse_args()
    tool = PaperTool(args.work.resolve(), args.corpora.resolve())
    print("installed:", tool.setup())
    home = args.work.resolve() / "paper-home-smoke"
    shutil.rmtree(home, ignore_errors=True)
    m, data = tool.clone(home)
    print(f"clone: {m.wall_s:.1f} s {data}")
    m, data = tool.index(home)
    print(f"cold index: {data['seconds']:.1f} s (process {m.wall_s:.1f} s, peak "
          f"{m.peak_tree_rss / 2**20:.0f} MiB) {data}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
