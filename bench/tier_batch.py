"""Batching across calls on the tier: ``python -m bench.tier_batch [--kind embedder|asr]``.

Starts a local Ray (2 logical CPUs), deploys one deployment alone (one replica): the
embedder (``--kind embedder``, the default) or ASR (``--kind asr``), and sends ``--rounds``
rounds of ``--concurrent`` requests at once (as that many calls' lookups, or utterances,
landing together), first with ``max_batch_size=1`` (each request its own model pass), then
with ``--batch`` (the requests of a round share passes). The embedder gets one sentence a
request; ASR one of eight questions said by flite at 8 kHz (1.2-2.6 s each). Prints
requests/s and the P50/P95 latency of each. Stops Ray at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ray
from ray import serve

from serve.registry import ModelSpec
from serve.scale import cluster
from serve.scale.client import RayASR, RayEmbedder
from serve.scale.deployments import ASRDeployment, EmbedderDeployment, deployment_options
from serve.scale.settings import DeploymentSettings, TierSettings

QUESTIONS = (
    "Where is my order?",
    "How much does delivery cost?",
    "Can I pay with PayPal?",
    "I want to return a chair I bought last week.",
    "Do you ship to Canada?",
    "What are your opening hours?",
    "Can I talk to a person please?",
    "My parcel arrived damaged.",
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def requester(kind: str, tier: TierSettings) -> Callable[[int], Awaitable[Any]]:
    """Deploy ``kind`` alone and return a function that sends request ``i`` to it."""
    options = deployment_options(kind, tier)
    cls: Any = ASRDeployment if kind == "asr" else EmbedderDeployment
    app = serve.deployment(**options)(cls).bind(ModelSpec().model_dump(), tier.model_dump())
    serve.run(app, name=tier.app_name, route_prefix=None)
    if kind == "asr":
        from testkit.voices import speak  # noqa: PLC0415 - flite, only for this bench

        said = [speak(q, voice="slt") for q in QUESTIONS]
        asr = RayASR(app_name=tier.app_name, timeout_s=60.0)
        await asr.load()
        await asr.transcribe(said[0], 8000)
        return lambda i: asr.transcribe(said[i % len(said)], 8000)
    embedder = RayEmbedder(app_name=tier.app_name, timeout_s=30.0)
    await embedder.load()
    await embedder.embed(["warm up"])
    return lambda i: embedder.embed([f"where is my order number {i}, it was due on monday"])


async def measure(
    kind: str, tier: TierSettings, concurrent: int, rounds: int
) -> tuple[float, list[float]]:
    send = await requester(kind, tier)
    latencies: list[float] = []

    async def one(i: int) -> None:
        begun = time.monotonic()
        await send(i)
        latencies.append((time.monotonic() - begun) * 1000)

    started = time.monotonic()
    for r in range(rounds):
        await asyncio.gather(*(one(r * concurrent + i) for i in range(concurrent)))
    elapsed = time.monotonic() - started
    serve.delete(tier.app_name)
    return concurrent * rounds / elapsed, latencies


async def main(kind: str, concurrent: int, rounds: int, batch: int, wait_s: float) -> None:
    base = TierSettings(backend="ray")
    cluster.connect(base)
    try:
        for size in (1, batch):
            deployment = DeploymentSettings(
                min_replicas=1,
                max_replicas=1,
                max_ongoing_requests=max(concurrent, 4),
                max_queued_requests=4 * concurrent,
                max_batch_size=size,
                batch_wait_timeout_s=wait_s if size > 1 else 0.0,
            )
            tier = base.model_copy(update={kind: deployment})
            rate, ms = await measure(kind, tier, concurrent, rounds)
            print(
                f"{kind}, {concurrent} at once, max_batch_size {size:3d}: {rate:7.1f} req/s"
                f"  P50 {statistics.median(ms):7.1f} ms  P95 {pct(ms, 0.95):7.1f} ms"
                f"  (n={len(ms)})",
                flush=True,
            )
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("embedder", "asr"), default="embedder")
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--wait-s", type=float, default=0.002)
    args = parser.parse_args()
    asyncio.run(main(args.kind, args.concurrent, args.rounds, args.batch, args.wait_s))
