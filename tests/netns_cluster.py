"""A Ray cluster of three machines made of network namespaces (examples/cluster/netns.sh),
for the tests and benchmarks/bench_netfaults.py: bring it up and down, run a replay on the
head, cut links, kill machines, bring workers back.

Needs root and iproute2; ``unavailable()`` says why not when they are missing, so the
tests skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "cluster" / "netns.sh"
WORKERS = ("worker1", "worker2")
MICRO = Path(__file__).resolve().parents[1] / "configs" / "paper-micro.yaml"


def unavailable() -> str:
    """Why the cluster cannot be made here, or ""."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no iproute2 ('ip')"
    probe = f"rrprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


class NetnsCluster:
    """One cluster: ``prefix`` names its namespaces, veths and bridge, ``subnet`` its /24."""

    def __init__(self, state: Path, *, prefix: str = "rrt", subnet: str = "10.213.7",
                 health: str = "1000:1000:5"):
        self.state = Path(state)
        # Ray's processes must run the Ray and the rayrm under test: this interpreter's
        # environment first on PATH, this checkout on PYTHONPATH.
        root = str(Path(__file__).resolve().parents[2])
        self.env = {**os.environ, "RAYRM_NETNS_PREFIX": prefix, "RAYRM_NETNS_SUBNET": subnet,
                    "RAYRM_NETNS_STATE": str(self.state), "RAYRM_NETNS_HEALTH": health,
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        self.address = f"{subnet}.1:6379"
        self.ips = {"head": f"{subnet}.1", "worker1": f"{subnet}.2", "worker2": f"{subnet}.3"}

    def script(self, *args: str, timeout: float = 120.0) -> str:
        done = subprocess.run([str(SCRIPT), *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"netns.sh {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def up(self) -> None:
        self.script("down")                      # what a killed earlier run left behind
        self.script("up", timeout=300.0)

    def down(self) -> None:
        self.script("down")

    def alive_workers(self) -> set[str]:
        """The workers the head's Ray counts alive (from ``netns.sh status``)."""
        lines = self.script("status").splitlines()
        ips = {v: k for k, v in self.ips.items()}
        return {ips[w.split()[3]] for w in lines if w.startswith("ray node") and "alive=True" in w} & set(WORKERS)

    def heal(self) -> None:
        """Every worker Ray lost back in the cluster (``netns.sh rejoin``)."""
        for w in sorted(set(WORKERS) - self.alive_workers()):
            self.script("rejoin", w)
        deadline = time.time() + 60
        while self.alive_workers() != set(WORKERS):
            if time.time() > deadline:
                raise RuntimeError("the workers did not rejoin within 60 s")
            time.sleep(0.5)

    def replay(self, out: Path, *args: str) -> subprocess.Popen:
        """``rayrm replay configs/paper-micro.yaml --address HEAD --out OUT ARGS`` started on
        the head machine; its output goes to ``OUT.log``."""
        config = MICRO
        log = open(f"{out}.log", "w")                # noqa: SIM115 - the child holds it
        with log:
            return subprocess.Popen(
                [str(SCRIPT), "exec", "head", sys.executable, "-m", "rayrm.rm.cli.main", "replay", str(config),
                 "--address", self.address, "--out", str(out), "--no-progress", *args],
                env=self.env, stdout=log, stderr=subprocess.STDOUT, text=True)

    @staticmethod
    def finish(out: Path, proc: subprocess.Popen, timeout: float = 600.0) -> tuple[int, str]:
        """The replay's exit status and its output."""
        proc.wait(timeout=timeout)
        return proc.returncode, Path(f"{out}.log").read_text()


#: the head machine's side of HeadLine: a driver connected to the cluster, answering commands
_HEAD_LINE = r"""
import sys, time
import ray
from rayrm.rm.service.protocol import NAMESPACE
ray.init(address=sys.argv[1], namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
rm, rid = None, 0
print("@ok", flush=True)
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "wait":                       # until a replay's RM runs its clock (t > 0)
        deadline = time.time() + float(arg)
        while time.time() < deadline:
            try:
                rm = ray.get_actor("rayrm-rm", namespace=NAMESPACE)
                if ray.get(rm.progress.remote(), timeout=5)["time"] > 0:
                    break
            except Exception:
                rm = None
            time.sleep(0.05)
        else:
            print("@timeout", flush=True)
            continue
    elif cmd == "fault":                    # an events.csv ``fault`` row, as the driver logs its own
        rid += 1
        ray.get(rm.fault.remote("netfaults", rid, arg, "", ""), timeout=10)
    elif cmd == "nms":                      # the NMs the replay of CONFIG placed on ADDRESS, as it did
        from rayrm.nodes.placement import alive_ray_nodes
        from rayrm.rm.core.config import load_config
        from rayrm.rm.runtime.plan import plan_replay
        config, address = arg.split()
        nodes = alive_ray_nodes()
        plan = plan_replay(load_config(config), nodes)
        ids = {r.node_id for r in nodes if r.address == address}
        print("@ok", " ".join(sorted(s.name for rid, specs in plan.hosted.items() if rid in ids for s in specs)),
              flush=True)
        continue
    print("@ok", time.time(), flush=True)
"""


class HeadLine:
    """A Python process on the head machine, connected to the cluster, that waits for a
    replay's clock to start and logs faults injected from outside into its RM's events.csv
    (``fault`` rows, so ``rayrm.rm.runs.recovery`` measures them as the driver's own)."""

    def __init__(self, cluster: NetnsCluster):
        self.cluster = cluster
        self._start()

    def _start(self) -> None:
        with open(self.cluster.state / "head-line.log", "a") as err:
            self.proc = subprocess.Popen(
                [str(SCRIPT), "exec", "head", sys.executable, "-c", _HEAD_LINE, self.cluster.address],
                env=self.cluster.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        self._answer()

    def _ask(self, line: str) -> str:
        if self.proc.poll() is not None:           # it died with an earlier replay: again
            self._start()
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> str:
        """The helper's answer: its line starting "@" (Ray prints notices on stdout too)."""
        while True:
            answer = self.proc.stdout.readline()
            if not answer or answer.startswith("@"):
                break
        if not answer.startswith("@ok"):
            raise RuntimeError(f"the head's helper answered {answer!r}")
        return answer[1:]

    def wait_started(self, timeout: float = 120.0) -> float:
        """The wall time once the replay's trace clock runs (its actors are all up)."""
        return float(self._ask(f"wait {timeout}").split()[1])

    def nms_on(self, config: Path, address: str) -> list[str]:
        """The NMs a replay of ``config`` started now puts on the machine at ``address``."""
        return self._ask(f"nms {config} {address}").split()[1:]

    def log_fault(self, detail: str) -> float:
        return float(self._ask(f"fault {detail}").split()[1])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
