"""WASH's own modes, and the entry points every mode runs through (``generate_stream``, ``generate``).

One step in ``wash`` mode (the paper's Section 2):

1. every distinct base model computes its next-token logits once (KV cache), all
   models at the same time (``members.py``, ``parallel.py``);
2. every provider perturbs its model's logits with its watermark -> p_i;
3. each p_i is scattered onto the union vocabulary and averaged -> p̄
   (``served.py``, ``averaging.py``); the token x is drawn from p̄;
4. if every vocabulary has x, every model appends it; otherwise fluency-aware
   routing (``routing.py``) lets uniformly chosen specialists finish the word, and
   context re-synchronisation (``resync.py``) re-tokenises the span for everyone
   (``decode.Generation.commit``, ``route``, ``resync``).

The four WASH modes are one step strategy with three facts switched (which
providers take part, watermarks on or off, routing on or off); the paper's
baselines (``wash.baselines``) are strategies of their own. Every mode runs the one
loop of ``decode.py``; ``modes.py`` registers them.

Lazy forwards (``forwards="lazy"``) replace steps 1-3 by: pick a provider
uniformly at random and draw x from its own p_i. Since p̄ = (1/N) Σ p_i, that is
the same law for x; only the picked provider's model computes logits. Picks are
drawn one step ahead from their own seeded stream, so while the picked model
computes, every other model feeds the ids it has not seen on its own thread,
without its output layer (``members.ModelContext.catch_up_async``). The price: p̄,
p* and the other providers' p_i are never computed, so lazy step events carry
``None`` there.

Aggregation (``config.rule``, ``aggregation.py``): step 3's mean is the
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

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from wash.engine.decode import Event, Generation, RunSettings, Stepper, Strategy, decode
from wash.engine.events import FinishedEvent, LoadEvent, RunResult, StepEvent
from wash.engine.members import side_by_side
from wash.engine.providers import build_providers
from wash.engine.readback import ShownProvider, read_step
from wash.engine.sampling import draw, uniform, uniform_choice
from wash.engine.settings import MAX_NEW_TOKENS_ENGINE, Forwards
from wash.watermarks.hashing import derive_seed

LoadCallback = Callable[[LoadEvent], None]

__all__ = ["Event", "generate", "generate_stream", "Wash", "Naive", "Single", "Unwatermarked"]


def generate_stream(config: RunSettings, should_stop: Callable[[], bool] | None = None,
                    on_load: LoadCallback | None = None) -> Iterator[Event]:
    """Run one generation in the caller's thread, yielding its events.

    Input is validated first, before any model loads. Loading reports progress as
    ``LoadEvent``s: to ``on_load`` as they happen when given (a first load takes a
    minute on a CPU, so the app and the CLI pass one), else yielded once loading is
    over, before the first token.
    """
    config.validate(max_tokens=MAX_NEW_TOKENS_ENGINE)  # the caller (app, API, CLI) applies the demo's cap
    strategy = config.strategy
    buffered: list[LoadEvent] = []
    report = on_load or buffered.append
    t_load = time.perf_counter()
    pset = build_providers(config.active_providers(), progress=lambda m: report(LoadEvent(m)),
                           backend=config.backend,
                           parallel_forwards=config.parallel_forwards)
    yield from buffered
    yield from strategy.load(config, pset)
    load_s = time.perf_counter() - t_load
    yield from decode(config, pset, strategy, load_s, should_stop or (lambda: False))


def generate(config: RunSettings, should_stop: Callable[[], bool] | None = None,
             on_load: LoadCallback | None = None) -> RunResult:
    result = None
    for event in generate_stream(config, should_stop, on_load):
        if isinstance(event, FinishedEvent):
            result = event.result
    assert result is not None
    return result


# -- the WASH modes: one strategy, three facts ------------------------------------------
@dataclass(frozen=True)
class Averaged(Strategy):
    """Draw every token from the providers' aggregate (eager) or one uniformly picked provider (lazy)."""

    def start(self, run: Generation) -> Stepper:
        return LazySteps(self, run) if run.config.forwards == Forwards.LAZY else EagerSteps(self, run)


@dataclass(frozen=True)
class Wash(Averaged, name="wash",
           summary="average every provider over the union, with routing (the paper's method)"):
    pass


@dataclass(frozen=True)
class Naive(Averaged, name="naive", routing=False,
            summary="average over the union, no routing: a missing token is re-tokenised at once"):
    pass


@dataclass(frozen=True)
class Single(Averaged, name="single", scope="first", routing=False,
             summary="provider 1 alone: the watermarked baseline"):
    pass


@dataclass(frozen=True)
class Unwatermarked(Averaged, name="unwatermarked", watermark=False,
                    summary="WASH with every watermark off: the base models' consensus"):
    pass


class EagerSteps(Stepper):
    """Every model's forward at once; the providers' aggregate over the union; one token drawn from it."""

    def step(self) -> StepEvent | None:
        run = self.run
        t0 = time.perf_counter()
        parts = side_by_side([(run.members[m], lambda m=m: run.model_part(m)) for m in run.models])
        agg = run.system.combine(dict(zip(run.models, parts)))
        shown = read_step(draw(agg.p_bar, uniform(run.gen)), agg.entropy, [agg.p_bar, agg.p_star],
                          run.config.view_k,
                          [ShownProvider(d, run.system.maps[pm]) for d, pm in zip(agg.dists, run.prov_model)],
                          average=agg.p_bar, consensus=agg.p_star)
        if run.end_of_step(shown.token):
            return None
        return run.commit(shown.token, t0, None, shown)


class LazySteps(Stepper):
    """Pick one provider uniformly; draw the token from its own distribution (the same law as p̄)."""

    def __init__(self, strategy: Strategy, run: Generation) -> None:
        super().__init__(strategy, run)
        # The picks come from their own stream, one step ahead, so the model picked next
        # is known while the others catch up (the picks are uniform and independent of
        # everything else, so drawing them early changes no law).
        self.picks = torch.Generator()
        self.picks.manual_seed(derive_seed("lazy-picks", run.config.seed))
        self.next_pick = uniform_choice(run.n, self.picks)

    def step(self) -> StepEvent | None:
        t0 = time.perf_counter()
        k = self.next_pick
        self.next_pick = uniform_choice(self.run.n, self.picks)
        event = self.run.one_provider_step(k, t0)
        if event is not None and not event.routed:
            self.catch_up_in_background()
        return event

    def resynced(self) -> None:
        self.catch_up_in_background()

    def catch_up_in_background(self) -> None:
        """Every model but the one picked next starts feeding its new ids now.

        The feed runs on the model's own thread, without the output layer, while the
        picked model computes the next step on its thread; a model picked later then
        feeds only the one id committed since (it is never the next pick, so one more
        id always arrives before it is asked for logits). The chunks are fixed by the algorithm
        (what was committed when the feed was queued), not by timing, so a seed still
        fixes the text for a given ``parallel_forwards`` setting (the two settings
        chunk lazy feeds differently, so their texts can differ by float rounding).
        """
        if not self.run.config.parallel_forwards:
            # One shared thread: a feed now would only delay the next pick, and feeding a
            # model's backlog in one forward when it is next picked costs less in total
            # (what K experiment workers, each on its share of the cores, want).
            return
        picked = self.run.prov_model[self.next_pick]
        for m, ctx in self.run.contexts.items():
            if m != picked:
                ctx.catch_up_async()
