"""What a user asks for: provider specs and generation settings, validated in one place.

Every check here raises ``WashInputError`` with a one-line message naming the
problem and the accepted values, so the CLI (exit code 2) and the app (a visible
error) report bad input the same way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from wash.errors import WashInputError
from wash.thresholds import Z_THRESHOLD



@dataclass(frozen=True)
class Mode:
    """How one generation mode runs: the same loop, switched by four facts."""

    name: str
    #: Only the first provider takes part (the watermarked baseline).
    first_provider_only: bool
    #: Providers perturb their distributions with their watermarks.
    watermark: bool
    #: A token missing from some vocabularies is finished by specialists (fluency-aware
    #: routing); without routing every model re-tokenises it at once.
    routing: bool
    description: str
    #: A removal attack the paper compares WASH with (``wash.baselines``): it decodes
    #: its own way and reads ``GenerationConfig.baseline_options``.
    baseline: bool = False


#: Every mode in one table; the engine reads these fields and nothing else.
MODE_TABLE: dict[str, Mode] = {m.name: m for m in (
    Mode("wash", False, True, True, "average every provider over the union, with routing (the paper's method)"),
    Mode("naive", False, True, False, "average over the union, no routing: a missing token is re-tokenised at once"),
    Mode("single", True, True, False, "provider 1 alone: the watermarked baseline"),
    Mode("unwatermarked", False, False, True, "WASH with every watermark off: the base models' consensus"),
    Mode("toblend", False, True, False, "baseline ToBlend: the providers take turns, each writing a fixed block "
         "of tokens, the context re-encoded at every switch", baseline=True),
    Mode("demark", True, True, False, "baseline De-mark: probe provider 1 for its green list and bias, then "
         "generate with them undone (green-list schemes only)", baseline=True),
    Mode("randomwalk", True, True, False, "baseline RandomWalk: provider 1 writes, then a weaker unwatermarked "
         "model rewrites spans, kept when a quality check accepts them", baseline=True),
)}
MODES = tuple(MODE_TABLE)
#: ``eager``: every base model runs its forward each step and the token is drawn from
#: the average. ``lazy``: one provider is picked uniformly at random and the token is
#: drawn from its distribution alone (the same law as drawing from the average); only
#: that provider's model runs, the others catch up in one batched forward later.
FORWARDS = ("eager", "lazy")
MAX_PROVIDERS = 8
#: Longest generation accepted: keeps a CPU demo responsive. (Contexts longer than a
#: sliding-window model's window stay correct: re-synchronisation then re-encodes
#: that model's context instead of cropping its cache; see resync.ModelContext._crop.)
MAX_NEW_TOKENS_CAP = 400
#: Longest routed span before the word is declared complete anyway (scripts without
#: spaces would otherwise hand a whole sentence to one watermarked specialist).
MAX_ROUTED_SPAN = 16
#: Options of a provider itself rather than of its scheme.
PROVIDER_OPTIONS = ("coordinated",)


@dataclass(frozen=True)
class ServingProfile:
    """How every provider serves its model: the base-logit settings before its watermark.

    A watermark perturbs what its provider would serve, so these settings change what
    is measured: with top-k 10 a green-list boost can only reorder ten candidates,
    with no truncation it can lift any token. Named profiles make a number's settings
    one word that a run records.
    """

    name: str
    temperature: float
    #: Keep the k most likely tokens (0: no truncation).
    top_k: int
    top_p: float
    description: str

    def settings(self) -> dict[str, float | int]:
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}


PROFILES: dict[str, ServingProfile] = {p.name: p for p in (
    ServingProfile("paper", 1.0, 10, 1.0, "as the paper's release serves each provider: temperature 1, top-k 10"),
    ServingProfile("open", 1.0, 0, 1.0, "temperature 1, no truncation: each model's full distribution"),
)}
DEFAULT_PROFILE = "open"
#: The largest serving top-k accepted (0 turns truncation off).
MAX_TOP_K = 1000


def profile(name: str) -> ServingProfile:
    """The named serving profile, or a one-line error listing the names."""
    try:
        return PROFILES[name]
    except KeyError:
        raise WashInputError(f"unknown serving profile '{name}' (accepted: {', '.join(PROFILES)})") from None


def profile_name(temperature: float, top_k: int, top_p: float) -> str:
    """The profile these settings are, or ``custom`` when no profile matches them."""
    for p in PROFILES.values():
        if (float(temperature), int(top_k), float(top_p)) == (p.temperature, p.top_k, p.top_p):
            return p.name
    return "custom"


@dataclass(frozen=True)
class ProviderSpec:
    """One watermarked provider: a base model, a scheme, a secret key, scheme overrides.

    Written ``MODEL:SCHEME:KEY[:param=value,...]``, e.g. ``smollm2:kgw:15485863`` or
    ``gemma3:dipmark:42:alpha=0.45``. ``coordinated=true`` makes the provider apply
    its scheme in the union vocabulary (the paper's coordinated control).
    """

    model: str
    scheme: str
    key: int = 0
    params: tuple[tuple[str, str], ...] = ()
    coordinated: bool = False

    @classmethod
    def parse(cls, text: str) -> "ProviderSpec":
        from wash.watermarks import scheme_class

        raw = text.strip()
        parts = raw.split(":")
        if len(parts) < 2 or len(parts) > 4 or not parts[0] or not parts[1]:
            raise WashInputError(
                f"malformed provider spec '{text}' (expected MODEL:SCHEME:KEY[:param=value,...], "
                "e.g. smollm2:kgw:15485863)")
        model, scheme = parts[0].strip(), parts[1].strip().lower()
        scheme_cls = scheme_class(scheme)
        if len(parts) < 3 or parts[2].strip() == "":
            if scheme != "none":
                raise WashInputError(f"provider spec '{text}' needs a KEY (an integer) after the scheme")
            key = 0
        else:
            try:
                key = int(parts[2].strip())
            except ValueError:
                raise WashInputError(f"key '{parts[2]}' in provider spec '{text}' is not an integer") from None
        params: dict[str, str] = {}
        if len(parts) == 4 and parts[3].strip():
            for item in parts[3].split(","):
                if "=" not in item:
                    raise WashInputError(f"scheme parameter '{item}' in '{text}' is not of the form name=value")
                k, v = item.split("=", 1)
                params[k.strip()] = v.strip()
        coordinated = params.pop("coordinated", "false").lower() in ("1", "true", "yes", "on")
        scheme_cls.parse_params(params)  # validates names, types and ranges now, before any model loads
        return cls(model=model, scheme=scheme, key=key, params=tuple(sorted(params.items())),
                   coordinated=coordinated)

    def __str__(self) -> str:
        extra = [f"{k}={v}" for k, v in self.params] + (["coordinated=true"] if self.coordinated else [])
        return f"{self.model}:{self.scheme}:{self.key}" + (":" + ",".join(extra) if extra else "")

    def label(self, index: int) -> str:
        """Short name for tables and legends, e.g. ``P1 smollm2/kgw#42``."""
        return f"P{index + 1} {self.model}/{self.scheme}#{self.key}" + (" (coord.)" if self.coordinated else "")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["params"] = dict(self.params)
        return d


#: The seeds a generation accepts: torch's generators take a signed 64-bit integer.
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def check_text(text: str, what: str) -> None:
    """Refuse text a tokenizer cannot encode (a lone surrogate from a broken UTF-8 decode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise WashInputError(f"{what} is not valid Unicode text: character {err.start + 1} is "
                             f"{text[err.start]!r}, half of a surrogate pair (broken UTF-8?)") from None


@dataclass
class GenerationConfig:
    """Everything one generation depends on; the same config and seed give the same text.

    Order of operations on each provider's base logits: special tokens masked, then
    temperature, top-k, top-p, THEN the watermark (as a provider would serve it). The
    defaults are the ``open`` profile; ``GenerationConfig.from_profile`` starts from
    another one.
    """

    providers: list[ProviderSpec]
    prompt: str
    mode: str = "wash"
    max_new_tokens: int = 128
    #: End-of-text is masked until this many tokens exist (fixed-length experiments).
    min_new_tokens: int = 0
    temperature: float = 1.0
    #: Serving top-k: each provider keeps its k most likely tokens (0: no truncation).
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    #: How many candidates each step event reports per distribution (the view, not serving).
    view_k: int = 8
    #: Compute each provider's detection z on the ids it has seen, every step.
    live_detection: bool = True
    z_threshold: float = Z_THRESHOLD
    max_routed_span: int = MAX_ROUTED_SPAN
    #: Feed the whole context every step instead of using KV caches (the slow reference).
    reencode_every_step: bool = False
    #: ``eager`` or ``lazy`` (see ``FORWARDS``).
    forwards: str = "eager"
    #: How the providers' distributions are combined, ``NAME[:param=value,...]`` (``wash.aggregation``):
    #: ``mean`` (the paper's average) or a robust variant, which needs eager forwards.
    aggregate: str = "mean"
    #: A baseline mode's parameters, ``param=value,...`` (``wash.baselines``; empty: its paper's defaults).
    baseline_options: str = ""

    @classmethod
    def from_profile(cls, name: str, **fields) -> "GenerationConfig":
        """A config serving with profile ``name``; explicit ``fields`` override it."""
        return cls(**{**profile(name).settings(), **fields})

    @property
    def profile(self) -> str:
        """The serving profile these settings match, or ``custom``."""
        return profile_name(self.temperature, self.top_k, self.top_p)

    @property
    def spec(self) -> Mode:
        return MODE_TABLE[self.mode]

    def active_providers(self) -> list[ProviderSpec]:
        """The providers that take part in this mode."""
        return list(self.providers[:1] if self.spec.first_provider_only else self.providers)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise WashInputError(f"unknown mode '{self.mode}' (accepted: {', '.join(MODES)})")
        if self.forwards not in FORWARDS:
            raise WashInputError(f"unknown forwards '{self.forwards}' (accepted: {', '.join(FORWARDS)})")
        if self.forwards == "lazy" and self.reencode_every_step:
            raise WashInputError("lazy forwards need KV caches; they cannot re-encode every step")
        from wash.aggregation import Mean, parse as parse_aggregate

        rule = parse_aggregate(self.aggregate)
        self.aggregate = str(rule)  # the canonical spelling, as runs record it
        if self.forwards == "lazy" and rule.name != Mean.name:
            raise WashInputError(f"aggregate {self.aggregate} needs --forwards eager: a lazy step draws from "
                                 "one provider, which has the law of the mean only")
        if self.spec.baseline:
            from wash.baselines import parse as parse_baseline

            if rule.name != Mean.name:
                raise WashInputError(f"mode {self.mode} is a baseline with its own decoding; "
                                     f"aggregate {self.aggregate} applies to WASH modes only")
            self.baseline_options = str(parse_baseline(self.mode, self.baseline_options))
        elif str(self.baseline_options).strip():
            raise WashInputError(f"baseline options apply to the baseline modes only "
                                 f"({', '.join(m.name for m in MODE_TABLE.values() if m.baseline)}), "
                                 f"not to mode {self.mode}")
        if not self.providers:
            raise WashInputError("no provider given (add at least one MODEL:SCHEME:KEY)")
        if len(self.providers) > MAX_PROVIDERS:
            raise WashInputError(f"{len(self.providers)} providers given; at most {MAX_PROVIDERS} are supported")
        from wash.models import check_model_name

        for spec in self.providers:
            check_model_name(spec.model)
        if not self.prompt or not self.prompt.strip():
            raise WashInputError("the prompt is empty")
        check_text(self.prompt, "the prompt")
        if not isinstance(self.max_new_tokens, int) or not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS_CAP:
            raise WashInputError(
                f"max new tokens must be an integer from 1 to {MAX_NEW_TOKENS_CAP}, got {self.max_new_tokens}")
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise WashInputError(
                f"min new tokens must be between 0 and max new tokens ({self.max_new_tokens}), "
                f"got {self.min_new_tokens}")
        if not 0.0 <= float(self.temperature) <= 5.0:  # NaN fails this test too
            raise WashInputError(f"temperature must be between 0 and 5, got {self.temperature}")
        if not 0.0 < float(self.top_p) <= 1.0:
            raise WashInputError(f"top-p must be in (0, 1], got {self.top_p}")
        if not isinstance(self.top_k, int) or not 0 <= self.top_k <= MAX_TOP_K:
            raise WashInputError(f"top-k must be an integer from 0 (no truncation) to {MAX_TOP_K}, got {self.top_k}")
        if not isinstance(self.view_k, int) or not 1 <= self.view_k <= 50:
            raise WashInputError(f"the distribution view's candidate count must be 1..50, got {self.view_k}")
        try:
            self.seed = int(self.seed)
        except (TypeError, ValueError):
            raise WashInputError(f"seed must be an integer, got {self.seed!r}") from None
        if not SEED_MIN <= self.seed <= SEED_MAX:  # torch's generators take a signed 64-bit seed
            raise WashInputError(f"seed must be an integer from {SEED_MIN} to {SEED_MAX}, got {self.seed}")
