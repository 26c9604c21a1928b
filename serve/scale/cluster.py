"""Connecting to the tier: the Ray cluster, the application's deployment, status, shutdown.

Used by the node (``SWITCHBOARD_TIER__BACKEND=ray``) and by ``switchboard serve``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray import serve

from serve.asr_twopass import TwoPassASR
from serve.base import Provider
from serve.registry import ModelSet, ModelSpec, asr_backends, create_models
from serve.scale.client import RAY, register_ray_backends
from serve.scale.deployments import DEPLOYMENT_NAMES, build_app, kinds_of
from serve.scale.load import remove_board
from serve.scale.settings import TierSettings

log = logging.getLogger(__name__)

PUSH_INTERVAL_VARIABLE = "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S"


def connect(tier: TierSettings) -> bool:
    """Join the cluster at ``tier.address``, or start a local Ray when it is unset;
    True when this process started it (and ``ray.shutdown()`` stops it)."""
    if ray.is_initialized():
        return False
    # Workers of a Ray started here run this process's code (the same PYTHONPATH).
    env = {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HF_HUB_OFFLINE")}
    runtime_env = {"env_vars": env} if env else None
    if tier.address is None:
        # Read by Serve's processes at start: they inherit this process's environment.
        os.environ.setdefault(PUSH_INTERVAL_VARIABLE, f"{tier.metrics_push_s:g}")
        ray.init(
            num_cpus=tier.local_num_cpus,
            namespace=tier.namespace,
            include_dashboard=False,
            runtime_env=runtime_env,
            log_to_driver=False,
            # Ray runs its workers 15 steps nicer than the node by default: the replicas
            # answering live calls would wait behind every other process on the machine
            # (a second LLM replica took longer to start than a busy minute of calls).
            _system_config={"worker_niceness": 0},
        )
        return True
    # A cluster from `ray start` uses token authentication when a token exists (Ray 2.60's
    # default); a driver joining it sends the token only in token mode, which `ray.init`
    # does not turn on by itself: the same check `ray start` makes.
    from ray._private.authentication.authentication_token_setup import (  # noqa: PLC0415
        maybe_enable_token_auth_if_token_available,
    )

    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    ray.init(address=tier.address, namespace=tier.namespace, log_to_driver=False)
    return False


class DeployError(RuntimeError):
    """The application did not become ready: failed, or not within ``deploy_timeout_s``."""


def deploy(spec: ModelSpec, tier: TierSettings) -> None:
    """Deploy (or update) the application and wait until every replica is running."""
    serve.start(proxy_location="Disabled")
    # Serve's public ``run`` waits with no bound (a replica that cannot be placed waits
    # forever); its non-blocking form is ``_run(_blocking=False)``, then the status is read.
    serve._run(build_app(spec, tier), _blocking=False, name=tier.app_name, route_prefix=None)
    deadline = time.monotonic() + tier.deploy_timeout_s
    while True:
        app = serve.status().applications.get(tier.app_name)
        state = str(getattr(app.status, "value", app.status)) if app is not None else "NONE"
        if state == "RUNNING":
            return
        if state in ("DEPLOY_FAILED", "UNHEALTHY"):
            raise DeployError(f"{tier.app_name}: {state}: {app.message if app else ''}")
        if time.monotonic() > deadline:
            why = app.message if app is not None else ""
            raise DeployError(
                f"{tier.app_name} not running after {tier.deploy_timeout_s:g}s ({state}) {why}"
            )
        time.sleep(0.5)


@dataclass
class DeploymentStatus:
    name: str
    status: str
    #: Replicas by state (RUNNING, STARTING, STOPPING, ...).
    replicas: dict[str, int] = field(default_factory=dict)

    @property
    def running(self) -> int:
        return self.replicas.get("RUNNING", 0)


def status(tier: TierSettings) -> dict[str, DeploymentStatus] | None:
    """The application's deployments and their replicas; None when it is not deployed."""
    app = serve.status().applications.get(tier.app_name)
    if app is None:
        return None
    out = {}
    for name, dep in app.deployments.items():
        replicas = {str(getattr(k, "value", k)): int(v) for k, v in dep.replica_states.items()}
        out[name] = DeploymentStatus(name, str(getattr(dep.status, "value", dep.status)), replicas)
    return out


def shutdown(tier: TierSettings) -> bool:
    """Delete the application and the load board; False when it was not deployed."""
    deployed = tier.app_name in serve.status().applications
    if deployed:
        serve.delete(tier.app_name)
    remove_board(tier)
    return deployed


@dataclass
class Tier:
    """The node's connection to the tier: its models, and whether it owns the cluster."""

    models: ModelSet
    started_local: bool
    tier: TierSettings

    def close(self) -> None:
        """Leave the cluster; a Ray this node started stops with it (its application too)."""
        if self.started_local:
            serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


async def connect_tier(
    spec: ModelSpec, tier: TierSettings, *, progress: Callable[[str], None] | None = None
) -> Tier:
    """Connect (or start a local Ray), deploy when asked, and return the node's models:
    the ``ray`` backends of ASR, LLM, TTS and the embedder, and the VAD in-process (it
    runs on every 20 ms frame: no hop is cheap enough)."""
    started = time.monotonic()
    started_local = await asyncio.to_thread(connect, tier)
    if progress is not None:
        where = "started a local Ray" if started_local else f"joined Ray at {tier.address}"
        progress(f"model tier: {where} in {time.monotonic() - started:.1f}s")
    if tier.deploy or started_local:
        begun = time.monotonic()
        await asyncio.to_thread(deploy, spec, tier)
        if progress is not None:
            kinds = ", ".join(DEPLOYMENT_NAMES[k] for k in kinds_of(spec))
            progress(f"model tier: deployed {kinds} in {time.monotonic() - begun:.1f}s")
    # The tier's backends, chosen through the registry like the in-process ones; the VAD
    # stays the spec's own, in this process.
    register_ray_backends(tier.app_name, second_pass=has_second_pass(spec))
    remote = {"asr": RAY, "llm": RAY, "tts": RAY, "embedder": spec.embedder and RAY}
    models = create_models(spec.model_copy(update=remote))
    providers: list[Provider | None] = [
        models.vad,
        models.asr,
        models.embedder,
        models.llm,
        models.tts,
    ]
    for provider in providers:
        if provider is not None:
            await provider.load()
            await provider.warm()
    return Tier(models=models, started_local=started_local, tier=tier)


def has_second_pass(spec: ModelSpec) -> bool:
    """Whether ``spec``'s recognizer, as the ASR deployment builds it, has a second pass
    (built, not loaded: no model is read)."""
    return isinstance(asr_backends.create(spec.asr, spec), TwoPassASR)


def replica_actor_names(tier: TierSettings, kind: str) -> list[str]:
    """The Ray actor names of ``kind``'s replicas (namespace ``serve``)."""
    prefix = f"SERVE_REPLICA::{tier.app_name}#{DEPLOYMENT_NAMES[kind]}#"
    names = ray.util.list_named_actors(all_namespaces=True)
    return sorted(a["name"] for a in names if str(a["name"]).startswith(prefix))


def kill_replica(tier: TierSettings, kind: str) -> str:
    """Kill one replica of ``kind`` as a crash would (Serve replaces it); its name."""
    names = replica_actor_names(tier, kind)
    if not names:
        raise LookupError(f"no running replica of {DEPLOYMENT_NAMES[kind]}")
    actor: Any = ray.get_actor(names[0], namespace="serve")
    ray.kill(actor, no_restart=True)
    return names[0]
