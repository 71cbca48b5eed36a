"""ToBlend (Huang, Kwak and An 2024): the providers take turns, one block of tokens each.

**Method.** ToBlend ("Token-Level Blending With an Ensemble of LLMs to Attack
AI-Generated Text Detection") writes one text with several models: at each turn
one model of the candidate set is selected and predicts the next block of tokens
from its own distribution, then the next turn is given to a (possibly other)
model, which continues the text written so far. The WASH paper (Sec. 3,
Baselines) runs it as its second generation-time baseline, "predicting a fixed
number of tokens with a single selected model each time", and charges it
(Introduction; the discussion of its quality-and-time table) for "re-encoding
the entire context at every switch" and for predicting "redundant future
tokens". Here the candidate set is every provider of the config (each
watermarked with its own scheme and key, exactly as under WASH), so ToBlend runs
beside WASH on the same providers.
There is no union-vocabulary averaging and no routing: the selected provider draws
each token of its block from its own watermarked distribution over its own
vocabulary. At a switch the incoming provider receives the text, not ids: its
model re-tokenises the generated text so far (after the prompt's ids, which stay
as the prompt is encoded for every mode) and encodes the whole context from
scratch, with a fresh KV cache. Within a block the KV cache is used normally.

**Parameters** (``--baseline-options block=1,select=random,lookahead=0``):

* ``block`` (default 1): tokens one selected provider writes per turn. ToBlend is
  "token-level" blending and its abstract says it proceeds "by randomly sampling
  token(s) from candidate LLMs sets": one token per selection is its base setting;
  the WASH paper says "a fixed number of tokens" without giving the number. Any
  value from 1 to 400 (the longest generation) is accepted.
* ``select`` (default ``random``): how each turn's provider is chosen.
  ``random``: uniformly among all providers, independently for every block (the
  abstract's "randomly sampling ... from candidate LLMs sets"; the same provider
  may be drawn twice in a row, which is then no switch). ``round-robin``:
  provider ``b mod N`` writes block ``b`` (a switch at every block when N > 1).
  Random picks come from their own stream seeded by the generation seed
  (``derive_seed("toblend-select", seed)``), so a seed fixes them and they never
  disturb the token draws.
* ``lookahead`` (default 0): tokens the selected provider predicts past the end
  of its block, which are then discarded, as an implementation that asks each
  model for a longer continuation than it keeps does. The WASH paper attributes
  part of ToBlend's cost to such "redundant future tokens" but gives no number,
  so the default predicts none (the cheapest faithful ToBlend); the discarded
  draws use their own seeded stream, so ``lookahead`` changes the cost, never the
  text. At most 64.

**Faithful here**: the blocks, the selection rules, drawing from each provider's
own watermarked distribution on its own vocabulary, re-tokenising and
re-encoding the whole context at every switch (the forward passes and their time
are real and counted), the providers' real detectors on the final text.
**Not reproduced**: the ToBlend paper's own models, prompts and candidate sets
(two small models here), and its exact variant settings: the copy of the paper
reachable from this project held only its abstract, so the defaults above follow
the abstract and the WASH paper's description, and the variants are parameters.
A switch between two providers on the same base model still re-encodes (each
provider is its own service and holds no cache of the other's text); a provider
drawn again for the next block keeps its cache (the favourable reading: no switch).
With ``block=1`` and ``select=random`` each token has, given the text, the law of
a lazy WASH step without routing (a uniformly picked provider draws it from its
own p_i, and p̄ is their mean), which is why the paper finds ToBlend's removal
close to WASH's; what differs is the cost (a from-scratch re-encoding at about
(N-1)/N of the tokens) and that no routing keeps words whole.

**Events.** One ``StepEvent`` per token, as a lazy WASH step records it:
``chosen`` is the provider holding the turn, its distribution alone is computed
(``provider_probs`` filled for it only, candidates its top tokens, ``entropy``
its served base distribution's), the average and consensus are ``None``,
``routed`` is false. Every model also appends each token (its own id for the
token's bytes where it has one, else the bytes re-tokenised), without a forward
pass, so every provider's live detector follows the text; a model whose context
is re-encoded at a switch restarts its providers' live detectors on the new ids.

**Costs** (``RunResult.settings["baseline"]``): ``blocks`` (turns),
``switches`` (turns given to another provider), ``reencoded_ids`` per model (ids
encoded from scratch at switches: prompt plus re-tokenised text),
``reencode_forwards`` and ``reencode_s`` per model (the forward passes and
seconds those re-encodings took; each also yields the block's first logits),
``lookahead_ids`` per model (discarded predictions), ``tokens_per_provider``.
``Timing`` keeps every model's total forward calls, ids fed and forward seconds,
re-encodings and look-ahead included; each step's ``elapsed_ms`` includes the
switch that opened its block.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from wash.engine.decode import Generation, Stepper, Strategy
from wash.core.errors import WashInputError
from wash.engine.events import RunResult, StepEvent
from wash.engine.members import side_by_side
from wash.engine.modes import register
from wash.core.options import check_range
from wash.engine.sampling import sample, uniform_choice
from wash.engine.settings import MAX_NEW_TOKENS_CAP
from wash.engine.vocab import encode_bytes
from wash.watermarks.hashing import derive_seed

#: How each turn's provider is chosen (see the module docstring).
SELECTIONS = ("random", "round-robin")
#: Most tokens predicted and discarded past a block: beyond this it only burns time.
MAX_LOOKAHEAD = 64


#: One line for help texts and the mode table.
_SUMMARY = ("baseline ToBlend (Huang et al. 2024): the providers take turns, each writing a "
            "fixed block of tokens from its own distribution, the context re-encoded at "
            "every switch")


@dataclass(frozen=True)
@register
class ToBlend(Strategy, name="toblend", routing=False, baseline=True,
              summary=_SUMMARY):
    """The providers take turns; each writes ``block`` tokens from its own watermarked distribution."""

    block: int = 1
    select: str = "random"
    lookahead: int = 0

    def __post_init__(self) -> None:
        """Refuse out-of-range parameters when the mode is parsed, before any model loads."""
        check_range("mode 'toblend'", "block", self.block, 1, MAX_NEW_TOKENS_CAP)
        if self.select not in SELECTIONS:
            raise WashInputError(f"mode 'toblend': unknown select '{self.select}' "
                                 f"(accepted: {', '.join(SELECTIONS)})")
        check_range("mode 'toblend'", "lookahead", self.lookahead, 0, MAX_LOOKAHEAD)

    def start(self, run: Generation) -> Stepper:
        return _BlendSteps(self, run)


@dataclass
class _Costs:
    """What ToBlend spent beyond drawing its tokens (``settings["baseline"]``)."""

    models: list[str]
    n_providers: int
    blocks: int = 0
    switches: int = 0
    reencoded_ids: dict[str, int] = field(default_factory=dict)
    reencode_forwards: dict[str, int] = field(default_factory=dict)
    reencode_s: dict[str, float] = field(default_factory=dict)
    lookahead_ids: dict[str, int] = field(default_factory=dict)
    tokens_per_provider: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for counter in (self.reencoded_ids, self.reencode_forwards, self.lookahead_ids):
            counter.update({m: 0 for m in self.models})
        self.reencode_s.update({m: 0.0 for m in self.models})
        self.tokens_per_provider = [0] * self.n_providers

    def as_dict(self, method: ToBlend) -> dict:
        return {"method": method.name, "params": str(method), "blocks": self.blocks,
                "switches": self.switches, "reencoded_ids": dict(self.reencoded_ids),
                "reencode_forwards": dict(self.reencode_forwards),
                "reencode_s": dict(self.reencode_s), "lookahead_ids": dict(self.lookahead_ids),
                "tokens_per_provider": list(self.tokens_per_provider)}


class _BlendSteps(Stepper):
    """Turns instead of averaging: the provider holding the turn draws from its own distribution."""

    strategy: ToBlend

    def __init__(self, strategy: ToBlend, run: Generation) -> None:
        super().__init__(strategy, run)
        self.method = strategy
        self.turns = torch.Generator()
        self.turns.manual_seed(derive_seed("toblend-select", run.config.seed))
        self.ahead = torch.Generator()
        self.ahead.manual_seed(derive_seed("toblend-lookahead", run.config.seed))
        self.turn: int | None = None  # the provider writing the current block
        self.costs = _Costs(run.models, run.n)

    # -- turns -----------------------------------------------------------------------
    def _next_provider(self) -> int:
        if self.method.select == "round-robin":
            return self.costs.blocks % self.run.n
        return uniform_choice(self.run.n, self.turns)

    def _start_block(self) -> None:
        """Hand the next block to a provider; a different provider re-encodes the context."""
        if self.turn is not None and self.method.lookahead:
            self._predict_ahead(self.turn)
        k = self._next_provider()
        if self.turn is not None and k != self.turn:
            self.costs.switches += 1
            self._reencode(self.run.prov_model[k])
        self.turn = k
        self.costs.blocks += 1

    def _reencode(self, m: str) -> None:
        """Model ``m`` takes the text as text: re-tokenise it and encode the whole context anew.

        The prompt keeps its ids (every mode encodes it the same way, and detection
        scores the generated ids after it); the generated text is re-tokenised by
        ``m``'s own tokenizer. The cache is dropped and the forward that rebuilds it
        runs here, timed, and leaves the block's first logits cached for the step.
        """
        run = self.run
        ctx, member = run.contexts[m], run.members[m]
        new = ctx.ids[:ctx.prompt_len] + encode_bytes(run.text_bytes(), member.encode, member.vocab)
        changed = new != ctx.ids
        ctx.restart(new)  # a fresh cache: the incoming provider holds none of this text
        calls, seconds = ctx.forward_calls, ctx.forward_s
        side_by_side([(member, ctx.next_logits)])
        self.costs.reencoded_ids[m] += len(new)
        self.costs.reencode_forwards[m] += ctx.forward_calls - calls
        self.costs.reencode_s[m] += ctx.forward_s - seconds
        if changed:
            run.restart_live(m)

    def _predict_ahead(self, k: int) -> None:
        """Provider ``k`` predicts ``lookahead`` tokens past its block; they are discarded."""
        run = self.run
        m = run.prov_model[k]
        ctx, member = run.contexts[m], run.members[m]
        keep = len(ctx.ids)
        eos = run.alignment.eos_index
        for _ in range(self.method.lookahead):
            if len(ctx.ids) >= member.max_context:
                break

            def work() -> int:
                return sample(run.provider_dist(k, run.base_logits(m)), self.ahead)

            row = side_by_side([(member, work)])[0]
            if int(run.alignment.to_union[m][row]) == eos:
                break
            ctx.append([row])
            self.costs.lookahead_ids[m] += 1
        ctx.truncate(keep)

    # -- one token -------------------------------------------------------------------
    def step(self) -> StepEvent | None:
        """The provider holding the turn draws one token from its own distribution."""
        t0 = time.perf_counter()
        if len(self.run.tokens) % self.method.block == 0:
            self._start_block()
        k = self.turn
        assert k is not None
        event = self.run.one_provider_step(k, t0)
        if event is not None:
            self.costs.tokens_per_provider[k] += 1
        return event

    def finish(self, result: RunResult) -> RunResult:
        result.settings["baseline"] = self.costs.as_dict(self.method)
        return result
