"""The cost of the Ray Serve tier on this machine: ``python -m bench.tier [--calls 200]``.

Starts a local Ray (2 logical CPUs), deploys the application with the packaged models
(the LLM batched), and prints: Ray's start time, the deployment's time until every replica
is running, the hop of a request through a deployment handle (a method that does no model
work, P50/P95), the embedder's latency in-process vs through the tier, and the resident
memory of the processes of the local cluster. Stops Ray at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import ray
from ray import serve

from serve.embed_minilm import MiniLMEmbedder
from serve.registry import ModelSpec
from serve.scale import cluster
from serve.scale.client import RayEmbedder
from serve.scale.deployments import DEPLOYMENT_NAMES
from serve.scale.settings import TierSettings


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def descendants_rss_mib(root: int) -> tuple[int, float]:
    """How many processes descend from ``root``, and their resident memory (MiB)."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            status = (entry / "status").read_text()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
        rss[int(entry.name)] = int(line.split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return len(found), sum(rss.get(pid, 0) for pid in found) / 1024


def line(name: str, values: list[float]) -> str:
    return (
        f"{name:34s} P50 {statistics.median(values):7.2f} ms  P95 {pct(values, 0.95):7.2f} ms"
        f"  (n={len(values)})"
    )


async def main(calls: int) -> None:
    tier = TierSettings(backend="ray")
    started = time.monotonic()
    cluster.connect(tier)
    print(f"ray start (local, 2 CPUs)          {time.monotonic() - started:6.1f} s", flush=True)
    try:
        started = time.monotonic()
        cluster.deploy(ModelSpec(llm="llama-cpp-batched"), tier)
        kinds = ", ".join(DEPLOYMENT_NAMES.values())
        print(f"deploy ({kinds}) {time.monotonic() - started:6.1f} s", flush=True)
        handle = serve.get_deployment_handle("Embedder", tier.app_name)
        hops = []
        for _ in range(calls):
            begun = time.monotonic()
            await handle.metrics.remote()
            hops.append((time.monotonic() - begun) * 1000)
        print(line("hop (handle -> replica -> back)", hops))
        remote = RayEmbedder(app_name=tier.app_name)
        local = MiniLMEmbedder(threads=1)
        for embedder in (local, remote):
            await embedder.load()
            await embedder.warm()
            times = []
            for i in range(calls // 4):
                begun = time.monotonic()
                await embedder.embed([f"where is my order number {i}"])
                times.append((time.monotonic() - begun) * 1000)
            where = "through the tier" if embedder is remote else "in-process"
            print(line(f"embed one sentence, {where}", times))
        count, mib = descendants_rss_mib(os.getpid())
        print(f"local cluster: {count} processes, {mib:.0f} MiB resident (models loaded)")
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(main(parser.parse_args().calls))
