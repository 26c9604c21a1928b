"""The answer evaluation: how the bot answers open questions end to end in-process.

Written questions (``questions.toml``: covered, uncovered, injection attempts, follow-ups,
each in a tuning or a held-out test split) go through the real Router, Responder and
AnswerGuard with the packaged models (``rig``), as text or as flite speech transcribed by the
bot's Whisper (``transcripts``); what the caller would hear is scored (``scoring``) and
counted per split (``summary``). ``bench.answer_eval`` is the command.
"""
