"""Same config, same seed, same run directory: the simulator's output against a saved baseline.

A matrix of simulations — configs × the ten policies × fault sets (none, each fault kind
the simulator models alone, NM and AM host partitions across an RM restart, and all of
them mixed with the kinds it only records) — is written by whatever ``rayrm`` the
interpreter imports (``PYTHONPATH`` picks a worktree), and compared file by file with the
run directories of an earlier ``--write``.  Fields that measure the machine rather than
the run (``wall_seconds``) are left out; every other byte must match.

    python benchmarks/check_same_runs.py --write /tmp/base            # e.g. on main
    PYTHONPATH=/path/to/worktree python benchmarks/check_same_runs.py --against /tmp/base

The configs: ``configs/paper-micro.yaml`` (50 nodes, 1,350 tasks) and a generated trace of
100 nodes, 200 jobs and 6,000 tasks (``rayrm trace generate google``, seed 1), kept in the
output directory so both sides simulate the very same file.  The RM service is checked
too, without Ray: the protocol harness of the same tree (``tests/harness.py``) drives
``ResourceManagerState`` through lost NMs, an NM rejoining, an expired AM, an RM restart
from its journal and a lost AM host, under each policy, and its run log is written as a
run directory (``runs/service/<policy>``).  Exit status 1 and a line per difference when
anything differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

POLICIES = ("tsf", "drf", "cdrf", "cmmf-cpu", "cmmf-mem", "fifo", "drfh-ff", "drfh-bf", "pm-drf", "slots")
#: summary fields that measure the machine, not the run
MACHINE_FIELDS = {"wall_seconds"}
#: run settings of the fault runs: short expiries so that every recovery step lands in the run
FAULT_RUN = {"nm_expiry": 4, "am_expiry": 3, "rm_restart": 2, "am_hosts": 2, "max_attempts": 2}
#: ... and of the partition runs: two NM hosts, a whole host silent for 1.5 expiries is lost
PARTITION_RUN = dict(FAULT_RUN, nm_hosts=2, host_silence=1.5)


def fault_sets(config) -> dict[str, tuple[list[str], dict, float]]:
    """name -> (fault specs, run settings, launch jitter), with targets taken from ``config``."""
    nodes = [n.name for n in config.nodes]
    jobs = sorted(config.jobs, key=lambda j: (j.app.submit, j.job_id))
    a, b = nodes[len(nodes) // 3], nodes[2 * len(nodes) // 3]
    t = max(10.0, jobs[len(jobs) // 4].app.submit)          # a quarter of the way into the arrivals
    # the AMs killed: the two largest jobs arrived by then, so that they still run
    big = sorted((j for j in jobs if j.app.submit <= t), key=lambda j: (-j.app.num_tasks, j.job_id))
    first, second = big[0].job_id, big[min(1, len(big) - 1)].job_id
    mixed = [f"kill-nm:{a}@{t:g}", f"kill-am:{first}@{t + 3:g}", f"kill-rm@{t + 7:g}", f"kill-nm:{b}@{t + 8:g}",
             f"kill-am-host:1@{t + 12:g}", f"kill-nm:{a}@{t + 30:g}", f"kill-am:{second}@{t + 31:g}",
             f"kill-rm@{t + 40:g}", f"kill-nm-host:0@{t + 2:g}", f"kill-ray-node:1@{t + 4:g}",
             f"stall-rm:2@{t + 5:g}", f"kill-am:{first}@{t + 60:g}"]
    return {
        "none": ([], {}, 0.0),
        "kill-nm": ([f"kill-nm:{a}@{t:g}", f"kill-nm:{a}@{t + 30:g}"], FAULT_RUN, 0.0),
        "kill-am": ([f"kill-am:{first}@{t:g}", f"kill-am:{first}@{t + 20:g}", f"kill-am:{second}@{t + 5:g}"],
                    FAULT_RUN, 0.0),
        "kill-am-host": ([f"kill-am-host:0@{t:g}", f"kill-am-host:0@{t + 2:g}"], FAULT_RUN, 0.0),
        "kill-rm": ([f"kill-rm@{t:g}", f"kill-nm:{b}@{t + 5:g}", f"kill-rm@{t + 6:g}"], FAULT_RUN, 0.0),
        "partition": ([f"partition-nm-host:0@{t:g}+45", f"partition-am-host:1@{t + 3:g}+40", f"kill-rm@{t + 20:g}",
                       f"kill-nm:{b}@{t + 25:g}", f"partition-nm-host:1@{t + 60:g}+5",
                       f"partition-am-host:0@{t + 62:g}+3"], PARTITION_RUN, 0.0),
        "not-simulated": ([f"kill-nm-host:0@{t:g}", f"kill-ray-node:1@{t:g}", f"stall-rm:3@{t:g}"], {}, 0.0),
        "mixed": (mixed, FAULT_RUN, 0.0),
        "mixed-jitter": (mixed, FAULT_RUN, 0.7),
    }


def configs(out: Path) -> dict[str, Path]:
    """The matrix's configs, generated into ``out`` when not there yet."""
    root = Path(__file__).resolve().parents[1]
    generated, micro = out / "g100.yaml", out / "paper-micro.yaml"
    out.mkdir(parents=True, exist_ok=True)
    if not micro.exists():
        micro.write_bytes((root / "configs" / "paper-micro.yaml").read_bytes())
    if not generated.exists():
        subprocess.run([sys.executable, "-m", "rayrm.rm.cli.main", "trace", "generate", "google", "--nodes", "100",
                        "--jobs", "200", "--tasks", "6000", "--span", "600", "--max-duration", "300", "--seed", "1",
                        "-o", str(generated)], check=True, capture_output=True)
    return {"micro": micro, "g100": generated}


def write(out: Path, only: set[str] | None = None) -> list[Path]:
    """Simulate the matrix into ``out/runs/<config>/<faults>/<policy>``; returns the run dirs."""
    from rayrm.rm.core.config import parse_config
    from rayrm.rm.sim.engine import simulate
    runs = []
    for cname, path in configs(out).items():
        doc = yaml.safe_load(path.read_text())
        base = parse_config(doc, path)
        for fname, (faults, run, jitter) in fault_sets(base).items():
            if only and fname not in only:
                continue
            config = parse_config(dict(doc, run=dict(doc.get("run") or {}, **run)), path) if run else base
            for policy in POLICIES:
                where = out / "runs" / cname / fname / policy
                simulate(config, policy=policy, out=where, progress=False, faults=faults, launch_jitter=jitter)
                runs.append(where)
    return runs


def service_runs(out: Path) -> list[Path]:
    """The harness scenario under each policy into ``out/runs/service/<policy>``."""
    import tempfile

    import rayrm
    sys.path.insert(0, str(Path(rayrm.__file__).parent / "tests"))
    from harness import APP, Harness, registration
    from rayrm.rm.core.model import AppSpec, Resources
    from rayrm.rm.service.calls import Call
    from rayrm.rm.service.protocol import AppRegistration
    from rayrm.rm.service.store import StateStore
    other = AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), num_tasks=5)
    runs = []
    for policy in POLICIES:
        with tempfile.TemporaryDirectory() as d:
            c = Harness(StateStore(d), apps=(APP, other), policy=policy)
            c.run(until=2)
            c.apply(Call.LOSE_NODE, "n2", "test")                   # n2 lost, then back
            c.running = {k: v for k, v in c.running.items() if v[2] != "n2"}
            c.call("nm", Call.REGISTER_NODES, [registration(n) for n in c.nodes])
            c.run(until=4)
            c.apply(Call.FAULT, "driver", 1, "kill-am:a@4", "", "a")
            c.now = 20.0
            c.apply(Call.EXPIRE_APPS, 10.0, ["a"])                   # a's attempt 1 expires
            c.call("am", Call.REGISTER_APPS, [AppRegistration(APP, 2)])
            c.attempt["a"] = 2
            c.run(until=23)
            c.restart()                                              # the RM from snapshot + journal
            c.run(until=26)
            c.apply(Call.LOSE_AM_HOST, "driver", 2, "am", "AM host am died")
            c.call("am", Call.REGISTER_APPS, [AppRegistration(APP, 3), AppRegistration(other, 2)])
            c.attempt.update(a=3, b=2)
            c.run(until=40)
            c.now = 100.0
            c.apply(Call.EXPIRE_NODES, 5.0, None)                    # everyone silent: all lost
            c.apply(Call.EXPIRE_APPS, 5.0, None)
            where = out / "runs" / "service" / policy
            c.rm.log.write(where, wall_seconds=0.0)
            (where / "progress.json").write_text(json.dumps(c.rm.progress(100.0), sort_keys=True))
            runs.append(where)
    return runs


def _summary(path: Path) -> str:
    doc = json.loads(path.read_text())
    for key in MACHINE_FIELDS:
        doc.pop(key, None)
    source = doc.get("policy_source")
    if isinstance(source, dict) and source.get("kind") == "built-in" and "file" in source:
        # a built-in policy is named by the rayrm that ran it: where the tree is checked
        # out and the bytes of its module are provenance, not behaviour
        source["file"] = "rm/" + source["file"].rsplit("/rm/", 1)[-1]
        source.pop("source_sha256", None)
    return json.dumps(doc, indent=1, sort_keys=True)


def compare(base: Path, new: Path) -> list[str]:
    """One line per file that differs (or exists on one side only) under the two ``runs`` trees."""
    diffs = []
    left = {p.relative_to(base) for p in (base / "runs").rglob("*") if p.is_file()}
    right = {p.relative_to(new) for p in (new / "runs").rglob("*") if p.is_file()}
    for rel in sorted(left ^ right):
        diffs.append(f"{rel}: only in {'the baseline' if rel in left else 'the new runs'}")
    for rel in sorted(left & right):
        a, b = base / rel, new / rel
        same = _summary(a) == _summary(b) if rel.name == "summary.json" else a.read_bytes() == b.read_bytes()
        if not same:
            diffs.append(f"{rel}: differs")
    return diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, help="simulate the matrix into this directory")
    ap.add_argument("--against", type=Path, help="simulate into a fresh directory and compare with this baseline")
    ap.add_argument("--out", type=Path, help="with --against: where the new runs go (default: <baseline>-new)")
    ap.add_argument("--faults", default="", help="only these fault sets, comma-separated (default: all)")
    args = ap.parse_args(argv)
    only = {f for f in args.faults.split(",") if f} or None
    if args.write:
        runs = write(args.write, only) + ([] if only else service_runs(args.write))
        print(f"wrote {len(runs)} runs under {args.write / 'runs'}")
        return 0
    if not args.against:
        ap.error("give --write DIR or --against DIR")
    new = args.out or args.against.with_name(args.against.name + "-new")
    new.mkdir(parents=True, exist_ok=True)
    for name in ("paper-micro.yaml", "g100.yaml", "g100.jobs.csv"):
        (new / name).write_bytes((args.against / name).read_bytes())
    runs = write(new, only) + ([] if only else service_runs(new))
    diffs = compare(args.against, new) if not only else \
        [d for d in compare(args.against, new) if d.split("/")[2] in only and "only in the baseline" not in d]
    for d in diffs:
        print(d)
    print(f"{len(runs)} runs compared with {args.against}: {len(diffs)} files differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
