"""The language model's end-of-utterance probability as an end-of-turn signal, offline:

    .venv/bin/python -m bench.eou_lm [--threads 1] [--repeats 3]

How likely SmolLM2-135M (the node's packaged gguf, llama-cpp-python, next-token logits)
finds it that the caller's words end where the pause fell, the technique of LiveKit's turn
detector (a fine-tune of the same model) without its fine-tuning. The words are
normalized as that detector does (lower case, no punctuation but apostrophes and hyphens),
so Whisper's full stop after a fragment says nothing. Formulations, one forward pass each:

- ``chat``: ``<|im_start|>user\\n{words}``, then P(``<|im_end|>``);
- ``chat+punct``: the same pass, P(``<|im_end|>``) + P(a full stop, "?" or "!" token);
- ``context+punct``: as ``chat+punct``, after the default profile's greeting as the
  assistant's turn (LiveKit's detector reads the conversation so far);
- ``text``: ``<|endoftext|>{words}``, then P(sentence-final punctuation or end of text).

Data, tuning and development splits only: fragments are the first halves of
``bench.pause_wire.PAUSED`` and the halves Whisper misheard as other words in the tuning
runs recorded in docs/benchmarks.md; whole sentences are ``PAUSED`` joined and the in-scope
utterances of ``bench.intent_eval``'s tuning split and the new profiles' dev splits (their
out-of-scope utterances, also whole, in a row of their own).

Printed per formulation: AUC (a fragment scored below a whole sentence), the share of
fragments called unfinished (score under the threshold) against the share of whole
sentences wrongly called unfinished, and the same on what the rules of
``bot.pipeline.language.end_of_turn.judge`` leave (words they read as finished or open: where the
model could add a wait); then the time of one call, P50 / P95.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.pause_wire import PAUSED
from bot.pipeline.language.end_of_turn import judge
from bot.profile import DEFAULT_PROFILE, load_profile
from serve.llm_llamacpp import packaged_gguf
from testkit.intent_eval.eval_sets import DATA, read_split

#: Halves of ``PAUSED`` as Whisper (tiny.en or base) heard them in the tuning runs of
#: docs/benchmarks.md (2026-11-26 and 2026-11-27), with their punctuation as recorded.
MISHEARD = (
    "Can you hack it?",  # Could you check if
    "Come you packet",
    "Come you package",
    "Can you care kids?",
    "I'm not yours",  # What time does your
    "What can not you",
    "What time do you have?",
    "What kind are you?",
    "My parcel arrived done",  # My parcel arrived and
    "My car is all arrived, then",
    "I'd like to consult.",  # I'd like to cancel
    "I need to drop this",  # I need to update
    "I need to upgrade",
    "You will be my group",
    "How long none is take good",  # How long does it take to
)
FORMULATIONS = ("chat", "chat+punct", "context+punct", "text")
GREETING = load_profile(DEFAULT_PROFILE).greeting
_NOT_WORD = re.compile(r"[^\w\s'-]")
#: A token that ends a sentence: a full stop, "?" or "!" (not "..."), then at most closing
#: quotes, brackets and white space.
_FINAL = re.compile(r"^(?:\.|[?!]+)[\"'”’)\]*\s]*$")


def normalize(text: str) -> str:
    """The words as the model reads them: lower case, no punctuation but ' and -."""
    return " ".join(_NOT_WORD.sub(" ", text.lower().replace("’", "'")).split())


def as_heard(half: str) -> str:
    """A fragment as Whisper writes it: capitalized, with a full stop."""
    return half[:1].upper() + half[1:] + "."


class EouScorer:
    """P(the words end here) from SmolLM2's next-token distribution (one context, its KV
    cache kept for the prompt's common prefix)."""

    def __init__(self, threads: int = 1, model_path: str | None = None) -> None:
        from llama_cpp import Llama  # noqa: PLC0415 - compiled, optional

        self.llm: Any = Llama(
            model_path=model_path or str(packaged_gguf()),
            n_ctx=256,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self.vocab = vocab = int(self.llm.n_vocab())
        self.im_start = self._special("<|im_start|>")
        self.im_end = self._special("<|im_end|>")
        self.eot = self._special("<|endoftext|>")
        punct = []
        for tok in range(vocab):
            piece = self.llm.detokenize([tok]).decode("utf-8", "ignore").lstrip()
            if _FINAL.match(piece):
                punct.append(tok)
        self.punct = np.array(punct)

    def _special(self, text: str) -> int:
        toks = self.llm.tokenize(text.encode(), add_bos=False, special=True)
        assert len(toks) == 1, (text, toks)
        return int(toks[0])

    def _next(self, tokens: list[int]) -> np.ndarray:
        """Next-token probabilities after ``tokens`` (re-evaluating after the common
        prefix with the previous call's tokens)."""
        llm = self.llm
        have = list(llm.input_ids[: llm.n_tokens])
        same = 0
        for a, b in zip(have, tokens, strict=False):
            if a != b:
                break
            same += 1
        llm.n_tokens = min(same, len(tokens) - 1)
        llm.eval(tokens[llm.n_tokens :])
        # The last token's logits: the only row a batch without logits_all asks for.
        row = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(self.vocab,))
        logits = row.astype(np.float64)
        p = np.exp(logits - logits.max())
        out: np.ndarray = p / p.sum()
        return out

    def _words(self, text: str) -> list[int]:
        return list(self.llm.tokenize(normalize(text).encode(), add_bos=False, special=False))

    def chat(self, text: str) -> tuple[float, float]:
        """P(<|im_end|>) and P(final punctuation) after ``<|im_start|>user\\n{words}``."""
        head = [self.im_start, *self.llm.tokenize(b"user\n", add_bos=False, special=False)]
        p = self._next(head + self._words(text))
        return float(p[self.im_end]), float(p[self.punct].sum())

    def chat_context(self, text: str) -> tuple[float, float]:
        """``chat`` after the bot's greeting as the assistant's turn (as LiveKit's detector
        reads the conversation so far)."""
        head = [
            self.im_start,
            *self.llm.tokenize(f"assistant\n{GREETING}".encode(), add_bos=False),
            self.im_end,
            *self.llm.tokenize(b"\n", add_bos=False),
            self.im_start,
            *self.llm.tokenize(b"user\n", add_bos=False),
        ]
        p = self._next(head + self._words(text))
        return float(p[self.im_end]), float(p[self.punct].sum())

    def text(self, text: str) -> float:
        """P(final punctuation or end of text) after ``<|endoftext|>{words}``."""
        p = self._next([self.eot, *self._words(text)])
        return float(p[self.punct].sum() + p[self.eot] + p[self.im_end])

    def scores(self, text: str) -> dict[str, float]:
        end, punct = self.chat(text)
        c_end, c_punct = self.chat_context(text)
        return {
            "chat": end,
            "chat+punct": end + punct,
            "context+punct": c_end + c_punct,
            "text": self.text(text),
        }


def auc(low: Sequence[float], high: Sequence[float]) -> float:
    """P(a ``low`` score below a ``high`` one), ties counting half."""
    if not low or not high:
        return float("nan")
    wins = sum((a < b) + 0.5 * (a == b) for a in low for b in high)
    return wins / (len(low) * len(high))


def frac_below(scores: Sequence[float], t: float) -> float:
    return sum(s < t for s in scores) / len(scores) if scores else float("nan")


@dataclass(frozen=True)
class Item:
    text: str
    set: str
    fragment: bool


def items() -> list[Item]:
    out = [Item(as_heard(a), "paused half", True) for a, _ in PAUSED]
    out += [Item(t, "misheard half", True) for t in MISHEARD]
    out += [Item(f"{a[:1].upper()}{a[1:]} {b}", "paused joined", False) for a, b in PAUSED]
    splits = [("intent tuning", read_split("tuning"))]
    for folder in sorted((DATA / "new_profiles").iterdir()):
        if (folder / "dev").is_dir():
            splits.append((f"{folder.name} dev", read_split("dev", folder)))
    for name, split in splits:
        out += [Item(t, name, False) for t, _ in split.positives]
    for name, split in splits:
        out += [Item(t, "out of scope (" + name + ")", False) for t in split.negatives]
    return out


def _row(name: str, frag: Sequence[float], whole: Sequence[float], oos: Sequence[float]) -> None:
    """One comparison: AUC, then per threshold (whole in-scope sentences' 0-20% points)."""
    print(
        f"{name}: AUC {auc(frag, whole):.3f} ({len(frag)} fragments, {len(whole)} whole in"
        f" scope; AUC {auc(frag, oos):.3f} against {len(oos)} out of scope)"
    )
    print("  | threshold | fragments unfinished | whole unfinished | out of scope unfinished |")
    for t in _thresholds(whole):
        print(
            f"  | {t:.2e} | {sum(s < t for s in frag)} ({frac_below(frag, t):.0%}) |"
            f" {sum(s < t for s in whole)} ({frac_below(whole, t):.1%}) |"
            f" {sum(s < t for s in oos)} ({frac_below(oos, t):.1%}) |"
        )


def _thresholds(whole: Sequence[float]) -> list[float]:
    """Thresholds under which 0, 1, 2, 5, 10 and 20% of whole sentences fall."""
    ranked = sorted(whole)
    out = []
    for share in (0.0, 0.01, 0.02, 0.05, 0.10, 0.20):
        k = int(share * len(ranked))
        out.append(ranked[k] if k < len(ranked) else ranked[-1] * 1.0001)
    return sorted(set(out))


def main(threads: int, repeats: int) -> None:
    print(f"load average at start: {os.getloadavg()}; model {Path(packaged_gguf()).name}")
    data = items()
    scorer = EouScorer(threads=threads)
    for it in data[:5]:
        scorer.scores(it.text)  # warm
    scores = {it.text: scorer.scores(it.text) for it in data}
    thought = {it.text: judge(it.text) for it in data}
    caught_all = [i for i in data if thought[i.text] == "unfinished"]
    caught = [i for i in caught_all if i.fragment]
    print(
        f"judge reads {len(caught)} of {sum(i.fragment for i in data)} fragments as unfinished"
        f" ({sum(i.set == 'paused half' for i in caught)} of {len(PAUSED)} paused halves,"
        f" {sum(i.set == 'misheard half' for i in caught)} of {len(MISHEARD)} misheard);"
        f" whole read as unfinished: {sum(not i.fragment for i in caught_all)}"
    )
    for form in FORMULATIONS:
        print(f"\n## {form}")

        def pick(keep: tuple[str, ...], form: str = form) -> tuple[list[float], ...]:
            chosen = [i for i in data if thought[i.text] in keep]
            return (
                [scores[i.text][form] for i in chosen if i.fragment],
                [scores[i.text][form] for i in chosen if not i.fragment and "scope" not in i.set],
                [scores[i.text][form] for i in chosen if "scope" in i.set],
            )

        _row("all fragments", *pick(("finished", "open", "unfinished", "hold")))
        # On top of the rules: only words they read as finished or open can be lengthened.
        _row("on top of the rules (judge: finished or open)", *pick(("finished", "open")))
        _row("judge: finished (the turn ends 300 ms into the pause)", *pick(("finished",)))
        left = [i for i in data if thought[i.text] in ("finished", "open")]
        whole_left = [scores[w.text][form] for w in left if not w.fragment]
        for i in sorted(left, key=lambda i: scores[i.text][form]):
            if i.fragment:
                rank = sum(w <= scores[i.text][form] for w in whole_left)
                print(
                    f"    {scores[i.text][form]:.2e}  {i.text!r} ({thought[i.text]});"
                    f" whole (any scope) at or below: {rank} of {len(whole_left)}"
                )
        low = sorted((w for w in left if not w.fragment), key=lambda w: scores[w.text][form])[:5]
        print(
            "    lowest whole: " + "; ".join(f"{scores[w.text][form]:.2e} {w.text!r}" for w in low)
        )
    # Time of one call, each prompt alone, the texts in turn (the prompt's head kept in the
    # KV cache, as a dedicated scorer would keep it).
    print(f"\ntime per call ({threads} thread(s), {repeats} passes over {len(data)} texts):")
    for form, call in (
        ("chat", scorer.chat),
        ("chat+context", scorer.chat_context),
        ("text", scorer.text),
    ):
        times = []
        for _ in range(repeats):
            for it in data:
                t0 = time.perf_counter()
                call(it.text)
                times.append((time.perf_counter() - t0) * 1000)
        q = statistics.quantiles(times, n=20)
        print(f"  {form}: P50 {statistics.median(times):.1f} ms / P95 {q[18]:.1f} ms")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (node: 1)")
    parser.add_argument("--repeats", type=int, default=3, help="timing passes over the texts")
    args = parser.parse_args()
    main(args.threads, args.repeats)
