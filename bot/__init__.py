"""The voice bot: per-call conversation pipeline, profiles, settings and the CLI.

Depends on telephony/ (calls as PCM frames) and serve/ (models); neither knows about it.
"""
