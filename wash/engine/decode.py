"""The one decoding loop, the generation state it drives, and the step strategies' interface.

Every mode decodes with ``decode``: a ``Strategy`` (registered in ``modes.py``:
``wash``, ``naive``, ``single``, ``unwatermarked`` in ``ensemble.py``; the paper's
baselines in ``wash.baselines``) starts a ``Stepper`` on a fresh ``Generation``, and
the loop asks it for one token at a time::

    before()   events before the first token (De-mark's calibration)
    step()     one committed token as a ``StepEvent``, or None to end
    [route]    a routed token: specialists finish the word, then every member
    [resync]   re-tokenises the span (``Generation.route``, ``Generation.resync``)
    resynced() after a re-synchronisation (lazy forwards catch up)
    after()    events after the last token (RandomWalk's rewrite walk)
    finish()   the final result (a baseline adds its costs)

``Generation`` is the public state a step works on: the served system
(``served.py``), every member's context (``members.py``), the seeded token stream,
the live detectors and the record; its methods are the moves a step combines:
``base_logits`` / ``provider_union`` / ``model_part`` (what the providers serve now),
``end_of_step`` (end of text drawn, or a context full), ``commit`` (give a drawn token
to every member, or open a routed span) and ``record``. Which providers take part,
whether their watermarks are on and whether routing is on are the strategy's own
facts (``scope``, ``watermark``, ``routing``).

The only token-by-token loops outside this one, and why each stays outside: none
writes the generation's text, so none has a ``StepEvent``, a routed span or a live
detector to give the loop, and each would make the loop carry a second text.

* ToBlend's lookahead (``baselines/toblend.py``, ``_predict_ahead``): tokens drawn past
  the block and thrown away (the cost the paper charges ToBlend), on the block
  provider's own context, which is cut back before the loop's next step.
* RandomWalk's rewriter (``baselines/randomwalk.py``, ``_Walk.rewrite``): after the loop
  has finished (``after``), a weaker model writes candidate spans of a finished text
  for the judge to accept or refuse; its draws come from a stream of its own.
* Identification's prefix-tree sampler (``detection/identification.py``,
  ``_System.sampled_counts``): thousands of generations at once, walking a tree of
  prefixes node by node, the samples that share a distribution at a node drawn in one
  multinomial; one generation at a time would cost a step per sample and token.
* The plain-decode bench (``timing.plain_decode_ms``): greedy ids on one member with
  nothing served, the raw forward the benchmarks compare the loop's steps with.

Each reaches its model only through the member protocol (``members.py``), so each runs
on every backend.
"""

from __future__ import annotations

import codecs
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, Iterator, Protocol

import torch

from wash.engine import parallel
from wash.engine.backends import backend_name
from wash.engine.detectors import LiveDetector, own_verdicts
from wash.core.errors import WashInputError
from wash.engine.events import (FinishedEvent, LoadEvent, ResyncEvent, RewriteEvent, RoutingSummary, RunResult,
                         SpanRecord, StepEvent, Timing, TokenRecord)
from wash.engine.members import side_by_side
from wash.core.options import params_text
from wash.engine.resync import resynchronise
from wash.engine.routing import pick_specialist, specialists, starts_new_word, word_complete
from wash.engine.readback import ShownProvider, StepReadback, read_step
from wash.engine.sampling import draw, entropy_of, uniform
from wash.engine.served import ModelPart, ServedSystem
from wash.core.version import code_version
from wash.engine.vocab import encode_bytes

if TYPE_CHECKING:
    from wash.engine.aggregation import Rule
    from wash.engine.providers import ProviderSet
    from wash.engine.backends import Backend
    from wash.engine.settings import Forwards, ProviderSpec

Event = LoadEvent | StepEvent | ResyncEvent | RewriteEvent | FinishedEvent
ShouldStop = Callable[[], bool]

#: Which providers a strategy's generation runs: every one, or provider 1 alone.
SCOPES = ("all", "first")


class RunSettings(Protocol):
    """The settings of one generation as the loop reads them; ``config.GenerationConfig`` is one.

    The loop names what it reads instead of importing the config: the config parses a
    mode's name into its strategy (``modes.py``), so it stands above the strategies and
    the loop they run in, and an import back down would close a circle.
    """

    prompt: str
    mode: str
    seed: int
    max_new_tokens: int
    min_new_tokens: int
    max_routed_span: int
    view_k: int
    temperature: float
    top_k: int
    top_p: float
    z_threshold: float
    reencode_every_step: bool
    live_detection: bool
    forwards: "Forwards"
    backend: "Backend"
    parallel_forwards: bool

    @property
    def rule(self) -> "Rule": ...

    @property
    def strategy(self) -> "Strategy": ...

    @property
    def profile(self) -> str: ...

    def active_providers(self) -> list["ProviderSpec"]: ...

    def validate(self) -> None: ...


@dataclass(frozen=True)
class Strategy:
    """How one mode decodes; its parameters are the dataclass's fields (``param=value,...``).

    A subclass states its facts as class keywords (``class Single(Averaged,
    name="single", scope="first", routing=False, summary=...)``) and implements
    ``start``; ``modes.register`` makes it a mode.
    """

    #: The mode's name (``--mode``).
    name: ClassVar[str] = ""
    #: One line for help texts and the mode table.
    summary: ClassVar[str] = ""
    #: ``all``: every provider takes part; ``first``: provider 1 alone.
    scope: ClassVar[str] = "all"
    #: Providers perturb their distributions with their watermarks.
    watermark: ClassVar[bool] = True
    #: A token missing from some vocabularies is finished by specialists (fluency-aware
    #: routing); without routing every member re-tokenises it at once.
    routing: ClassVar[bool] = True
    #: A removal attack the paper compares WASH with (``wash.baselines``), with parameters.
    baseline: ClassVar[bool] = False

    def __init_subclass__(cls, name: str | None = None, summary: str | None = None, scope: str | None = None,
                          watermark: bool | None = None, routing: bool | None = None,
                          baseline: bool | None = None, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        facts = dict(name=name, summary=summary, scope=scope, watermark=watermark, routing=routing,
                     baseline=baseline)
        for fact, value in facts.items():
            if value is not None:
                setattr(cls, fact, value)
        if cls.scope not in SCOPES:
            raise ValueError(f"strategy {cls.name}: scope must be one of {', '.join(SCOPES)}, "
                             f"got {cls.scope}")

    def load(self, config: RunSettings, pset: "ProviderSet") -> Iterator[LoadEvent]:
        """Load what the strategy needs beyond the providers (counted as loading time)."""
        return iter(())

    def start(self, run: "Generation") -> "Stepper":
        """A stepper for one generation."""
        raise NotImplementedError

    def __str__(self) -> str:
        return params_text(self)


class Stepper:
    """One generation's steps under a strategy (its per-run state lives here)."""

    def __init__(self, strategy: Strategy, run: "Generation") -> None:
        self.strategy = strategy
        self.run = run

    def before(self, should_stop: ShouldStop) -> Iterator[Event]:
        """Events before the first token."""
        return iter(())

    def step(self) -> StepEvent | None:
        """Draw and commit one token; None ends the generation (end of text, a full context)."""
        raise NotImplementedError

    def resynced(self) -> None:
        """Called after every re-synchronisation."""

    def after(self, result: RunResult, should_stop: ShouldStop) -> Iterator[Event]:
        """Events after the last token (``result`` records the generation)."""
        return iter(())

    def finish(self, result: RunResult) -> RunResult:
        """The run's final result (the generation's record by default)."""
        return result


def decode(config: RunSettings, pset: "ProviderSet", strategy: Strategy, load_s: float,
           should_stop: ShouldStop) -> Iterator[Event]:
    """The decoding loop of every mode: the strategy's steps until the length, end of text or a stop."""
    run = Generation(config, pset, strategy)
    stepper = strategy.start(run)
    t_start = time.perf_counter()
    yield from stepper.before(should_stop)
    while len(run.tokens) < config.max_new_tokens and run.finish == "length":
        if should_stop():
            run.finish = "stopped"
            break
        with parallel.caller_on_one_thread():
            event = stepper.step()
        if event is None:
            break  # end of text drawn, or a context is full
        yield event
        if not event.routed:
            continue
        yield from run.route(should_stop)
        yield run.resync()
        stepper.resynced()
    result = run.result(load_s, time.perf_counter() - t_start)
    yield from stepper.after(result, should_stop)
    yield FinishedEvent(stepper.finish(result))


class Generation:
    """The state of one generation: the served system, every member's context, detectors, the record."""

    def __init__(self, config: RunSettings, pset: "ProviderSet", strategy: Strategy) -> None:
        self.config = config
        self.strategy = strategy
        #: Every loaded provider and member (a strategy may load members of its own).
        self.pset = pset
        providers = pset.providers[:1] if strategy.scope == "first" else pset.providers
        self.system = system = ServedSystem(pset, providers, strategy.watermark, config.rule,
                                            config.temperature, config.top_p, config.top_k)
        self.providers = system.providers
        self.n = system.n
        self.alignment = system.alignment
        self.models = system.models
        self.members = system.members
        self.prov_model = system.prov_model
        self.by_model = system.by_model
        self.contexts = {}
        for m, member in self.members.items():
            prompt_ids = member.encode_prompt(config.prompt)
            if len(prompt_ids) >= member.max_context:
                raise WashInputError(
                    f"prompt too long for model {m}: {len(prompt_ids)} tokens leave no room in its context "
                    f"of {member.max_context} tokens")
            self.contexts[m] = member.context(prompt_ids, use_cache=not config.reencode_every_step,
                                              served=system.served_rows(m))
        for p in self.providers:
            p.start_generation(config.seed)
        #: Every token draw of the generation (a seed fixes the text).
        self.gen = torch.Generator()
        self.gen.manual_seed(config.seed)
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

    # -- what the providers serve now (run these on the member's lane) --------------------
    def base_logits(self, m: str) -> torch.Tensor:
        """Member ``m``'s served base logits at its context (end of text masked before min_new_tokens)."""
        end_of_text = len(self.tokens) >= self.config.min_new_tokens
        return self.system.serve(m, self.contexts[m].next_logits(), end_of_text)

    def provider_dist(self, i: int, base: torch.Tensor) -> torch.Tensor:
        """Provider i's distribution over its model's rows at its context."""
        ctx = self.contexts[self.prov_model[i]]
        return self.system.provider_dist(i, base, ctx.ids, ctx.prompt_len)

    def model_part(self, m: str) -> ModelPart:
        ctx = self.contexts[m]
        return self.system.model_part(m, self.base_logits(m), ctx.ids, ctx.prompt_len)

    def provider_union(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Provider i's distribution on the union, and its served base entropy (0-d), computed on its lane."""
        m = self.prov_model[i]

        def work() -> tuple[torch.Tensor, torch.Tensor]:
            base = self.base_logits(m)
            return self.system.on_union(m, self.provider_dist(i, base)), entropy_of(base)

        return side_by_side([(self.members[m], work)])[0]

    # -- helpers ---------------------------------------------------------------------
    def room_for(self, u: int) -> bool:
        """Whether every context can take union token ``u`` (and the open span) in its own ids.

        A model needs at most one id per byte (byte-level and byte-fallback
        vocabularies), so the bytes bound each model's own id count.
        """
        a = self.alignment
        extra = len(a.token_bytes(u)) + sum(len(a.token_bytes(v)) for v in self.span)
        for m, ctx in self.contexts.items():
            start = self.span_starts[m] if self.span else len(ctx.ids)
            if start + extra > self.members[m].max_context:
                return False
        return True

    def feed_live(self) -> None:
        """Push every model's newly settled ids to the live detectors of its providers."""
        for m in self.models:
            new = self.contexts[m].ids[self.fed[m]:]
            for d in self.live:
                if d.provider.model == m:
                    d.feed(new)
            self.fed[m] = len(self.contexts[m].ids)

    def restart_live(self, m: str) -> None:
        """Re-tokenised ids replace what ``m``'s live detectors had seen: start them again on them."""
        ctx = self.contexts[m]
        for j, d in enumerate(self.live):
            if d.provider.model == m:
                fresh = LiveDetector(d.provider, ctx.ids[:ctx.prompt_len])
                fresh.feed(ctx.ids[ctx.prompt_len:])
                self.live[j] = fresh
        self.fed[m] = len(ctx.ids)

    def text_bytes(self) -> bytes:
        return b"".join(self.alignment.token_bytes(t.union_id) for t in self.tokens)

    def record(self, u: int, routed: bool, specialists_: list[int], chosen: int | None, t0: float,
               shown: StepReadback) -> StepEvent:
        """The token ``u`` as the run's record and its event; ``shown`` is what its step read back."""
        text = self.decoder.decode(self.alignment.token_bytes(u))
        span_id = len(self.spans) if routed else None
        self.tokens.append(TokenRecord(text=text, union_id=u, routed=routed, span_id=span_id,
                                       specialists=list(specialists_), chosen=chosen, entropy=shown.entropy))
        self.step_ms.append((time.perf_counter() - t0) * 1000)
        view = shown.view
        return StepEvent(
            step=len(self.tokens) - 1, token=text, union_id=u, routed=routed, span_id=span_id,
            specialists=list(specialists_), chosen=chosen,
            candidates=[self.alignment.token_text(v) for v in view], candidate_ids=view,
            provider_probs=shown.provider_probs, average_probs=shown.average_probs,
            consensus_probs=shown.consensus_probs, linf=shown.linf,
            live_z=[d.z() for d in self.live] if self.live else [None] * self.n,
            elapsed_ms=self.step_ms[-1], entropy=shown.entropy)

    def own_draw(self, k: int) -> StepReadback:
        """Provider k draws from its own law on the union (a lazy step's, a turn's, a routed one's):
        the token and what the step shows, read back in one copy (``readback``)."""
        with parallel.caller_on_one_thread():
            dist, h = self.provider_union(k)
            return read_step(draw(dist, uniform(self.gen)), h, [dist], self.config.view_k,
                             [ShownProvider(dist) if i == k else None for i in range(self.n)])

    def end_of_step(self, x: int) -> bool:
        """True when the run ends at ``x``: end of text drawn, or some context is full."""
        if x == self.alignment.eos_index:
            self.finish = "eos"
            return True
        if not self.room_for(x):
            self.finish = "context"
            return True
        return False

    def one_provider_step(self, k: int, t0: float) -> StepEvent | None:
        """Provider k draws the token from its own distribution on the union (a lazy step's or a turn's)."""
        shown = self.own_draw(k)
        if self.end_of_step(shown.token):
            return None
        return self.commit(shown.token, t0, k, shown)

    # -- committing a token, routing, re-synchronisation --------------------------------
    def commit(self, x: int, t0: float, chosen: int | None, shown: StepReadback) -> StepEvent:
        """Give a drawn token to every member, or open a routed span when some vocabularies lack it.

        ``shown`` is what the step read back with the token (``readback``): its view, entropy, probabilities.
        """
        a = self.alignment
        if bool(a.intersection[x]) or not self.strategy.routing:
            # Every vocabulary has x (or routing is off: every model re-tokenises it at once).
            for m in self.models:
                mid = int(a.from_union[m][x])
                member = self.members[m]
                self.contexts[m].append([mid] if mid >= 0 else
                                        encode_bytes(a.token_bytes(x), member.encode, member.vocab))
            self.feed_live()
            return self.record(x, False, [], chosen, t0, shown)
        # x is missing from some vocabularies: open a routed span with its specialists.
        self.span = [x]
        self.span_starts = {m: len(self.contexts[m].ids) for m in self.models}
        self.span_specialists = specialists(range(self.n), self.prov_model, a.from_union, x)
        self._commit_to_specialists(x, self.span_specialists)
        return self.record(x, True, self.span_specialists, chosen, t0, shown)

    def _commit_to_specialists(self, u: int, current: list[int]) -> None:
        for m in dict.fromkeys(self.prov_model[i] for i in current):
            self.contexts[m].append([int(self.alignment.from_union[m][u])])

    def _span_bytes(self) -> bytes:
        return b"".join(self.alignment.token_bytes(u) for u in self.span)

    def _bytes_before_span(self) -> bytes:
        """The last few bytes written before the open span (a span can open inside a character)."""
        start = len(self.tokens) - len(self.span)
        return b"".join(self.alignment.token_bytes(t.union_id) for t in self.tokens[max(0, start - 4):start])

    def route(self, should_stop: ShouldStop) -> Iterator[StepEvent]:
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
            shown = self.own_draw(k)
            y = shown.token
            if y == a.eos_index:
                self.finish = "eos"
                return
            if starts_new_word(a.token_bytes(y)):
                return  # the word is complete; the boundary token is not committed
            if not self.room_for(y):
                self.finish = "context"
                return
            current = specialists(current, self.prov_model, a.from_union, y)
            self._commit_to_specialists(y, current)
            self.span.append(y)
            yield self.record(y, True, current, k, t0, shown)

    def resync(self) -> ResyncEvent:
        """Context re-synchronisation: every member re-tokenises the finished span."""
        span_bytes = self._span_bytes()
        new = resynchronise(span_bytes, self.contexts, self.span_starts, self.members)
        self.feed_live()
        text = span_bytes.decode("utf-8", errors="replace")
        span_id = len(self.spans)
        self.spans.append(SpanRecord(span_id=span_id, text=text, start=len(self.tokens) - len(self.span),
                                     length=len(self.span), specialists=list(self.span_specialists)))
        self.span = []
        return ResyncEvent(span_id=span_id, text=text, specialists=list(self.span_specialists),
                           tokens_per_model={m: [self.members[m].decode_id(i) for i in ids]
                                             for m, (ids, _) in new.items()},
                           ids_replaced={m: replaced for m, (_, replaced) in new.items()})

    def result(self, load_s: float, total_s: float) -> RunResult:
        for ctx in self.contexts.values():
            ctx.settle()  # a background feed still queued finishes before its counters are read
        text = self.text_bytes().decode("utf-8", errors="replace")
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
            detection=own_verdicts(self.providers, text, cfg.z_threshold) if text else [],
            timing=Timing(per_token_ms=sum(ms) / len(ms) if ms else 0.0,
                          median_token_ms=statistics.median(ms) if ms else 0.0,
                          total_s=total_s, load_s=load_s,
                          forward_calls={m: c.forward_calls for m, c in self.contexts.items()},
                          ids_fed={m: c.ids_fed for m, c in self.contexts.items()},
                          forward_s={m: c.forward_s for m, c in self.contexts.items()},
                          backend=backend_name(cfg.backend)),
            model_ids={m: c.generated_ids() for m, c in self.contexts.items()},
            finish_reason=self.finish,
            settings={"max_new_tokens": cfg.max_new_tokens, "min_new_tokens": cfg.min_new_tokens,
                      "profile": cfg.profile, "temperature": cfg.temperature, "top_k": cfg.top_k,
                      "top_p": cfg.top_p, "aggregation": str(self.system.rule), "models": list(self.models),
                      "z_threshold": cfg.z_threshold, "max_routed_span": cfg.max_routed_span,
                      "view_k": cfg.view_k, "forwards": str(cfg.forwards),
                      "parallel_forwards": cfg.parallel_forwards,
                      "threads_per_model": parallel.threads_per_model(),
                      "live_z_final": [d.z(force=True) for d in self.live],
                      "code": code_version()},
        )
