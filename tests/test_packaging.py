"""What an install ships: configs/ as the package ``rayrm.configs``, and every package in the tree.

pyproject.toml lists the packages by hand (package discovery cannot map the repository
root to the package ``rayrm``), so a new subpackage or a config file of a new kind would be left out of
a wheel silently; these tests name it instead.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace

import pytest

from rayrm.rm.cli.main import main
from rayrm.rm.cli import replay as replay_command
from rayrm.rm.cli.replay import bundled_config
from rayrm.rm.core.config import load_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(p.name for p in (ROOT / "configs").iterdir() if p.suffix != ".py" and p.name != "__pycache__")


def test_the_default_config_of_replay_is_installed_and_loads():
    path = bundled_config()
    assert path.is_file()
    assert load_config(path).name == "paper-micro"


def test_replay_without_the_bundled_configs_says_so_in_one_line(monkeypatch, capsys):
    def files(package):
        raise ModuleNotFoundError(f"No module named {package!r}")
    monkeypatch.setattr(replay_command, "resources", SimpleNamespace(files=files))
    # --time-scale 0 would stop the replay before Ray starts, were the config found
    assert main(["replay", "--time-scale", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bundled configs (package rayrm.configs) are not installed" in err[0]


@pytest.mark.parametrize("name", CONFIGS)
def test_every_config_in_the_repo_is_installed_with_the_same_text(name):
    assert bundled_config(name).read_bytes() == (ROOT / "configs" / name).read_bytes()


def test_pyproject_ships_every_package_and_every_config():
    tomllib = pytest.importorskip("tomllib")
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    in_tree = {".".join(("rayrm",) + init.parent.relative_to(ROOT).parts)
               for top in ("rm", "nodes", "apps", "traces", "configs") for init in (ROOT / top).rglob("__init__.py")}
    assert in_tree | {"rayrm"} == set(setuptools["packages"])
    assert setuptools["package-dir"] == {"rayrm": "."}
    globs = setuptools["package-data"]["rayrm.configs"]
    assert [n for n in CONFIGS if not any(fnmatch(n, g) for g in globs)] == []
