"""The public Python API, re-exported by ``wash`` itself: generate, stream, detect, identify.

A notebook needs four calls and two types::

    import wash

    providers = ["smollm2:kgw:15485863", "gemma3:aar:42", "smollm2:dipmark:7"]
    result = wash.generate("The old lighthouse keeper", providers, max_new_tokens=48, seed=0)
    print(result.text)
    for d in wash.detect(result): print(d.provider, round(d.z, 2), d.detected)

A provider is written ``MODEL:SCHEME:KEY[:param=value,...]`` (as on the command line)
or given as a ``wash.Provider``; every other setting is a ``wash.GenerationConfig``
field, passed by name (``mode="naive"``, ``forwards="lazy"``, ``aggregate="median-clip"``,
``baseline_options="block=8"``). Bad input raises ``wash.WashInputError`` with a
one-line message before any model loads. A seed fixes the text.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, Union

import wash.baselines  # noqa: F401  (registers the baseline modes)
from wash.engine.config import DEFAULT_PROFILE, GenerationConfig, ProviderSpec
from wash.core.errors import WashInputError
from wash.detection.thresholds import Z_THRESHOLD

if TYPE_CHECKING:
    from wash.engine.events import LoadEvent, ProviderDetection, RunResult
    from wash.detection.identification import Identification

#: One watermarked provider: a base model served with a scheme and a secret key
#: (``Provider("smollm2", "kgw", 42)`` or ``Provider.parse("smollm2:kgw:42:gamma=0.25")``).
Provider = ProviderSpec
#: What the functions accept for a provider.
ProviderLike = Union[str, ProviderSpec]


def providers_of(values: Sequence[ProviderLike] | ProviderLike) -> list[ProviderSpec]:
    """Provider specs from spec strings or ``Provider`` objects (one, or a sequence)."""
    if isinstance(values, (str, ProviderSpec)):
        values = [values]
    return [v if isinstance(v, ProviderSpec) else ProviderSpec.parse(str(v)) for v in values]


def make_config(prompt: str | GenerationConfig, providers: Sequence[ProviderLike] | ProviderLike = (),
                profile: str | None = None, **settings: Any) -> GenerationConfig:
    """A validated ``GenerationConfig`` from a prompt, providers and settings by name.

    ``profile`` (``open``, the default, or ``paper``) sets temperature, top-k and
    top-p, which ``settings`` may override. Given a ``GenerationConfig`` instead of a
    prompt, returns a copy with ``settings`` applied (``providers`` replace its own
    when given).
    """
    if isinstance(prompt, GenerationConfig):
        if profile is not None:
            raise WashInputError("give a profile or a GenerationConfig, not both")
        fields = dict(settings, **({"providers": providers_of(providers)} if providers else {}))
        config = dataclasses.replace(prompt, **fields)
    else:
        try:
            config = GenerationConfig.from_profile(profile or DEFAULT_PROFILE, prompt=prompt,
                                                   providers=providers_of(providers), **settings)
        except TypeError as err:  # a setting that is no GenerationConfig field
            raise WashInputError(f"unknown setting: {err}") from None
    config.validate()
    return config


def generate(prompt: str | GenerationConfig, providers: Sequence[ProviderLike] | ProviderLike = (), *,
             profile: str | None = None, on_load: Callable[["LoadEvent"], None] | None = None,
             should_stop: Callable[[], bool] | None = None, **settings: Any) -> "RunResult":
    """Generate one text and return its ``RunResult``.

    ``prompt`` is the prompt (or a whole ``GenerationConfig``), ``providers`` the
    providers (spec strings or ``Provider``s), ``settings`` any ``GenerationConfig``
    field by name: ``mode`` (``wash``, ``naive``, ``single``, ``unwatermarked``,
    ``toblend``, ``demark``, ``randomwalk``), ``max_new_tokens``, ``seed``,
    ``forwards`` (``eager`` or ``lazy``), ``aggregate`` (``mean`` or a robust rule),
    ``temperature``, ``top_k``, ``top_p``, ``baseline_options``, ... The result holds
    the text, every token's record, the routing summary, each provider's detection
    on the text and the settings the text depends on. ``on_load`` receives model
    loading progress; ``should_stop`` is polled before every token.
    """
    from wash.engine.ensemble import generate as run

    return run(make_config(prompt, providers, profile, **settings), should_stop, on_load)


def stream(prompt: str | GenerationConfig, providers: Sequence[ProviderLike] | ProviderLike = (), *,
           profile: str | None = None, on_load: Callable[["LoadEvent"], None] | None = None,
           should_stop: Callable[[], bool] | None = None, **settings: Any) -> Iterator[Any]:
    """``generate``, one event at a time (``wash.engine.events``): loading messages (unless
    ``on_load`` takes them), one ``StepEvent`` per token with every provider's
    distribution on its candidates, a ``ResyncEvent`` after each routed span, and a
    final ``FinishedEvent`` whose ``result`` is what ``generate`` returns."""
    from wash.engine.ensemble import generate_stream

    yield from generate_stream(make_config(prompt, providers, profile, **settings), should_stop, on_load)


def detect(text: "str | RunResult", providers: Sequence[ProviderLike] | ProviderLike = (), *,
           models: Sequence[str] | None = None, threshold: float = Z_THRESHOLD, statistic: str = "sum",
           backend: str | None = None) -> list["ProviderDetection"]:
    """Each provider's own detector on ``text`` (re-tokenised by that provider's tokenizer).

    ``text`` may be a ``RunResult``: its text, its providers (unless ``providers``
    names others) and its model set. ``models`` is the generation's model set, the
    union vocabulary a coordinated provider hashes in (default: the providers' own
    models). Returns one ``ProviderDetection`` per provider: ``z``, ``p``,
    ``tokens_scored`` and ``detected`` (z above ``threshold``; for a ``statistic`` other than the
    scheme's own ``sum``, its calibrated p). ``backend`` says where the providers' models run
    (``local``, ``ray[:address=HOST:PORT]``; default ``WASH_BACKEND``): a model-aware statistic
    re-reads the text there.
    """
    from wash.detection.per_text import detect_text, recorded_run
    from wash.engine.events import RunResult
    from wash.engine.providers import build_providers

    if isinstance(text, RunResult):
        run = recorded_run(text.to_dict())
        text, specs = run.text, providers_of(providers) if providers else run.specs
        models = list(models) if models is not None else run.models
    else:
        specs = providers_of(providers)
    if not specs:
        raise WashInputError("no provider given")
    return detect_text(build_providers(specs, union_models=models, backend=backend).providers, text, threshold,
                       statistic=statistic)


def identify(providers: Sequence[ProviderLike] | ProviderLike, mode: str = "wash",
             **probe: Any) -> "Identification":
    """Ask whether the system made of ``providers`` is watermarked at all, with no key (Water-Probe).

    ``mode``: ``single`` (provider 1 alone), ``wash`` (the average) or
    ``unwatermarked``. ``probe`` sets ``wash.detection.identification.Probe`` fields by name
    (``version``, ``contexts``, ``samples``, ``runs``, ``seed``, ``serving``,
    ``aggregate``, ...). The result's ``s`` (mean pair score, with ``s_low`` and
    ``s_high``) and Water-Probe's ``z`` and ``band`` say how watermarked it looks.
    """
    from wash.detection.identification import Probe, identify as run

    try:
        settings = Probe(**probe)
    except TypeError as err:
        raise WashInputError(f"unknown probe setting: {err}") from None
    return run(providers_of(providers), mode, settings)
