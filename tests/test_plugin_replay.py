"""Policy plugins on Ray: the user's code travels to the RM, and a wrong one stops the replay.

One module-scoped ``ray.cluster_utils.Cluster`` of two nodes; the second offers the
custom resource ``rayrm_rm``, so the RM actor runs there, on the node that did not start
the driver.  The plugins are written to a temporary directory that only the driver's
``sys.path`` (or nothing, for a file) knows: a worker can import them only if the replay
ships them.  The config is samples.py's small one (30 tasks, about a wall second).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402
from samples import SMALL, small_config  # noqa: E402

from rayrm.rm.cli.main import main  # noqa: E402
from rayrm.rm.core.policies import PolicyError  # noqa: E402
from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402
from rayrm.rm.runtime.shipping import RM_RESOURCE  # noqa: E402
from rayrm.rm.runtime.session import SYSTEM_CONFIG  # noqa: E402

STORE = 80 * 1024 * 1024

#: TSF that writes the Ray node it was prepared on (in the RM) to the file ``mark``
SHIPPED = '''
from rayrm import Policy

class ShippedTSF(Policy):
    """TSF, and where it ran."""
    def __init__(self, mark=""):
        self.mark = mark
    def prepare(self, nodes, dims):
        import ray
        with open(self.mark, "w") as fh:
            fh.write(ray.get_runtime_context().get_node_id())
    def unit(self, app, cluster):
        return 1.0 / (app.h * app.weight)
'''

BAD = Path(__file__).resolve().parent / "data" / "badpolicies.py"


@pytest.fixture(scope="module")
def cluster():
    """(head node id, the RM's node id)."""
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False, "_system_config": SYSTEM_CONFIG})
    c.add_node(num_cpus=1, resources={RM_RESOURCE: 1}, object_store_memory=STORE)
    c.wait_for_nodes()
    ray.init(address=c.address, namespace="rayrm", logging_level="ERROR")
    head = ray.get_runtime_context().get_node_id()
    other = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] != head]
    assert len(other) == 1
    yield head, other[0]
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    """A file plugin, a package plugin (on the driver's sys.path only) and the bad ones."""
    where = tmp_path_factory.mktemp("userpolicies")
    (where / "shippedtsf.py").write_text(SHIPPED)
    pkg = where / "lib" / "teamsched"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "fair.py").write_text(SHIPPED.replace("ShippedTSF", "TeamTSF"))
    sys.path.insert(0, str(where / "lib"))
    yield where
    sys.path.remove(str(where / "lib"))


def importable_on(node_id: str, module: str) -> bool:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    def probe():
        import importlib
        try:
            importlib.import_module(module)
            return True
        except ImportError:
            return False
    return ray.get(probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote())


@pytest.mark.parametrize("kind", ["file", "package"])
def test_the_plugin_travels_to_the_rm_on_the_other_node_and_comes_back_after_kill_rm(cluster, plugins, tmp_path, kind):
    head, rm_node = cluster
    mark = tmp_path / "prepared-on"
    spec = (f"{plugins}/shippedtsf.py:ShippedTSF:mark={mark}" if kind == "file"
            else f"teamsched.fair:TeamTSF:mark={mark}")
    assert not importable_on(rm_node, "shippedtsf" if kind == "file" else "teamsched")
    summary = replay(small_config(), policy=spec, out=tmp_path / "run", faults=["kill-rm@4"], progress=False)
    assert mark.read_text() == rm_node != head                  # the RM ran the user's code there
    result = check_run(tmp_path / "run")
    assert result.ok, result.report()
    # the restarted RM unpickled its snapshot, policy included, and went on: all 30 tasks, once
    assert summary["faults"]["rm_restarts"] == 1 and summary["tasks"]["finished"] == 30
    assert len(RunDir(tmp_path / "run").events.query("kind == 'rm_recovered'")) == 1
    source = summary["policy_source"]
    assert source["class"] == ("shippedtsf:ShippedTSF" if kind == "file" else "teamsched.fair:TeamTSF")
    assert summary["policy"] == spec and len(source["source_sha256"]) == 64


@pytest.mark.parametrize("cls, method", [("NanUnit", "unit"), ("RaisesInKey", "key"),
                                         ("RaisesInNodeKey", "node_key"), ("RaisesInChooseNode", "choose_node"),
                                         ("ChoosesFirstNode", "choose_node")])
def test_a_plugin_failing_mid_replay_stops_it_and_tears_it_down(cluster, plugins, tmp_path, cls, method):
    out = tmp_path / "run"
    summary = replay(small_config(), policy=f"{BAD}:{cls}", out=out, progress=False)
    # the supervisor saw the RM halt (a stall would have raised instead) and ended the replay
    assert summary["interrupt_reason"].startswith(f"policy error: policy badpolicies:{cls}: {method}: ")
    assert summary["policy_error"].startswith(f"policy badpolicies:{cls}: {method}: ")
    assert json.loads((out / "summary.json").read_text())["policy_error"] == summary["policy_error"]
    result = check_run(out)
    assert result.ok and result.over_allocations == 0, result.report()
    assert summary["tasks"]["finished"] < 30
    assert [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("rayrm-")] == []


def test_the_replay_command_says_so_in_one_line_and_exits_2(cluster, plugins, tmp_path, capsys):
    import yaml
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    out = tmp_path / "run"
    code = main(["replay", str(config), "--policy", f"{BAD}:NanUnit", "--out", str(out),
                 "--no-progress", "--ui-port", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"rayrm replay: error: policy badpolicies:NanUnit: unit: returned nan for app "
                                 f"j1: a unit must be a number >= 0 (the replay stopped; what ran: {out})"]


@pytest.mark.parametrize("spec, what", [("{dir}/missing.py:X", "load: no file"),
                                        ("{bad}:Missing", "load: badpolicies has no Missing"),
                                        ("no_such_module_xyz:X", "load: no module named")])
def test_a_plugin_that_cannot_load_fails_before_ray_is_asked(cluster, plugins, tmp_path, spec, what):
    spec = spec.format(dir=plugins, bad=BAD)
    with pytest.raises(PolicyError, match=what):
        replay(small_config(), policy=spec, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
