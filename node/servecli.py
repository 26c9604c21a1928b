"""``switchboard serve deploy | status | shutdown``: the model tier on a Ray cluster."""

from __future__ import annotations

import sys

from node.settings import Settings


def run_serve(settings: Settings, command: str) -> int:
    """Run one ``serve`` subcommand against ``settings.tier``; 0 on success."""
    tier = settings.tier
    if tier.address is None:
        print(
            "switchboard: serve needs a running Ray cluster: --address or "
            "SWITCHBOARD_TIER__ADDRESS (e.g. 127.0.0.1:6380 after `ray start --head`); "
            "a node with no address starts a Ray of its own",
            file=sys.stderr,
        )
        return 2
    from serve.scale import cluster  # noqa: PLC0415 - Ray only for this command
    from serve.scale.load import load_board  # noqa: PLC0415

    cluster.connect(tier)
    if command == "deploy":
        try:
            cluster.deploy(settings.models, tier)
        except cluster.DeployError as exc:
            print(f"switchboard: {exc}", file=sys.stderr)
            return 1
        print(f"deployed {tier.app_name} on {tier.address}")
        command = "status"
    if command == "status":
        deployments = cluster.status(tier)
        if deployments is None:
            print(f"{tier.app_name}: not deployed")
            return 1
        for dep in deployments.values():
            replicas = ", ".join(f"{n} {state.lower()}" for state, n in dep.replicas.items())
            print(f"{dep.name:10s} {dep.status:10s} {replicas}")
        import ray  # noqa: PLC0415

        totals = ray.get(load_board(tier).totals.remote(tier.report_stale_s))
        print(
            "nodes reporting {:g}, calls in flight {:g}, call queue {:g}".format(
                totals["nodes_reporting"], totals["calls_in_flight"], totals["call_queue_depth"]
            )
        )
        return 0
    if command == "shutdown":
        if cluster.shutdown(tier):
            print(f"{tier.app_name}: deleted")
            return 0
        print(f"{tier.app_name}: not deployed")
        return 1
    raise ValueError(f"unknown serve command {command!r}")
