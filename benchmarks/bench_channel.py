"""What one call to the RM costs in CPU, by how it travels: a Ray actor call, the RM's
channel (rm/service/channel.py), and a bare asyncio ``Protocol`` echo (the floor of any
stream between two Python processes).

Each way, a server in its own process answers ``--calls`` calls of the same message (a
host's heartbeat-sized list of 20 tuples, ~1 KB pickled), one at a time, ``--gap``
seconds apart (a host's calls are 5-10 ms apart in a replay, so every call wakes the
server from its poll, as here).  The server echoes the argument: the figures are the
transport's, with no RM work.  Printed per way: the server's and the client's CPU
(user + system, ``psutil``) per call, in µs, and the wall round trip's median::

    python benchmarks/bench_channel.py [--calls 3000] [--gap 0.002]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import pickle
import statistics
import sys
import time

try:
    import psutil
except ImportError:       # not a rayrm dependency: only this script reads another process's CPU
    sys.exit("bench_channel.py needs psutil, which rayrm does not install: pip install psutil")

from rayrm.rm.service.calls import Call
from rayrm.rm.service.channel import _HEADER as HEADER, Channel, ChannelServer, _frame

KEY = os.urandom(32)


class Echo:
    """The RM's side of the channel answering a node heartbeat with its own argument."""

    async def serve(self, call: Call, beats):
        return beats


class EchoProtocol(asyncio.Protocol):
    """The channel's frames in, the same out, in ``data_received``: no task, no coroutine per call."""

    def connection_made(self, transport):
        self.transport, self.buf = transport, bytearray()

    def data_received(self, data):
        self.buf += data
        while len(self.buf) >= HEADER.size:
            (n,) = HEADER.unpack_from(self.buf)
            if len(self.buf) < HEADER.size + n:
                return
            seq, _, wire = pickle.loads(bytes(self.buf[HEADER.size:HEADER.size + n]))
            args = pickle.loads(wire)
            del self.buf[:HEADER.size + n]
            self.transport.write(_frame((seq, True, args[0])))


def serve(way: str, queue) -> None:
    async def main():
        if way == "channel":
            address = await ChannelServer(Echo(), KEY).start("127.0.0.1")
        else:
            server = await asyncio.get_running_loop().create_server(EchoProtocol, "127.0.0.1", 0)
            address = ("127.0.0.1", server.sockets[0].getsockname()[1])
        queue.put(address)
        await asyncio.Event().wait()
    asyncio.run(main())


async def drive(call, calls: int, gap: float, message) -> list[float]:
    trips = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await call(message)
        trips.append(time.perf_counter() - t0)
        await asyncio.sleep(gap)
    return trips


async def _read(reader: asyncio.StreamReader):
    """One bare frame (``_frame``): its length, then its pickle."""
    (n,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    return pickle.loads(await reader.readexactly(n))


async def bare_client(address):
    reader, writer = await asyncio.open_connection(*address)
    seq = 0

    async def call(message):
        nonlocal seq
        seq += 1
        writer.write(_frame((seq, Call.NODE_HEARTBEAT.value, pickle.dumps((message,), protocol=pickle.HIGHEST_PROTOCOL))))
        return await _read(reader)
    return call


def measure_stream(way: str, calls: int, gap: float, message) -> tuple[float, float, float]:
    queue = mp.Queue()
    proc = mp.Process(target=serve, args=(way, queue), daemon=True)
    proc.start()
    address = queue.get(timeout=30)
    server = psutil.Process(proc.pid)

    async def main():
        if way == "channel":
            async def resolve():
                return (*address, KEY)
            call = Channel(resolve).method(Call.NODE_HEARTBEAT.value).remote
        else:
            call = await bare_client(address)
        await drive(call, 50, gap, message)                      # connected and warm
        s0, c0 = sum(server.cpu_times()[:2]), time.process_time()
        trips = await drive(call, calls, gap, message)
        return sum(server.cpu_times()[:2]) - s0, time.process_time() - c0, trips
    try:
        server_cpu, client_cpu, trips = asyncio.run(main())
    finally:
        proc.kill()
    return 1e6 * server_cpu / calls, 1e6 * client_cpu / calls, 1e3 * statistics.median(trips)


def measure_ray(calls: int, gap: float, message) -> tuple[float, float, float]:
    import ray  # noqa: PLC0415

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        @ray.remote(num_cpus=0, max_concurrency=1000)
        class EchoActor:
            async def node_heartbeat(self, beats):
                return beats

            async def pid(self):
                return os.getpid()

        actor = EchoActor.remote()
        server = psutil.Process(ray.get(actor.pid.remote()))

        async def call(m):
            return await actor.node_heartbeat.remote(m)

        async def main():
            await drive(call, 50, gap, message)
            s0, c0 = sum(server.cpu_times()[:2]), time.process_time()
            trips = await drive(call, calls, gap, message)
            return sum(server.cpu_times()[:2]) - s0, time.process_time() - c0, trips
        server_cpu, client_cpu, trips = asyncio.run(main())
    finally:
        ray.shutdown()
    return 1e6 * server_cpu / calls, 1e6 * client_cpu / calls, 1e3 * statistics.median(trips)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--gap", type=float, default=0.002, help="wall seconds between calls")
    ap.add_argument("--ways", default="ray,channel,bare")
    args = ap.parse_args()
    message = [(f"m{i:04d}", i, 1.5, "RUNNING", 100 + i) for i in range(20)]
    print(f"{args.calls} calls, {args.gap * 1e3:g} ms apart, "
          f"{len(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))} bytes pickled each")
    print("| way | server CPU µs/call | client CPU µs/call | round trip p50 ms |")
    print("|---|---|---|---|")
    for way in args.ways.split(","):
        server, client, trip = (measure_ray if way == "ray" else
                                lambda *a: measure_stream(way, *a))(args.calls, args.gap, message)
        print(f"| {way} | {server:.0f} | {client:.0f} | {trip:.2f} |", flush=True)


if __name__ == "__main__":
    main()
