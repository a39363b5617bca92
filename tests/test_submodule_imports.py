"""Several ``import a.b`` of one external package bind one name; the file keeps each one whose
submodule a chain of the closure reads (orb's ``import ase.data`` and ``import ase.db.row``
for ``ase.db.row.AtomsRow``), or the submodule is never loaded: in a fresh interpreter the
block failed with AttributeError where upstream's builds. Golden case ``submodule_import``."""

import shutil
import subprocess
import sys
from pathlib import Path

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor

CASE = Path(__file__).parent / "fixtures" / "closure" / "submodule_import" / "repo"


def test_a_submodule_a_chain_reads_is_imported_in_a_fresh_interpreter(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(CASE, repo)
    with BlockExtractor(parse_config({"r": {"path": str(repo)}}), cache_dir=tmp_path / "c",
                        data_dir=tmp_path / "d") as ex:
        ex.index()
        res = ex.extract_single_block("Net", tmp_path / "out")
    assert res.ok
    run = subprocess.run(
        [sys.executable, "-I", "-c",
         "import importlib.util as u, sys\n"
         f"s = u.spec_from_file_location('net_file', {str(res.paths[0])!r})\n"
         "m = u.module_from_spec(s); s.loader.exec_module(m)\n"
         "print(m.Net().tag)\n"],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "scale"
