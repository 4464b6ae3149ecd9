"""The ResourceManager's durable state: a snapshot plus a journal of calls (YARN's RMStateStore).

``ResourceManagerState`` is a deterministic function of the calls made on it
(every method takes the wall time ``now`` as an argument and reads nothing else
from the world), so the RM persists *calls*, not effects:

* the **journal** — every state-changing call, appended as
  ``(method, now, args)`` after it is applied and before its answer leaves the
  actor.  A call whose answer a caller saw is therefore in the journal; a call
  that died with the RM before being journaled was never answered, and its
  caller retries it with the same request id;
* a **snapshot** — the whole state pickled every ``SNAPSHOT_RECORDS`` records or
  ``SNAPSHOT_BYTES`` of journal (or ``SNAPSHOT_SECONDS``), after which a new journal starts and the old one is deleted.
  At paper scale the state (with its run log) is tens of MB and pickling it takes
  seconds, so the RM takes it *off its loop* (``snapshot(background=True)``, as
  Redis's BGSAVE does): a forked child, holding a copy-on-write image of the state
  at that instant, writes it while the RM goes on; the journal switches to g+1 at
  the fork, and journal g is deleted only once the child has written snapshot g+1
  (``poll``).  Recovery therefore replays journal g and every later one it finds.

Recovery loads the snapshot and applies the journal's records in order; the
kept answers (``_responses``) come back with the rest, so a call retried across
the restart gets the answer it would have got and allocates nothing twice.

Files (in the directory given, ``<run dir>/rm-state`` by default)::

    snapshot.pkl        pickle of (generation, state); replaced atomically (os.replace)
    journal-<g>.log     records after snapshot g: [u32 length][u32 crc32][pickle of
                        (Call value, now, args)]; args may be the bytes of their own pickle
                        (a host's call, journaled as it arrived)
    snapshot-<g>.pkl    with ``keep``: every generation's snapshot (a hard link, no copy),
                        and no journal is deleted — for ``restores.check_restores``

A record cut short or failing its checksum ends the journal (a torn last write).

Reading them back runs no code from the files: only rayrm's own data types are rebuilt
(``restricted_load``, below), and a file that is not a snapshot or a journal of this
version raises ``StateFileError`` naming it (one line at the command line, exit status 2).

Why files: the RM actor is pinned to the driver's Ray node (its restart lands
there too), and the run directory is on that node's disk, so a restarted actor
reads what the dead one wrote, whichever process it is; an append costs a
``write`` to the page cache, which survives the process being killed; the files
outlive Ray itself for a post-mortem; and nothing depends on Ray internals.  A
store actor would keep the state in one more process that can die, and would
put an RPC on every call.
"""

from __future__ import annotations

import array
import copyreg
import importlib
import io
import itertools
import os
import pickle
import re
import struct
import sys
import time
import zlib
from pathlib import Path

from rayrm.rm.core.errors import InputError
from rayrm.rm.service.calls import Call

SNAPSHOT_RECORDS = 20_000
SNAPSHOT_SECONDS = 30.0
#: journal bytes that trigger a snapshot: a restart replays what the journal holds, at about
#: 0.2 s per MB at 1,000 nodes (records of a few hundred bytes: container statuses, allocations,
#: an NM host's marked heartbeat of ~130), so this bounds it near a second
SNAPSHOT_BYTES = 4 * 2**20
_HEADER = struct.Struct("<II")


def _reduce_count(counter: itertools.count):
    """Pickle an ``itertools.count`` by its next value (its own pickling is deprecated)."""
    text = repr(counter)                       # count(5) or count(5, 2)
    args = tuple(int(x) if re.fullmatch(r"-?\d+", x) else float(x)
                 for x in text[text.index("(") + 1:-1].split(", "))
    return itertools.count, args


copyreg.pickle(itertools.count, _reduce_count)


class StateStore:
    """Snapshot + journal of one RM's calls in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str | Path, keep: bool = False):
        self.dir = Path(directory)
        self.keep = keep
        self.dir.mkdir(parents=True, exist_ok=True)
        self.generation = 0
        self.records = 0                 # journal records since the last snapshot
        self.bytes = 0                   # and their bytes
        self.written = 0                 # journal bytes this store appended, all generations
        self._fd: int | None = None
        self._oldest = 0                 # the oldest journal still kept
        self._child: tuple[int, int, float] | None = None   # background snapshot: pid, journal it ends, start

    @property
    def snapshot_path(self) -> Path:
        return self.dir / "snapshot.pkl"

    def journal_path(self, generation: int) -> Path:
        return self.dir / f"journal-{generation}.log"

    def exists(self) -> bool:
        """Whether an RM wrote state here before (so this one is a restart)."""
        return self.snapshot_path.exists()

    # ----- writing ---------------------------------------------------------------

    def append(self, call: Call, now: float, args: tuple, wire: bytes | None = None) -> None:
        """Journal one applied call (a single write: a killed process never half-writes it).
        ``wire``: ``args`` already pickled (as a host sent them), kept as they are."""
        body = pickle.dumps((Call(call).value, now, args if wire is None else wire), protocol=pickle.HIGHEST_PROTOCOL)
        os.write(self._fd, _HEADER.pack(len(body), zlib.crc32(body)) + body)
        self.records += 1
        self.bytes += _HEADER.size + len(body)
        self.written += _HEADER.size + len(body)

    def due(self) -> bool:
        """Whether the journal since the last snapshot is long enough to take another."""
        return self.records >= SNAPSHOT_RECORDS or self.bytes >= SNAPSHOT_BYTES

    def snapshot(self, state, background: bool = False) -> int:
        """Write the whole state as generation g+1, start journal g+1, drop journal g; returns
        its bytes.  ``background``: in a forked child (module docstring); returns 0 at once, and
        ``poll`` reports the snapshot when written.  One background snapshot at a time."""
        if background and self._child is not None:
            return 0
        if self._child is not None:
            self.poll(wait=True)
        nxt = self.generation + 1
        tmp = self.dir / "snapshot.pkl.tmp"
        new_fd = os.open(self.journal_path(nxt), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        if background and hasattr(os, "fork"):
            pid = os.fork()
            if pid == 0:                                   # the child: write and leave at once
                code = 1
                try:
                    _write_snapshot(tmp, self.snapshot_path, nxt, state, self.keep)
                    code = 0
                finally:
                    os._exit(code)
            self._child = (pid, self.generation, time.time())
            old, self._fd = self._fd, new_fd
            if old is not None:
                os.close(old)
            self.generation, self.records, self.bytes = nxt, 0, 0
            return 0
        size = _write_snapshot(tmp, self.snapshot_path, nxt, state, self.keep)
        old, self._fd = self._fd, new_fd
        if old is not None:
            os.close(old)
        self._drop_journals(nxt - 1)
        self._oldest = nxt
        self.generation, self.records, self.bytes = nxt, 0, 0
        return size

    def poll(self, wait: bool = False) -> tuple[int, float] | None:
        """(bytes, seconds) of a background snapshot that has just been written, else None.

        Only then are the journals it covers deleted; a child that failed leaves them
        (recovery still has the older snapshot and every journal after it).
        """
        if self._child is None:
            return None
        pid, covered, started = self._child
        done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
        if not done:
            return None
        self._child = None
        if status != 0:
            return None
        self._drop_journals(covered)
        return self.snapshot_path.stat().st_size, time.time() - started

    def _drop_journals(self, covered: int) -> None:
        """Journals up to ``covered`` are in the snapshot now (kept with ``keep``)."""
        if not self.keep:
            for g in range(self._oldest, covered + 1):
                self.journal_path(g).unlink(missing_ok=True)
        self._oldest = covered + 1

    def journal_bytes(self) -> int:
        """Size of the current journal."""
        path = self.journal_path(self.generation)
        return path.stat().st_size if path.exists() else 0

    # ----- reading -----------------------------------------------------------------

    def load(self, trusted=()):
        """(state, records) from the snapshot and the journals after it (its own, and later
        ones a background snapshot started); opens the last journal to append, cut after
        its last whole record: what this RM appends must not land behind a torn tail,
        where the next recovery would stop reading.  ``trusted``: modules whose names the
        files may use besides rayrm's data types (``restricted_load``)."""
        self.generation, state = read_snapshot(self.snapshot_path, trusted)
        self._oldest = self.generation
        records = []
        while True:
            path = self.journal_path(self.generation)
            data, whole = (path.read_bytes(), 0) if path.exists() else (b"", 0)
            for whole, record in _records(data, path, trusted):
                records.append(record)
            if not self.journal_path(self.generation + 1).exists():
                break
            self.generation += 1
        if whole < len(data):
            os.truncate(self.journal_path(self.generation), whole)
        self._fd = os.open(self.journal_path(self.generation), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.records = len(records)
        self.bytes = sum(self.journal_path(g).stat().st_size for g in range(self._oldest, self.generation + 1)
                         if self.journal_path(g).exists())
        return state, records

    def close(self) -> None:
        if self._child is not None:
            self.poll(wait=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _write_snapshot(tmp: Path, final: Path, generation: int, state, keep: bool = False) -> int:
    with open(tmp, "wb") as fh:
        pickle.dump((generation, state), fh, protocol=pickle.HIGHEST_PROTOCOL)
        size = fh.tell()
    if keep:
        kept = final.with_name(f"snapshot-{generation}.pkl")
        kept.unlink(missing_ok=True)
        os.link(tmp, kept)
    os.replace(tmp, final)
    return size


class StateFileError(InputError):
    """A snapshot or journal record that does not read back as rayrm's data: corrupt, from
    another version, or naming code (``restricted_load``)."""


def read_snapshot(path: Path, trusted=()) -> tuple[int, object]:
    """(generation, state) of a snapshot file; StateFileError naming it if it is not one."""
    try:
        with open(path, "rb") as fh:
            generation, state = restricted_load(fh, trusted)
    except OSError as e:
        raise StateFileError(f"cannot read the RM's snapshot: {e.strerror}", file=str(path)) from None
    except Exception as e:  # noqa: BLE001 - whatever a corrupt pickle raises, it is the file's fault
        raise StateFileError(f"not a snapshot of this rayrm's RM: {_why(e)}", file=str(path)) from None
    if not isinstance(generation, int):
        raise StateFileError("not a snapshot of this rayrm's RM: no generation number", file=str(path))
    return generation, state


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def read_journal(path: Path, trusted=()):
    """The journal's records in order, stopping at a torn or corrupt tail."""
    for _, record in _records(Path(path).read_bytes(), path, trusted):
        yield record


def _records(data: bytes, path: Path | None = None, trusted=()):
    """(offset just past it, record) of each whole record of a journal's bytes, in order,
    stopping at a torn or corrupt tail.  A record whose checksum holds but that does not
    unpickle as rayrm's data raises StateFileError (the file and the record's number)."""
    pos, i = 0, 0
    while pos + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, pos)
        body = data[pos + _HEADER.size: pos + _HEADER.size + length]
        if len(body) < length or zlib.crc32(body) != crc:
            return
        pos += _HEADER.size + length
        i += 1
        try:
            name, now, args = restricted_loads(body, trusted)
            if isinstance(args, bytes):
                args = restricted_loads(args, trusted)
        except Exception as e:  # noqa: BLE001 - the file's fault, as in read_snapshot
            raise StateFileError(f"journal record {i} is not a call of this rayrm's RM: {_why(e)}",
                                 file=str(path) if path else None) from None
        yield pos, (name, now, args)


def replay_records(state, records) -> int:
    """Apply journal records to ``state`` (the calls it saw after its snapshot); returns how many.

    A record naming a call the protocol does not have (a journal from another
    version) raises ``JournalError`` naming the record, rather than being skipped.
    """
    for i, (name, now, args) in enumerate(records):
        try:
            call = Call(name)
        except ValueError:
            raise JournalError(f"journal record {i}: unknown call {name!r} "
                               f"(known: {', '.join(c.value for c in Call)})") from None
        call.apply(state, now, *(restricted_loads(args) if isinstance(args, bytes) else args))
    return len(records)


class JournalError(InputError):
    """The journal cannot be replayed onto this version's state."""


# ----- reading back as data ------------------------------------------------------------
#
# A run directory is data someone may hand you, and an ordinary ``pickle.load`` calls
# whatever callable a pickle names, with whatever arguments it gives: a crafted snapshot
# would run its author's code in whoever reads it (``rayrm check --restores``).
# ``restricted_load`` and ``restricted_loads`` unpickle with the C unpickler, but resolve
# each name a pickle refers to through ``find_class`` below, which returns only:
#
# * **rayrm's own types**: classes defined in ``rayrm.rm.core``, ``rayrm.rm.service`` and
#   the run log's modules (``RunLog``, ``ColumnBuffer``), save those of the store and the
#   channel (files, sockets).  Calling one builds one of rayrm's objects;
# * two of rayrm's functions the state holds as values, ``wall_seconds`` and
#   ``trace_seconds`` (they format a number);
# * side-effect-free builtins, containers (``collections``, ``array``, ``itertools.count``,
#   ``random.Random``) and numpy's array reconstructors;
# * ``getattr`` only as the state uses it, for its bound methods: ``append`` of a list or an
#   array, and a policy's ``virtual_capacity`` and ``virtual_demand``
#   (``_Unpickler.bound_method``);
# * with ``trusted``, anything from the named modules: the RM restarting from its own
#   snapshot trusts the module of the policy it was started with — code it runs anyway.
#
# Anything else — ``os.system``, ``builtins.eval``, ``subprocess``, a function of rayrm
# that writes files — raises ``UnsafePickle`` naming it, before it is called.  Names are
# resolved once per process (``_CACHE``): the journal's hot path is writing, and a
# restart reads some 20,000 records, each naming a few types.

#: packages whose classes a snapshot or journal may hold
_PACKAGES = ("rayrm.rm.core.", "rayrm.rm.service.")
_MODULES = {"rayrm.rm.runs.log", "rayrm.rm.runs.columns"}
#: modules of those packages whose classes are not data: files, sockets
_EXCLUDED = {"rayrm.rm.service.store", "rayrm.rm.service.channel", "rayrm.rm.service.stream",
             "rayrm.rm.service.client"}
_FUNCTIONS = {("rayrm.rm.core.fault_rules", "wall_seconds"), ("rayrm.rm.core.fault_rules", "trace_seconds")}
_SAFE = {
    "builtins": {"set", "frozenset", "bytearray", "list", "dict", "tuple", "complex", "slice", "range",
                 "int", "float", "str", "bytes", "bool", "object"},
    "collections": {"deque", "OrderedDict", "Counter", "defaultdict"},
    "itertools": {"count"},
    "array": {"array", "_array_reconstructor"},
    "random": {"Random"},
    "copyreg": {"_reconstructor"},
    "numpy": {"dtype", "ndarray"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "numpy.core.numeric": {"_frombuffer"},
    "numpy._core.numeric": {"_frombuffer"},
}
#: methods a policy's state keeps bound (besides a list's or an array's ``append``)
_POLICY_METHODS = {"virtual_capacity", "virtual_demand"}
_CACHE: dict[tuple[str, str], object] = {}
_NEVER_TRUSTED = set(sys.stdlib_module_names) | {"rayrm", "numpy", "ray", "__main__"}


class UnsafePickle(pickle.UnpicklingError):
    """A snapshot or journal names something that is not one of rayrm's own data types."""


def _rayrm_type(module: str, name: str) -> bool:
    return (module.startswith(_PACKAGES) or module in _MODULES) and module not in _EXCLUDED


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, trusted=()):
        super().__init__(file)
        # a policy's own module, never the standard library's nor rayrm's
        self.trusted = frozenset(m for m in trusted if m.partition(".")[0] not in _NEVER_TRUSTED)

    def find_class(self, module: str, name: str):
        hit = _CACHE.get((module, name))
        if hit is not None:
            return hit
        if module in self.trusted:
            return super().find_class(module, name)
        if (module, name) == ("builtins", "getattr"):
            return self.bound_method
        if "." in name or name.startswith("__"):
            raise UnsafePickle(f"{module}.{name}: a nested or private name")
        if name in _SAFE.get(module, ()) or (module, name) in _FUNCTIONS:
            obj = getattr(importlib.import_module(module), name)
        elif _rayrm_type(module, name):
            obj = getattr(importlib.import_module(module), name, None)
            if not isinstance(obj, type) or obj.__module__ != module:
                raise UnsafePickle(f"{module}.{name}, which is not a class defined there")
        else:
            raise UnsafePickle(f"{module}.{name}, which is not one of rayrm's own data types")
        _CACHE[(module, name)] = obj
        return obj

    def bound_method(self, obj, name: str):
        """``getattr(obj, name)`` for the methods the state keeps bound (module docstring)."""
        cls = type(obj)
        if (name == "append" and cls in (list, array.array)
                or name in _POLICY_METHODS and (_rayrm_type(cls.__module__, cls.__name__)
                                                or cls.__module__ in self.trusted)):
            return getattr(obj, name)
        raise UnsafePickle(f"a bound method {cls.__module__}.{cls.__qualname__}.{name}, "
                           "which rayrm's state never holds")


def restricted_load(file, trusted=()):
    """``pickle.load`` restricted to rayrm's data (module docstring); raises UnsafePickle."""
    return _Unpickler(file, trusted).load()


def restricted_loads(data: bytes, trusted=()):
    """``pickle.loads`` restricted to rayrm's data (module docstring); raises UnsafePickle."""
    return _Unpickler(io.BytesIO(data), trusted).load()
