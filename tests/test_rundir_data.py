"""A run directory someone hands you is data, not code (docs/security.md, "Run directories").

The run directory is real: ``rayrm simulate`` of configs/paper-micro.yaml, with an RM
state a keeping store wrote (``rm-state/``, two snapshots and their journals, by the
protocol harness, as in test_restores.py).  Then its pickles are replaced by crafted ones
whose unpickling would run ``os.system("touch <marker>")``, and every command that reads
a run directory is run on it: none may create the marker; the ones that read ``rm-state``
refuse it in one line, exit status 2.
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
import urllib.request
import zlib
from pathlib import Path

import pytest
from harness import Harness

from rayrm.rm.cli.main import main
from rayrm.rm.core.policies.plugins import BUILTIN
from rayrm.rm.runtime.rmactor.journal import export_from_store
from rayrm.rm.service.restores import check_restores
from rayrm.rm.service.store import StateFileError, StateStore, read_snapshot, restricted_loads
from rayrm.rm.ui.rundir import RunDirSource
from rayrm.rm.ui.server import serve

CONFIG = Path(__file__).parents[1] / "configs" / "paper-micro.yaml"


class Exploit:
    """Unpickled by ``pickle.load``, it runs a shell command."""

    def __init__(self, marker: Path):
        self.command = f"touch {marker}"

    def __reduce__(self):
        return os.system, (self.command,)


def journal_record(obj) -> bytes:
    """One journal record as StateStore.append writes it: u32 length, u32 crc32, pickle."""
    body = pickle.dumps(obj)
    return struct.pack("<II", len(body), zlib.crc32(body)) + body


def kept_run(state_dir: Path) -> None:
    """Snapshots 1 (empty), 2 at t = 3 and 3 at t = 6 of the harness's RM, every journal kept."""
    c = Harness(StateStore(state_dir, keep=True))
    c.run(until=3)
    c.store.snapshot(c.rm)
    c.run(until=6)
    c.store.snapshot(c.rm)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("clean") / "run"
    assert main(["simulate", str(CONFIG), "--out", str(run)]) == 0
    kept_run(run / "rm-state")
    return run


def crafted(clean_run: Path, tmp_path: Path, where: str) -> tuple[Path, Path]:
    """A copy of the clean run whose ``where`` (a snapshot or a journal) runs code."""
    import shutil
    run, marker = tmp_path / "run", tmp_path / "pwned"
    shutil.copytree(clean_run, run)
    state = run / "rm-state"
    if where == "snapshot":
        (state / "snapshot-2.pkl").write_bytes(pickle.dumps((2, Exploit(marker))))
        (state / "snapshot.pkl").write_bytes(pickle.dumps((3, Exploit(marker))))
    elif where == "journal":
        with open(state / "journal-1.log", "ab") as fh:
            fh.write(journal_record(("node_heartbeat", 1.0, (Exploit(marker),))))
    else:                                            # the arguments' own pickle, as hosts send them
        with open(state / "journal-1.log", "ab") as fh:
            fh.write(journal_record(("node_heartbeat", 1.0, pickle.dumps((Exploit(marker),)))))
    return run, marker


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize("where", ["snapshot", "journal", "wire"])
def test_check_restores_refuses_a_crafted_rm_state_in_one_line_and_runs_nothing(clean_run, tmp_path, capsys, where):
    run, marker = crafted(clean_run, tmp_path, where)
    capsys.readouterr()
    assert main(["check", "--restores", str(run)]) == 2
    line = one_error_line(capsys)
    file = "snapshot-2.pkl" if where == "snapshot" else "journal-1.log"
    assert line.startswith(f"rayrm check: error: {run / 'rm-state' / file}: ")
    # os.system pickles as posix.system; the unpickler names it and calls nothing
    assert "posix.system, which is not one of rayrm's own data types" in line
    assert not marker.exists()


def test_the_clean_run_passes_check_restores(clean_run, capsys):
    capsys.readouterr()
    assert main(["check", "--restores", str(clean_run)]) == 0
    assert "restores               2 of 2 snapshots rebuilt exactly" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not a pair"])
def test_a_corrupt_snapshot_is_one_line_and_exit_2(clean_run, tmp_path, capsys, damage):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(clean_run, run)
    snapshot = run / "rm-state" / "snapshot-2.pkl"
    data = snapshot.read_bytes()
    snapshot.write_bytes({"truncated": data[:len(data) // 2], "garbage": os.urandom(4096),
                          "not a pair": pickle.dumps(["a", "list"])}[damage])
    capsys.readouterr()
    assert main(["check", "--restores", str(run)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"rayrm check: error: {snapshot}: not a snapshot of this rayrm's RM: ")


@pytest.mark.parametrize("command", ["check", "report"])
def test_commands_that_read_only_the_run_s_tables_never_touch_its_pickles(clean_run, tmp_path, capsys, command):
    run, marker = crafted(clean_run, tmp_path, "snapshot")
    args = [command, str(run)] + (["--out", str(tmp_path / "report")] if command == "report" else [])
    assert main(args) == 0
    assert not marker.exists()


def test_the_ui_of_a_crafted_run_serves_it_and_runs_nothing(clean_run, tmp_path):
    run, marker = crafted(clean_run, tmp_path, "snapshot")
    server = serve(RunDirSource(run), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        for path in ("/ws/v1/cluster/apps", "/ws/v1/cluster/nodes", "/ws/v1/cluster/metrics", "/"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
                assert answer.status == 200
    finally:
        server.shutdown()
        server.server_close()
    assert not marker.exists()


def test_an_interrupted_replay_s_snapshot_and_a_restarting_rm_read_only_data(tmp_path):
    marker = tmp_path / "pwned"
    StateStore(tmp_path).snapshot_path.write_bytes(pickle.dumps((1, Exploit(marker))))
    with pytest.raises(StateFileError, match="posix.system"):
        export_from_store(tmp_path, 1.0)
    with pytest.raises(StateFileError, match="posix.system"):
        StateStore(tmp_path).load(trusted={"rayrm.rm.core.policies.task_share"})
    # a policy module is trusted, never the standard library's
    with pytest.raises(StateFileError, match="posix.system"):
        read_snapshot(StateStore(tmp_path).snapshot_path, trusted={"posix", "os", "builtins"})
    assert not marker.exists()


@pytest.mark.parametrize("name", ["builtins.eval", "builtins.exec", "subprocess.Popen", "os.system",
                                  "rayrm.rm.service.store._write_snapshot", "rayrm.rm.service.store.StateStore",
                                  "rayrm.rm.core.policies.plugins.resolve_policy", "rayrm.rm.core.errors.__builtins__"])
def test_names_that_are_not_rayrm_s_data_are_refused_before_they_are_called(name):
    module, attr = name.rsplit(".", 1)
    # GLOBAL opcode, then an empty tuple and REDUCE: a call of the named object
    crafted = b"\x80\x02c" + module.encode() + b"\n" + attr.encode() + b"\n)R."
    with pytest.raises(pickle.UnpicklingError):
        restricted_loads(crafted)


def test_the_restricted_unpickler_reads_what_the_state_holds():
    """Bound methods the state keeps (a list's append) come back; another method does not."""
    import array
    kept = [1, 2]
    back = restricted_loads(pickle.dumps((kept.append, array.array("d", [1.5]).append, {1, 2})))
    assert back[0].__name__ == "append" and back[2] == {1, 2}
    with pytest.raises(pickle.UnpicklingError, match="bound method builtins.list.pop"):
        restricted_loads(pickle.dumps(kept.pop))


def test_the_parquet_reader_is_a_pyarrow_that_does_not_unpickle_a_file_s_extension_types():
    """pyarrow 0.14.0 to 14.0.0 rebuild a Parquet file's extension types by unpickling them
    (CVE-2023-47248): a run directory's tables.parquet could run code.  14.0.1 is the fix."""
    tomllib = pytest.importorskip("tomllib")                # Python 3.11+
    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    pyarrow = next(Requirement(r) for r in project["dependencies"] if r.startswith("pyarrow"))
    assert "14.0.0" not in pyarrow.specifier and "14.0.1" in pyarrow.specifier


@pytest.mark.parametrize("policy", sorted(BUILTIN))
def test_every_built_in_policy_s_state_reads_back_through_the_restricted_unpickler(tmp_path, policy):
    """What the state holds under each policy (its own objects, the bound methods its
    scheduler keeps) is rayrm's data: every kept snapshot rebuilds exactly."""
    if policy == "ray-native":
        pytest.skip("no RM: the trace goes straight to Ray's scheduler")
    c = Harness(StateStore(tmp_path, keep=True), policy=policy)
    c.run(until=3)
    c.store.snapshot(c.rm)
    c.run(until=6)
    c.store.snapshot(c.rm)
    checks = check_restores(tmp_path)
    assert [check.same for check in checks] == [True, True], [check.differences for check in checks]
