"""The ``rayrm`` command line itself (rayrm.rm.cli.main) and ``rayrm check --recovery``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rayrm.rm.cli import main as cli
from rayrm.rm.core.config import parse_config
from rayrm.rm.sim.engine import simulate


def test_every_listed_subcommand_is_on_the_command_line():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == [name for name, _ in cli.COMMANDS]


def test_a_listed_subcommand_without_its_module_is_a_loud_error(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", cli.COMMANDS + [("nosuch", "a command whose module is missing")])
    with pytest.raises(ModuleNotFoundError, match="rayrm.rm.cli.nosuch"):
        cli.build_parser()


def test_one_commands_parser_lists_all_and_imports_only_its_module():
    """``rayrm simulate ...`` builds the parser of simulate alone: the same arguments as the
    whole parser's, every command still listed, no other command's module imported (a fresh
    interpreter: this one has imported them all)."""
    argv = ["simulate", "c.yaml", "--policy", "drf", "--seed", "3", "--fault", "kill-rm@5"]
    alone, whole = cli.build_parser(cli._command(argv)).parse_args(argv), cli.build_parser().parse_args(argv)
    assert vars(alone) == vars(whole)
    sub = next(a for a in cli.build_parser("simulate")._actions if a.dest == "command")
    assert list(sub.choices) == [name for name, _ in cli.COMMANDS]
    assert cli._command(["--help"]) is None and cli._command(["nosuch"]) is None and cli._command([]) is None
    code = ("import sys; from rayrm.rm.cli.main import build_parser; build_parser('simulate'); "
            "print(sorted(m for m in sys.modules if m.startswith('rayrm.rm.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['rayrm.rm.cli.main', 'rayrm.rm.cli.simulate']"


def _crashed_nm_run(tmp_path):
    # Two nodes a, b of <1 cpu, 1 GB>; j: 4 tasks of <1 cpu, 512 MB>, 10 s each, heartbeat
    # 1 s, time scale 1, nm_expiry 3.  t0 on a, t1 on b at 0; b crashes at 5, is declared
    # lost at 5 + 3 = 8 (detected 3 s after the fault); t1 runs again on a when a frees at
    # 10 (recovered 10 - 5 = 5 s after the fault); one attempt lost.
    doc = {"name": "faults",
           "cluster": {"nodes": [{"name": n, "capacity": {"cpu": 1, "memory_mb": 1024}} for n in "ab"]},
           "workload": {"jobs": [{"id": "j", "submit": 0, "tasks": 4, "demand": {"cpu": 1, "memory_mb": 512},
                                  "duration": 10}]},
           "faults": ["kill-nm:b@5"], "run": {"seed": 1, "heartbeat_interval": 1, "nm_expiry": 3}}
    out = tmp_path / "run"
    simulate(parse_config(doc), out=out, progress=False)
    return out


def test_check_recovery_prints_each_faults_detection_and_recovery(tmp_path, capsys):
    out = _crashed_nm_run(tmp_path)
    assert cli.main(["check", "--recovery", str(out)]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("kill-nm:b@5"))
    # fault, at, detected, recovered (trace s), wall s (a simulation has none), attempts lost
    assert row[:4] == ["kill-nm:b@5", "5.0", "3.00", "5.00"]
    assert row[-1] == "1"


def test_check_recovery_json(tmp_path, capsys):
    out = _crashed_nm_run(tmp_path)
    assert cli.main(["check", "--recovery", "--json", str(out)]) == 0
    (r,) = json.loads(capsys.readouterr().out)["recovery"]
    assert (r["fault"], r["detected"], r["recovered"], r["lost_attempts"]) == ("kill-nm:b@5", 3.0, 5.0, 1)


def test_check_recovery_without_faults_says_so(tmp_path, capsys):
    doc = {"name": "calm", "cluster": {"nodes": [{"name": "a", "capacity": {"cpu": 1, "memory_mb": 1024}}]},
           "workload": {"jobs": [{"id": "j", "submit": 0, "tasks": 1, "demand": {"cpu": 1, "memory_mb": 512},
                                  "duration": 10}]},
           "run": {"seed": 1, "heartbeat_interval": 1}}
    simulate(parse_config(doc), out=tmp_path / "run", progress=False)
    assert cli.main(["check", "--recovery", str(tmp_path / "run")]) == 0
    assert "no fault was injected" in capsys.readouterr().out


def test_no_suggested_command_is_a_repository_script():
    # An installed rayrm has no benchmarks/ directory: what the CLI tells a user to run
    # must be a rayrm command.
    from pathlib import Path
    cli_dir = Path(cli.__file__).parent
    offenders = [f"{p.name}:{i}" for p in cli_dir.glob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1) if "benchmarks/" in line]
    assert offenders == []
