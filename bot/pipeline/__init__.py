"""One call's conversation, as a pipeline of small processors exchanging typed frames.

TurnDetector -> Transcriber -> Router -> Responder -> Speaker -> CallControl, driven by
``CallSession`` (session.py). Every event is a frame (frames.py).
"""
