"""The voice bot: what happens inside a call.

- ``pipeline/``: one call's conversation as small processors exchanging typed frames;
- ``intents/``: frequent questions answered from pre-computed audio;
- ``calllog/``: every call, turn and event, written to SQL and never lost;
- ``profile.py``: the operator's bot profile (greeting, prompts, intents, endpointing).

Depends on telephony/ (calls as PCM frames) and serve/ (models); neither knows about it.
Wired together by node/.
"""
