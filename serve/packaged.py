"""Models whose weights ship inside Python packages: nothing is fetched from a model hub."""

from __future__ import annotations

import os


def hub_offline() -> None:
    """Keep Hugging Face libraries (faster-whisper, sentence-transformers) off the network.

    Called by every loader that uses one; a deployment that does want a hub sets
    ``HF_HUB_OFFLINE=0`` itself.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
