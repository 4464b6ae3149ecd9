"""Offline progressive filling (rm/offline/filling.py) on the papers' worked examples.

Each case is an instance, the expected numbers and the arithmetic behind them.
The last tests recompute TSF, CDRF, DRFH and per-machine DRF on random
instances with the literal Algorithm 1 of tsf-paper §V-B (per-machine variables,
no coalescing, one freeze LP per active user per round) and require agreement.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from rayrm.rm.offline import lp as offline_lp
from rayrm.rm.cli.main import main as rayrm
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.offline.filling import Problem, progressive_filling
from rayrm.rm.offline.views import offline_policy

R = Resources.parse


def instance(machines: dict[str, str], users: dict[str, tuple], **limits) -> Problem:
    """machines: name -> "cpu:9;mem:12"; users: name -> (demand, whitelist or "*"[, weight])."""
    nodes = [NodeSpec(name, R(cap)) for name, cap in machines.items()]
    apps = []
    for name, (demand, where, *weight) in users.items():
        constraint = Constraint() if where == "*" else Constraint.whitelist(where.split())
        apps.append(AppSpec(name, R(demand), limits.get(name, 10**6), weight[0] if weight else 1.0,
                            constraint=constraint))
    return Problem.from_specs(nodes, apps, limit_tasks=bool(limits))


# tsf-paper Fig. 4: m1 = m3 = <9 CPU, 12 GB>, m2 = <3, 4>.
FIG4 = instance({"m1": "cpu:9;mem:12", "m2": "cpu:3;mem:4", "m3": "cpu:9;mem:12"},
                {"u1": ("cpu:1;mem:2", "m1 m2"), "u2": ("cpu:3;mem:1", "m2"), "u3": ("cpu:1;mem:4", "*")})
# tsf-paper Fig. 2a: two machines <18, 18>; u2 may use m2 only.
FIG2 = instance({"m1": "cpu:18;mem:18", "m2": "cpu:18;mem:18"},
                {"u1": ("cpu:1;mem:2", "m1 m2"), "u2": ("cpu:1;mem:3", "m2")})
# tsf-paper Fig. 2b: u2 falsely claims m1 as well.
FIG2_LIE = instance({"m1": "cpu:18;mem:18", "m2": "cpu:18;mem:18"},
                    {"u1": ("cpu:1;mem:2", "m1 m2"), "u2": ("cpu:1;mem:3", "m1 m2")})
# tsf-paper Fig. 3 (from the text): three 3-CPU machines, one-CPU tasks.
FIG3 = instance({"m1": "cpu:3", "m2": "cpu:3", "m3": "cpu:3"},
                {"u1": ("cpu:1", "m1"), "u2": ("cpu:1", "m1 m2 m3"), "u3": ("cpu:1", "m2"),
                 "u4": ("cpu:1", "m2"), "u5": ("cpu:1", "m3"), "u6": ("cpu:1", "m3"), "u7": ("cpu:1", "m3")})
# DRF's example (tsf-paper Theorem 6): one machine <9 CPU, 18 GB>.
ONE_MACHINE = instance({"m": "cpu:9;mem:18"}, {"u1": ("cpu:1;mem:4", "*"), "u2": ("cpu:3;mem:1", "*")})
# choosy-paper Fig. 5: nine one-slot machines.
CHOOSY5 = instance({f"m{k}": "slot:1" for k in range(1, 10)},
                   {"u1": ("slot:1", "m1 m2"), "u2": ("slot:1", "m2 m3 m4 m5"),
                    "u3": ("slot:1", "m5 m6 m7 m8 m9")})
# drfh-paper Fig. 1: servers <2 CPU, 12 GB> and <12 CPU, 2 GB>.
DRFH1 = instance({"s1": "cpu:2;mem:12", "s2": "cpu:12;mem:2"},
                 {"u1": ("cpu:0.2;mem:1", "*"), "u2": ("cpu:1;mem:0.2", "*")})

CASES = [
    # name, instance, policy, expected tasks, expected shares (None: not checked)
    # Fig. 4, TSF: u2 fills m2 (1 task, share 1/7) and freezes; u1 and u3 rise to 3/7:
    # u1 = 14·3/7 = 6 tasks (all 12 GB of m1), u3 = 7·3/7 = 3 tasks (all 12 GB of m3).
    ("fig4", FIG4, "tsf", [6, 1, 3], [3 / 7, 1 / 7, 3 / 7]),
    # Fig. 2a, CDRF: h^c = 18, 6; u1 = 18s, u2 = 6s, memory 2·18s + 3·6s = 54s ≤ 36 → s = 2/3.
    ("fig2 cdrf", FIG2, "cdrf", [12, 4], [2 / 3, 2 / 3]),
    # Fig. 2b, CDRF with u2's lie: h^c = 18, 12; memory 2·18s + 3·12s = 72s ≤ 36 → s = 1/2: 9 and 6.
    ("fig2 cdrf lie", FIG2_LIE, "cdrf", [9, 6], [1 / 2, 1 / 2]),
    # Fig. 2a, TSF: h = 18, 12; u2 needs 3·12s GB of m2, u1 2·18s GB: 72s ≤ 36 → s = 1/2: 9 and 6.
    ("fig2 tsf", FIG2, "tsf", [9, 6], [1 / 2, 1 / 2]),
    # Fig. 3, CDRF: h^c = 3 except u2's 9; 6·3s + 9s ≤ 9 CPUs → s = 1/3: u2 3 tasks, the rest 1.
    ("fig3 cdrf", FIG3, "cdrf", [1, 3, 1, 1, 1, 1, 1], [1 / 3] * 7),
    # Fig. 3, TSF: every h = 9.  m3 holds u5..u7 at 9s each → s = 1/9 (1 task each); then
    # u1..u4 share m1 + m2 (6 CPUs) at 4a = 6 → 1.5 tasks each.
    ("fig3 tsf", FIG3, "tsf", [1.5, 1.5, 1.5, 1.5, 1, 1, 1], [1.5 / 9] * 4 + [1 / 9] * 3),
]
# One machine: DRF equalises 4x/18 = 3y/9 → x = 1.5y; CPU x + 3y = 4.5y ≤ 9 → y = 2, x = 3
# (dominant shares 2/3 each).  Every policy reduces to DRF there (Definition 5).
CASES += [(f"one machine {p}", ONE_MACHINE, p, [3, 2], None) for p in ("drf", "drfh", "pm-drf", "cdrf", "tsf")]
# choosy Fig. 5: round 1 gives everyone 2 machines and freezes u1 (it holds m1 and m2, all
# it may use); round 2 raises u2 and u3 to 3, where u2 holds m3, m4, m5 and is stuck (m2 is
# u1's); round 3 gives u3 all of m6..m9: 2, 3, 4 (Fig. 5c).
# TSF (Theorem 7) and DRFH (one resource) reduce to CMMF.
CASES += [(f"choosy fig5 {p}", CHOOSY5, p, [2, 3, 4], None) for p in ("cmmf", "tsf", "drfh")]
# drfh-paper Fig. 2: per-machine DRF gives each user half of each server's dominant resource:
# u1 5 tasks on s1 (1 CPU of 2) + 1 on s2 (1 GB of 2) = 6; u2 likewise 6.
# Fig. 3: DRFH gives s1 to u1 (min(2/0.2, 12/1) = 10 tasks) and s2 to u2 (10), g = 10/14 = 5/7.
CASES += [("drfh fig1 pm-drf", DRFH1, "pm-drf", [6, 6], None),
          ("drfh fig1 drfh", DRFH1, "drfh", [10, 10], [5 / 7, 5 / 7])]


@pytest.mark.parametrize("name, problem, policy, tasks, shares", CASES, ids=[c[0] for c in CASES])
def test_paper_examples(name, problem, policy, tasks, shares):
    alloc = progressive_filling(problem, policy, resource="slot" if policy == "cmmf" else None)
    np.testing.assert_allclose(alloc.tasks, tasks, atol=1e-6)
    if shares is not None:
        np.testing.assert_allclose(alloc.share, shares, atol=1e-6)


def test_fig4_h_and_placement():
    # u1: m1 min(9/1, 12/2) = 6, m2 min(3, 2) = 2, m3 6 → 14; u2: 3 + 1 + 3 = 7; u3: 3 + 1 + 3 = 7.
    np.testing.assert_allclose(FIG4.h, [14, 7, 7])
    # with constraints (CDRF's h^c): u1 6 + 2 = 8, u2 1, u3 7.
    np.testing.assert_allclose(FIG4.h_c, [8, 1, 7])
    per_node = progressive_filling(FIG4, "tsf").as_dict()["apps"]
    assert per_node["u1"]["per_node"] == {"m1": 6.0}
    assert per_node["u2"]["per_node"] == {"m2": 1.0}
    assert per_node["u3"]["per_node"] == {"m3": 3.0}


def test_table_2_h_from_the_bundled_config():
    # tsf-paper Table II: nodes 1-25 <1 CPU, 1 GB>, 26-50 <2 CPU, 1 GB>.  Job 1 <1, 0.5 GB>:
    # 25·1 + 25·2 = 75; jobs 2, 3 <0.5, 0.5 GB>: 25·2 + 25·2 = 100; job 4 <1, 0.5 GB>: 75.
    from pathlib import Path

    from rayrm.rm.core.config import load_config
    config = load_config(Path(__file__).parent.parent / "configs" / "paper-micro.yaml")
    np.testing.assert_allclose(Problem.from_config(config).h, [75, 100, 100, 75])


def test_fig2_cdrf_placement():
    # 9 on m1 (all 18 GB), 3 on m2 (6 GB) next to u2's 4 (12 GB): the only way to reach 12 and 4.
    apps = progressive_filling(FIG2, "cdrf").as_dict()["apps"]
    assert apps["u1"]["per_node"] == {"m1": 9.0, "m2": 3.0}
    assert apps["u2"]["per_node"] == {"m2": 4.0}


def test_weights_and_task_limits():
    # One machine of 12 slots, h = 12 each.  Weighted TSF: n1 / (12·2) = n2 / 12 → n1 = 2 n2 = 8.
    weighted = instance({"m": "slot:12"}, {"u1": ("slot:1", "*", 2.0), "u2": ("slot:1", "*")})
    np.testing.assert_allclose(progressive_filling(weighted, "tsf").tasks, [8, 4], atol=1e-6)
    # u1 has only 2 tasks: it stops there and u2 takes the other 10.
    limited = instance({"m": "slot:12"}, {"u1": ("slot:1", "*"), "u2": ("slot:1", "*")}, u1=2, u2=100)
    np.testing.assert_allclose(progressive_filling(limited, "tsf").tasks, [2, 10], atol=1e-6)


def test_coalescing_splits_a_type_evenly():
    # Four identical machines, one user: 4 · 3 = 12 tasks, 3 on each machine.
    four = instance({f"m{k}": "cpu:3" for k in range(4)}, {"u": ("cpu:1", "*")})
    assert progressive_filling(four, "tsf").as_dict()["apps"]["u"]["per_node"] == {f"m{k}": 3.0 for k in range(4)}


def test_drf_pools_the_cluster():
    # drfh Fig. 1 pooled: <14 CPU, 14 GB>; equal dominant shares: u1 x GB, u2 y CPU, x = y;
    # CPU 0.2x + y ≤ 14 and GB x + 0.2y ≤ 14 → 1.2x = 14 → x = y = 35/3 tasks, no placement.
    alloc = progressive_filling(DRFH1, "drf")
    np.testing.assert_allclose(alloc.tasks, [35 / 3, 35 / 3], atol=1e-6)
    assert all(row["per_node"] == {} for row in alloc.as_dict()["apps"].values())


def test_linprog_fallback_agrees(monkeypatch):
    monkeypatch.setattr(offline_lp, "USE_BINDINGS", False)
    np.testing.assert_allclose(progressive_filling(FIG4, "tsf").tasks, [6, 1, 3], atol=1e-6)
    np.testing.assert_allclose(progressive_filling(FIG3, "cdrf").tasks, [1, 3, 1, 1, 1, 1, 1], atol=1e-6)


@pytest.mark.parametrize("name, kind, pooled, per_node", [
    ("tsf", "task_share", False, False), ("cdrf", "work_slowdown", False, False),
    ("cmmf-cpu", "cpu_share", False, False), ("cmmf-mem", "mem_share", False, False),
    ("cmmf", "cpu_share", False, False), ("drfh-ff", "dominant_share", False, False),
    ("drfh-bf", "dominant_share", False, False), ("drfh", "dominant_share", False, False),
    ("drf", "dominant_share", True, False), ("pm-drf", "dominant_share", False, True),
])
def test_the_solver_asks_the_policy_what_it_shares(name, kind, pooled, per_node):
    made = offline_policy(name)
    assert (made.share_kind().name, made.pooled, made.per_node) == (kind, pooled, per_node)


@pytest.mark.parametrize("name", ["fifo", "slots", "nonsense"])
def test_policies_without_offline_form_are_input_errors(name):
    with pytest.raises(InputError, match=f"policy '{name}'"):
        offline_policy(name)


FIG4_YAML = """
resources: [cpu, memory_mb]
cluster:
  nodes:
    - {name: m1, capacity: {cpu: 9, memory_mb: 12}}
    - {name: m2, capacity: {cpu: 3, memory_mb: 4}}
    - {name: m3, capacity: {cpu: 9, memory_mb: 12}}
workload:
  jobs:
    - {id: u1, tasks: 100, demand: {cpu: 1, memory_mb: 2}, duration: 10, constraint: "node in (m1, m2)"}
    - {id: u2, tasks: 100, demand: {cpu: 3, memory_mb: 1}, duration: 10, constraint: "node in (m2)"}
    - {id: u3, tasks: 100, demand: {cpu: 1, memory_mb: 4}, duration: 10}
policy: cmmf-cpu
"""


def test_cli_json(tmp_path, capsys):
    path = tmp_path / "fig4.yaml"
    path.write_text(FIG4_YAML)
    assert rayrm(["offline", str(path), "--policy", "tsf", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"policy": "tsf", "apps": {
        "u1": {"tasks": 6.0, "share": round(3 / 7, 9), "per_node": {"m1": 6.0}},
        "u2": {"tasks": 1.0, "share": round(1 / 7, 9), "per_node": {"m2": 1.0}},
        "u3": {"tasks": 3.0, "share": round(3 / 7, 9), "per_node": {"m3": 3.0}}}}


def test_cli_table_uses_the_configs_policy(tmp_path, capsys):
    path = tmp_path / "fig4.yaml"
    path.write_text(FIG4_YAML)
    assert rayrm(["offline", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The config says cmmf-cpu: CPU shares of 21 CPUs.  u2 fills m2's 3 CPUs (1 task) and stops;
    # u1 (m1 only) and u3 rise together at x tasks: u3 takes 3 on m3 (12 GB / 4) and x − 3 on
    # m1, whose 12 GB give 2x + 4(x − 3) ≤ 12 → x = 4.  So 4, 1, 4 where TSF gives 6, 1, 3.
    assert lines[0].startswith("offline cmmf-cpu (cpu share): 3 apps on 3 nodes")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows == {"u1": ["4.0000", "0.190476", "1"], "u2": ["1.0000", "0.142857", "1"],
                    "u3": ["4.0000", "0.190476", "2"]}


def test_cli_unknown_policy_is_one_line(tmp_path, capsys):
    path = tmp_path / "fig4.yaml"
    path.write_text(FIG4_YAML)
    assert rayrm(["offline", str(path), "--policy", "fifo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "policy 'fifo' has no offline" in err[0]


# ----- the independent check: tsf-paper Algorithm 1, literally ------------------------

def literal_algorithm_1(C, D, P, w, h, cap=None):
    """Progressive filling exactly as printed: n_im per machine, shares n_i / (h_i w_i),
    and FREEZE testing each active user j with all other active users held at their tasks.
    ``cap`` adds Σ_m n_im ≤ cap_i (the tasks a job has), which rm.offline also supports."""
    N, M = P.shape
    cap = np.full(N, np.inf) if cap is None else cap
    var = np.arange(N * M).reshape(N, M)

    def lp(active, floors):
        c = np.zeros(N * M + 1)
        c[-1] = -1.0                                              # (1) max s
        a_ub, b_ub, a_eq = [], [], []
        for m in range(M):                                        # (4) machine constraints
            for r in range(C.shape[1]):
                row = np.zeros(N * M + 1)
                row[var[:, m]] = D[:, r]
                a_ub.append(row)
                b_ub.append(C[m, r])
        for i in np.flatnonzero(np.isfinite(cap)):                # the tasks each job has
            row = np.zeros(N * M + 1)
            row[var[i]] = 1.0
            a_ub.append(row)
            b_ub.append(cap[i])
        for i in active:                                          # (2) active users at s
            row = np.zeros(N * M + 1)
            row[var[i]] = 1.0 / (h[i] * w[i])
            row[-1] = -1.0
            a_eq.append(row)
        for i, f in floors.items():                               # (3) frozen users
            row = np.zeros(N * M + 1)
            row[var[i]] = -1.0
            a_ub.append(row)
            b_ub.append(-f)
        bounds = [(0, None if P[i, m] else 0) for i in range(N) for m in range(M)] + [(0, None)]
        res = linprog(c, A_ub=np.array(a_ub), b_ub=b_ub, A_eq=np.array(a_eq), b_eq=np.zeros(len(a_eq)),
                      bounds=bounds, method="highs")
        assert res.status == 0, res.message
        return res.x[-1], res.x[:-1].reshape(N, M)

    active, frozen = [i for i in range(N) if h[i] > 0 and (P[i] & (C @ (D[i] > 0) > 0)).any()], {}
    frozen.update({i: 0.0 for i in range(N) if i not in active})
    while active:
        s, n = lp(active, frozen)
        inactive = []
        for j in active:
            floors = dict(frozen)
            floors.update({i: n[i].sum() for i in active if i != j})
            s_j, _ = lp([j], floors)
            if s_j <= s + 1e-7:
                inactive.append(j)
        assert inactive, "a round must saturate someone"
        frozen.update({j: n[j].sum() for j in inactive})
        active = [j for j in active if j not in inactive]
    return np.array([frozen[i] for i in range(N)])


def random_instance(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    M, N, Rn = rng.integers(1, 6), rng.integers(2, 6), rng.integers(1, 4)
    C = rng.integers(1, 13, size=(M, Rn)).astype(float)
    D = rng.integers(0, 5, size=(N, Rn)).astype(float)
    D[np.arange(N), rng.integers(Rn, size=N)] += 1                 # every demand non-zero somewhere
    P = rng.random((N, M)) < 0.6
    P[np.arange(N), rng.integers(M, size=N)] = True                # every user may use some machine
    w = np.ones(N) if seed % 2 else rng.integers(1, 4, size=N).astype(float)
    return Problem(tuple(f"r{k}" for k in range(Rn)), tuple(f"m{k}" for k in range(M)), C,
                   tuple(f"u{k}" for k in range(N)), D, P, w, np.full(N, np.inf))


def fit(C, D):
    """tasks of user i on machine m, min_{r: d_ir > 0} C_mr / d_ir (computed afresh, no rm code)."""
    return np.array([[min(C[m, r] / D[i, r] for r in range(C.shape[1]) if D[i, r] > 0)
                      for m in range(C.shape[0])] for i in range(D.shape[0])])


@pytest.mark.parametrize("seed", range(50))
def test_random_instances_match_literal_algorithm_1(seed):
    p = random_instance(seed)
    C, D, P, w = p.capacity, p.demand, p.eligible, p.weight
    F = fit(C, D)
    references = {
        "tsf": F.sum(axis=1),                                      # h_i, constraints removed
        "cdrf": (F * P).sum(axis=1),                               # h_i^c
        "drfh": 1.0 / (D / C.sum(axis=0)).max(axis=1),             # share n_i · max_r d_ir / total_r
    }
    for policy, h in references.items():
        expected = literal_algorithm_1(C, D, P, w, h)
        np.testing.assert_allclose(progressive_filling(p, policy).tasks, expected, atol=1e-6,
                                   err_msg=policy)
    # Per-machine DRF: Algorithm 1 on every machine alone, among the users eligible on it,
    # with shares n_im · max_r d_ir / C_mr, i.e. "h" = the tasks one machine holds.
    expected = np.zeros(len(w))
    for m in range(len(C)):
        on_m = np.flatnonzero(P[:, m])
        if len(on_m):
            expected[on_m] += literal_algorithm_1(C[m:m + 1], D[on_m], P[on_m, m:m + 1], w[on_m],
                                                  F[on_m, m])
    np.testing.assert_allclose(progressive_filling(p, "pm-drf").tasks, expected, atol=1e-6)


@pytest.mark.parametrize("seed", range(20))
def test_task_limits_match_literal_algorithm_1(seed):
    # Half the users have only a few tasks (0.2-4): they stop there, as in DRFH's finite demands
    # (drfh-paper §V-A), and the rest keep filling.
    p = random_instance(seed)
    rng = np.random.default_rng(seed + 77)
    cap = np.where(rng.random(len(p.app_ids)) < 0.5, rng.uniform(0.2, 4, size=len(p.app_ids)), np.inf)
    limited = Problem(p.dims, p.node_names, p.capacity, p.app_ids, p.demand, p.eligible, p.weight, cap)
    expected = literal_algorithm_1(p.capacity, p.demand, p.eligible, p.weight,
                                   fit(p.capacity, p.demand).sum(axis=1), cap)
    np.testing.assert_allclose(progressive_filling(limited, "tsf").tasks, expected, atol=1e-6)


# ----- any policy spec: the solver asks the policy ---------------------------------------

PLUGIN_TSF = str(Path(__file__).resolve().parents[1] / "benchmarks" / "tsf_plugin.py") + ":PluginTSF"
PRIORITY = str(Path(__file__).resolve().parents[1] / "examples" / "policies" / "priority_tsf.py") + ":PriorityTSF"


def test_cli_runs_a_plugin_policy(tmp_path, capsys):
    # The plugin's unit is TSF's, 1 / (h_i w_i), asked on the divisible instance: Fig. 4 again,
    # u1 6, u2 1, u3 3 tasks at task shares 6/14 = 3/7, 1/7, 3/7 (as test_cli_json).
    path = tmp_path / "fig4.yaml"
    path.write_text(FIG4_YAML)
    assert rayrm(["offline", str(path), "--policy", PLUGIN_TSF, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"policy": PLUGIN_TSF, "apps": {
        "u1": {"tasks": 6.0, "share": round(3 / 7, 9), "per_node": {"m1": 6.0}},
        "u2": {"tasks": 1.0, "share": round(1 / 7, 9), "per_node": {"m2": 1.0}},
        "u3": {"tasks": 3.0, "share": round(3 / 7, 9), "per_node": {"m3": 3.0}}}}


PRIORITY_YAML = """
resources: [cpu]
cluster:
  nodes:
    - {name: m, capacity: {cpu: 12}}
workload:
  jobs:
    - {id: prod-a, tasks: 100, demand: {cpu: 1}, duration: 10}
    - {id: b, tasks: 100, demand: {cpu: 1}, duration: 10}
policy: tsf
"""


def test_cli_runs_a_plugin_with_its_own_share(tmp_path, capsys):
    # priority-tsf, boost 4 for prod-*: h = 12 each, units 1/(12·4) and 1/12.  Equal shares
    # n_a / 48 = n_b / 12 with n_a + n_b = 12 → n_a = 4 n_b = 9.6, n_b = 2.4; share 2.4/12 = 0.2.
    path = tmp_path / "prio.yaml"
    path.write_text(PRIORITY_YAML)
    spec = PRIORITY + ":prefix=prod:boost=4"
    assert rayrm(["offline", str(path), "--policy", spec, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["apps"]
    assert {a: (r["tasks"], r["share"]) for a, r in out.items()} == {"prod-a": (9.6, 0.2), "b": (2.4, 0.2)}
    assert rayrm(["offline", str(path), "--policy", spec]) == 0
    assert capsys.readouterr().out.startswith(f"offline {spec} (priority-tsf share): 2 apps on 1 nodes")
