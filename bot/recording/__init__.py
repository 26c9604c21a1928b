"""Call recordings: both directions of a call in one WAV file, kept for a set time."""

from bot.recording.recorder import CallRecorder, RecordedCall, recording_path
from bot.recording.settings import RecordingSettings

__all__ = ["CallRecorder", "RecordedCall", "RecordingSettings", "recording_path"]
