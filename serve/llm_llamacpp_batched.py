"""llama.cpp decoding several conversations at once: one context, one sequence per answer.

``LlamaCppLLM`` answers one request at a time on its one context, so at 10 calls an answer
waits for every answer ahead of it. Here one engine thread owns a context with
``sequences`` KV sequences; each step decodes one batch holding one new token of every
answer being generated plus the prompt tokens of answers starting, so a new question's
prompt is read while other answers go on, and each step's cost is shared (llama.cpp's
``n_seq_max``, ``llama_batch`` with a sequence id per token, ``llama_get_logits_ith``).

The prompt's shared prefix is computed once: a request starts from the slot whose KV
cache holds the longest prefix of its prompt (its own conversation's previous turn), or
copies that prefix from another slot (``llama_memory_seq_cp``: the system prompt every
call shares), and reads only the rest. bench/llm_batch.py measures it against one at a time.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from serve.base import _renice
from serve.errors import ProviderError, ProviderUnavailable
from serve.llm import LLM, ChatMessage
from serve.llm_llamacpp import PACKAGED_LLMS, SMOLLM2, packaged_gguf, packaged_stem

log = logging.getLogger(__name__)

_TOP_K = 40


@dataclass
class _Request:
    prompt: list[int]
    max_tokens: int
    temperature: float
    out: queue.SimpleQueue[str | BaseException | None] = field(default_factory=queue.SimpleQueue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    slot: int = -1
    #: Prompt tokens already in the slot's KV cache.
    n_past: int = 0
    generated: int = 0
    #: The token sampled last, to decode in the next step (-1: still reading the prompt).
    next_token: int = -1
    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("ignore"))


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class BatchedLlamaCppLLM(LLM):
    """A gguf model answering up to ``sequences`` requests in one batched decode."""

    name = "llama-cpp-batched"
    thread_safe = True

    def __init__(
        self,
        *,
        model_path: str | None = None,
        packaged: str = SMOLLM2,
        sequences: int = 4,
        n_ctx_per_sequence: int = 2048,
        n_batch: int = 512,
        n_threads: int = 1,
        thread_nice: int = 0,
        timeout_s: float = 10.0,
        retries: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        if sequences < 1:
            raise ValueError("sequences must be at least 1")
        if packaged not in PACKAGED_LLMS:
            raise ValueError(f"no packaged gguf {packaged!r}; known: {', '.join(PACKAGED_LLMS)}")
        self.model_path = model_path
        self.packaged = packaged
        self.sequences = sequences
        self.kv_slots = sequences
        self.n_ctx = sequences * n_ctx_per_sequence
        self.n_ctx_per_sequence = n_ctx_per_sequence
        self.n_batch = n_batch
        self.n_threads = n_threads
        self.thread_nice = thread_nice
        self._llama: Any = None
        self._ctx: Any = None
        self._format: Any = None
        self._inbox: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._engine: threading.Thread | None = None
        self._streams: ThreadPoolExecutor | None = None
        self._rng = np.random.default_rng()
        #: Decode steps and the tokens they held (prompt and generated), for the bench.
        self.steps = 0
        self.batched_tokens = 0

    @property
    def description(self) -> str:
        stem = packaged_stem(self.model_path, self.packaged)
        return f"llama-cpp {stem}, {self.sequences} sequences batched"

    def _executor(self) -> Executor:
        # Each open stream waits on its queue in a thread of its own: many more than the
        # sequences, so that requests beyond them wait in the engine's inbox, not here.
        if self._streams is None:
            self._streams = ThreadPoolExecutor(
                4 * self.sequences + 2, thread_name_prefix=f"serve-{self.name}"
            )
        return self._streams

    def _load(self) -> None:
        try:
            import llama_cpp  # noqa: PLC0415 - optional, compiled library
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: PLC0415
        except ImportError as exc:
            raise ProviderUnavailable("llama-cpp-python is not installed") from exc
        path = self.model_path or str(packaged_gguf(self.packaged))
        # The high-level object for the model, its tokenizer and chat template; its own
        # context is tiny and unused.
        self._llama = llama_cpp.Llama(
            model_path=path, n_ctx=64, n_batch=64, n_threads=1, verbose=False
        )
        template = self._llama.metadata.get("tokenizer.chat_template")
        if template is None:
            raise ProviderUnavailable(f"{path} has no chat template")
        eos, bos = self._llama.token_eos(), self._llama.token_bos()
        model = self._llama._model
        self._format = Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(eos) if eos != -1 else "",
            bos_token=model.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        )
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = self.n_ctx
        params.n_batch = params.n_ubatch = self.n_batch
        params.n_seq_max = self.sequences
        params.n_threads = params.n_threads_batch = self.n_threads
        params.kv_unified = True  # sequences share cells: a copied prefix costs nothing
        self._ctx = llama_cpp.llama_init_from_model(model.model, params)
        if not self._ctx:
            raise ProviderUnavailable("llama.cpp could not create the batched context")
        self._vocab = llama_cpp.llama_model_get_vocab(model.model)
        self._n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._engine = threading.Thread(target=self._run, name="llm-batch", daemon=True)
        self._engine.start()

    def close(self) -> None:
        """Stop the engine and free the context."""
        self._closed.set()
        self._wake.set()
        if self._engine is not None:
            self._engine.join(timeout=5)
        if self._ctx is not None:
            import llama_cpp  # noqa: PLC0415

            llama_cpp.llama_free(self._ctx)
            self._ctx = None

    def tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The prompt's tokens, as ``LlamaCppLLM`` formats it (the model's chat template)."""
        formatted = self._format(
            messages=[{"role": m.role, "content": m.content} for m in messages]
        )
        prompt: list[int] = self._llama.tokenize(
            formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
        )
        return prompt

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        prompt = self.tokens(messages)
        if len(prompt) + max_tokens > self.n_ctx_per_sequence:
            raise ProviderError(
                f"{self.name}: prompt of {len(prompt)} tokens + {max_tokens} does not fit "
                f"a sequence of {self.n_ctx_per_sequence}"
            )
        request = _Request(prompt, max_tokens, temperature)
        self._inbox.put(request)
        self._wake.set()
        try:
            while True:
                item = request.out.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            request.cancelled.set()
            self._wake.set()

    # The engine thread: everything below runs only there.

    def _run(self) -> None:
        _renice(self.thread_nice)
        import llama_cpp  # noqa: PLC0415

        batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        slots: list[_Request | None] = [None] * self.sequences
        #: The tokens each sequence's KV cache holds, in order.
        cached: list[list[int]] = [[] for _ in range(self.sequences)]
        waiting: list[_Request] = []
        try:
            while not self._closed.is_set():
                while True:
                    try:
                        waiting.append(self._inbox.get_nowait())
                    except queue.Empty:
                        break
                waiting = [r for r in waiting if not r.cancelled.is_set()]
                for i, req in enumerate(slots):
                    if req is not None and req.cancelled.is_set():
                        slots[i] = None
                while waiting and None in slots:
                    self._admit(waiting.pop(0), slots, cached)
                active = [r for r in slots if r is not None]
                if not active:
                    self._wake.wait(0.5)
                    self._wake.clear()
                    continue
                if self.yield_to is not None:
                    self.yield_to(self.yield_max_s)
                self._step(batch, active, slots, cached)
        finally:
            llama_cpp.llama_batch_free(batch)
            for req in [*waiting, *(r for r in slots if r is not None)]:
                req.out.put(ProviderUnavailable(f"{self.name} stopped"))

    def _admit(self, req: _Request, slots: list[_Request | None], cached: list[list[int]]) -> None:
        """Give ``req`` a free slot, starting from the longest cached prefix of its prompt."""
        import llama_cpp  # noqa: PLC0415

        free = [i for i, r in enumerate(slots) if r is None]
        own = max(free, key=lambda i: _common_prefix(cached[i], req.prompt))
        own_len = _common_prefix(cached[own], req.prompt)
        donor = max(range(self.sequences), key=lambda i: _common_prefix(cached[i], req.prompt))
        donor_len = _common_prefix(cached[donor], req.prompt)
        # Keep at least the prompt's last token to decode: its logits give the first token.
        limit = len(req.prompt) - 1
        mem = llama_cpp.llama_get_memory(self._ctx)
        if donor_len > own_len and donor != own:
            n = min(donor_len, limit)
            llama_cpp.llama_memory_seq_rm(mem, own, -1, -1)
            llama_cpp.llama_memory_seq_cp(mem, donor, own, 0, n)
            cached[own] = req.prompt[:n]
        else:
            n = min(own_len, limit)
            llama_cpp.llama_memory_seq_rm(mem, own, n, -1)
            cached[own] = cached[own][:n]
        req.slot, req.n_past = own, n
        slots[own] = req

    def _step(
        self,
        batch: Any,
        active: list[_Request],
        slots: list[_Request | None],
        cached: list[list[int]],
    ) -> None:
        """One decode: a token of every answer being generated, then prompt tokens."""
        import llama_cpp  # noqa: PLC0415

        rows: list[tuple[int, _Request]] = []  # batch row -> request whose logits it has
        n = 0

        def add(token: int, req: _Request, logits: bool) -> None:
            nonlocal n
            seq = req.slot
            batch.token[n] = token
            batch.pos[n] = len(cached[seq])
            batch.n_seq_id[n] = 1
            batch.seq_id[n][0] = seq
            batch.logits[n] = logits
            cached[seq].append(token)
            if logits:
                rows.append((n, req))
            n += 1

        for req in active:
            if req.next_token >= 0:
                add(req.next_token, req, True)
        for req in active:
            if req.next_token < 0 and n < self.n_batch:
                take = min(len(req.prompt) - req.n_past, self.n_batch - n)
                for k in range(take):
                    pos = req.n_past + k
                    add(req.prompt[pos], req, pos == len(req.prompt) - 1)
                req.n_past += take
        batch.n_tokens = n
        status = llama_cpp.llama_decode(self._ctx, batch)
        self.steps += 1
        self.batched_tokens += n
        if status != 0:
            error = ProviderError(f"{self.name}: llama_decode returned {status}", retryable=True)
            mem = llama_cpp.llama_get_memory(self._ctx)
            for req in active:
                req.out.put(error)
                slots[req.slot] = None
                llama_cpp.llama_memory_seq_rm(mem, req.slot, -1, -1)
                cached[req.slot] = []
            return
        for row, req in rows:
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(self._ctx, row), shape=(self._n_vocab,)
            )
            token = self._sample(logits, req.temperature)
            if llama_cpp.llama_vocab_is_eog(self._vocab, token) or req.cancelled.is_set():
                self._finish(req, slots)
                continue
            piece = req.decoder.decode(self._piece(token))
            req.generated += 1
            if piece:
                req.out.put(piece)
            if req.generated >= req.max_tokens:
                self._finish(req, slots)
            else:
                req.next_token = token

    def _finish(self, req: _Request, slots: list[_Request | None]) -> None:
        tail = req.decoder.decode(b"", final=True)
        if tail:
            req.out.put(tail)
        req.out.put(None)
        slots[req.slot] = None  # its cache stays: the conversation's next turn reuses it

    def _sample(self, logits: npt.NDArray[np.float32], temperature: float) -> int:
        if temperature <= 0.0:
            return int(np.argmax(logits))
        top = np.argpartition(logits, -_TOP_K)[-_TOP_K:]
        scaled = logits[top].astype(np.float64) / temperature
        p = np.exp(scaled - scaled.max())
        return int(top[self._rng.choice(len(top), p=p / p.sum())])

    def _piece(self, token: int) -> bytes:
        import llama_cpp  # noqa: PLC0415

        buf = ctypes.create_string_buffer(64)
        size = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        if size < 0:
            buf = ctypes.create_string_buffer(-size)
            size = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return buf.raw[:size]
