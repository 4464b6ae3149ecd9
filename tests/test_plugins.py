"""Policy plugins in the simulator: naming (file, module, entry point, options), what a run
records of the code, the read-only views, and every way a plugin can be wrong.

The bad plugins live in tests/data/badpolicies.py (``BAD``); each is run through the
command line in this process, so the exit status and stderr are what a user sees.
"""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
from pathlib import Path

import pytest
from samples import small_config

from rayrm.rm.cli.main import main
from rayrm.rm.core.policies import PolicyError, make_policy
from rayrm.rm.core.policies.plugins import parse_policy, policy_slug, policy_source, resolve_policy
from rayrm.rm.core.scheduler import OnlineScheduler
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.sim.engine import simulate

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_TSF = ROOT / "benchmarks" / "tsf_plugin.py"

#: wrong in every way a policy can be wrong at run time (and two that cannot load)
BAD = ROOT / "tests" / "data" / "badpolicies.py"


@pytest.fixture
def config_file(tmp_path):
    """The small config of samples.py as YAML: a1, a2 <2 cpu>, b1, b2 <1 cpu>; j1 = 20 tasks
    of 1 cpu from t=0, j2 = 10 tasks of 0.5 cpu from t=2 (disk == ssd: a1, a2 only)."""
    import yaml
    from samples import SMALL
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


@pytest.fixture
def bad():
    return BAD


def run_cli(capsys, *argv) -> tuple[int, list[str]]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


# ----- naming --------------------------------------------------------------------


def test_the_grammar_of_a_policy_string():
    assert parse_policy("tsf").kind == "built-in"
    assert parse_policy("slots:k=3").options == (("k", 3),)
    ref = parse_policy("a/b/x.py:Mine:alpha=0.5:name=fast:on=true")
    assert (ref.kind, ref.target, ref.attr) == ("file", "a/b/x.py", "Mine")
    assert ref.options == (("alpha", 0.5), ("name", "fast"), ("on", True))
    ref = parse_policy("pkg.mod:Cls")
    assert (ref.kind, ref.target, ref.attr, ref.options) == ("module", "pkg.mod", "Cls", ())
    assert parse_policy("theirs:k=2").kind == "entry point"
    assert policy_slug("a/b/x.py:Mine:k=3") == "x.Mine-k=3"
    assert policy_slug("pkg.mod:Cls") == "pkg.mod.Cls"
    assert make_policy("slots:k=3").k == 3


def test_a_policy_loads_by_path_and_records_its_source():
    policy = make_policy(f"{PLUGIN_TSF}:PluginTSF")
    assert type(policy).__name__ == "PluginTSF" and type(policy).__module__ == "tsf_plugin"
    source = policy_source(f"{PLUGIN_TSF}:PluginTSF")
    assert source["class"] == "tsf_plugin:PluginTSF" and source["kind"] == "file"
    assert source["source_sha256"] == hashlib.sha256(PLUGIN_TSF.read_bytes()).hexdigest()


def test_a_policy_loads_by_module_with_options(tmp_path, monkeypatch):
    pkg = tmp_path / "teampolicies"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fair.py").write_text(textwrap.dedent('''
        from rayrm import Policy
        class Scaled(Policy):
            """TSF scaled by a constant."""
            def __init__(self, scale=1.0):
                self.scale = scale
            def unit(self, app, cluster):
                return self.scale / app.h
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    policy = make_policy("teampolicies.fair:Scaled:scale=2.5")
    assert policy.scale == 2.5
    assert policy_source("teampolicies.fair:Scaled:scale=2.5")["options"] == {"scale": 2.5}


def test_a_policy_loads_by_entry_point_and_rayrm_policies_lists_it(tmp_path, monkeypatch, capsys):
    """A distribution 'theirs-1.2' on sys.path whose entry point 'oldest' names a class in
    its module theirmod: ``--policy oldest`` works and ``rayrm policies`` shows it."""
    (tmp_path / "theirmod.py").write_text(textwrap.dedent('''
        from rayrm import Policy
        class Oldest(Policy):
            """Oldest job first."""
            def unit(self, app, cluster): return 0.0
            def key(self, app): return app.submit
    '''))
    info = tmp_path / "theirs-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: theirs\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text("[rayrm.policies]\noldest = theirmod:Oldest\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert type(make_policy("oldest")).__name__ == "Oldest"
    assert policy_source("oldest")["distribution"] == "theirs 1.2"
    assert main(["policies"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["oldest"].split(None, 1)[1] == "Oldest job first.  [entry point of theirs 1.2]"
    # twelve built-ins (ten policies, yarn-fair, yarn-capacity), + oldest, + the hint
    assert rows["tsf"].endswith("[built-in]") and len(rows) == 12 + 1 + 1


def test_the_views_are_read_only():
    """Writing to what a policy reads raises; the free vector is a copy."""
    sched = OnlineScheduler("tsf", ("cpu",), [NodeSpec("m1", Resources(cpu=2))])
    app, _ = sched.submit(AppSpec("u1", Resources(cpu=1), 1))
    view, node = app.view, sched.cluster.nodes[0].view
    with pytest.raises(AttributeError):
        view.running = 5
    with pytest.raises(AttributeError):
        node.free = (9.0,)
    with pytest.raises(TypeError):
        view.on_node[0] = 1
    assert isinstance(node.free, tuple) and isinstance(view.eligible, bytes)


# ----- a built-in and the same key as a plugin ------------------------------------------


def test_a_plugin_with_the_builtin_key_gives_the_same_run_directory(tmp_path):
    cfg = small_config()
    simulate(cfg, policy="tsf", out=tmp_path / "a", progress=False)
    simulate(cfg, policy=f"{PLUGIN_TSF}:PluginTSF", out=tmp_path / "b", progress=False)
    for name in ("tasks.csv", "jobs.csv", "events.csv", "shares.csv", "nodes.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in "ab")
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert differ - {"wall_seconds"} == {"policy", "policy_source"}     # wall time may round alike
    assert b["policy_source"]["class"] == "tsf_plugin:PluginTSF"


# ----- wrong plugins ----------------------------------------------------------------


@pytest.mark.parametrize("spec, method, what", [
    ("{dir}/missing.py:X", "load", "no file"),
    ("no_such_module_xyz:X", "load", "no module named 'no_such_module_xyz'"),
    ("{bad}:Missing", "load", "badpolicies has no Missing"),
    ("{bad}:NotAPolicy", "load", "badpolicies.NotAPolicy is not a subclass of rayrm.Policy"),
    ("{bad}:NoUnit", "load", "defines neither share nor unit()"),
    ("{bad}:NanUnit:x=1", "__init__", "TypeError"),
    ("nope", "load", "unknown policy"),
])
def test_a_plugin_that_cannot_load_is_one_line_and_exit_2(capsys, config_file, bad, tmp_path, spec, method, what):
    spec = spec.format(dir=tmp_path, bad=bad)
    code, err = run_cli(capsys, "simulate", config_file, "--policy", spec, "--out", tmp_path / "run")
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"rayrm simulate: error: policy {spec}: {method}: " if spec != "nope"
                             else "rayrm simulate: error: unknown policy 'nope' (choose from tsf, ")
    assert what in err[0], err[0]
    assert not (tmp_path / "run").exists()


def test_a_plugin_that_fails_to_import_is_one_line_and_exit_2(capsys, config_file, tmp_path):
    broken = tmp_path / "brokenpolicy.py"
    broken.write_text("from rayrm import Policy\nclass X(Policy):\n    def unit(self, app, cluster) return 1\n")
    code, err = run_cli(capsys, "simulate", config_file, "--policy", f"{broken}:X")
    assert code == 2 and len(err) == 1
    assert f"policy {broken}:X: import: SyntaxError" in err[0]
    raising = tmp_path / "raisingpolicy.py"
    raising.write_text("import no_such_dependency_xyz\n")
    code, err = run_cli(capsys, "simulate", config_file, "--policy", f"{raising}:X")
    assert code == 2 and err == [f"rayrm simulate: error: policy {raising}:X: import: ModuleNotFoundError: "
                                 f"No module named 'no_such_dependency_xyz'"]


@pytest.mark.parametrize("cls, method, what", [
    ("NanUnit", "unit", "returned nan for app j1: a unit must be a number >= 0"),
    ("NegativeUnit", "unit", "returned -1.0 for app j1: a unit must be a number >= 0"),
    ("TextUnit", "unit", "returned '1' for app j1: a unit must be a number >= 0"),
    ("NanKey", "key", "returned nan for app j1: a key must be a number, not NaN"),
    ("RaisesInUnit", "unit", "raised ZeroDivisionError: division by zero"),
    ("RaisesInKey", "key", "raised KeyError: 'boom'"),
    ("RaisesInNodeKey", "node_key", "raised RuntimeError: boom"),
    ("RaisesInChooseNode", "choose_node", "raised RuntimeError: boom"),
    # a1 takes j1's first two tasks; offered a2, the policy answers a1, full: refused
    ("ChoosesFirstNode", "choose_node", "returned node a1 for app j1, where its task does not fit "
                                        "(refused: nothing was allocated)"),
    ("WritesToView", "unit", "raised AttributeError: property 'running' of 'AppView' object has no setter"),
])
def test_a_plugin_failing_mid_run_ends_the_run_with_its_directory(capsys, config_file, bad, tmp_path, cls, method, what):
    out = tmp_path / "run"
    code, err = run_cli(capsys, "simulate", config_file, "--policy", f"{bad}:{cls}", "--out", out)
    assert code == 2 and len(err) == 1, err
    assert err[0] == f"rayrm simulate: error: policy badpolicies:{cls}: {method}: {what} (what ran: {out})"
    summary = json.loads((out / "summary.json").read_text())
    assert method in summary["policy_error"] and what in summary["policy_error"]
    assert summary["interrupted"] is True and summary["policy_source"]["class"] == f"badpolicies:{cls}"
    assert main(["check", str(out)]) == 0       # nothing over-allocated, every row consistent
    if cls == "ChoosesFirstNode":
        # the error came in t = 0's scheduling round, whose placements never started: no task
        # ran, j1 and j2 (submitted at 0 and 2) are unfinished, and the run ended at t = 0
        from rayrm.rm.runs.reader import RunDir
        run = RunDir(out)
        assert len(run.tasks) == 0 and dict(zip(run.jobs.app, run.jobs.status)) == {"j1": "unfinished"}


def test_compare_mixes_builtins_and_a_plugin(tmp_path, config_file, capsys):
    spec = f"{PLUGIN_TSF}:PluginTSF"
    assert main(["compare", str(config_file), "--policies", f"tsf,{spec}", "--out", str(tmp_path / "c")]) == 0
    plugin_dir = tmp_path / "c" / "tsf_plugin.PluginTSF"
    assert json.loads((plugin_dir / "summary.json").read_text())["policy"] == spec
    assert (tmp_path / "c" / "tsf" / "tasks.csv").read_bytes() == (plugin_dir / "tasks.csv").read_bytes()


def test_a_config_may_name_a_plugin(tmp_path):
    from rayrm.rm.core.config import parse_config
    from samples import SMALL
    cfg = parse_config(dict(SMALL, policy=f"{PLUGIN_TSF}:PluginTSF"))
    assert resolve_policy(cfg.policy).cls.__name__ == "PluginTSF"
    with pytest.raises(PolicyError):
        resolve_policy(f"{tmp_path}/none.py:X")


# ----- docs/policies.md ---------------------------------------------------------------


def test_every_name_docs_policies_cites_is_in_the_code():
    """Each `code` span of docs/policies.md that is a Python name (or NAME(...)) is defined
    or used in rayrm's source; each path it names exists."""
    doc = (ROOT / "docs" / "policies.md").read_text()
    code = "\n".join(p.read_text() for d in ("rm", "examples", "benchmarks") for p in (ROOT / d).rglob("*.py"))
    code += (ROOT / "__init__.py").read_text()
    import re
    missing = []
    for span in set(re.findall(r"`([^`\n]+)`", doc)):
        name = re.sub(r"\(.*\)$", "", span)
        if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*", name) and "." not in name:
            if not re.search(rf"\b{name}\b", code):
                missing.append(span)
        elif re.fullmatch(r"(rm|examples|benchmarks|docs)/[\w/.]+\.(py|md)", span):
            if not (ROOT / span).exists():
                missing.append(span)
    assert missing == []


def test_the_example_in_docs_policies_runs_as_written(tmp_path, monkeypatch, capsys):
    doc = (ROOT / "docs" / "policies.md").read_text()
    source = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert source.startswith("# oldest.py")
    (tmp_path / "oldest.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    try:
        assert main(["simulate", str(ROOT / "configs" / "paper-micro.yaml"), "--policy", "oldest.py:Oldest",
                     "--no-progress"]) == 0
    finally:
        sys.modules.pop("oldest", None)
    assert (tmp_path / "runs" / "paper-micro-oldest.Oldest-sim" / "summary.json").exists()
