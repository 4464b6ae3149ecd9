"""Every ``--json`` output is exactly one JSON document on the process's stdout.

Each command runs in a fresh subprocess, so the real file descriptor 1 is captured:
HiGHS prints its banner from C code when a process builds its first solver, which
``capsys`` (``sys.stdout`` only) never sees and which an in-process test would miss
once any earlier test had built a solver.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from samples import FIG2_YAML

ROOT = Path(__file__).resolve().parents[1]
RUN_CLI = "import sys; from rayrm.rm.cli.main import main; sys.exit(main(sys.argv[1:]))"


def rayrm_stdout(*argv: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", RUN_CLI, *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def one_document(text: str):
    """The single JSON value ``text`` holds; fails on a banner before it or anything after it."""
    value, end = json.JSONDecoder().raw_decode(text)   # raises on a leading banner
    assert text[end:].strip() == "", f"after the JSON: {text[end:][:200]!r}"
    return value


def test_offline_json_is_one_document(tmp_path):
    out = one_document(rayrm_stdout("offline", str(ROOT / "configs" / "paper-micro.yaml"), "--json",
                                    cwd=tmp_path))
    assert out["policy"] == "tsf" and out["apps"]


def test_audit_json_is_one_document(tmp_path):
    out = one_document(rayrm_stdout("audit", "--json", "--instances", "0", "--policies", "tsf", cwd=tmp_path))
    # TSF keeps every property on the papers' instances (tsf-paper Table I).
    assert all(row["holds"] for row in out["policies"]["tsf"].values())


def test_audit_what_if_json_is_one_document(tmp_path):
    config = tmp_path / "fig2.yaml"
    config.write_text(FIG2_YAML)
    out = one_document(rayrm_stdout("audit", "--config", str(config), "--app", "u2", "--policies", "cdrf",
                                    "--simulate", "--json", cwd=tmp_path))
    # CDRF gives u2 4 tasks truthfully and 6 when it claims m1 (tsf-paper Fig. 2b).
    assert out["policies"]["cdrf"]["truthful_tasks"] == pytest.approx(4)
    assert out["policies"]["cdrf"]["gain"] == pytest.approx(2)


def test_check_json_is_one_document(tmp_path):
    config = tmp_path / "fig2.yaml"
    config.write_text(FIG2_YAML)
    run = tmp_path / "run"
    subprocess.run([sys.executable, "-c", RUN_CLI, "simulate", str(config), "--out", str(run), "--no-progress"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=300)
    out = one_document(rayrm_stdout("check", str(run), "--json", cwd=tmp_path))
    # 100 + 100 tasks, each run once to the end.
    assert out["ok"] and out["tasks"] == 200 and out["attempts_by_status"] == {"finished": 200}


def test_every_command_with_json_is_tested_here():
    """A command that gains --json must get a test above."""
    import argparse

    from rayrm.rm.cli.main import build_parser

    def commands_with_json(parser, prefix=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from commands_with_json(sub, prefix + (name,))
            elif "--json" in action.option_strings:
                yield " ".join(prefix)

    assert set(commands_with_json(build_parser())) == {"offline", "audit", "check"}
