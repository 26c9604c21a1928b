"""Settings of the model tier: in-process (the embedded default) or Ray Serve.

Composed by the node as ``SWITCHBOARD_TIER__<FIELD>`` (``SWITCHBOARD_TIER__LLM__MAX_REPLICAS``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The deployments of the application, by model kind.
KINDS = ("asr", "llm", "tts", "embedder")


class DeploymentSettings(BaseModel):
    """Sizing and overload limits of one deployment (one model kind)."""

    model_config = ConfigDict(extra="forbid")

    min_replicas: int = Field(1, ge=1, le=1000)
    max_replicas: int = Field(2, ge=1, le=1000)
    #: Requests one replica works on at once. The LLM's replica decodes this many
    #: conversations in one batch; speech models run on their replica's worker threads.
    max_ongoing_requests: int = Field(4, ge=1, le=1000)
    #: Requests waiting at a caller's handle beyond that; more are refused at once
    #: (``BackPressureError``), which the call hears as a filler and a retry, or the apology.
    max_queued_requests: int = Field(8, ge=0, le=100_000)
    #: Logical CPUs Ray reserves for each replica (fractions share a core). The CPU models
    #: pin their own threads (``ModelSpec.threads``); this only places replicas.
    num_cpus: float = Field(0.25, ge=0.0, le=256.0)
    num_gpus: float = Field(0.0, ge=0.0, le=64.0)
    #: Calls one replica serves before the policy asks for another (see docs/scaling.md).
    calls_per_replica: float = Field(4.0, gt=0.0)
    #: Requests of different calls one replica runs in one model pass (``@serve.batch``;
    #: the embedder and ASR, see docs/scaling.md), and how long the first waits for others
    #: (s). ``max_ongoing_requests`` bounds what can arrive together.
    max_batch_size: int = Field(16, ge=1, le=1024)
    batch_wait_timeout_s: float = Field(0.002, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _bounds(self) -> DeploymentSettings:
        if self.max_replicas < self.min_replicas:
            raise ValueError(
                f"max_replicas ({self.max_replicas}) is below min_replicas ({self.min_replicas})"
            )
        return self


class TierSettings(BaseModel):
    """Where the models run: in this process, or on a Ray Serve application."""

    model_config = ConfigDict(extra="forbid")

    #: ``in-process``: the models load in the node (the embedded default, no Ray).
    #: ``ray``: the node talks to the tier's deployments through Ray Serve handles.
    backend: Literal["in-process", "ray"] = "in-process"
    #: The Ray cluster (``ray://host:10001``, ``host:6379`` or ``auto``). Unset with
    #: ``backend=ray``: the node starts a local Ray of its own and deploys the application.
    address: str | None = None
    #: Deploy (or update) the application when the node starts; False: it must be running
    #: (``switchboard serve deploy``).
    deploy: bool = True
    #: Longest wait for the application's replicas to load their models and run (s).
    deploy_timeout_s: float = Field(300.0, gt=0.0)
    app_name: str = "switchboard"
    namespace: str = "switchboard"
    #: CPUs of a Ray started by the node or the tests (``address`` unset).
    local_num_cpus: int = Field(2, ge=1, le=1024)
    #: How often the node reports its calls in flight and queue depth to the tier (s).
    report_every_s: float = Field(1.0, gt=0.0, le=60.0)
    #: Seconds of no report after which a node's load no longer counts (a node gone).
    report_stale_s: float = Field(10.0, gt=0.0)
    #: Autoscaling reaction times: up quickly (a caller is waiting), down slowly.
    upscale_delay_s: float = Field(2.0, ge=0.0)
    downscale_delay_s: float = Field(30.0, ge=0.0)
    #: The window the policy's inputs are taken over (their largest value in it: a burst
    #: of calls scales up at once, a lull must last the window before it scales down).
    #: Serve wants it longer than its 10 s metrics interval.
    look_back_s: float = Field(12.0, gt=10.0)
    #: How often replicas push their metrics to Serve's controller (s), for a Ray this
    #: process starts (``RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S``; on a
    #: cluster, set that variable where ``ray start`` runs).
    metrics_push_s: float = Field(1.0, gt=0.0, le=60.0)
    health_check_period_s: float = Field(5.0, gt=0.0)
    health_check_timeout_s: float = Field(10.0, gt=0.0)
    asr: DeploymentSettings = DeploymentSettings()
    llm: DeploymentSettings = DeploymentSettings(
        max_ongoing_requests=8, num_cpus=0.5, calls_per_replica=8.0
    )
    tts: DeploymentSettings = DeploymentSettings()
    embedder: DeploymentSettings = DeploymentSettings(calls_per_replica=16.0)

    def deployment(self, kind: str) -> DeploymentSettings:
        """The settings of ``kind``'s deployment (one of ``KINDS``)."""
        if kind not in KINDS:
            raise ValueError(f"unknown deployment {kind!r}; known: {', '.join(KINDS)}")
        settings: DeploymentSettings = getattr(self, kind)
        return settings
