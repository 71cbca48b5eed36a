"""One served system: what each provider serves on the union vocabulary, and their aggregate.

A system is a set of providers (each a member's base model with a watermark and a
key), the union of their models' vocabularies, how every provider serves its
model (mask, temperature, top-k, top-p, then the watermark, or no watermark in
``unwatermarked`` mode) and the aggregation rule that combines them. Given a
member's logits it gives

* each provider's served distribution p_i on its model's rows (``provider_dist``),
  under its own generation state or any other (a fresh request's);
* p_i on the union vocabulary (``on_union``): a token absent from a vocabulary gets
  0 there, two rows spelling the same bytes add up (``averaging.py``);
* one model's share of an eager step (``model_part``): its providers' p_i, their
  sum and (N_m × its unwatermarked distribution) on the union, each p_i on the union
  when the rule needs them, and the served entropy;
* the step's aggregate (``combine``): p̄ under the rule (the mean by default, one
  scatter per base model; any other rule over every p_i on the union), the consensus
  p* (the mean of the unwatermarked distributions) and the mean served entropy.

The WASH steps (eager and lazy), identification (``identification.py``) and the
baselines all read the system through this one object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import torch

from wash.engine.aggregation import Rule
from wash.engine.averaging import average
from wash.engine.providers import OWN_STATE
from wash.engine.sampling import ServedRows, entropy_of, process_logits
from wash.watermarks.base import softmax

if TYPE_CHECKING:
    from wash.engine.providers import Provider, ProviderSet


@dataclass
class ModelPart:
    """One base model's share of an eager step, computed on that model's own lane."""

    dists: list[torch.Tensor]  # p_i of this model's providers, in provider order
    p_bar_part: torch.Tensor  # Σ of those p_i on the union
    p_star_part: torch.Tensor  # (number of those providers) × softmax(base) on the union
    entropy: torch.Tensor  # 0-d, of softmax(base), the served base distribution (nats), where base is
    #: Each p_i on the union, for a rule other than the mean (``None`` under the mean).
    union_dists: list[torch.Tensor] | None = None


@dataclass
class Aggregate:
    """A step's combined distributions: what the token is drawn from, and the consensus."""

    p_bar: torch.Tensor  # the rule's aggregate on the union (the mean by default)
    p_star: torch.Tensor  # the mean of the unwatermarked distributions on the union
    dists: list[torch.Tensor]  # every provider's p_i on its model's rows, in provider order
    entropy: torch.Tensor  # 0-d: the providers' served base entropies, averaged like p*


class ServedSystem:
    """Providers on their members, served with one profile, combined under one rule."""

    def __init__(self, pset: "ProviderSet", providers: Sequence["Provider"], watermark: bool, rule: Rule,
                 temperature: float, top_p: float, top_k: int) -> None:
        self.providers = list(providers)
        self.n = len(self.providers)
        self.alignment = a = pset.alignment
        self.prov_model = [p.model for p in self.providers]
        self.models = list(dict.fromkeys(self.prov_model))
        self.members = {m: pset.members[m] for m in self.models}
        self.by_model = {m: [i for i, pm in enumerate(self.prov_model) if pm == m] for m in self.models}
        #: Each model's projection onto the union (``vocab.UnionMap``: every projection goes through it).
        self.maps = {m: a.union_map(m) for m in self.models}
        self.invalid = {m: a.served_mask(m) for m in self.models}
        # Until a generation's min_new_tokens exist, end-of-text rows are masked like special tokens.
        self.no_eos = {m: a.served_mask(m, end_of_text=False) for m in self.models}
        self.watermark = watermark
        self.rule = rule
        # The mean (and any rule over a single provider, which is that provider) keeps the
        # per-model fast path; another rule needs every p_i on the union and which
        # vocabularies have which token.
        self.robust = not rule.is_mean and self.n > 1
        self.present = torch.stack([a.from_union[m] >= 0 for m in self.prov_model]) if self.robust else None
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        #: Provider distributions computed so far (identification reports it).
        self.distributions = 0
        self._masks: dict[tuple[str, bool, torch.device], torch.Tensor] = {}

    # -- one provider ------------------------------------------------------------------
    def serve(self, model: str, logits: torch.Tensor, end_of_text: bool = True) -> torch.Tensor:
        """A member's raw logits as its providers serve them, before any watermark (float64).

        ``end_of_text=False`` masks the end-of-text rows too (before ``min_new_tokens``).
        """
        mask = self.mask_on(model, end_of_text, logits.device)
        return process_logits(logits, mask, self.temperature, self.top_p, self.top_k)

    def mask_on(self, model: str, end_of_text: bool, device: torch.device) -> torch.Tensor:
        """``serve``'s mask where the logits are (copied to a device once: a GPU step reads no host mask)."""
        mask = self.invalid[model] if end_of_text else self.no_eos[model]
        if device.type == "cpu":
            return mask
        key = (model, end_of_text, device)
        if key not in self._masks:
            self._masks[key] = mask.to(device)
        return self._masks[key]

    def served_rows(self, model: str) -> ServedRows | None:
        """The rows of ``model``'s logits that ``serve`` can keep under either mask (``None``: all of them)."""
        return ServedRows.of([self.invalid[model], self.no_eos[model]], self.temperature, self.top_k)

    def provider_dist(self, i: int, base: torch.Tensor, ids: Sequence[int], prompt_len: int,
                      state: Any = OWN_STATE) -> torch.Tensor:
        """Provider i's next-token distribution over its model's rows (watermarked unless switched off)."""
        self.distributions += 1
        if not self.watermark:
            return softmax(base)
        return self.providers[i].distribution(base, ids, prompt_len, state)

    def on_union(self, model: str, probs: torch.Tensor) -> torch.Tensor:
        """A distribution over ``model``'s rows, scattered onto the union vocabulary (mass kept)."""
        return self.maps[model].project(probs)

    def provider_union(self, i: int, base: torch.Tensor, ids: Sequence[int], prompt_len: int,
                       state: Any = OWN_STATE) -> torch.Tensor:
        """Provider i's distribution on the union vocabulary."""
        return self.on_union(self.prov_model[i], self.provider_dist(i, base, ids, prompt_len, state))

    # -- every provider ----------------------------------------------------------------
    def model_part(self, model: str, base: torch.Tensor, ids: Sequence[int], prompt_len: int) -> ModelPart:
        """``model``'s providers at served logits ``base`` after ``ids``: its share of an eager step."""
        dists = [self.provider_dist(i, base, ids, prompt_len) for i in self.by_model[model]]
        summed = dists[0] if len(dists) == 1 else torch.stack(dists).sum(0)
        p_bar_part = self.on_union(model, summed)
        p_star_part = p_bar_part if not self.watermark else self.on_union(model, softmax(base) * len(dists))
        union_dists = [self.on_union(model, d) for d in dists] if self.robust else None
        return ModelPart(dists, p_bar_part, p_star_part, entropy=entropy_of(base), union_dists=union_dists)

    def combine(self, parts: dict[str, ModelPart]) -> Aggregate:
        """Every model's part -> p̄ under the rule, p*, every p_i and the mean served entropy."""
        ordered = [parts[m] for m in self.models]
        p_mean = average([p.p_bar_part for p in ordered], self.n)
        p_star = p_mean if not self.watermark else average([p.p_star_part for p in ordered], self.n)
        dists: list[torch.Tensor] = [torch.empty(0)] * self.n
        union: list[torch.Tensor] = [torch.empty(0)] * self.n
        for m in self.models:
            for i, d in zip(self.by_model[m], parts[m].dists):
                dists[i] = d
            for i, d in zip(self.by_model[m], parts[m].union_dists or []):
                union[i] = d
        p_bar = self.aggregate(union) if self.robust else p_mean
        h = sum(len(self.by_model[m]) * parts[m].entropy for m in self.models) / self.n
        return Aggregate(p_bar=p_bar, p_star=p_star, dists=dists, entropy=h)

    def aggregate(self, union_dists: Sequence[torch.Tensor]) -> torch.Tensor:
        """The rule over every provider's distribution on the union, in provider order."""
        return self.rule(torch.stack(list(union_dists)), self.present)
