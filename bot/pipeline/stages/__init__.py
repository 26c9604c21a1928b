"""The call's stages, one job each, in ``CALL_STAGES`` order (``bot/pipeline/session.py``)."""
