"""How long one intent lookup's embedding takes after the CPU did something else, or nothing.

    .venv/bin/python -m bench.embed_idle [--gaps 0,0.3,1.0] [--n 24]

In a running node, the pause's lookup embeds one short sentence some 100-300 ms after the
last model call of the call, and the previous turn's lookup was seconds before. On this
2-core virtual machine, the call log showed the lookup at 45-70 ms where the stack notes
measured MiniLM at 5-15 ms in a tight loop. This embeds short sentences through the node's
own ``MiniLMEmbedder`` (its thread setting, the shared pool, new words each time, so the
embedder's memo never answers), with ``--gaps`` seconds of idle between them (``spin``:
busy instead of asleep), and prints P50/P95 per gap: the time the lookup costs on a node
whose calls are far apart.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from serve.registry import ModelSpec, embedder_backends
from testkit.wire import percentile

SENTENCES = (
    "What do you charge for shipping?",
    "How can I return something I ordered?",
    "My package was damaged in the post.",
    "When does my money come back?",
)


async def measure(gaps: list[float], n: int, spin: bool) -> list[tuple[float, list[float]]]:
    embedder = embedder_backends.create("minilm", ModelSpec())
    await embedder.load()
    await embedder.warm()
    out: list[tuple[float, list[float]]] = []
    for gap in gaps:
        times: list[float] = []
        for i in range(n):
            if spin:
                until = time.perf_counter() + gap
                while time.perf_counter() < until:
                    pass
            else:
                await asyncio.sleep(gap)
            words = f"{SENTENCES[i % len(SENTENCES)]} ({gap} {i})"  # never the memo's
            started = time.perf_counter()
            await embedder.embed([words])
            times.append((time.perf_counter() - started) * 1000.0)
        out.append((gap, times))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gaps", default="0,0.3,1.0", help="seconds between lookups")
    parser.add_argument("--n", type=int, default=24, help="lookups per gap")
    parser.add_argument("--spin", action="store_true", help="busy between lookups, not idle")
    args = parser.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    results = asyncio.run(measure(gaps, args.n, args.spin))
    between = "busy" if args.spin else "idle"
    print(f"| gap ({between}) | n | P50 ms | P95 ms |")
    print("|---|---|---|---|")
    for gap, times in results:
        p50, p95 = percentile(times, 50), percentile(times, 95)
        print(f"| {gap:g} s | {len(times)} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
