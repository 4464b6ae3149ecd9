"""The compiled pieces of a job's arrival (rm/core/native/_arrival.pyx) against their
Python references: the generator state NumPy's SeedSequence gives, the durations
``JobSpec.task_durations`` draws, and an app's eligibility, count and h^c
(``ClusterState._eligible``), the same bits."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from rayrm.rm.core import native
from rayrm.rm.core.cluster import ClusterState
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.jobs import JobSpec, parse_durations
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources

needs_native = pytest.mark.skipif(not native.native_built(), reason="the compiled core is not built")


@needs_native
def test_the_seeded_state_is_numpys():
    """PCG64(SeedSequence([w0, w1])) on 20,000 pairs of words, the edges among them (0, 1,
    2**32 - 1: still one word each)."""
    pcg64_state = native.compiled("_arrival").pcg64_state
    rng = random.Random(3)
    edges = [0, 1, 7, 2 ** 31, 2 ** 32 - 1]
    for k in range(20000):
        w0 = rng.choice(edges) if k % 4 == 0 else rng.getrandbits(32)
        w1 = rng.choice(edges) if k % 5 == 0 else rng.getrandbits(32)
        want = np.random.default_rng([w0, w1]).bit_generator.state["state"]
        assert pcg64_state(w0, w1) == (want["state"], want["inc"]), (w0, w1)
    # a worked check of the state's form: inc is odd (2i + 1), both below 2**128
    state, inc = pcg64_state(7, zlib.crc32(b"j0001"))
    assert inc % 2 == 1 and 0 <= state < 2 ** 128 and 0 <= inc < 2 ** 128


@needs_native
@pytest.mark.parametrize("duration", [30, [10, 12, 9], {"mean": 40, "jitter": 0.2},
                                      {"dist": "exponential", "mean": 30},
                                      {"dist": "lognormal", "mean": 30, "sigma": 1},
                                      {"dist": "pareto", "alpha": 1.9, "mean": 100, "max": 7200},
                                      # x_m = 100 * 0.9 / 1.9 = 47.4: most draws above the cap of 60
                                      {"dist": "pareto", "alpha": 1.9, "mean": 100, "max": 60},
                                      {"dist": "pareto", "alpha": 3, "mean": 10}])
def test_durations_are_the_same_draws(duration):
    task_durations = native.compiled("_arrival").task_durations
    capped = 0
    for seed in (0, 7, 2 ** 33 + 5, -1):          # seeds are taken mod 2**32, as the reference does
        for k in range(50):
            tasks = 3 if isinstance(duration, list) else k % 9
            job = JobSpec(AppSpec(f"job{k}", Resources(cpu=1), tasks), parse_durations(duration, tasks))
            want = job.task_durations(seed)
            got = task_durations(job, seed)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (seed, k)
            capped += int((want == 60.0).sum())
    if isinstance(duration, dict) and duration.get("max") == 60:
        assert capped > 100          # the cap taken: 4 seeds x 190 tasks, P(x > 60) = (47.4/60)^1.9 = 0.64


@needs_native
@pytest.mark.parametrize("seed", range(5))
def test_eligibility_is_the_same_bytes_count_and_h_c(seed):
    """Random clusters (some nodes lost), constraints and demands: the compiled pass gives
    the reference's eligibility bytes, count and h^c, bit for bit."""
    rng = random.Random(seed)
    values = ["v0", "v1", 1, 2, 3]
    nodes = [NodeSpec(f"n{i}", Resources(cpu=rng.choice([2, 4, 8]), mem=rng.choice([4, 16, 64])),
                      {a: rng.choice(values) for a in ("a", "b") if rng.random() < 0.8})
             for i in range(rng.randint(1, 80))]
    clusters = [ClusterState(("cpu", "mem")) for _ in range(2)]
    clusters[0]._native, clusters[1]._native = False, True  # the reference, the compiled pass
    lost = [n.name for n in nodes if rng.random() < 0.15]
    for c in clusters:
        c.add_nodes(nodes)
        c.remove_nodes(lost)
    clauses = ["a == v0", "a != 1", "b >= 2", "b in (v1, 3)", "a exists", "b not exists"]
    for _ in range(200):
        constraint = Constraint.parse(" and ".join(rng.sample(clauses, rng.randint(0, 3))))
        demand = (rng.choice([0.0, 0.5, 1.0, 3.0, 9.0]), rng.choice([0.0, 1.0, 7.5, 40.0]))
        want, got = (c._eligible(constraint, demand) for c in clusters)
        assert type(got[1]) is int and type(got[2]) is float
        assert got == want, (str(constraint), demand)


@needs_native
def test_eligibility_beyond_exact_sums_is_the_references():
    """Tasks per node near 2**52 (a demand of 1e-300): a sum in node order could differ from
    numpy's, so the reference's numpy sum is taken."""
    c = ClusterState(("cpu",))
    c._native = True
    c.add_nodes([NodeSpec(f"n{i}", Resources(cpu=4)) for i in range(3)])
    fits, per, exact = c._per_demand((1e-300,))
    assert not exact
    mask = np.ones(3, dtype=bool)
    assert c._eligible(Constraint(), (1e-300,)) == (bytes([1, 1, 1]), 3, float(per[mask].sum()))
