"""The intent cache's evaluation: labelled utterances (``eval_sets``), the profile's intents
as the cache holds them (``profile_index``), what the matcher decides on each
(``outcomes``, ``prefixes``), the threshold sweep (``sweep``), the ASR transcript cache
(``transcripts``) and what a lookup costs (``lookup_cost``).

``python -m bench.intent_eval`` runs it; the data is the benchmark's (``bench/intent_eval/``).
"""
