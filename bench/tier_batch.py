"""Batching across calls on the tier's embedder: ``python -m bench.tier_batch [--concurrent 8]``.

Starts a local Ray (2 logical CPUs), deploys the embedder deployment alone (one replica),
and sends ``--rounds`` rounds of ``--concurrent`` one-sentence requests at once (as that
many calls' lookups landing together), first with ``max_batch_size=1`` (each request its
own model pass), then with ``--batch`` (the requests of a round share passes). Prints
requests/s and the P50/P95 latency of each. Stops Ray at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import ray
from ray import serve

from serve.registry import ModelSpec
from serve.scale import cluster
from serve.scale.client import RayEmbedder
from serve.scale.deployments import EmbedderDeployment, deployment_options
from serve.scale.settings import DeploymentSettings, TierSettings


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(tier: TierSettings, concurrent: int, rounds: int) -> tuple[float, list[float]]:
    options = deployment_options("embedder", tier)
    app = serve.deployment(**options)(EmbedderDeployment).bind(
        ModelSpec().model_dump(), tier.model_dump()
    )
    serve.run(app, name=tier.app_name, route_prefix=None)
    embedder = RayEmbedder(app_name=tier.app_name, timeout_s=30.0)
    await embedder.load()
    await embedder.embed(["warm up"])
    latencies: list[float] = []

    async def one(i: int) -> None:
        begun = time.monotonic()
        await embedder.embed([f"where is my order number {i}, it was due on monday"])
        latencies.append((time.monotonic() - begun) * 1000)

    started = time.monotonic()
    for r in range(rounds):
        await asyncio.gather(*(one(r * concurrent + i) for i in range(concurrent)))
    elapsed = time.monotonic() - started
    serve.delete(tier.app_name)
    return concurrent * rounds / elapsed, latencies


async def main(concurrent: int, rounds: int, batch: int, wait_s: float) -> None:
    base = TierSettings(backend="ray")
    cluster.connect(base)
    try:
        for size in (1, batch):
            embedder = DeploymentSettings(
                min_replicas=1,
                max_replicas=1,
                max_ongoing_requests=max(concurrent, 4),
                max_queued_requests=4 * concurrent,
                max_batch_size=size,
                batch_wait_timeout_s=wait_s if size > 1 else 0.0,
            )
            tier = base.model_copy(update={"embedder": embedder})
            rate, ms = await measure(tier, concurrent, rounds)
            print(
                f"embed, {concurrent} at once, max_batch_size {size:3d}: {rate:7.1f} req/s"
                f"  P50 {statistics.median(ms):7.1f} ms  P95 {pct(ms, 0.95):7.1f} ms"
                f"  (n={len(ms)})",
                flush=True,
            )
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--wait-s", type=float, default=0.002)
    args = parser.parse_args()
    asyncio.run(main(args.concurrent, args.rounds, args.batch, args.wait_s))
