"""What a wake-up costs: the CPU an asyncio loop spends per timer wake-up after sleeping.

The RM, once a trace's last job has arrived, does little but wake for heartbeats; on a
small VM the wake-up itself is much of what it costs (``rm/runtime/ticker.py``).  This
prints, for each gap, the process's CPU (user + system, ``getrusage``) per wake-up of a
loop that sleeps ``gap`` and wakes to do nothing, and per period of one that then sleeps
0.5 ms more and wakes again (a second wake-up close after the first).

    python benchmarks/bench_wakeups.py [--wakeups 300] [--gaps 0.001,0.002,0.005,0.01,0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import resource

SECOND = 0.0005


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def per_period(gap: float, extra: tuple[float, ...], n: int) -> float:
    """CPU µs per period of: sleep ``gap``, then each of ``extra``."""
    before = cpu()
    for _ in range(n):
        await asyncio.sleep(gap)
        for e in extra:
            await asyncio.sleep(e)
    return 1e6 * (cpu() - before) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wakeups", type=int, default=300, help="wake-ups measured per row")
    ap.add_argument("--gaps", default="0.001,0.002,0.005,0.01,0.02", help="seconds asleep (comma-separated)")
    args = ap.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    print("| asleep ms | CPU µs per wake-up | + a second wake-up 0.5 ms later |")
    print("|---|---|---|")
    for gap in gaps:
        one = asyncio.run(per_period(gap, (), args.wakeups))
        two = asyncio.run(per_period(gap, (SECOND,), args.wakeups))
        print(f"| {1000 * gap:g} | {one:.0f} | +{two - one:.0f} |", flush=True)


if __name__ == "__main__":
    main()
