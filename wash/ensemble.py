"""The WASH decoding loop: average, sample, route, re-synchronise, repeat.

One step in ``wash`` mode (the paper's Section 2):

1. every distinct base model computes its next-token logits once (KV cache), all
   models at the same time (``parallel.py``);
2. every provider perturbs its model's logits with its watermark -> p_i;
3. each p_i is scattered onto the union vocabulary and averaged -> p̄
   (``averaging.py``); the token x is drawn from p̄;
4. if every vocabulary has x, every model appends it; otherwise fluency-aware
   routing (``routing.py``) lets uniformly chosen specialists finish the word, and
   context re-synchronisation (``resync.py``) re-tokenises the span for everyone.

Every WASH mode runs this one loop, switched by the fields of ``config.MODE_TABLE``
(which providers take part, watermarks on or off, routing on or off); the paper's
baselines (``wash.baselines``) load the same way and decode their own way.

Lazy forwards (``forwards="lazy"``) replace steps 1-3 by: pick a provider
uniformly at random and draw x from its own p_i. Since p̄ = (1/N) Σ p_i, that is
the same law for x; only the picked provider's model computes logits. Picks are
drawn one step ahead from their own seeded stream, so while the picked model
computes, every other model feeds the ids it has not seen on its own thread,
without its output layer (``resync.ModelContext.catch_up_async``). The price: p̄,
p* and the other providers' p_i are never computed, so lazy step events carry
``None`` there.

Aggregation (``config.aggregate``, ``aggregation.py``): step 3's mean is the
default and keeps its fast path (one scatter per base model). A robust rule
(``median-clip`` and the like) gets every provider's p_i on the union, stacked,
and draws x from the rule's output instead; p* stays the mean of the
unwatermarked distributions (the paper's consensus, the reference the distribution
view and ‖p̄ − p*‖∞ compare with), so ``linf`` shows how far the rule lands from
it. A robust rule needs eager forwards (config validation refuses lazy ones: a lazy
step has the law of the mean only). Routed steps are the same under every rule:
one uniformly chosen specialist's own p_k.

``generate_stream`` yields the events of ``events.py``; ``generate`` drains it and
returns the final ``RunResult``.
"""

from __future__ import annotations

import codecs
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from wash.aggregation import Mean, parse as parse_aggregate
from wash.averaging import average, candidates, linf, model_probs_at, probs_at, to_union
from wash.config import GenerationConfig
from wash.detection import LiveDetector, detect_text
from wash.errors import WashInputError
from wash.events import (FinishedEvent, LoadEvent, ResyncEvent, RewriteEvent, RoutingSummary, RunResult,
                         SpanRecord, StepEvent, Timing, TokenRecord)
from wash import parallel
from wash.parallel import run_all
from wash.providers import ProviderSet, build_providers
from wash.resync import ModelContext, resynchronise
from wash.routing import pick_specialist, specialists, starts_new_word, word_complete
from wash.sampling import entropy, process_logits, sample, uniform_choice
from wash.vocab import encode_bytes, model_vocab
from wash.version import code_version
from wash.watermarks.base import softmax
from wash.watermarks.hashing import derive_seed

Event = LoadEvent | StepEvent | ResyncEvent | RewriteEvent | FinishedEvent
LoadCallback = Callable[[LoadEvent], None]


def generate_stream(config: GenerationConfig, should_stop: Callable[[], bool] | None = None,
                    on_load: LoadCallback | None = None) -> Iterator[Event]:
    """Run one generation in the caller's thread, yielding its events.

    Input is validated first, before any model loads. Loading reports progress as
    ``LoadEvent``s: to ``on_load`` as they happen when given (a first load takes a
    minute on a CPU, so the app and the CLI pass one), else yielded once loading is
    over, before the first token.
    """
    config.validate()
    buffered: list[LoadEvent] = []
    report = on_load or buffered.append
    t_load = time.perf_counter()
    pset = build_providers(config.active_providers(), progress=lambda m: report(LoadEvent(m)))
    yield from buffered
    load_s = time.perf_counter() - t_load
    if config.spec.baseline:  # another removal attack, decoding its own way (wash.baselines)
        from wash.baselines import parse as parse_baseline

        baseline = parse_baseline(config.mode, config.baseline_options)
        yield from baseline.decode(config, pset, load_s, should_stop or (lambda: False))
        return
    yield from _decode(config, pset, load_s, should_stop or (lambda: False))


def generate(config: GenerationConfig, should_stop: Callable[[], bool] | None = None,
             on_load: LoadCallback | None = None) -> RunResult:
    result = None
    for event in generate_stream(config, should_stop, on_load):
        if isinstance(event, FinishedEvent):
            result = event.result
    assert result is not None
    return result


def _decode(config: GenerationConfig, pset: ProviderSet, load_s: float,
            should_stop: Callable[[], bool]) -> Iterator[Event]:
    run = _Run(config, pset)
    step = run.lazy_step if config.forwards == "lazy" else run.eager_step
    t_start = time.perf_counter()
    while len(run.tokens) < config.max_new_tokens and run.finish == "length":
        if should_stop():
            run.finish = "stopped"
            break
        with parallel.caller_on_one_thread():
            x, event = step()
        if event is None:
            break  # end of text drawn, or a context is full
        yield event
        if not event.routed:
            continue
        yield from run.route(should_stop)
        yield run.resync()
    yield FinishedEvent(run.result(load_s, time.perf_counter() - t_start))


@dataclass
class _ModelStep:
    """One base model's share of an eager step, computed in that model's own thread."""

    dists: list[torch.Tensor]  # p_i of this model's providers, in provider order
    p_bar_part: torch.Tensor  # Σ of those p_i on the union
    p_star_part: torch.Tensor  # (number of those providers) × softmax(base) on the union
    entropy: float  # of softmax(base), the served base distribution (nats)
    #: Each p_i on the union, for a robust aggregation rule (``None`` under the mean).
    union_dists: list[torch.Tensor] | None = None


class _Run:
    """The state of one generation: every model's context, the detectors, the record."""

    def __init__(self, config: GenerationConfig, pset: ProviderSet) -> None:
        self.config = config
        self.mode = config.spec
        self.providers = pset.providers
        self.lms = pset.models
        self.alignment = a = pset.alignment
        self.n = len(self.providers)
        self.models = list(self.lms)
        self.prov_model = [p.model for p in self.providers]
        self.by_model = {m: [i for i, pm in enumerate(self.prov_model) if pm == m] for m in self.models}
        self.vocabs = {m: model_vocab(self.lms[m]) for m in self.models}
        self.invalid = {m: a.to_union[m] < 0 for m in self.models}
        # Until min_new_tokens exist, end-of-text rows are masked like special tokens.
        self.no_eos = {m: self.invalid[m] | (a.to_union[m] == a.eos_index) for m in self.models}
        # A robust aggregation rule needs every p_i on the union and which vocabularies
        # have which token; the mean (and any rule over a single provider, which is that
        # provider) keeps the per-model fast path.
        self.rule = parse_aggregate(config.aggregate)
        self.robust = self.rule.name != Mean.name and self.n > 1
        self.present = torch.stack([a.from_union[m] >= 0 for m in self.prov_model]) if self.robust else None
        self.contexts: dict[str, ModelContext] = {}
        for m in self.models:
            prompt_ids = self.lms[m].encode_prompt(config.prompt)
            if len(prompt_ids) >= self.lms[m].max_context:
                raise WashInputError(
                    f"prompt too long for model {m}: {len(prompt_ids)} tokens leave no room in its context "
                    f"of {self.lms[m].max_context} tokens")
            self.contexts[m] = ModelContext(self.lms[m], prompt_ids, use_cache=not config.reencode_every_step)
        for p in self.providers:
            p.start_generation(config.seed)
        self.gen = torch.Generator()
        self.gen.manual_seed(config.seed)
        # Lazy forwards draw their provider picks from their own stream, one step ahead, so
        # the model picked next is known while the others catch up (the picks are uniform
        # and independent of everything else, so drawing them early changes no law).
        self.picks = torch.Generator()
        self.picks.manual_seed(derive_seed("lazy-picks", config.seed))
        self.next_pick = uniform_choice(self.n, self.picks)
        # Detectors are always the providers' real ones, also when the watermarks are off.
        self.live = ([LiveDetector(p, self.contexts[p.model].ids) for p in self.providers]
                     if config.live_detection else [])
        self.fed = {m: self.contexts[m].prompt_len for m in self.models}
        self.tokens: list[TokenRecord] = []
        self.spans: list[SpanRecord] = []
        self.step_ms: list[float] = []
        self.finish = "length"
        # Token texts are decoded incrementally, so a character split across tokens shows
        # up whole on the token that completes it and the texts concatenate to the text.
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # The open routed span: its union ids, where each context stood before it, its specialists.
        self.span: list[int] = []
        self.span_starts: dict[str, int] = {}
        self.span_specialists: list[int] = []

    # -- per-model work (runs on the forward pool) -----------------------------------
    def _logits(self, m: str) -> torch.Tensor:
        mask = self.no_eos[m] if len(self.tokens) < self.config.min_new_tokens else self.invalid[m]
        c = self.config
        return process_logits(self.contexts[m].next_logits(), mask, c.temperature, c.top_p, c.top_k)

    def _dist(self, i: int, base: torch.Tensor) -> torch.Tensor:
        """Provider i's next-token distribution over its model's rows (watermarked if the mode says so)."""
        if not self.mode.watermark:
            return softmax(base)
        ctx = self.contexts[self.prov_model[i]]
        return self.providers[i].distribution(base, ctx.ids, ctx.prompt_len)

    def _model_step(self, m: str) -> _ModelStep:
        a = self.alignment
        base = self._logits(m)
        dists = [self._dist(i, base) for i in self.by_model[m]]
        summed = dists[0] if len(dists) == 1 else torch.stack(dists).sum(0)
        p_bar_part = to_union(summed, a.scatter_index[m], a.size)
        p_star_part = (p_bar_part if not self.mode.watermark else
                       to_union(softmax(base) * len(dists), a.scatter_index[m], a.size))
        union_dists = [to_union(d, a.scatter_index[m], a.size) for d in dists] if self.robust else None
        return _ModelStep(dists, p_bar_part, p_star_part, entropy=entropy(base), union_dists=union_dists)

    def _provider_union_dist(self, i: int) -> tuple[torch.Tensor, float]:
        """Provider i's distribution on the union, and the entropy of its served base distribution."""
        m = self.prov_model[i]

        def work() -> tuple[torch.Tensor, float]:
            base = self._logits(m)
            dist = to_union(self._dist(i, base), self.alignment.scatter_index[m], self.alignment.size)
            return dist, entropy(base)

        return run_all([(m, work)], [self.lms[m].device])[0]

    def _catch_up_in_background(self) -> None:
        """Lazy forwards: every model but the one picked next starts feeding its new ids now.

        The feed runs on the model's own thread, without the output layer, while the
        picked model computes the next step on its thread; a model picked later then
        feeds only the one id committed since (it is never the next pick, so one more
        id always arrives before it is asked for logits). The chunks are fixed by the algorithm
        (what was committed when the feed was queued), not by timing, so a seed still
        fixes the text for a given ``WASH_PARALLEL_FORWARDS`` setting (the two settings
        chunk lazy feeds differently, so their texts can differ by float rounding).
        """
        if not parallel.parallel_enabled():
            # One shared thread: a feed now would only delay the next pick, and feeding a
            # model's backlog in one forward when it is next picked costs less in total
            # (what K experiment workers, each on its share of the cores, want).
            return
        picked = self.prov_model[self.next_pick]
        for m, ctx in self.contexts.items():
            if m != picked:
                ctx.catch_up_async()

    # -- helpers ---------------------------------------------------------------------
    def _room_for(self, u: int) -> bool:
        """Whether every context can take union token ``u`` (and the open span) in its own ids.

        A model needs at most one id per byte (byte-level and byte-fallback
        vocabularies), so the bytes bound each model's own id count.
        """
        a = self.alignment
        extra = len(a.token_bytes(u)) + sum(len(a.token_bytes(v)) for v in self.span)
        for m, ctx in self.contexts.items():
            start = self.span_starts[m] if self.span else len(ctx.ids)
            if start + extra > self.lms[m].max_context:
                return False
        return True

    def _feed_live(self) -> None:
        """Push every model's newly settled ids to the live detectors of its providers."""
        for m in self.models:
            new = self.contexts[m].ids[self.fed[m]:]
            for d in self.live:
                if d.provider.model == m:
                    d.feed(new)
            self.fed[m] = len(self.contexts[m].ids)

    def _record(self, u: int, routed: bool, specialists: list[int], chosen: int | None, t0: float,
                view: list[int], provider_probs: list, average_: torch.Tensor | None,
                consensus: torch.Tensor | None, entropy_: float | None) -> StepEvent:
        text = self.decoder.decode(self.alignment.token_bytes(u))
        span_id = len(self.spans) if routed else None
        self.tokens.append(TokenRecord(text=text, union_id=u, routed=routed, span_id=span_id,
                                       specialists=list(specialists), chosen=chosen, entropy=entropy_))
        self.step_ms.append((time.perf_counter() - t0) * 1000)
        return StepEvent(
            step=len(self.tokens) - 1, token=text, union_id=u, routed=routed, span_id=span_id,
            specialists=list(specialists), chosen=chosen,
            candidates=[self.alignment.token_text(v) for v in view], candidate_ids=view,
            provider_probs=provider_probs,
            average_probs=probs_at(average_, view) if average_ is not None else None,
            consensus_probs=probs_at(consensus, view) if consensus is not None else None,
            linf=linf(average_, consensus) if average_ is not None and consensus is not None else None,
            live_z=[d.z() for d in self.live] if self.live else [None] * self.n,
            elapsed_ms=self.step_ms[-1], entropy=entropy_)

    def _end_of_step(self, x: int) -> bool:
        """True when the run ends at ``x``: end of text drawn, or some context is full."""
        if x == self.alignment.eos_index:
            self.finish = "eos"
            return True
        if not self._room_for(x):
            self.finish = "context"
            return True
        return False

    # -- the three moves of the algorithm ---------------------------------------------
    def eager_step(self) -> tuple[int, StepEvent | None]:
        """Every model's forward at once; average every provider over the union; draw one token."""
        t0 = time.perf_counter()
        parts = run_all([(m, lambda m=m: self._model_step(m)) for m in self.models],
                        [self.lms[m].device for m in self.models])
        by_model = dict(zip(self.models, parts))
        p_mean = average([p.p_bar_part for p in parts], self.n)
        p_star = p_mean if not self.mode.watermark else average([p.p_star_part for p in parts], self.n)
        p_bar = self._robust_average(by_model) if self.robust else p_mean
        x = sample(p_bar, self.gen)
        if self._end_of_step(x):
            return x, None
        a = self.alignment
        view = candidates([p_bar, p_star], self.config.view_k)
        dists: list[torch.Tensor] = [torch.empty(0)] * self.n
        for m in self.models:
            for i, d in zip(self.by_model[m], by_model[m].dists):
                dists[i] = d
        provider_probs = [model_probs_at(d, a.rows_of[pm], a.from_union[pm], view)
                          for d, pm in zip(dists, self.prov_model)]
        # each provider's served base entropy, averaged like p* (a lazy pick's expectation)
        h = sum(len(self.by_model[m]) * by_model[m].entropy for m in self.models) / self.n
        return x, self._commit_drawn(x, t0, None, view, provider_probs, p_bar, p_star, h)

    def _robust_average(self, by_model: dict[str, _ModelStep]) -> torch.Tensor:
        """The configured robust rule over every provider's p_i on the union, in provider order."""
        union: list[torch.Tensor] = [torch.empty(0)] * self.n
        for m in self.models:
            for i, d in zip(self.by_model[m], by_model[m].union_dists or []):
                union[i] = d
        return self.rule(torch.stack(union), self.present)

    def lazy_step(self) -> tuple[int, StepEvent | None]:
        """Pick one provider uniformly; draw the token from its own distribution (same law as p̄)."""
        t0 = time.perf_counter()
        k = self.next_pick
        self.next_pick = uniform_choice(self.n, self.picks)
        dist, h = self._provider_union_dist(k)
        x = sample(dist, self.gen)
        if self._end_of_step(x):
            return x, None
        view = candidates([dist], self.config.view_k)
        provider_probs = [probs_at(dist, view) if i == k else None for i in range(self.n)]
        event = self._commit_drawn(x, t0, k, view, provider_probs, None, None, h)
        if not event.routed:
            self._catch_up_in_background()
        return x, event

    def _commit_drawn(self, x: int, t0: float, chosen: int | None, view: list[int], provider_probs: list,
                      p_bar: torch.Tensor | None, p_star: torch.Tensor | None, h: float | None) -> StepEvent:
        """Give a drawn token to every model, or open a routed span when some vocabularies lack it.

        ``h`` is the step's served base entropy, recorded with the token (``StepEvent.entropy``).
        """
        a = self.alignment
        if bool(a.intersection[x]) or not self.mode.routing:
            # Every vocabulary has x (or routing is off: every model re-tokenises it at once).
            for m in self.models:
                mid = int(a.from_union[m][x])
                self.contexts[m].append([mid] if mid >= 0 else
                                        encode_bytes(a.token_bytes(x), self.lms[m].encode, self.vocabs[m]))
            self._feed_live()
            return self._record(x, False, [], chosen, t0, view, provider_probs, p_bar, p_star, h)
        # x is missing from some vocabularies: open a routed span with its specialists.
        self.span = [x]
        self.span_starts = {m: len(self.contexts[m].ids) for m in self.models}
        self.span_specialists = specialists(range(self.n), self.prov_model, a.from_union, x)
        self._commit_to_specialists(x, self.span_specialists)
        return self._record(x, True, self.span_specialists, chosen, t0, view, provider_probs, p_bar, p_star,
                            h)

    def _commit_to_specialists(self, u: int, current: list[int]) -> None:
        for m in dict.fromkeys(self.prov_model[i] for i in current):
            self.contexts[m].append([int(self.alignment.from_union[m][u])])

    def _span_bytes(self) -> bytes:
        return b"".join(self.alignment.token_bytes(u) for u in self.span)

    def _bytes_before_span(self) -> bytes:
        """The last few bytes written before the open span (a span can open inside a character)."""
        start = len(self.tokens) - len(self.span)
        return b"".join(self.alignment.token_bytes(t.union_id) for t in self.tokens[max(0, start - 4):start])

    def route(self, should_stop: Callable[[], bool]) -> Iterator[StepEvent]:
        """Fluency-aware routing: uniformly chosen specialists finish the word."""
        a = self.alignment
        current = list(self.span_specialists)
        before = self._bytes_before_span()
        while len(self.tokens) < self.config.max_new_tokens and len(self.span) < self.config.max_routed_span:
            if word_complete(self._span_bytes(), before=before):
                return  # a character of a script without spaces is complete: so is the "word"
            if should_stop():
                self.finish = "stopped"
                return
            t0 = time.perf_counter()
            k = pick_specialist(current, self.gen)
            with parallel.caller_on_one_thread():
                dist, h = self._provider_union_dist(k)
                y = sample(dist, self.gen)
            if y == a.eos_index:
                self.finish = "eos"
                return
            if starts_new_word(a.token_bytes(y)):
                return  # the word is complete; the boundary token is not committed
            if not self._room_for(y):
                self.finish = "context"
                return
            current = specialists(current, self.prov_model, a.from_union, y)
            self._commit_to_specialists(y, current)
            self.span.append(y)
            with parallel.caller_on_one_thread():
                view = candidates([dist], self.config.view_k)
            probs = [probs_at(dist, view) if i == k else None for i in range(self.n)]
            yield self._record(y, True, current, k, t0, view, probs, None, None, h)

    def resync(self) -> ResyncEvent:
        """Context re-synchronisation: every model re-tokenises the finished span."""
        span_bytes = self._span_bytes()
        new = resynchronise(span_bytes, self.contexts, self.span_starts, self.vocabs)
        self._feed_live()
        if self.config.forwards == "lazy":
            self._catch_up_in_background()
        text = span_bytes.decode("utf-8", errors="replace")
        span_id = len(self.spans)
        self.spans.append(SpanRecord(span_id=span_id, text=text, start=len(self.tokens) - len(self.span),
                                     length=len(self.span), specialists=list(self.span_specialists)))
        self.span = []
        return ResyncEvent(span_id=span_id, text=text, specialists=list(self.span_specialists),
                           tokens_per_model={m: [self.lms[m].tokenizer.decode([i]) for i in ids]
                                             for m, (ids, _) in new.items()},
                           ids_replaced={m: replaced for m, (_, replaced) in new.items()})

    def result(self, load_s: float, total_s: float) -> RunResult:
        for ctx in self.contexts.values():
            ctx.settle()  # a background feed still queued finishes before its counters are read
        a = self.alignment
        text = b"".join(a.token_bytes(t.union_id) for t in self.tokens).decode("utf-8", errors="replace")
        if self.tokens:  # bytes of a character cut off by the end stay visible as U+FFFD
            self.tokens[-1].text += self.decoder.decode(b"", final=True)
        routed = sum(1 for t in self.tokens if t.routed)
        ms = self.step_ms
        cfg = self.config
        return RunResult(
            text=text, prompt=cfg.prompt, mode=cfg.mode, seed=cfg.seed,
            providers=[{**p.spec.to_dict(), "label": p.label} for p in self.providers],
            tokens=self.tokens, spans=self.spans,
            routing=RoutingSummary(
                routed_token_fraction=routed / len(self.tokens) if self.tokens else 0.0,
                mean_routed_span_length=(sum(s.length for s in self.spans) / len(self.spans)
                                         if self.spans else 0.0),
                routed_spans=len(self.spans), tokens=len(self.tokens)),
            detection=detect_text(self.providers, text, cfg.z_threshold) if text else [],
            timing=Timing(per_token_ms=sum(ms) / len(ms) if ms else 0.0,
                          median_token_ms=statistics.median(ms) if ms else 0.0,
                          total_s=total_s, load_s=load_s,
                          forward_calls={m: c.forward_calls for m, c in self.contexts.items()},
                          ids_fed={m: c.ids_fed for m, c in self.contexts.items()},
                          forward_s={m: c.forward_s for m, c in self.contexts.items()}),
            model_ids={m: c.generated_ids() for m, c in self.contexts.items()},
            finish_reason=self.finish,
            settings={"max_new_tokens": cfg.max_new_tokens, "min_new_tokens": cfg.min_new_tokens,
                      "profile": cfg.profile, "temperature": cfg.temperature, "top_k": cfg.top_k,
                      "top_p": cfg.top_p, "aggregation": str(self.rule), "models": list(self.models),
                      "z_threshold": cfg.z_threshold, "max_routed_span": cfg.max_routed_span,
                      "view_k": cfg.view_k, "forwards": cfg.forwards,
                      "parallel_forwards": parallel.parallel_enabled(),
                      "threads_per_model": parallel.threads_per_model(),
                      "live_z_final": [d.z(force=True) for d in self.live],
                      "code": code_version()},
        )
