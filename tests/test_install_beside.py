"""rayrm installs one top-level package, so it never shadows PyPI's ``traces`` or ``nodes``.

The wheel is built from a copy of the tree (a build writes build/ and *.egg-info beside
the sources).  The second test installs the wheel into a fresh target directory beside
PyPI's ``traces`` (a time-series library) and ``nodes`` and imports all three; it needs
the package index and is skipped without it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL_LITTER = {".git", ".venv", ".ci-venv", "build", "dist", "runs", "out", ".pytest_cache", ".hypothesis"}


def ignore(directory: str, names: list[str]) -> set[str]:
    """Leave out run output and environments at the top, caches and build metadata anywhere."""
    top = TOP_LEVEL_LITTER if Path(directory) == ROOT else set()
    return {n for n in names if n in top or n == "__pycache__" or n.endswith(".egg-info")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, tmp / "src", ignore=ignore)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"),
                           str(tmp / "src")], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {done.stderr.strip().splitlines()[-1:]}")
    return next((tmp / "dist").glob("rayrm-*.whl"))


def test_the_wheel_holds_one_top_level_package(wheel):
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"rayrm"}
    names = set(zipfile.ZipFile(wheel).namelist())
    # the subpackages, the bundled default config and the generator's data travel inside rayrm/
    assert {"rayrm/rm/core/scheduler.py", "rayrm/traces/importers/swim.py", "rayrm/nodes/host.py",
            "rayrm/apps/am.py", "rayrm/configs/paper-micro.yaml"} <= names


def test_rayrm_imports_beside_pypis_traces_and_nodes(wheel, tmp_path):
    target = tmp_path / "site"
    for args in (["traces", "nodes"], ["--no-deps", str(wheel)]):   # rayrm's own deps are the environment's
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), *args],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.skip(f"the package index is not reachable: {done.stderr.strip().splitlines()[-1:]}")
    probe = ("import traces, nodes, rayrm.traces.generate, rayrm.nodes.placement;"
             "ts = traces.TimeSeries(); ts[0] = 1; ts[2] = 3;"
             "print(traces.__file__); print(nodes.__file__); print(rayrm.__file__); print(ts[1])")
    # -I: no user site and no current directory, so only the target and the environment count;
    # the target first, so its rayrm is the wheel's, not an editable install's
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    traces_file, nodes_file, rayrm_file, value = out.stdout.split()
    assert traces_file.startswith(str(target / "traces"))
    assert nodes_file.startswith(str(target / "nodes"))
    assert rayrm_file.startswith(str(target / "rayrm"))
    assert value == "1"    # a TimeSeries is a step function: at t=1 it still holds t=0's value
