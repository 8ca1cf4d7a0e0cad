"""logd under concurrent HTTP load: N keep-alive clients, 80% get / 20% single-item patch, for a bounded time.

``--patch-share`` changes the mix (0: gets only, the read path's ceiling; 1: patches only).

``retain logd serve --http`` runs as a child process on a loopback port over a store of ITEMS jobs.
Client processes (``--processes``, asyncio, one plain HTTP/1.1 keep-alive connection per client) share the
N clients between them; each client sends one request, waits for its answer, sends the next, until the
run's time is up. Each N (50, then 200) runs ``--seconds`` (default 10).

Baseline, same run, same client code: the same HTTP stack (uvicorn + starlette, the same h11 protocol)
answering every POST with a fixed JSON document and no store -- the ceiling the transport and the
clients allow on this machine. ``ratio_50`` = logd's req/s / the baseline's at 50 clients.

Where the time goes: the server's and the clients' CPU seconds per request (from /proc), beside the
wall time; the machine is shared, so the figures are noisy -- compare within one run.

A big document: ``probe_max_ms_big_doc`` is the longest 1-record ``get`` of a second
client on the stream socket while one client sends a 3 MiB JSON document (a patch of a list of 1.6 million
zeros) and waits for its answer; the target is under 250 ms (9 s when the event loop loaded documents).

Run: python3 dev.py bench logd_load [--seconds 10] [--clients 50,200] [--processes 2] [--synchronous full]
     [--patch-share 0.2]
Prints a table, then one JSON line: {"rps_50", "p99_ms_50", "rps_200", "p99_ms_200", "baseline_rps_50",
"ratio_50", "probe_max_ms_big_doc", ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ITEMS = 1_000
BASELINE_APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from retain.wire.http import _Guarded
ANSWER = b'{"result":{"get":{"commit":1,"value":{"status":"done","n":1}}}}\\n'
async def post(request):
    await request.body()
    return Response(ANSWER, media_type="application/json")
app = Starlette(routes=[Route("/", post, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False, lifespan="off",
            http=_Guarded)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SystemExit(f"the server exited: {child.stderr.read().decode() if child.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not start listening")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_process(port: int, clients: int, seconds: float, seed: int, patch_share: float,
                   out: multiprocessing.Queue) -> None:
    """Run ``clients`` keep-alive clients for ``seconds``; put (latencies in ms, errors, CPU seconds) on ``out``.

    Each client is a plain HTTP/1.1 keep-alive connection on asyncio streams (a request in one write; the
    answer read by its Content-Length): a few microseconds of client CPU per request, so the figures measure
    the server rather than a client library (httpx spent ~10 ms of CPU per request here)."""
    latencies: list[float] = []
    errors = 0

    async def one(client_id: int, deadline: float) -> None:
        nonlocal errors
        rng = random.Random(seed * 1000 + client_id)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline:
                item = rng.randrange(ITEMS)
                if rng.random() < patch_share:
                    body = {"patch": {"ops": [{"set": f"jobs.j{item}.status", "value": rng.choice(["done", "new"])}]}}
                else:
                    body = {"get": {"path": f"jobs.j{item}"}}
                data = json.dumps(body).encode()
                start = time.perf_counter()
                writer.write(b"POST / HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                await reader.readexactly(length)
                latencies.append((time.perf_counter() - start) * 1000)
                if not head.startswith(b"HTTP/1.1 200"):
                    errors += 1
        finally:
            writer.close()

    async def run() -> None:
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(one(index, deadline) for index in range(clients)))

    cpu = time.process_time()
    asyncio.run(run())
    out.put((latencies, errors, time.process_time() - cpu))


def load(port: int, server_pid: int, clients: int, seconds: float, processes: int,
         patch_share: float = 0.2) -> dict[str, float]:
    """N clients against the server on ``port`` for ``seconds``: req/s, p50/p99 ms, errors, server and client CPU per request."""
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = context.Queue()
    shares = [clients // processes + (index < clients % processes) for index in range(processes)]
    workers = [context.Process(target=client_process, args=(port, share, seconds, index, patch_share, out))
               for index, share in enumerate(shares) if share]
    server_cpu = cpu_seconds(server_pid)
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    results = [out.get(timeout=seconds + 120) for _ in workers]
    wall = time.perf_counter() - started
    for worker in workers:
        worker.join(timeout=60)
    server_cpu = cpu_seconds(server_pid) - server_cpu
    latencies = sorted(latency for result in results for latency in result[0])
    count = len(latencies)
    return {
        "rps": count / seconds,
        "p50_ms": latencies[count // 2] if count else float("nan"),
        "p99_ms": latencies[min(count - 1, int(count * 0.99))] if count else float("nan"),
        "errors": sum(result[1] for result in results),
        "server_cpu_ms": 1000 * server_cpu / max(count, 1),
        "client_cpu_ms": 1000 * sum(result[2] for result in results) / max(count, 1),
        "wall_s": wall,
    }


def probe_big_doc(port: int) -> tuple[float, int]:
    """The longest 1-record get (ms) of a client on the stream socket while another sends a 3 MiB JSON document
    and waits for its answer; and how many probes ran meanwhile."""
    from retain.logd import Client
    from retain.wire.framing import END, Framer

    document = json.dumps({"patch": {"ops": [{"set": "big", "value": [0] * 1_600_000}]}}, separators=(",", ":"))
    data = document.encode() + b"\n" + END

    def attack() -> None:
        framer, found = Framer(1 << 25), []
        with socket.create_connection(("127.0.0.1", port), timeout=300) as raw:
            raw.sendall(data)
            while not found:
                chunk = raw.recv(65536)
                if not chunk:
                    raise SystemExit("logd closed the big document's connection")
                found.extend(framer.feed(chunk))

    attacker = threading.Thread(target=attack, daemon=True)
    longest, probes = 0.0, 0
    with Client(("127.0.0.1", port), timeout=300) as probe:
        probe.get("jobs.j1")
        attacker.start()
        while attacker.is_alive():
            start = time.perf_counter()
            probe.get("jobs.j1")
            longest, probes = max(longest, time.perf_counter() - start), probes + 1
    attacker.join()
    return 1000 * longest, probes


def start_logd(directory: Path, synchronous: str) -> tuple[subprocess.Popen[bytes], int, int]:
    from retain.logd import Store
    from retain.logd.settings import Settings

    db = directory / "logd.sqlite3"
    with Store.open(str(db), settings=Settings(synchronous="normal")) as store:
        store.session().patch([{"set": "jobs", "value": {f"j{i}": {"status": "new", "n": i, "updatedAt":
                                                                   "2026-09-11T07:00:00Z"} for i in range(ITEMS)}}])
    http, stream = free_port(), free_port()
    child = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                              "--db", str(db), "--listen", f"127.0.0.1:{stream}", "--http", f"127.0.0.1:{http}",
                              "--synchronous", synchronous], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_listening(http, child)
    wait_listening(stream, child)
    return child, http, stream


def start_baseline() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    child = subprocess.Popen([sys.executable, "-c", BASELINE_APP, str(port)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    wait_listening(port, child)
    return child, port


def stop(child: subprocess.Popen[bytes]) -> None:
    child.terminate()
    child.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each run lasts")
    parser.add_argument("--clients", default="50,200", help="client counts, comma-separated (50 and 200 name keys)")
    parser.add_argument("--processes", type=int, default=2, help="client processes sharing the clients")
    parser.add_argument("--synchronous", default="full", choices=["off", "normal", "full", "extra"],
                        help="the served store's storage.synchronous")
    parser.add_argument("--patch-share", type=float, default=0.2,
                        help="the share of requests that are patches (the rest are gets)")
    options = parser.parse_args()
    if not 0 <= options.patch_share <= 1:
        parser.error(f"--patch-share is a share of the requests, from 0 to 1 (got {options.patch_share:g})")
    counts = [int(text) for text in options.clients.split(",")]
    figures: dict[str, float] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="retain-bench-") as directory:
        logd, logd_port, stream_port = start_logd(Path(directory), options.synchronous)
        try:
            for clients in counts:
                result = load(logd_port, logd.pid, clients, options.seconds, options.processes,
                              options.patch_share)
                rows.append(("logd", clients, result))
                figures[f"rps_{clients}"] = round(result["rps"], 1)
                figures[f"p99_ms_{clients}"] = round(result["p99_ms"], 1)
                figures[f"p50_ms_{clients}"] = round(result["p50_ms"], 1)
                figures[f"errors_{clients}"] = result["errors"]
                figures[f"server_cpu_ms_per_request_{clients}"] = round(result["server_cpu_ms"], 3)
                figures[f"client_cpu_ms_per_request_{clients}"] = round(result["client_cpu_ms"], 3)
            probe_ms, probes = probe_big_doc(stream_port)
            figures["probe_max_ms_big_doc"] = round(probe_ms, 1)
            figures["probes_big_doc"] = probes
        finally:
            stop(logd)
        baseline, baseline_port = start_baseline()
        try:
            clients = counts[0]
            result = load(baseline_port, baseline.pid, clients, options.seconds,
                          options.processes)
            rows.append(("baseline (HTTP stack, no store)", clients, result))
            figures[f"baseline_rps_{clients}"] = round(result["rps"], 1)
            figures[f"baseline_p99_ms_{clients}"] = round(result["p99_ms"], 1)
            figures[f"baseline_server_cpu_ms_per_request_{clients}"] = round(result["server_cpu_ms"], 3)
            figures[f"ratio_{clients}"] = round(figures[f"rps_{clients}"] / max(result["rps"], 1e-9), 3)
        finally:
            stop(baseline)
    print(f"{'server':34} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} "
          f"{'srv cpu ms/req':>14} {'cli cpu ms/req':>14}")
    for name, clients, result in rows:
        print(f"{name:34} {clients:>7} {result['rps']:>8.1f} {result['p50_ms']:>8.1f} {result['p99_ms']:>8.1f} "
              f"{result['errors']:>6} {result['server_cpu_ms']:>14.3f} {result['client_cpu_ms']:>14.3f}")
    print(f"{options.seconds:g} s per run, {options.processes} client processes, storage.synchronous="
          f"{options.synchronous}, {options.patch_share:.0%} patches; the machine is shared: figures are noisy")
    print(f"longest 1-record get while another client sends 3 MiB of JSON: {figures['probe_max_ms_big_doc']} ms "
          f"({figures['probes_big_doc']} probes)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
