"""The property audit (rm/offline/audit/search.py) on the papers' counterexamples, and TSF passing them.

Every expected number is worked by hand in the comment above it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from samples import FIG2_YAML

from rayrm.rm.offline.audit.search import (PROPERTIES, Tally, allocate, check_ef, check_po, check_si, extreme_placement, lie_outcome,
                      run_audit)
from rayrm.rm.offline.audit.instances import paper_instances
from rayrm.rm.cli.main import main as rayrm

PAPER = {inst.name: inst for inst in paper_instances()}
FIG2, FIG3 = PAPER["tsf-fig2"].problem, PAPER["tsf-fig3"].problem


def claim(problem, user: int, machines: str) -> np.ndarray:
    return np.array([m in machines.split() for m in problem.node_names])


# ----- tsf-paper Fig. 2: u2 claims m1 as well -------------------------------------------

def test_fig2_cdrf_pays_u2_for_claiming_m1():
    # Truthful CDRF gives u2 4 tasks (h^c = 6, slowdown 2/3).  Claiming m1, h^c = 12 and CDRF
    # gives u1 9 and u2 6 (slowdown 1/2).  With u1's 9 on m1 (18 GB) u2's 6 fit on m2
    # (18 GB): 6 tasks it can really run, +2 (Fig. 2b).  The same counts also allow u2's
    # 6 all on m1 and u1's 9 on m2, where u2 runs nothing: "at least" 0.
    most, least = lie_outcome("cdrf", FIG2, 1, FIG2.demand[1], claim(FIG2, 1, "m1 m2"))
    assert most == pytest.approx(6) and least == pytest.approx(0, abs=1e-6)


def test_fig2_tsf_gives_the_liar_nothing_more():
    # TSF's h_2 = 12 whether or not u2 claims m1 (constraints are removed in h), so the
    # claim changes nothing: u1 18s and u2 12s tasks, 2·18s + 3·12s = 72s ≤ 36 GB → s = 1/2,
    # u2 6 tasks — exactly its truthful 6.
    truthful = run_audit([PAPER["tsf-fig2"]], ("tsf",))
    assert truthful["policies"]["tsf"]["SP"]["holds"]
    most, _ = lie_outcome("tsf", FIG2, 1, FIG2.demand[1], claim(FIG2, 1, "m1 m2"))
    assert most == pytest.approx(6)


def test_demand_inflation_is_counted_in_true_tasks():
    # One machine <9 CPU, 18 GB>; u1 <1, 4> reports <2, 4>.  DRF (= TSF here) equalises
    # 2x/9 = 3y/9 → x = 1.5y; CPU 2x + 3y = 6y ≤ 9 → y = 1.5, x = 2.25 bundles of <2, 4>,
    # each running min(2/1, 4/4) = 1 true task: 2.25 < the truthful 3.
    one = PAPER["drf-one-machine"].problem
    most, least = lie_outcome("tsf", one, 0, np.array([2.0, 4.0]), one.eligible[0])
    assert most == pytest.approx(2.25) and least == pytest.approx(2.25)


# ----- tsf-paper Fig. 3: u1 envies u2 under CDRF ----------------------------------------

def test_fig3_cdrf_u1_envies_u2():
    tally = Tally()
    check_ef("cdrf", PAPER["tsf-fig3"], FIG3, allocate("cdrf", FIG3), tally)
    example = tally.result()["counterexample"]
    # CDRF: 6·3s + 9s ≤ 9 CPUs → s = 1/3: u1 1 task; u2 3 tasks, forced to 2 on m1 and 1 on
    # m2 (m3 is full with u5..u7, m2 holds u3 and u4).  With u2's allocation u1 runs its
    # 2 tasks on m1: 2 > 1.
    assert example["user"] == "u1" and example["envies"] == "u2"
    assert example["own_tasks"] == pytest.approx(1) and example["tasks_with_other_allocation"] == pytest.approx(2)


def test_fig3_tsf_is_envy_free():
    alloc = allocate("tsf", FIG3)
    # TSF: u1..u4 1.5 tasks; m1 holds u1's 1.5 and u2's 1.5 (m2 is full with u3 and u4),
    # so u2's whole allocation is 1.5 tasks on m1: u1 would run 1.5 with it, no more.
    objective = np.zeros_like(FIG3.eligible, dtype=float)
    objective[1] = FIG3.eligible[0]
    assert extreme_placement(FIG3, alloc, objective) == pytest.approx(1.5)
    tally = Tally()
    check_ef("tsf", PAPER["tsf-fig3"], FIG3, alloc, tally)
    assert tally.result() == {"holds": True, "tried": 42, "counterexample": None}     # 7 · 6 ordered pairs


# ----- SI and PO counterexamples of per-machine DRF and DRFH ----------------------------

def test_per_machine_drf_breaks_choosy_theorem_1():
    # Each user brings one slot; u1 may use both, u2 only m2.  Per-machine DRF: m1 to u1,
    # m2 halved → u2 0.5 < the 1 slot it brought (choosy-paper Theorem 1).  TSF with
    # Theorem 1 weights (k = 1, h = 2 → w = 1/2 each): u2 fills m2, u1 m1: 1 and 1.
    inst = PAPER["choosy-thm1"]
    for policy, holds in (("pm-drf", False), ("tsf", True)):
        tally = Tally()
        check_si(policy, inst, inst.problem, tally)
        result = tally.result()
        assert result["holds"] is holds
        assert result["tried"] == 2                                # equal partitioning + the paper's pool
    assert tally.smallest is None
    pm = Tally()
    check_si("pm-drf", inst, inst.problem, pm)
    example = pm.result()["counterexample"]
    assert (example["user"], example["shared_tasks"], example["dedicated_tasks"]) == ("u2", 0.5, 1)


def test_drfh_dummy_machine_breaks_sharing_incentive():
    # m1 <15, 15> and a dummy m2 <16 CPU, 0 GB>; u1 <1, 0.5>, u2 <0.5, 1>.  Totals <31, 15>
    # make memory both users' global dominant resource: u1 30g tasks, u2 15g.  m1's CPU:
    # 30g + 7.5g ≤ 15 → g = 0.4: u1 12, u2 6 — below the 7.5 that half of m1 gives u2.
    inst = PAPER["cdrf-thesis-dummy"]
    tally = Tally()
    check_si("drfh", inst, inst.problem, tally)
    example = tally.result()["counterexample"]
    assert (example["user"], example["shared_tasks"], example["dedicated_tasks"]) == ("u2", 6, 7.5)


def test_per_machine_drf_is_not_pareto_optimal():
    # drfh-paper Fig. 2: per-machine DRF gives each user 6 tasks.  Keeping u2 at 6 on s2
    # (6 CPU, 1.2 GB), u1 takes all of s1 (min(2/0.2, 12/1) = 10) and s2's leftover
    # <6 CPU, 0.8 GB> (0.8 tasks): 10.8 > 6.
    inst = PAPER["drfh-fig1"]
    tally = Tally()
    check_po("pm-drf", inst, inst.problem, allocate("pm-drf", inst.problem), tally)
    example = tally.result()["counterexample"]
    assert example["user"] == "u1" and example["could_run"] == pytest.approx(10.8)


# ----- Table I on the papers' instances -------------------------------------------------

def test_table_1_on_the_papers_instances():
    result = run_audit(paper_instances(), ("pm-drf", "drfh", "cdrf", "tsf"))["policies"]
    violated = {p: {prop for prop in ("SI", "SP", "EF", "PO") if not result[p][prop]["holds"]} for p in result}
    # tsf-paper Table I, rows SI, SP, EF, PO.
    assert violated == {"pm-drf": {"SI", "PO"}, "drfh": {"SI"}, "cdrf": {"SP", "EF"}, "tsf": set()}
    assert "tsf-fig2" in result["cdrf"]["SP"]["counterexample"]["found_on"]
    assert "tsf-fig3" in result["cdrf"]["EF"]["counterexample"]["found_on"]
    # Single machine fairness holds for all four; single resource fairness only for TSF and
    # DRFH (per-machine DRF is independent allocation there, CDRF weighs by h^c).
    assert {p for p in result if not result[p]["SRF"]["holds"]} == {"pm-drf", "cdrf"}
    assert all(result[p]["SMF"]["holds"] for p in result)


def test_cli_json_shape(capsys):
    assert rayrm(["audit", "--json", "--instances", "2", "--policies", "tsf"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["policies"] and list(out["policies"]) == ["tsf"]
    for prop in PROPERTIES:
        assert set(out["policies"]["tsf"][prop]) == {"holds", "tried", "counterexample"}
        assert out["policies"]["tsf"][prop]["holds"] is True and out["policies"]["tsf"][prop]["counterexample"] is None


def test_what_if_fig2(tmp_path, capsys):
    path = tmp_path / "fig2.yaml"
    path.write_text(FIG2_YAML)
    assert rayrm(["audit", "--config", str(path), "--app", "u2", "--policies", "cdrf,tsf", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["policies"]
    # CDRF: 4 truthful, 6 by claiming m1 (Fig. 2b); TSF: 6 either way.
    assert out["cdrf"]["truthful_tasks"] == pytest.approx(4)
    assert out["cdrf"]["would_gain"] and out["cdrf"]["best_lie"].startswith("adds m1")
    assert out["cdrf"]["gain"] == pytest.approx(2)
    assert out["tsf"]["truthful_tasks"] == pytest.approx(6) and not out["tsf"]["would_gain"]


def test_what_if_unknown_app_is_one_line(tmp_path, capsys):
    path = tmp_path / "fig2.yaml"
    path.write_text(FIG2_YAML)
    assert rayrm(["audit", "--config", str(path), "--app", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no job 'nope'" in err[0] and "--app" in err[0]


def test_cli_audits_a_plugin_policy(capsys):
    # benchmarks/tsf_plugin.py's unit is TSF's, 1 / (h_i w_i): on the papers' instances it
    # passes every check TSF passes, as many times (tsf-paper Table I: TSF has SI, SP, EF,
    # PO, SMF and SRF) — the audit asks the plugin for its share and its SI weights k_i / h_i.
    from pathlib import Path
    plugin = str(Path(__file__).resolve().parents[1] / "benchmarks" / "tsf_plugin.py") + ":PluginTSF"
    assert rayrm(["audit", "--json", "--instances", "0", "--policies", f"tsf,{plugin}"]) == 0
    result = json.loads(capsys.readouterr().out)["policies"]
    assert result[plugin] == result["tsf"]
    assert all(result[plugin][p]["holds"] and result[plugin][p]["tried"] > 0 for p in PROPERTIES)


def test_cli_rejects_a_policy_without_a_share(capsys):
    assert rayrm(["audit", "--instances", "0", "--policies", "fifo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "policy 'fifo' has no offline" in err[0]
