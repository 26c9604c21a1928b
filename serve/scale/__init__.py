"""The model tier on Ray Serve: deployments, clients, the autoscaling policy, the cluster.

Only ``settings`` and ``policy`` are importable without Ray installed; the node imports the
rest only when ``SWITCHBOARD_TIER__BACKEND=ray``, so the embedded default never imports Ray.
"""
