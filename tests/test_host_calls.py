"""Calls to a host actor are bounded (``call_host``, rm/service/client.py): a host that never
answers — here an AM host behind a cut link, which holds the RM's ``launch_attempts`` until
the link heals — does not hold its caller, and a host that answers is answered as before."""

from __future__ import annotations

import asyncio
import time

import pytest

from rayrm.rm.core.fault_rules import LinkFault
from rayrm.rm.service.client import call_host


@pytest.fixture(scope="module")
def am_host(local_ray):
    import ray

    from rayrm.apps.am import ApplicationMasterHost
    host = ApplicationMasterHost.options(num_cpus=0).remote("am-0", None, {}, [], interval_wall=0.1)
    yield host
    ray.kill(host)


def test_a_launch_to_a_host_that_answers_returns_its_answer(am_host):
    # no app "a" on the host: launch_attempts skips it and answers None at once
    assert asyncio.run(call_host(am_host.launch_attempts, [("a", 2)], timeout=30.0, budget=60.0)) is None


def test_a_launch_across_a_cut_link_times_out_instead_of_hanging(am_host):
    import ray
    now = time.time()
    ray.get(am_host.link_fault.remote(LinkFault("partition", now, now + 3600)))
    # the host holds launch_attempts until the link heals, an hour from now.  Tries of 0.2 s
    # within a budget of 0.5 s: the third try is cut at the budget and the caller gets a
    # TimeoutError naming it (the outer 60 s bound only guards the test against a hang)
    call = call_host(am_host.launch_attempts, [("a", 2)], timeout=0.2, budget=0.5)
    with pytest.raises(TimeoutError, match=r"no answer from the host for 0\.5s"):
        asyncio.run(asyncio.wait_for(call, 60.0))
