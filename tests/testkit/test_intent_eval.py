"""The intent evaluation's data (split sizes, held out from the profile and from each other)
and its machinery (the sweep decides as the matcher does, the transcript cache keys)."""

from __future__ import annotations

import difflib
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from bot.intents.background import background_lines
from bot.intents.match import IntentIndex, IntentMatchingConfig, IntentVectors, normalize
from bot.profile import DEFAULT_PROFILE, load_profile
from testkit.intent_eval.eval_sets import (
    DATA,
    MIN_TEST_INTENTS,
    MIN_TEST_NEGATIVES,
    MIN_TEST_PER_INTENT,
    load_eval_sets,
    read_split,
)
from testkit.intent_eval.outcomes import evaluate, ranking
from testkit.intent_eval.prefixes import evaluate_prefixes, word_prefixes
from testkit.intent_eval.sweep import choose, sweep
from testkit.intent_eval.transcripts import (
    AsrSetup,
    read_transcripts,
    voice_keys,
    write_transcripts,
)
from tests.bot.intent_fakes import WordsEmbedder


def test_the_test_split_is_large_enough() -> None:
    test = read_split("test")
    per_intent = test.per_intent()
    big = [n for n, count in per_intent.items() if count >= MIN_TEST_PER_INTENT]
    assert len(big) >= MIN_TEST_INTENTS, per_intent
    assert len(test.negatives) >= MIN_TEST_NEGATIVES


def test_the_tuning_split_covers_every_intent_of_the_default_profile() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    tuning = read_split("tuning")
    assert {i.name for i in profile.intents} <= set(tuning.per_intent())
    assert len(tuning.negatives) >= MIN_TEST_NEGATIVES


def test_splits_are_held_out_from_the_profile_and_from_each_other() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    sets = load_eval_sets(profile)  # raises on a leak or an utterance in both splits
    tuning = {normalize(t) for t, _ in sets["tuning"].items}
    test = {normalize(t) for t, _ in sets["test"].items}
    assert not tuning & test
    texts = {normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)}
    assert not texts & (tuning | test)


def test_no_profile_text_is_a_near_copy_of_a_test_utterance() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    texts = [normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)]
    close = [
        (said, text)
        for said in (normalize(t) for t, _ in read_split("test").items)
        for text in texts
        if difflib.SequenceMatcher(None, said, text).ratio() >= 0.9
    ]
    assert not close


def test_no_background_line_is_a_near_copy_of_a_held_out_utterance() -> None:
    """The background lines apply to every profile: one copied from a test split would make
    that split's figures optimistic."""
    lines = [normalize(t) for t in background_lines()]
    held_out = [t for t, _ in read_split("test").items]
    dental = DATA / "new_profiles" / "harbor_dental"
    held_out += [t for t, _ in read_split("test", dental).items]
    close = [
        (said, line)
        for said in (normalize(t) for t in held_out)
        for line in lines
        if difflib.SequenceMatcher(None, said, line).ratio() >= 0.9
    ]
    assert not close


def test_leaks_and_overlaps_are_refused(tmp_path: Path) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    example = profile.intents[0].examples[0]
    for split in ("tuning", "test"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "negatives.txt").write_text("# none\nIs it raining?\n")
        (tmp_path / split / "paraphrases.toml").write_text("")
    with pytest.raises(ValueError, match="in both"):
        load_eval_sets(profile, tmp_path)
    (tmp_path / "test" / "negatives.txt").write_text(f"{example.upper()}\n")
    with pytest.raises(ValueError, match="in the profile"):
        load_eval_sets(profile, tmp_path)


def test_paraphrases_of_an_intent_the_profile_lacks_are_negatives(tmp_path: Path) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    for split, text in (("tuning", "Sing me a song."), ("test", "Sing a song for me.")):
        (tmp_path / split).mkdir()
        (tmp_path / split / "negatives.txt").write_text("")
        (tmp_path / split / "paraphrases.toml").write_text(f'karaoke = ["{text}"]\n')
    absent: list[str] = []
    sets = load_eval_sets(profile, tmp_path, absent=absent)
    assert absent == ["karaoke"]
    assert sets["test"].items == [("Sing a song for me.", None)]


def index_and_items() -> tuple[IntentIndex, list[tuple[str, str | None]], np.ndarray]:
    rng = np.random.default_rng(7)

    def unit(n: int) -> np.ndarray:
        v = rng.normal(size=(n, 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    intents = [
        IntentVectors(name, tuple(f"{name} {i}" for i in range(6)), ("no", "nay"), unit(6), unit(2))
        for name in ("a", "b", "c")
    ]
    intents[2] = IntentVectors(
        "c",
        intents[2].examples,
        (),
        intents[2].example_vectors,
        np.zeros((0, 8), np.float32),
        action="hangup",
    )
    index = IntentIndex(intents)
    # Queries near an example of their intent, and random ones that must not match.
    items: list[tuple[str, str | None]] = []
    vectors = []
    for n, intent in enumerate(intents):
        for i in range(5):
            v = intent.example_vectors[i] + rng.normal(scale=0.5 + 0.1 * n, size=8)
            items.append((f"q{n}{i}", intent.name))
            vectors.append(v / np.linalg.norm(v))
    for i, v in enumerate(unit(12)):
        items.append((f"r{i}", None))
        vectors.append(v)
    items.append(("a 0", "a"))  # an exact match
    vectors.append(unit(1)[0])
    return index, items, np.asarray(vectors, dtype=np.float32)


def test_the_sweep_decides_as_the_matcher_does() -> None:
    index, items, vectors = index_and_items()
    cells = sweep(index, [(items, vectors)], top_ks=(1, 3), calibrations=(0.0, 0.5))
    rng = np.random.default_rng(1)
    for n in rng.choice(len(cells), size=40, replace=False):
        cell = cells[int(n)]
        out = evaluate(index, items, vectors, cell.rule)
        assert (cell.correct[0], cell.false_accepts[0]) == (out.correct, out.false_accepts)
    assert any(c.total_correct for c in cells) and any(c.total_false_accepts for c in cells)


def test_ranking_counts_the_nearest_intent_and_the_best_single_threshold() -> None:
    def unit(*v: float) -> np.ndarray:
        a = np.asarray(v, dtype=np.float32)
        return a / np.linalg.norm(a)

    none = np.zeros((0, 3), np.float32)
    index = IntentIndex(
        [
            IntentVectors("a", ("a",), (), unit(1, 0, 0)[None, :], none),
            IntentVectors("b", ("b",), (), unit(0, 1, 0)[None, :], none),
        ]
    )
    items: list[tuple[str, str | None]] = [
        ("close to a", "a"),  # score 0.99: above every negative
        ("loosely a", "a"),  # score 0.8: below the best negative (0.9)
        ("nearer b than a", "a"),  # the nearest intent is wrong
        ("a near-miss", None),  # 0.9 for a
        ("far away", None),
    ]
    vectors = np.asarray(
        [
            unit(0.99, np.sqrt(1 - 0.99**2), 0),
            unit(0.8, 0, 0.6),
            unit(0.3, 0.9, 0.3),
            unit(0.9, 0, np.sqrt(1 - 0.81)),
            unit(0, 0, 1),
        ]
    )
    found = ranking(index, items, vectors, top_k=1)
    assert found.nearest_right == pytest.approx(2 / 3)
    assert found.one_threshold == pytest.approx(1 / 3)


def test_choose_wants_no_false_accept_then_accuracy_then_strictness() -> None:
    index, items, vectors = index_and_items()
    cells = sweep(index, [(items, vectors)], top_ks=(2,), calibrations=(0.0,))
    best = choose(cells)
    assert best is not None and best.total_false_accepts == 0
    safe = [c for c in cells if c.total_false_accepts == 0]
    assert best.total_correct == max(c.total_correct for c in safe)
    ties = [c for c in safe if c.total_correct == best.total_correct]
    assert best.rule.threshold == max(c.rule.threshold for c in ties)


def test_transcripts_are_keyed_by_everything_they_depend_on(tmp_path: Path) -> None:
    base = AsrSetup(
        backend="whisper-window", description="whisper tiny.en", sources="s1", versions="v1"
    )
    variants = [
        AsrSetup("whisper", "whisper tiny.en", "s1", "v1"),
        AsrSetup("whisper-window", "whisper tiny.en, 10 s window", "s1", "v1"),
        AsrSetup("whisper-window", "whisper tiny.en", "s2", "v1"),
        AsrSetup("whisper-window", "whisper tiny.en", "s1", "v2"),
        AsrSetup("whisper-window", "whisper tiny.en", "s1", "v1", sample_rate=16000),
        AsrSetup("whisper-window", "whisper tiny.en", "s1", "v1", prompt="Acme"),
    ]
    keys = {base.key, *(v.key for v in variants)}
    assert len(keys) == len(variants) + 1
    # The cache drops a setup of older code that the new one supersedes (the same setup
    # but for the code, every transcript made again), and keeps another backend's (the
    # second recognizer of a two-pass run, written in turn with the first), an older
    # setup of other settings (another profile's vocabulary) and one with transcripts the
    # new one lacks (another split): the decisions bench still reads those.
    path = tmp_path / "t.json"
    second = AsrSetup("whisper-base-window", "whisper base", "s9", "v1")
    other_prompt = AsrSetup("whisper-window", "whisper tiny.en", "s2", "v1", prompt="Acme")
    more = AsrSetup("whisper-window", "whisper tiny.en", "s3", "v1")
    known = {
        base.key: {"setup": asdict(base), "transcripts": {"slt|Hi": "hi"}},
        variants[2].key: {"setup": asdict(variants[2]), "transcripts": {"slt|Hi": "high"}},
        second.key: {"setup": asdict(second), "transcripts": {"slt|Hi": "hi"}},
        other_prompt.key: {"setup": asdict(other_prompt), "transcripts": {"slt|Hi": "hi"}},
        more.key: {"setup": asdict(more), "transcripts": {"slt|Hi": "hi", "rms|Yo": "yo"}},
    }
    write_transcripts(path, known, base)
    assert sorted(read_transcripts(path)) == sorted(
        [base.key, second.key, other_prompt.key, more.key]
    )


def test_voices_take_turns_within_a_split() -> None:
    items: list[tuple[str, str | None]] = [(t, None) for t in ("a", "b", "c", "d", "e")]
    keys = voice_keys(items)
    assert [k.split("|")[0] for k in keys] == ["slt", "rms", "awb", "kal16", "slt"]
    assert len(set(keys)) == 5


def test_espeak_voices_take_turns_under_keys_of_their_own() -> None:
    items: list[tuple[str, str | None]] = [(t, None) for t in ("a", "b|c", "d", "e")]
    keys = voice_keys(items, "espeak")
    assert keys == [
        "espeak:en-us|a",
        "espeak:en-gb+f3|b|c",
        "espeak:en-gb-scotland|d",
        "espeak:en-us|e",
    ]
    assert not set(keys) & set(voice_keys(items))


def test_word_prefixes_are_every_proper_start_of_two_words_or_more() -> None:
    items: list[tuple[str, str | None]] = [("Where is my order?", "order_status"), ("Hi", None)]
    assert word_prefixes(items) == [
        ("Where is", "Where is my order?", "order_status"),
        ("Where is my", "Where is my order?", "order_status"),
    ]


async def test_partial_utterances_count_own_wrong_and_false_accepts() -> None:
    embedder = WordsEmbedder()
    await embedder.load()
    examples = {"hours": ("when are you open",), "person": ("talk to a person",)}
    intents = []
    for name, texts in examples.items():
        vectors = await embedder.embed(list(texts))
        empty = np.zeros((0, vectors.shape[1]), np.float32)
        intents.append(IntentVectors(name, texts, (), vectors, empty))
    index = IntentIndex(intents)
    rule = IntentMatchingConfig(
        threshold=0.6,
        margin=0.1,
        negative_margin=0.0,
        top_k=1,
        action_threshold=0.0,
        background_margin=0.0,
        confirm_threshold=0.0,
    )
    items: list[tuple[str, str | None]] = [
        ("when are you open on sunday", "hours"),  # its start is the example itself
        ("talk to a person about hours", "hours"),  # its start means another intent
        ("talk to a person now please", None),  # a negative whose start matches
    ]
    out = await evaluate_prefixes(index, embedder, items, rule)
    assert out.paraphrase_prefixes == 4 + 4 and out.negative_prefixes == 4
    assert ("when are you open", "when are you open on sunday", "hours") not in out.wrong
    assert out.own_intent >= 1
    assert ("talk to a person", "talk to a person about hours", "hours", "person") in out.wrong
    assert ("talk to a person", "talk to a person now please", "person") in out.false_accepts
