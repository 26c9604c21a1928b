"""The intent cache: frequent questions answered with pre-computed audio.

``match`` scores a caller's words against the operator's intents, ``store`` keeps the
entries (in the process or in Redis), ``cache`` ties them together for the pipeline.
"""
