"""The WASH decoding loop: average, sample, route, re-synchronise, repeat.

One step in ``wash`` mode (the paper's Section 2):

1. every distinct base model computes its next-token logits once (KV cache);
2. every provider perturbs its model's logits with its watermark -> p_i;
3. each p_i is scattered onto the union vocabulary and averaged -> p̄
   (``averaging.py``); the token x is drawn from p̄;
4. if every vocabulary has x, every model appends it; otherwise fluency-aware
   routing (``routing.py``) lets uniformly chosen specialists finish the word, and
   context re-synchronisation (``resync.py``) re-tokenises the span for everyone.

The other modes share the loop: ``naive`` averages over the union without routing
(an out-of-intersection token is re-tokenised for the other models at once),
``single`` serves the first provider alone (the watermarked baseline), and
``unwatermarked`` averages the base models with no watermark at all.

``generate_stream`` yields the events of ``events.py``; ``generate`` drains it and
returns the final ``RunResult``.
"""

from __future__ import annotations

import codecs
import queue
import threading
import time
from typing import Callable, Iterator

import torch

from wash.averaging import candidates, linf, mixture, model_probs_at, probs_at, to_union
from wash.config import GenerationConfig
from wash.detection import LiveDetector, detect_text
from wash.errors import WashInputError
from wash.events import FinishedEvent, LoadEvent, ResyncEvent, RunResult, StepEvent
from wash.models import LoadedModel, load_model
from wash.providers import Provider, build_provider
from wash.resync import ModelContext, resynchronise
from wash.routing import pick_specialist, specialists, starts_new_word
from wash.sampling import process_logits, sample
from wash.vocab import ModelVocab, VocabAlignment, align, build_model_vocab, encode_bytes
from wash.watermarks.base import softmax

Event = LoadEvent | StepEvent | ResyncEvent | FinishedEvent

_VOCABS: dict[str, ModelVocab] = {}


def model_vocab(lm: LoadedModel) -> ModelVocab:
    """Token bytes of a loaded model, computed once per process."""
    if lm.name not in _VOCABS:
        _VOCABS[lm.name] = build_model_vocab(lm.name, lm.tokenizer, lm.vocab_size, lm.eos_ids)
    return _VOCABS[lm.name]


def prepare(config: GenerationConfig, progress: Callable[[str], None] | None = None,
            ) -> tuple[list[Provider], dict[str, LoadedModel], VocabAlignment]:
    """Load the models, align their vocabularies, build the providers."""
    config.validate()
    specs = config.providers[:1] if config.mode == "single" else list(config.providers)
    say = progress or (lambda _m: None)
    names = list(dict.fromkeys(s.model for s in specs))
    lms = {n: load_model(n, progress=say) for n in names}
    say("aligning vocabularies" if len(names) > 1 else "reading the vocabulary")
    alignment = align([model_vocab(lms[n]) for n in names])
    watermark = config.mode != "unwatermarked"
    providers = [build_provider(i, s, lms[s.model], alignment, watermark) for i, s in enumerate(specs)]
    return providers, lms, alignment


def generate_stream(config: GenerationConfig, should_stop: Callable[[], bool] | None = None,
                    ) -> Iterator[Event]:
    """Run one generation, yielding an event per loading step, token and routed span.

    Models load in a helper thread so that their progress messages reach the
    consumer as they happen (a first load takes a minute on a CPU).
    """
    config.validate()
    messages: queue.Queue = queue.Queue()
    outcome: dict = {}

    def load() -> None:
        try:
            outcome["prepared"] = prepare(config, messages.put)
        except BaseException as err:  # re-raised in the consumer's thread below
            outcome["error"] = err
        finally:
            messages.put(None)

    t_load = time.perf_counter()
    threading.Thread(target=load, name="wash-load", daemon=True).start()
    while (message := messages.get()) is not None:
        yield LoadEvent(message)
    if "error" in outcome:
        raise outcome["error"]
    providers, lms, alignment = outcome["prepared"]
    load_s = time.perf_counter() - t_load
    yield from _decode(config, providers, lms, alignment, load_s, should_stop or (lambda: False))


def generate(config: GenerationConfig, should_stop: Callable[[], bool] | None = None) -> RunResult:
    result = None
    for event in generate_stream(config, should_stop):
        if isinstance(event, FinishedEvent):
            result = event.result
    assert result is not None
    return result


def _decode(config: GenerationConfig, providers: list[Provider], lms: dict[str, LoadedModel],
            alignment: VocabAlignment, load_s: float, should_stop: Callable[[], bool]) -> Iterator[Event]:
    run = _Run(config, providers, lms, alignment)
    t_start = time.perf_counter()
    while len(run.tokens) < config.max_new_tokens and run.finish == "length":
        if should_stop():
            run.finish = "stopped"
            break
        x, event = run.ensemble_step()
        if event is None:
            break  # end of text drawn from the average
        yield event
        if not event.routed:
            continue
        yield from run.route(x, should_stop)
        yield run.resync()
    yield FinishedEvent(run.result(load_s, time.perf_counter() - t_start))


class _Run:
    """The state of one generation: every model's context, the detectors, the record."""

    def __init__(self, config: GenerationConfig, providers: list[Provider], lms: dict[str, LoadedModel],
                 alignment: VocabAlignment) -> None:
        self.config = config
        self.providers = providers
        self.lms = lms
        self.alignment = alignment
        self.n = len(providers)
        self.models = list(lms)
        self.prov_model = [p.model for p in providers]
        self.vocabs = {m: model_vocab(lms[m]) for m in self.models}
        self.count = {m: self.prov_model.count(m) for m in self.models}
        self.invalid = {m: alignment.to_union[m] < 0 for m in self.models}
        # Until min_new_tokens exist, end-of-text rows are masked like special tokens.
        self.no_eos = {m: self.invalid[m] | (alignment.to_union[m] == alignment.eos_index)
                       for m in self.models}
        self.contexts: dict[str, ModelContext] = {}
        for m in self.models:
            prompt_ids = lms[m].encode_prompt(config.prompt)
            if len(prompt_ids) > lms[m].max_context - config.max_new_tokens:
                raise WashInputError(
                    f"prompt too long for model {m}: {len(prompt_ids)} tokens plus {config.max_new_tokens} "
                    f"new ones exceed its context of {lms[m].max_context} tokens")
            self.contexts[m] = ModelContext(lms[m], prompt_ids, use_cache=not config.reencode_every_step)
        for p in providers:
            p.start_generation(config.seed)
        self.gen = torch.Generator()
        self.gen.manual_seed(config.seed)
        self.live = ([LiveDetector(p, self.contexts[p.model].ids) for p in providers]
                     if config.live_detection else [])
        self.fed = {m: self.contexts[m].prompt_len for m in self.models}
        self.tokens: list[dict] = []
        self.spans: list[dict] = []
        self.step_ms: list[float] = []
        self.finish = "length"
        # Token texts are decoded incrementally, so a character split across tokens shows
        # up whole on the token that completes it and the texts concatenate to the text.
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # The open routed span: its union ids, where each context stood before it, its specialists.
        self.span: list[int] = []
        self.span_starts: dict[str, int] = {}
        self.span_specialists: list[int] = []

    # -- helpers ---------------------------------------------------------------------
    def _logits(self, m: str) -> torch.Tensor:
        mask = self.no_eos[m] if len(self.tokens) < self.config.min_new_tokens else self.invalid[m]
        return process_logits(self.contexts[m].next_logits(), mask, self.config.temperature, self.config.top_p)

    def _feed_live(self) -> None:
        """Push every model's newly settled ids to the live detectors of its providers."""
        for m in self.models:
            new = self.contexts[m].ids[self.fed[m]:]
            for d in self.live:
                if d.provider.model == m:
                    d.feed(new)
            self.fed[m] = len(self.contexts[m].ids)

    def _record(self, u: int, routed: bool, specialists: list[int], chosen: int | None, t0: float,
                view: list[int], provider_probs: list, average: torch.Tensor | None,
                consensus: torch.Tensor | None) -> StepEvent:
        text = self.decoder.decode(self.alignment.token_bytes(u))
        span_id = len(self.spans) if routed else None
        self.tokens.append({"text": text, "union_id": u, "routed": routed, "span_id": span_id,
                            "specialists": list(specialists), "chosen": chosen})
        self.step_ms.append((time.perf_counter() - t0) * 1000)
        return StepEvent(
            step=len(self.tokens) - 1, token=text, union_id=u, routed=routed, span_id=span_id,
            specialists=list(specialists), chosen=chosen,
            candidates=[self.alignment.token_text(v) for v in view], candidate_ids=view,
            provider_probs=provider_probs,
            average_probs=probs_at(average, view) if average is not None else None,
            consensus_probs=probs_at(consensus, view) if consensus is not None else None,
            linf=linf(average, consensus) if average is not None else None,
            live_z=[d.z() for d in self.live] if self.live else [None] * self.n,
            elapsed_ms=self.step_ms[-1])

    # -- the three moves of the algorithm ---------------------------------------------
    def ensemble_step(self) -> tuple[int, StepEvent | None]:
        """Average every provider's distribution over the union and draw one token."""
        t0 = time.perf_counter()
        a = self.alignment
        base = {m: self._logits(m) for m in self.models}
        dists = [p.distribution(base[p.model], self.contexts[p.model].ids, self.contexts[p.model].prompt_len)
                 for p in self.providers]
        summed = {m: sum(d for d, pm in zip(dists, self.prov_model) if pm == m) for m in self.models}
        p_bar = mixture([(a.scatter_index[m], summed[m]) for m in self.models], a.size, self.n)
        p_star = mixture([(a.scatter_index[m], softmax(base[m]) * self.count[m]) for m in self.models],
                         a.size, self.n)
        x = sample(p_bar, self.gen)
        if x == a.eos_index:
            self.finish = "eos"
            return x, None
        view = candidates([p_bar, p_star], self.config.top_k)
        provider_probs = [model_probs_at(d, a.rows_of[pm], a.from_union[pm], view)
                          for d, pm in zip(dists, self.prov_model)]
        if bool(a.intersection[x]) or self.config.mode != "wash":
            # Every vocabulary has x (or routing is off: naive re-tokenises it at once).
            for m in self.models:
                mid = int(a.from_union[m][x])
                self.contexts[m].append([mid] if mid >= 0 else
                                        encode_bytes(a.token_bytes(x), self.lms[m].encode, self.vocabs[m]))
            self._feed_live()
            return x, self._record(x, False, [], None, t0, view, provider_probs, p_bar, p_star)
        # x is missing from some vocabularies: open a routed span with its specialists.
        self.span = [x]
        self.span_starts = {m: len(self.contexts[m].ids) for m in self.models}
        self.span_specialists = specialists(range(self.n), self.prov_model, a.from_union, x)
        self._commit_to_specialists(x, self.span_specialists)
        return x, self._record(x, True, self.span_specialists, None, t0, view, provider_probs, p_bar, p_star)

    def _commit_to_specialists(self, u: int, current: list[int]) -> None:
        for m in dict.fromkeys(self.prov_model[i] for i in current):
            self.contexts[m].append([int(self.alignment.from_union[m][u])])

    def route(self, x: int, should_stop: Callable[[], bool]) -> Iterator[StepEvent]:
        """Fluency-aware routing: uniformly chosen specialists finish the word."""
        a = self.alignment
        current = list(self.span_specialists)
        while len(self.tokens) < self.config.max_new_tokens and len(self.span) < self.config.max_routed_span:
            if should_stop():
                self.finish = "stopped"
                return
            t0 = time.perf_counter()
            k = pick_specialist(current, self.gen)
            prov = self.providers[k]
            ctx = self.contexts[prov.model]
            dist = to_union(prov.distribution(self._logits(prov.model), ctx.ids, ctx.prompt_len),
                            a.scatter_index[prov.model], a.size)
            y = sample(dist, self.gen)
            if y == a.eos_index:
                self.finish = "eos"
                return
            if starts_new_word(a.token_bytes(y)):
                return  # the word is complete; the boundary token is not committed
            current = specialists(current, self.prov_model, a.from_union, y)
            self._commit_to_specialists(y, current)
            self.span.append(y)
            view = candidates([dist], self.config.top_k)
            probs = [probs_at(dist, view) if i == k else None for i in range(self.n)]
            yield self._record(y, True, current, k, t0, view, probs, None, None)

    def resync(self) -> ResyncEvent:
        """Context re-synchronisation: every model re-tokenises the finished span."""
        a = self.alignment
        span_bytes = b"".join(a.token_bytes(u) for u in self.span)
        new = resynchronise(span_bytes, self.contexts, self.span_starts, self.vocabs)
        self._feed_live()
        text = span_bytes.decode("utf-8", errors="replace")
        span_id = len(self.spans)
        self.spans.append({"span_id": span_id, "text": text, "start": len(self.tokens) - len(self.span),
                           "length": len(self.span), "specialists": list(self.span_specialists)})
        self.span = []
        return ResyncEvent(span_id=span_id, text=text, specialists=list(self.span_specialists),
                           tokens_per_model={m: [self.lms[m].tokenizer.decode([i]) for i in ids]
                                             for m, (ids, _) in new.items()},
                           ids_replaced={m: replaced for m, (_, replaced) in new.items()})

    def result(self, load_s: float, total_s: float) -> RunResult:
        a = self.alignment
        text = b"".join(a.token_bytes(t["union_id"]) for t in self.tokens).decode("utf-8", errors="replace")
        if self.tokens:  # bytes of a character cut off by the end stay visible as U+FFFD
            self.tokens[-1]["text"] += self.decoder.decode(b"", final=True)
        routed = sum(1 for t in self.tokens if t["routed"])
        ms = self.step_ms
        return RunResult(
            text=text, prompt=self.config.prompt, mode=self.config.mode, seed=self.config.seed,
            providers=[{**p.spec.to_dict(), "label": p.label} for p in self.providers],
            tokens=self.tokens, spans=self.spans,
            routing={"routed_token_fraction": routed / len(self.tokens) if self.tokens else 0.0,
                     "mean_routed_span_length": (sum(s["length"] for s in self.spans) / len(self.spans)
                                                 if self.spans else 0.0),
                     "routed_spans": len(self.spans), "tokens": len(self.tokens)},
            detection=detect_text(self.providers, text, self.config.z_threshold) if text else [],
            timing={"per_token_ms": sum(ms) / len(ms) if ms else 0.0,
                    "median_token_ms": sorted(ms)[len(ms) // 2] if ms else 0.0,
                    "total_s": total_s, "load_s": load_s,
                    "forward_calls": {m: c.forward_calls for m, c in self.contexts.items()},
                    "ids_fed": {m: c.ids_fed for m, c in self.contexts.items()},
                    "forward_s": {m: c.forward_s for m, c in self.contexts.items()}},
            model_ids={m: c.generated_ids() for m, c in self.contexts.items()},
            finish_reason=self.finish,
            settings={"max_new_tokens": self.config.max_new_tokens, "temperature": self.config.temperature,
                      "top_p": self.config.top_p, "z_threshold": self.config.z_threshold,
                      "live_z_final": [d.z(force=True) for d in self.live]},
        )
