"""The RM actor's journal and snapshots (rm/service/store.py is the format).

Every call applied is journaled before its answer leaves (``record``); a host's call that
came over the channel is journaled as the bytes its arguments arrived as
(``ChannelServer.wire``: the same arguments, not pickled a second time).  A snapshot is
taken off the loop (a forked child writes it; the loop pays for the fork) when the
journal is long enough (``StateStore.due``) or ``SNAPSHOT_SECONDS`` have passed with
something journaled (``tick``).  A restarted RM rebuilds its state from the snapshot and
the journal (``restore``).
"""

from __future__ import annotations

import time
from pathlib import Path

from rayrm.rm.service.calls import Call
from rayrm.rm.service.channel import ChannelServer
from rayrm.rm.service.state import ResourceManagerState
from rayrm.rm.service.store import SNAPSHOT_SECONDS, StateStore, read_snapshot, replay_records


class RMJournal:
    """The snapshot and journal of one RM in ``store`` (None: a replay that keeps neither),
    and what writing them cost: ``snapshots``, (bytes, seconds) of each written in the
    background; ``blocked``, the seconds the loop spent starting each."""

    def __init__(self, store: StateStore | None, channel: ChannelServer):
        self.store, self.channel = store, channel
        self.snapshots: list[tuple[int, float]] = []
        self.blocked: list[float] = []
        self._last_snapshot = time.time()

    def restore(self, trusted=()) -> tuple[ResourceManagerState, str, dict] | None:
        """The state a dead RM left (its snapshot, its journal replayed), what was done
        (for ``rm_recovered``) and its sizes and times; None when there is none.
        ``trusted``: the policy's module, which the files may name (``StateStore.load``)."""
        store = self.store
        if store is None or not store.exists():
            return None
        t0 = time.time()
        state, records = store.load(trusted)
        loaded = time.time()
        replay_records(state, records)
        state.apps.news.clear()
        stats = {"snapshot_bytes": store.snapshot_path.stat().st_size,
                 "journal_bytes": store.journal_bytes(), "journal_records": len(records),
                 "load_s": round(loaded - t0, 4), "replay_s": round(time.time() - loaded, 4),
                 "restore_s": round(time.time() - t0, 4)}
        detail = (f"snapshot {store.generation} + {len(records)} journal records replayed in "
                  f"{time.time() - t0:.3f}s")
        return state, detail, stats

    def begin(self, state: ResourceManagerState) -> None:
        """A fresh RM: its state as the first snapshot."""
        if self.store is not None:
            self.store.snapshot(state)

    def record(self, call: Call, now: float, args: tuple, state: ResourceManagerState) -> None:
        """``call`` applied at ``now`` with ``args``: journaled, and a snapshot when due."""
        if self.store is not None:
            self.store.append(call, now, args, self.channel.wire(call))
            if self.store.due():
                self._snapshot(state)

    def tick(self, now: float, state: ResourceManagerState) -> None:
        """The monitor's turn: a background snapshot just written is counted; one is taken
        when ``SNAPSHOT_SECONDS`` passed with something journaled."""
        if self.store is None:
            return
        written = self.store.poll()
        if written is not None:
            self.snapshots.append(written)
        if self.store.records and now - self._last_snapshot > SNAPSHOT_SECONDS:
            self._snapshot(state)

    def _snapshot(self, state: ResourceManagerState) -> None:
        t0 = time.time()
        self.store.snapshot(state, background=True)
        self._last_snapshot = time.time()
        self.blocked.append(self._last_snapshot - t0)

    def export(self) -> dict:
        """The journal's figures for the run's summary."""
        store = self.store
        return {"snapshots": list(self.snapshots), "snapshot_blocked": list(self.blocked),
                "journal_bytes": store.journal_bytes() if store is not None else 0,
                "journal_written": store.written if store is not None else 0}

    def close(self) -> None:
        """No more records: a long poll still out must not journal into a closed file."""
        if self.store is not None:
            self.store.close()
            self.store = None


def export_from_store(state_dir: Path, wall_seconds: float, trusted=()) -> dict:
    """What ``ResourceManager.export`` gives, from the RM's last snapshot on disk (the RM
    did not answer an interrupted replay in time); measurements it alone held are empty.
    ``trusted``: the policy's module, which the snapshot may name (``store.read_snapshot``)."""
    _, state = read_snapshot(StateStore(state_dir).snapshot_path, trusted)
    last = max((x for row in state.log.tasks.values() for x in row[5:7] if x is not None), default=0.0)
    return {"log": state.log, "alloc_to_running": list(state.alloc_to_running),
            "alloc_to_launch": list(state.alloc_to_launch),
            "progress": state.progress(state.clock.start if state.clock is not None else 0.0) | {"time": last},
            "calls": 0, "pace": {"interval_wall": 0.0, "samples": [], "beat_lags": []},
            "cpu_seconds": 0.0, "peak_rss_mb": 0.0, "snapshots": [], "snapshot_blocked": [],
            "recoveries": list(state.recoveries), "journal_bytes": 0}
