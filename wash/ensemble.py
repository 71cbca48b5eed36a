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
    n = len(providers)
    models = list(lms)
    prov_model = [p.model for p in providers]
    vocabs = {m: model_vocab(lms[m]) for m in models}
    invalid = {m: alignment.to_union[m] < 0 for m in models}
    # Until min_new_tokens exist, end-of-text rows are masked like special tokens.
    no_eos = {m: invalid[m] | (alignment.to_union[m] == alignment.eos_index) for m in models}

    def mask(m: str) -> torch.Tensor:
        return no_eos[m] if len(tokens) < config.min_new_tokens else invalid[m]
    count = {m: prov_model.count(m) for m in models}
    contexts: dict[str, ModelContext] = {}
    for m in models:
        prompt_ids = lms[m].encode_prompt(config.prompt)
        budget = lms[m].max_context - config.max_new_tokens
        if len(prompt_ids) > budget:
            raise WashInputError(
                f"prompt too long for model {m}: {len(prompt_ids)} tokens plus {config.max_new_tokens} "
                f"new ones exceed its context of {lms[m].max_context} tokens")
        contexts[m] = ModelContext(lms[m], prompt_ids, use_cache=not config.reencode_every_step)
    for p in providers:
        p.start_generation(config.seed)
    gen = torch.Generator()
    gen.manual_seed(config.seed)
    live = [LiveDetector(p, contexts[p.model].ids) for p in providers] if config.live_detection else []
    fed = {m: contexts[m].prompt_len for m in models}

    def feed_live() -> None:
        for m in models:
            new = contexts[m].ids[fed[m]:]
            for d in live:
                if d.provider.model == m:
                    d.feed(new)
            fed[m] = len(contexts[m].ids)

    def live_z() -> list[float | None]:
        return [d.z() for d in live] if live else [None] * n

    def text_of(u: int) -> str:
        return alignment.token_text(u)

    tokens: list[dict] = []
    spans: list[dict] = []
    step_ms: list[float] = []
    finish = "length"
    route = config.mode == "wash"
    t_start = time.perf_counter()
    k_view = config.top_k

    while len(tokens) < config.max_new_tokens:
        if should_stop():
            finish = "stopped"
            break
        t0 = time.perf_counter()
        base = {m: process_logits(contexts[m].next_logits(), mask(m), config.temperature, config.top_p)
                for m in models}
        dists = [p.distribution(base[p.model], contexts[p.model].ids, contexts[p.model].prompt_len)
                 for p in providers]
        summed = {m: sum(d for d, pm in zip(dists, prov_model) if pm == m) for m in models}
        p_bar = mixture([(alignment.scatter_index[m], summed[m]) for m in models], alignment.size, n)
        p_star = mixture([(alignment.scatter_index[m], softmax(base[m]) * count[m]) for m in models],
                         alignment.size, n)
        x = sample(p_bar, gen)
        if x == alignment.eos_index:
            finish = "eos"
            break
        view = candidates([p_bar, p_star], k_view)
        shared = bool(alignment.intersection[x])

        if shared or not route:
            for m in models:
                mid = int(alignment.from_union[m][x])
                contexts[m].append([mid] if mid >= 0 else
                                   encode_bytes(alignment.token_bytes(x), lms[m].encode, vocabs[m]))
            feed_live()
            tokens.append({"text": text_of(x), "union_id": x, "routed": False, "span_id": None, "specialists": [],
                           "chosen": None})
            step_ms.append((time.perf_counter() - t0) * 1000)
            yield StepEvent(step=len(tokens) - 1, token=text_of(x), union_id=x, routed=False, span_id=None,
                            specialists=[], chosen=None, candidates=[text_of(u) for u in view],
                            candidate_ids=view, provider_probs=[model_probs_at(d, alignment.rows_of[pm], alignment.from_union[pm], view)
                                            for d, pm in zip(dists, prov_model)],
                            average_probs=probs_at(p_bar, view), consensus_probs=probs_at(p_star, view),
                            linf=linf(p_bar, p_star), live_z=live_z(), elapsed_ms=step_ms[-1])
            continue

        # -- fluency-aware routing: x is missing from some vocabularies ---------------
        span_id = len(spans)
        starts = {m: len(contexts[m].ids) for m in models}
        current = specialists(range(n), prov_model, alignment.from_union, x)
        for m in dict.fromkeys(prov_model[i] for i in current):
            contexts[m].append([int(alignment.from_union[m][x])])
        span = [x]
        used = set(current)
        tokens.append({"text": text_of(x), "union_id": x, "routed": True, "span_id": span_id,
                       "specialists": list(current), "chosen": None})
        step_ms.append((time.perf_counter() - t0) * 1000)
        yield StepEvent(step=len(tokens) - 1, token=text_of(x), union_id=x, routed=True, span_id=span_id,
                        specialists=list(current), chosen=None, candidates=[text_of(u) for u in view],
                        candidate_ids=view, provider_probs=[model_probs_at(d, alignment.rows_of[pm], alignment.from_union[pm], view)
                                            for d, pm in zip(dists, prov_model)],
                        average_probs=probs_at(p_bar, view), consensus_probs=probs_at(p_star, view),
                        linf=linf(p_bar, p_star), live_z=live_z(), elapsed_ms=step_ms[-1])
        while len(tokens) < config.max_new_tokens and len(span) < config.max_routed_span:
            if should_stop():
                finish = "stopped"
                break
            t0 = time.perf_counter()
            k = pick_specialist(current, gen)
            prov = providers[k]
            ctx = contexts[prov.model]
            logits = process_logits(ctx.next_logits(), mask(prov.model), config.temperature, config.top_p)
            dist = to_union(prov.distribution(logits, ctx.ids, ctx.prompt_len),
                            alignment.scatter_index[prov.model], alignment.size)
            y = sample(dist, gen)
            if y == alignment.eos_index:
                finish = "eos"
                break
            if starts_new_word(alignment.token_bytes(y)):
                break  # the word is complete; the boundary token is not committed
            current = specialists(current, prov_model, alignment.from_union, y)
            for m in dict.fromkeys(prov_model[i] for i in current):
                contexts[m].append([int(alignment.from_union[m][y])])
            span.append(y)
            view = candidates([dist], k_view)
            tokens.append({"text": text_of(y), "union_id": y, "routed": True, "span_id": span_id,
                           "specialists": list(current), "chosen": k})
            step_ms.append((time.perf_counter() - t0) * 1000)
            yield StepEvent(step=len(tokens) - 1, token=text_of(y), union_id=y, routed=True,
                            span_id=span_id, specialists=list(current), chosen=k,
                            candidates=[text_of(u) for u in view], candidate_ids=view,
                            provider_probs=[probs_at(dist, view) if i == k else None for i in range(n)],
                            average_probs=None, consensus_probs=None, linf=None, live_z=live_z(),
                            elapsed_ms=step_ms[-1])
        # -- context re-synchronisation --------------------------------------------
        span_bytes = b"".join(alignment.token_bytes(u) for u in span)
        before = {m: contexts[m].ids[starts[m]:] for m in models}
        new_ids = resynchronise(span_bytes, contexts, starts, vocabs)
        feed_live()
        span_text = span_bytes.decode("utf-8", errors="replace")
        spans.append({"span_id": span_id, "text": span_text, "start": len(tokens) - len(span),
                      "length": len(span), "specialists": sorted(used)})
        yield ResyncEvent(span_id=span_id, text=span_text, specialists=sorted(used),
                          tokens_per_model={m: [lms[m].tokenizer.decode([i]) for i in new_ids[m]]
                                            for m in models},
                          ids_replaced={m: sum(1 for a, b in zip(before[m], new_ids[m]) if a != b)
                                        + abs(len(before[m]) - len(new_ids[m])) for m in models})
        if finish in ("eos", "stopped"):
            break

    total_s = time.perf_counter() - t_start
    text = b"".join(alignment.token_bytes(t["union_id"]) for t in tokens).decode("utf-8", errors="replace")
    routed = sum(1 for t in tokens if t["routed"])
    detection = detect_text(providers, text, config.z_threshold) if text else []
    result = RunResult(
        text=text, prompt=config.prompt, mode=config.mode, seed=config.seed,
        providers=[{**p.spec.to_dict(), "label": p.label} for p in providers],
        tokens=tokens, spans=spans,
        routing={"routed_token_fraction": routed / len(tokens) if tokens else 0.0,
                 "mean_routed_span_length": (sum(s["length"] for s in spans) / len(spans)) if spans else 0.0,
                 "routed_spans": len(spans), "tokens": len(tokens)},
        detection=detection,
        timing={"per_token_ms": (sum(step_ms) / len(step_ms)) if step_ms else 0.0,
                "median_token_ms": sorted(step_ms)[len(step_ms) // 2] if step_ms else 0.0,
                "total_s": total_s, "load_s": load_s,
                "forward_calls": {m: contexts[m].forward_calls for m in models},
                "ids_fed": {m: contexts[m].ids_fed for m in models}},
        model_ids={m: contexts[m].generated_ids() for m in models},
        finish_reason=finish,
        settings={"max_new_tokens": config.max_new_tokens, "temperature": config.temperature,
                  "top_p": config.top_p, "z_threshold": config.z_threshold,
                  "live_z_final": [d.z(force=True) for d in live] if live else []},
    )
    yield FinishedEvent(result)

