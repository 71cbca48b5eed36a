"""The settings every experiment shares, its presets, and the job key they imply.

Each experiment subclasses ``ExperimentConfig`` with its own fields and ``quick`` /
``tiny`` presets. The serving settings (temperature, top-k, top-p) are not free
fields: they come from one named profile of ``wash.engine.config.PROFILES`` (``open`` by
default, ``paper`` for the paper release's top-k 10), so a result's sampling is
one recorded word and every generation of a run is served alike.

Every generation of a run is an engine ``GenerationConfig`` (``ExperimentConfig.generation``):
the experiment's forwards, aggregation rule and length are parsed and validated by the
engine's config, never by a second copy here (``rule`` is the engine's parse of
``aggregate``; ``generations`` lists what ``python -m wash experiment`` validates up front).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

from wash.engine import (DEFAULT_PROFILE, GenerationConfig, ProviderSpec, Rule, ServingProfile,
                         profile as serving_profile)
from wash.detection import Z_THRESHOLD
from wash.watermarks import published_schemes

Scalar = str | int | float | bool

#: Every published watermark scheme (the paper's Table 2 plus Unigram and SynthID), from the registry.
ALL_SCHEMES = published_schemes()


@dataclass
class ExperimentConfig:
    """Settings common to every experiment; subclasses add their own fields and presets.

    ``models[0]`` is the fixed base model (and the instruct model for arithmetic);
    heterogeneous ensembles assign provider ``i`` the model ``models[i % len(models)]``.
    """

    out: Path = Path("runs")
    models: tuple[str, ...] = ("smollm2", "gemma3")
    prompts: int = 30
    tokens: int = 200
    seeds: tuple[int, ...] = (0,)
    schemes: tuple[str, ...] = ALL_SCHEMES
    #: Serving profile (``wash.engine.config.PROFILES``): every provider's temperature, top-k, top-p.
    profile: str = DEFAULT_PROFILE
    z_threshold: float = Z_THRESHOLD
    #: Reuse stored generations (see ``store_root`` and ``wash.experiments.store``).
    cache: bool = True
    #: ``eager`` or ``lazy`` forwards for every generation (``wash.engine.config.FORWARDS``); each
    #: experiment sets its own default (lazy where only the final texts are read).
    forwards: str = "eager"
    #: Aggregation rule of every generation (``wash.engine.aggregation``): ``mean`` (the paper's) or a
    #: robust variant such as ``median-clip:xi=0.5``, which needs eager forwards.
    aggregate: str = "mean"
    #: How the ensembles' providers are watermarked (``wash.experiments.ensembles.LINEUPS``):
    #: ``independent`` (each its own watermark) or ``anchor`` (provider 1 alone).
    lineup: str = "independent"
    #: Name of the preset the config was built from (recorded in meta.json).
    preset: str = "full"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}
    #: The line-ups this experiment can build (the others refuse ``--lineup anchor``).
    LINEUPS: ClassVar[tuple[str, ...]] = ("independent",)

    @classmethod
    def from_preset(cls, name: str = "full", **overrides: Any) -> "ExperimentConfig":
        """The preset's settings, then ``overrides`` (``None`` values ignored, lists made tuples)."""
        if name != "full" and name not in cls.PRESETS:
            raise ValueError(f"unknown preset '{name}' (accepted: full, {', '.join(cls.PRESETS)})")
        values = {**cls.PRESETS.get(name, {}), **{k: v for k, v in overrides.items() if v is not None}}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)} for {cls.__name__}")
        for f in dataclasses.fields(cls):
            if f.name in values and isinstance(values[f.name], list):
                values[f.name] = tuple(values[f.name])
        return cls(preset=name, **values)

    # -- serving: read from the profile, never set one by one ---------------------------
    @property
    def serving(self) -> ServingProfile:
        """The serving profile (a one-line ``WashInputError`` for an unknown name)."""
        return serving_profile(self.profile)

    @property
    def temperature(self) -> float:
        return self.serving.temperature

    @property
    def top_k(self) -> int:
        return self.serving.top_k

    @property
    def top_p(self) -> float:
        return self.serving.top_p

    # -- the engine's configuration of each generation -------------------------------------
    def generation(self, specs: Sequence[ProviderSpec] = (), prompt: str = "", mode: str = "wash",
                   seed: int = 0, max_new_tokens: int | None = None, **overrides: Any) -> GenerationConfig:
        """The engine config of one generation: this experiment's length, serving profile, forwards and
        rule, live detection off (texts are scored afterwards); ``overrides`` set any other engine field
        (quality's arithmetic its own temperature: the profile's top-k and top-p still apply)."""
        settings: dict[str, Any] = dict(max_new_tokens=int(max_new_tokens or self.tokens),
                                        **self.serving.settings(), seed=int(seed), live_detection=False,
                                        z_threshold=self.z_threshold, forwards=self.forwards,
                                        aggregate=self.aggregate)
        settings.update(overrides)
        return GenerationConfig(providers=list(specs), prompt=prompt, mode=mode, **settings)

    def generations(self) -> dict[str, GenerationConfig]:
        """The settings this experiment generates under, by what to call them in an error ("" for the
        experiment's own): ``python -m wash experiment`` validates each (``GenerationConfig.validate``
        without providers and prompt) before any job runs. An experiment whose variants change the
        engine settings (cost's lazy and re-encoding ones) names each."""
        return {"": self.generation()}

    @property
    def rule(self) -> Rule:
        """``aggregate`` as the engine's config parses it (a ``WashInputError`` if it does not)."""
        return self.generation().rule

    def key(self, **params: Scalar) -> dict[str, Scalar]:
        """A job key: the given parameters plus the settings every generation depends on.

        The serving values (not the profile's name) enter the key: they are what the
        text depends on, and a row of one profile is never taken for another's. The
        aggregation rule enters it (canonically spelt) only when it is not ``mean``, and
        the line-up only when it is not ``independent``, so the keys of results made
        before there was a choice stay valid (a missing ``lineup`` column reads as
        ``independent``).
        """
        rule = rule_key(self.rule)
        # like the rule, the line-up enters only when it is not the default, so the keys
        # (and the CSVs' job ids) of runs made before there was a choice stay valid
        lineup = {} if self.lineup == "independent" else {"lineup": self.lineup}
        return {"tokens": self.tokens, "temperature": self.temperature, "top_k": self.top_k,
                "top_p": self.top_p, "forwards": self.forwards, **rule, **lineup, **params}

    def store_root(self) -> Path:
        """Where generations are stored: ``<out>/../generations``, shared by sibling outputs.

        Generations are scratch, so an output folder inside ``results/`` (committed)
        stores them in the scratch folder beside it, ``runs/generations``, instead.
        """
        parent = Path(self.out).parent
        if parent.name == "results":
            return parent.parent / "runs" / "generations"
        return parent / "generations"

    def to_dict(self) -> dict[str, Any]:
        """The fields, JSON-ready (``from_preset(**to_dict())`` rebuilds the config)."""
        d = dataclasses.asdict(self)
        d["out"] = str(self.out)
        return d


def rule_key(rule: Rule) -> dict[str, str]:
    """``{"aggregate": the rule's canonical spelling}``, or nothing for the mean (keys made before
    there was a choice stay valid)."""
    return {} if rule.is_mean else {"aggregate": str(rule)}
