"""The simulator's side of preemption: the clock-free rules (``rayrm.rm.core.queues.preemption``)
applied on the virtual clock.

After each instant's scheduling round the rules are asked (``decide``); each victim is
warned (a ``preempt_warned`` event in events.csv, as the replay's RM tells the AM) and a
kill is put on the heap at its deadline.  Kills run after the completions of their instant,
so a container that finishes at or before its deadline is not killed (it finished first).
A killed attempt ends ``preempted`` in tasks.csv and its task is asked for again, a new
attempt submitted at the kill, as a lost one is.  When a leaf's starvation timeout will
expire with nothing else happening, a wake-up event makes that instant happen.

Counted per queue the containers were taken from: preempted containers and the
task-seconds they had run (lost work); per starved queue, each episode's time from
starvation to share restored (summary.json ``preemption``).
"""

from __future__ import annotations

from rayrm.rm.core.queues.preemption import Preemption


class SimPreemption:
    """The rules of one simulation and what they did (module docstring)."""

    def __init__(self, sim, config, queues, kill: int, wake: int):
        self.sim = sim
        self.rules = Preemption(config, queues)
        self.kill_priority, self.wake_priority = kill, wake
        self.woken: set[float] = set()
        #: rounds before then need not ask the rules (``after_round``; the compiled loop
        #: reads it to skip the call)
        self.quiet_until = -float("inf")
        self.preempted: dict[str, int] = {}
        self.lost_seconds: dict[str, float] = {}
        self.warned = 0
        self.spared = 0

    def after_round(self, t: float) -> None:
        """The instant ``t`` is scheduled: warn the new victims, plan their kills and the next wake-up.

        A round before the next evaluation is due changes nothing in the rules, and their
        wake-up time stays the one already planned until that time (``Preemption.wake``: the
        next evaluation, or a clock's expiry before it): such rounds are not asked."""
        if t < self.quiet_until:
            return
        sim = self.sim
        for v in self.rules.decide(t, sim.scheduler):
            self.warned += 1
            sim.log.event("preempt_warned", t, app=v.app, container=v.container,
                          detail=f"from {v.source} for {v.starved}; killed at {v.deadline:g} unless finished")
            sim._push(v.deadline, self.kill_priority, v)
        w = self.rules.wake(t)
        if w is not None and w not in self.woken:
            self.woken.add(w)
            sim._push(w, self.wake_priority, None)
        self.quiet_until = w if w is not None and self.rules.last_evaluation < t else -float("inf")

    def kill(self, v, t: float, changed: dict) -> None:
        """Victim ``v``'s deadline: killed if it still runs, its task asked for again."""
        sim = self.sim
        entry = sim.running.pop(v.container, None)
        if entry is None:               # it finished first (or was lost with its node): spared
            self.spared += 1
            return
        job, task, attempt = entry
        started = sim.log.tasks[(job.app_id, task, attempt)][5]
        sim.scheduler.release(v.container)
        sim.log.end(job.app_id, task, attempt, "preempted", t, container=v.container,
                    detail=f"preempted from {v.source} for {v.starved}")
        self.preempted[v.source] = self.preempted.get(v.source, 0) + 1
        self.lost_seconds[v.source] = self.lost_seconds.get(v.source, 0.0) + max(0.0, t - started)
        job.retry.append((task, t))
        sim.scheduler.ask(job.app_id, 1)
        changed[job.app_id] = job

    def summary(self, end: float) -> dict:
        """summary.json ``preemption``: containers warned, preempted and spared (no longer running
        at their deadline: finished first, or lost with their node); per queue, containers
        preempted from it, the task-seconds they had run, and each starvation episode (start,
        restored; null: never restored)."""
        self.rules.close(end)
        queues: dict[str, dict] = {}
        for q, n in self.preempted.items():
            queues.setdefault(q, {})["preempted_containers"] = n
            queues[q]["lost_task_seconds"] = round(self.lost_seconds[q], 6)
        for q, start, restored in self.rules.episodes:
            ep = queues.setdefault(q, {}).setdefault("starved", [])
            ep.append({"start": round(start, 6), "restored": round(restored, 6) if restored != float("inf") else None,
                       "seconds": round(restored - start, 6) if restored != float("inf") else None})
        return {"settings": self.rules.config.to_dict(), "warned": self.warned,
                "preempted": sum(self.preempted.values()), "spared": self.spared,
                "queues": dict(sorted(queues.items()))}
