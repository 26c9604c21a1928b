"""Synthetic caller voices for tests and benchmarks (8 kHz PCM): the flite voices and WAV
files of ``switchboard dial`` (``node.dialcli``), the product's, used as they are."""

from __future__ import annotations

from node.dialcli import RATE, read_wav, speak, write_wav

__all__ = ["FLITE_VOICES", "RATE", "read_wav", "speak", "write_wav"]

#: flite's built-in voices, each a different speaker.
FLITE_VOICES = ("slt", "rms", "awb", "kal16")
