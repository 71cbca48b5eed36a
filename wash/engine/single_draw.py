"""The engine's single mode as a transformers logits processor: ``model.generate`` emits its tokens.

Single mode serves provider 1 alone, one token per step: the model's raw logits are
served (non-text rows masked, end of text too before ``min_new_tokens``, then
temperature, top-k and top-p: ``ServedSystem.serve``), watermarked by the provider's
scheme under the state its index and the run's seed draw (``Provider.start_generation``),
projected onto the union vocabulary and drawn there by inverting the CDF at one uniform
of a generator seeded with the run's seed (``sampling.sample``). ``single_processor``
hands ``wash.watermarks.logits_processor.SchemeLogitsProcessor`` that serving and that
draw, so greedy decoding with it yields the engine's tokens for the same spec, seed and
profile (``tests/test_logits_processor.py``).
"""

from __future__ import annotations

import torch

from wash.engine.aggregation import Mean
from wash.engine.models import LoadedModel, load_model
from wash.engine.providers import build_providers
from wash.engine.sampling import sample
from wash.engine.served import ServedSystem
from wash.engine.settings import DEFAULT_PROFILE, ProviderSpec, profile
from wash.core.errors import WashInputError
from wash.watermarks.logits_processor import SchemeLogitsProcessor


def single_processor(provider: str | ProviderSpec, seed: int, serving: str = DEFAULT_PROFILE,
                     min_new_tokens: int = 0) -> tuple[SchemeLogitsProcessor, LoadedModel]:
    """The processor that makes ``generate(..., do_sample=False)`` on the returned model emit what
    mode ``single`` generates for ``provider`` (a spec, ``model:scheme:key[:params]``), ``seed`` and
    the serving profile ``serving``; one prompt (the model's ``encode_prompt``) per processor.

    A coordinated provider is refused: its scheme reads union ids, not the model's."""
    spec = ProviderSpec.parse(provider) if isinstance(provider, str) else provider
    if spec.coordinated:
        raise WashInputError("single_processor: a coordinated provider's scheme reads union ids; "
                             "generate it with the engine")
    pset = build_providers([spec], backend="local")  # the caller's generate runs the model here
    p = pset.providers[0]
    prof = profile(serving)
    system = ServedSystem(pset, [p], True, Mean(), prof.temperature, prof.top_p, prof.top_k)
    umap = system.maps[p.model]
    p.start_generation(seed)
    gen = torch.Generator()
    gen.manual_seed(seed)
    steps = [0]

    def serve(logits: torch.Tensor) -> torch.Tensor:
        out = system.serve(p.model, logits, end_of_text=steps[0] >= min_new_tokens)
        steps[0] += 1
        return out

    def draw(probs: torch.Tensor) -> int:
        return int(umap.from_union[sample(umap.project(probs), gen)])

    return SchemeLogitsProcessor(p.scheme, p.state, serve=serve, draw=draw), load_model(p.model)
