"""What bounds the RM's CPU per allocation: the calls it must answer and the state work it
must do, measured apart, then together without the RM actor around them.

``bench_rm_throughput.py`` sets the RM's CPU per allocation against the simulator's CPU per
task (the goal: at most 5 times).  This script takes one replay of the same workload, with
the RM's journal and snapshots kept (``rayrm replay --keep-rm-state``: every call the
hosts made, when it came and the bytes its arguments arrived as), and measures three
things on this machine:

* **answering the calls** — the journal's host calls sent again, at the times they came,
  with the same argument bytes, over the same kind of channel (a TCP stream per host,
  length-prefixed pickles), to a bare asyncio ``Protocol`` server that unpickles each
  call's arguments, as the RM must, and answers a small pickle at once.  No state, no
  journal, no scheduling, no monitor: only the wake-ups, the socket work and the
  unpickling of the calls the protocol makes.  Its CPU is a floor under the RM's.
* **the state's work** — the same journal applied to the state restored from the first
  snapshot, in this process, one call after another (``replay_records``, as a restarted
  RM does): the scheduling, the protocol's bookkeeping and the run log, with the loop,
  the sockets and the journal's writes taken out, and every cache warm.
* **serving the calls** — both at once, as a live RM must: the same resend to a server
  that applies each call to that state as it comes (in the journal's order, with the
  time the RM applied it), journals it as the RM does and answers with the state's
  answer.  What it leaves out is the RM actor itself: Ray's worker around it, the
  monitor's ticks, the long polls' holding, the pace meter, the metrics, the snapshots.
  Its CPU is split into unpickling, the state's work, the journal, the answers, and
  the rest (the loop and the sockets).

Each is set against the run's allocations and the simulator's CPU per task on the same
workload (``rayrm simulate``, as ``bench_rm_throughput.py`` measures it).  If the served
calls alone exceed 5 times the simulator's per task, the goal is out of reach of any RM
that makes these calls and keeps this state, on this machine; what the RM spends above
them is what its actor adds.  Every server here runs the garbage collector as the RM's
actor does (``quiet_gc``).

    flock /tmp/rayrm-heavy.lock timeout 2400 python benchmarks/bench_call_floor.py \\
        [--nodes 1000] [--time-scale 0.02] [--until 0] [--out DIR] [--run DIR]

The replay takes as long as ``bench_rm_throughput.py``'s (about five minutes for the whole
trace at 0.02) and each resend as long again; the state's replay takes seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import pickle
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rm_throughput import measure_sim, task_attempts, trace  # noqa: E402

from rayrm.rm.core.config import load_config  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402
from rayrm.rm.service.calls import HOST_CALLS, Call  # noqa: E402
from rayrm.rm.service.channel import _HEADER, _frame  # noqa: E402
from rayrm.rm.service.heap import quiet_gc  # noqa: E402
from rayrm.rm.service.restores import kept_generations  # noqa: E402
from rayrm.rm.service.store import StateStore, read_journal, read_snapshot, replay_records  # noqa: E402

#: what the bare server answers every call with (an RM's answer is at least this)
ANSWER = [("normal", ())]


def journals(state_dir: Path) -> list[tuple]:
    """Every record of the kept journals, in order."""
    gens = sorted(int(re.search(r"\d+", p.name).group()) for p in state_dir.glob("journal-*.log"))
    return [r for g in gens for r in read_journal(state_dir / f"journal-{g}.log")]


def is_host_call(name: str) -> bool:
    """Whether a journal record is a numbered call a host made on the channel (the hosts'
    ``lose_node`` is neither numbered nor timed here)."""
    return name in HOST_CALLS and HOST_CALLS[name].spec.numbered


def host_calls(records: list[tuple]) -> list[tuple[float, str, str, bytes, int]]:
    """(wall time, caller, call, argument bytes, record index) of each call a host made on
    the channel."""
    out = []
    for i, (name, now, args) in enumerate(records):
        if is_host_call(name):
            if not isinstance(args, bytes):          # a journal that pickled them with the record
                args = pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL)
            out.append((now, pickle.loads(args)[0], name, args, i))
    return out


def frames(buf: bytearray):
    """Each whole frame at the front of ``buf``, unpickled (seq, call, argument bytes), taken
    off it as it is read."""
    while len(buf) >= _HEADER.size:
        (n,) = _HEADER.unpack_from(buf)
        end = _HEADER.size + n
        if len(buf) < end:
            return
        frame = pickle.loads(bytes(buf[_HEADER.size:end]))
        del buf[:end]
        yield frame


def bare_server(conn) -> None:
    """A channel server that does nothing but read, unpickle and answer (module docstring);
    sends its address on ``conn``, then — told to stop — its own CPU seconds and calls."""

    class Bare(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport, self.buf = transport, bytearray()

        def data_received(self, data):
            self.buf += data
            for seq, _, wire in frames(self.buf):
                pickle.loads(wire)
                counts[0] += 1
                self.transport.write(_frame((seq, True, ANSWER)))

    counts = [0]
    serve(conn, Bare, lambda: counts[0])


async def resend(address, calls: list[tuple[float, str, str, bytes]]) -> float:
    """Each host's calls on its own connection, each at its recorded offset from the first;
    returns how late the sends ran at most (seconds)."""
    start, first = time.time() + 0.5, calls[0][0]
    by_caller: dict[str, list] = {}
    for c in calls:
        by_caller.setdefault(c[1], []).append(c)
    late = [0.0]

    async def one(mine):
        reader, writer = await asyncio.open_connection(*address)

        async def drain_answers():
            while True:
                (n,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
                await reader.readexactly(n)
        answers = asyncio.get_running_loop().create_task(drain_answers())
        for now, _, name, wire, seq in mine:
            delay = start + (now - first) - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                late[0] = max(late[0], -delay)
            writer.write(_frame((seq, name, wire)))
        await asyncio.sleep(0.5)
        answers.cancel()
        writer.close()
    await asyncio.gather(*(one(m) for m in by_caller.values()))
    return late[0]


#: what the served floor's CPU is split into (thread CPU of each; the rest is the loop's
#: waking, the sockets' reads and writes)
SERVED_PARTS = ("unpickling", "state", "journal", "answers")


def served_server(conn, state_dir: str) -> None:
    """A channel server that serves the calls for real, with none of the RM actor around it
    (module docstring): sends its address on ``conn``, then — told to stop — its own CPU
    seconds and (the journal records it applied, the thread CPU seconds of each of
    ``SERVED_PARTS``).

    Each call's arguments are unpickled, the call is applied to the state of the first kept
    snapshot with the time the RM applied it, journaled as the RM journals it (the argument
    bytes as they came) and answered at once with the state's answer.  The RM's own records
    between the calls (its ticks, the long polls' second halves, the driver's calls) are
    applied and journaled in their turn; a call that comes before its turn waits for it, so
    the state goes through exactly the RM's sequence of calls."""
    state_dir = Path(state_dir)
    records = journals(state_dir)
    state = first_snapshot(state_dir)
    journal_dir = tempfile.TemporaryDirectory(prefix="rayrm-served-")
    store = StateStore(journal_dir.name)
    store.snapshot(state)                    # opens the journal; before the CPU is counted
    quiet_gc()                               # as the RM's actor does
    arrived: dict[int, tuple] = {}           # record index -> (transport, args, wire bytes)
    turn = [0]
    split = dict.fromkeys(SERVED_PARTS, 0.0)   # thread CPU seconds of each part
    clock = time.thread_time

    def advance():
        while turn[0] < len(records):
            name, now, args = records[turn[0]]
            t0 = clock()
            if is_host_call(name):
                if turn[0] not in arrived:
                    return
                transport, args, wire = arrived.pop(turn[0])
                out = Call(name).apply(state, now, *args)
                t1 = clock()
                store.append(name, now, args, wire)
                t2 = clock()
                transport.write(_frame((turn[0], True, out)))
                split["answers"] += clock() - t2
            else:
                args = pickle.loads(args) if isinstance(args, bytes) else args
                Call(name).apply(state, now, *args)
                t1 = clock()
                store.append(name, now, args)
                t2 = clock()
            split["state"] += t1 - t0
            split["journal"] += t2 - t1
            turn[0] += 1

    class Served(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport, self.buf = transport, bytearray()

        def data_received(self, data):
            self.buf += data
            t0 = clock()
            for seq, _, wire in frames(self.buf):
                arrived[seq] = (self.transport, pickle.loads(wire), wire)
            split["unpickling"] += clock() - t0
            advance()

    try:
        serve(conn, Served, lambda: (turn[0], split))
    finally:
        store.close()
        journal_dir.cleanup()


def serve(conn, protocol, count) -> None:
    """Run ``protocol``'s server until told to stop; send its address, then (CPU s, count())."""
    async def main():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(protocol, "127.0.0.1", 0)
        conn.send(server.sockets[0].getsockname())
        t0 = time.process_time()
        await loop.run_in_executor(None, conn.recv)
        conn.send((time.process_time() - t0, count()))
    asyncio.run(main())


def floor(calls: list[tuple], server=None, *args) -> tuple[float, object, float]:
    """The CPU seconds of ``server`` (the bare one by default) for ``calls`` resent at their
    times, what it counted (calls answered, records applied), and the resend's worst lateness."""
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=server or bare_server, args=(theirs, *args), daemon=True)
    proc.start()
    address = mine.recv()
    late = asyncio.run(resend(address, calls))
    mine.send("stop")
    cpu, answered = mine.recv()
    proc.join(10)
    return cpu, answered, late


def first_snapshot(state_dir: Path):
    """The state of the first kept snapshot (the journals' records follow it)."""
    return read_snapshot(state_dir / f"snapshot-{kept_generations(state_dir)[0]}.pkl")[1]


def state_work(state_dir: Path, records: list[tuple]) -> float:
    """CPU seconds of applying ``records`` to the state of the first kept snapshot."""
    state = first_snapshot(state_dir)
    quiet_gc()                               # as the RM's actor does
    t0 = time.process_time()
    replay_records(state, records)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--time-scale", type=float, default=0.02)
    ap.add_argument("--until", type=float, default=0.0, help="trace seconds replayed (0: the whole trace)")
    ap.add_argument("--policy", default="tsf")
    ap.add_argument("--out", help="the replay's and the simulator's run directories (default: a temporary one)")
    ap.add_argument("--run", help="take this replay's run directory (its rm-state kept, of the same "
                                  "workload and --until) instead of replaying")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="rayrm-call-floor-"))
    out.mkdir(parents=True, exist_ok=True)
    config = trace(out, args.nodes, 7200.0)
    if args.run:
        run = Path(args.run)
        summary = json.loads((run / "summary.json").read_text())
    else:
        run = out / "replay"
        summary = replay(load_config(config), policy=args.policy, out=run, time_scale=args.time_scale,
                         executor="actor", payload="sleep", until=args.until or None, progress=False,
                         keep_state=True)
    allocations, rm_cpu = task_attempts(summary), summary["rm"]["cpu_seconds"]
    sim = measure_sim(config, args.policy, args.until or None, out / "sim")
    sim_us = 1e6 * sim["sim_cpu_s"] / sim["sim_tasks"]
    records = journals(run / "rm-state")
    calls = host_calls(records)
    state_cpu = state_work(run / "rm-state", records)
    floor_cpu, answered, late = floor(calls)
    served_cpu, (applied, split), served_late = floor(calls, served_server, str(run / "rm-state"))
    if applied != len(records):
        sys.exit(f"the served floor applied {applied} of the journal's {len(records)} records")
    us = lambda s: 1e6 * s / allocations  # noqa: E731
    rows = [("the RM (the replay's summary.json)", rm_cpu),
            ("answering its calls, a bare server", floor_cpu),
            ("its state's work, replayed warm", state_cpu),
            ("the two floors together", floor_cpu + state_cpu),
            ("serving the calls: state, journal, answers; no Ray, no timers", served_cpu)]
    rows += [(f"... of which {part}", split[part]) for part in SERVED_PARTS]
    rows += [("... of which the loop and the sockets (the rest)", served_cpu - sum(split.values()))]
    print(f"{args.nodes} NMs, time scale {args.time_scale:g}, until {args.until or 'the end'}: "
          f"{allocations} allocations, {len(calls)} host calls over {calls[-1][0] - calls[0][0]:.0f} s "
          f"(resent: {answered} answered, at most {1000 * max(late, served_late):.1f} ms late); "
          f"simulator {sim_us:.1f} us CPU per task, 5x = {5 * sim_us:.0f} us\n")
    print("| what | CPU s | us per allocation | x the simulator's per task |")
    print("|---|---|---|---|")
    for what, cpu in rows:
        print(f"| {what} | {cpu:.1f} | {us(cpu):.0f} | {us(cpu) / sim_us:.1f} |")
    (out / "floor.json").write_text(json.dumps({
        "allocations": allocations, "calls": len(calls), "rm_cpu_s": rm_cpu, "floor_cpu_s": floor_cpu,
        "state_cpu_s": state_cpu, "served_cpu_s": served_cpu, "served_split_s": split, "sim_us_per_task": sim_us,
        "late_s": max(late, served_late)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
