"""How well the intent cache matches: paraphrases of the intents and utterances that must not
match, in a tuning split and a held-out test split.

    .venv/bin/python -m bench.intent_eval [--asr] [--sweep] [--profile PATH]

Data (this folder), one folder per split, each with ``paraphrases.toml`` (per intent) and
``negatives.txt`` (other requests, near-misses and chit-chat):

- ``tuning/``: the thresholds are chosen on it (``--sweep``), and it may be read to see
  which wordings the profile's examples lack.
- ``test/``: held out. Nothing is chosen on it; it is only reported.

No utterance of either split is a profile example or negative, and the splits share none
(``load_eval_sets`` checks, after normalization). With ``--asr`` each utterance is first
spoken by a flite voice at 8 kHz and transcribed by the bot's own ASR configuration, as on a
call; the transcripts are cached in ``asr_transcripts.json`` under a key of everything they
depend on (``AsrSetup``). The evaluation itself is ``testkit.intent_eval``'s.
"""
