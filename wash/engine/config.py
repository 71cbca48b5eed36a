"""The generation's settings, parsed once at the edge and validated in one place.

``GenerationConfig`` holds everything one generation depends on; the text settings
(mode and its options, forwards, aggregation rule) are parsed into typed objects
when the config is made, and ``validate`` checks the whole and changes nothing.
Every check raises ``WashInputError`` with a one-line message naming the problem and
the accepted values, so the CLI (exit code 2) and the app (a visible error) report
bad input the same way. The command line that makes the same text as a config is
``command_line`` (and ``python -m wash generate`` reads one back).

The provider specs, serving profiles and limits live in ``settings.py`` and the
modes in ``modes.py``; both are re-exported here, where callers have always found them.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field
from typing import Any

from wash.engine.aggregation import Rule, describe as describe_rules, parse as parse_rule
from wash.engine.decode import Strategy
from wash.core import env
from wash.core.errors import WashInputError
from wash.engine.modes import MODE_TABLE, STRATEGIES, Mode, baseline_names, mode_names, parse as parse_mode, unknown_mode
from wash.engine.backends import BACKENDS, DEFAULT as DEFAULT_BACKEND, Backend, default_backend, parse_backend
from wash.engine.backends import summaries as backend_summaries
from wash.engine.settings import (DEFAULT_PROFILE, FORWARDS, MAX_NEW_TOKENS_CAP, MAX_NEW_TOKENS_ENGINE, MAX_PROVIDERS,
                           MAX_ROUTED_SPAN, MAX_TOP_K, PROFILES, PROVIDER_OPTIONS, SEED_MAX, SEED_MIN, Forwards,
                           ProviderSpec, ServingProfile, check_text, profile, profile_name)
from wash.watermarks.scoring import Z_THRESHOLD

__all__ = ["GenerationConfig", "rule_of", "command_line", "add_generate_arguments", "from_command_line", "Mode",
           "MODE_TABLE", "STRATEGIES", "mode_names", "baseline_names", "DEFAULT_PROFILE", "FORWARDS", "Forwards",
           "MAX_NEW_TOKENS_CAP", "MAX_NEW_TOKENS_ENGINE", "MAX_PROVIDERS", "MAX_ROUTED_SPAN", "MAX_TOP_K", "PROFILES",
           "PROVIDER_OPTIONS", "SEED_MAX", "SEED_MIN", "BACKENDS", "Backend", "ProviderSpec", "ServingProfile",
           "check_text", "profile", "profile_name"]

def rule_of(aggregate: str | Rule) -> Rule:
    """The rule ``aggregate`` names (a ``Rule`` is returned as it is), or a one-line ``WashInputError``.

    The package's one parse of a rule's text: a generation, an experiment's runs and keys
    and an identification probe read every spelling alike and refuse the same bad ones.
    Everyone else holds the ``Rule`` (or the ``GenerationConfig`` that holds it) and asks it
    (``rule.is_mean``, ``str(rule)``); ``tests/test_config.py`` counts the call sites.
    """
    return aggregate if isinstance(aggregate, Rule) else parse_rule(aggregate)


#: The fields written as text that are parsed when set (``GenerationConfig._parse``).
_PARSED = frozenset({"mode", "forwards", "backend", "aggregate", "baseline_options", "seed"})


@dataclass
class GenerationConfig:
    """Everything one generation depends on; the same config and seed give the same text.

    Order of operations on each provider's base logits: special tokens masked, then
    temperature, top-k, top-p, THEN the watermark (as a provider would serve it). The
    defaults are the ``open`` profile; ``GenerationConfig.from_profile`` starts from
    another one.

    The settings written as text are parsed once, when the config is made (or one of
    them is set): ``forwards`` becomes a ``Forwards``, ``aggregate`` and a baseline's
    ``baseline_options`` their canonical spelling (every parameter written out, as
    runs record it), and the typed objects the engine runs are ``rule`` (a
    ``wash.engine.aggregation.Rule``) and ``strategy`` (the mode's ``decode.Strategy``, its
    options applied). Text that does not parse is kept as given and ``validate``
    reports it; ``validate`` only checks, it changes nothing.
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
    #: ``eager`` or ``lazy`` (``settings.Forwards``; text is read as one).
    forwards: Forwards | str = Forwards.EAGER
    #: How the providers' distributions are combined, ``NAME[:param=value,...]`` (``wash.engine.aggregation``;
    #: a ``Rule`` is taken as it is): ``mean`` (the paper's average) or a robust variant, which needs eager
    #: forwards.
    aggregate: str | Rule = "mean"
    #: A baseline mode's parameters, ``param=value,...`` (``wash.baselines``; empty: its paper's defaults).
    baseline_options: str = ""
    #: Where the members' models run, ``NAME[:param=value,...]`` (``backends.py``: ``local``, or ``ray`` with
    #: ``address=HOST:PORT``; default ``WASH_BACKEND``, else ``local``; a parsed ``Backend`` is taken as it
    #: is). Never changes the text, so neither ``command_line`` nor a store key carries it.
    backend: Backend | str = field(default_factory=default_backend)
    #: Whether the models compute side by side, each on its own thread, or one after the other on
    #: one shared thread (``parallel.py``; default ``WASH_PARALLEL_FORWARDS``, else on). The same
    #: eager text either way; lazy runs chunk their feeds differently (``ensemble.LazySteps``).
    #: A machine setting: neither ``command_line`` nor a store key carries it.
    parallel_forwards: bool = field(default_factory=env.parallel_forwards)

    @classmethod
    def from_profile(cls, name: str, **fields) -> "GenerationConfig":
        """A config serving with profile ``name``; explicit ``fields`` override it."""
        return cls(**{**profile(name).settings(), **fields})

    # -- parsed once ---------------------------------------------------------------------
    def __post_init__(self) -> None:
        self._parse()

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _PARSED and "_typed" in self.__dict__:
            self._parse()

    def _parse(self) -> None:
        """Turn the text settings into typed objects; keep what does not parse for ``validate``."""
        typed: dict[str, Any] = {}
        set_ = object.__setattr__
        try:
            set_(self, "seed", int(self.seed))
        except (TypeError, ValueError):
            pass
        try:
            set_(self, "forwards", Forwards(self.forwards))
        except ValueError:
            pass
        try:
            set_(self, "backend", parse_backend(self.backend))
        except WashInputError:
            pass
        try:
            typed["rule"] = rule = rule_of(self.aggregate)
            set_(self, "aggregate", str(rule))  # the canonical spelling, as runs record it
        except WashInputError as err:
            typed["rule"] = err
        if self.mode in STRATEGIES and STRATEGIES[self.mode].baseline:
            try:
                typed["strategy"] = strategy = parse_mode(self.mode, self.baseline_options)
                set_(self, "baseline_options", str(strategy))
            except WashInputError as err:
                typed["strategy"] = err
        elif self.mode in STRATEGIES:
            typed["strategy"] = parse_mode(self.mode)
        set_(self, "_typed", typed)

    def _get(self, what: str) -> Any:
        value = self._typed.get(what)
        if isinstance(value, WashInputError):
            raise value
        if value is None:
            raise unknown_mode(self.mode)
        return value

    @property
    def rule(self) -> Rule:
        """How the providers' distributions are combined (``aggregate``, parsed)."""
        return self._get("rule")

    @property
    def strategy(self) -> Strategy:
        """The mode's step strategy with its options (``mode`` and ``baseline_options``, parsed)."""
        return self._get("strategy")

    @property
    def profile(self) -> str:
        """The serving profile these settings match, or ``custom``."""
        return profile_name(self.temperature, self.top_k, self.top_p)

    @property
    def spec(self) -> Mode:
        return MODE_TABLE[self.mode]

    def active_providers(self) -> list[ProviderSpec]:
        """The providers that take part in this mode."""
        return list(self.providers[:1] if STRATEGIES[self.mode].scope == "first" else self.providers)

    def check_forwards(self) -> None:
        """Refuse lazy forwards where they cannot serve this config (the one check; ``validate`` calls it).

        A lazy step runs one provider's model and draws from its p_i alone, which has the
        law of the mean only, so a robust rule needs eager forwards; and a lazy step keeps
        KV caches, so it cannot re-encode every step.
        """
        if self.forwards != Forwards.LAZY:
            return
        if self.reencode_every_step:
            raise WashInputError("lazy forwards need KV caches; they cannot re-encode every step")
        if not self.rule.is_mean:
            raise WashInputError(f"aggregate {self.aggregate} needs --forwards eager: a lazy step draws from "
                                 "one provider, which has the law of the mean only")

    def validate(self, inputs: bool = True, max_tokens: int = MAX_NEW_TOKENS_CAP) -> None:
        """Check every setting (one-line ``WashInputError``s); changes nothing.

        ``inputs=False`` leaves out the providers and the prompt: an experiment checks the
        settings of its generations this way before any job has its providers and prompt.
        ``max_tokens``: the longest generation accepted, the demo's cap for a request; the
        engine itself and the experiments accept up to ``MAX_NEW_TOKENS_ENGINE``.
        """
        if self.mode not in STRATEGIES:
            raise unknown_mode(self.mode)
        if not isinstance(self.forwards, Forwards):
            raise WashInputError(f"unknown forwards '{self.forwards}' (accepted: {', '.join(FORWARDS)})")
        parse_backend(self.backend)  # raises: the text is no backend, or an option is not its
        self.check_forwards()
        rule = self.rule
        if self.spec.baseline:
            if not rule.is_mean:
                raise WashInputError(f"mode {self.mode} is a baseline with its own decoding; "
                                     f"aggregate {self.aggregate} applies to WASH modes only")
            self.strategy  # its options parse
        elif str(self.baseline_options).strip():
            raise WashInputError(f"baseline options apply to the baseline modes only "
                                 f"({', '.join(baseline_names())}), not to mode {self.mode}")
        if inputs:
            self._validate_inputs()
        if not isinstance(self.max_new_tokens, int) or not 1 <= self.max_new_tokens <= max_tokens:
            raise WashInputError(
                f"max new tokens must be an integer from 1 to {max_tokens}, got {self.max_new_tokens}")
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
        if not isinstance(self.seed, int):
            raise WashInputError(f"seed must be an integer, got {self.seed!r}")
        if not SEED_MIN <= self.seed <= SEED_MAX:  # torch's generators take a signed 64-bit seed
            raise WashInputError(f"seed must be an integer from {SEED_MIN} to {SEED_MAX}, got {self.seed}")

    def _validate_inputs(self) -> None:
        """The providers and the prompt (``validate``)."""
        if not self.providers:
            raise WashInputError("no provider given (add at least one MODEL:SCHEME:KEY)")
        if len(self.providers) > MAX_PROVIDERS:
            raise WashInputError(f"{len(self.providers)} providers given; at most {MAX_PROVIDERS} are supported")
        from wash.engine.catalog import check_model_name

        for spec in self.providers:
            check_model_name(spec.model)
        if not self.prompt or not self.prompt.strip():
            raise WashInputError("the prompt is empty")
        check_text(self.prompt, "the prompt")


def command_line(config: GenerationConfig) -> str:
    """The ``python -m wash generate`` call that makes the same text as ``config``.

    Serving settings are written as the matching profile when there is one, else
    explicitly; options at their defaults are left out so the line stays readable.
    """
    args = ["python", "-m", "wash", "generate"]
    for spec in config.providers:
        args += ["--provider", str(spec)]
    args += ["--prompt", config.prompt, "--mode", config.mode, "--seed", str(config.seed),
             "--max-new-tokens", str(config.max_new_tokens)]
    name = config.profile
    if name == "custom":
        args += ["--temperature", repr(float(config.temperature)), "--top-k", str(config.top_k),
                 "--top-p", repr(float(config.top_p))]
    elif name != DEFAULT_PROFILE:
        args += ["--profile", name]
    if config.forwards != Forwards.EAGER:
        args += ["--forwards", str(config.forwards)]
    if not config.rule.is_mean:
        args += ["--aggregate", config.aggregate]
    if config.spec.baseline:
        options = str(config.strategy)
        if options != str(type(config.strategy)()):
            args += ["--baseline-options", options]
    return shlex.join(args)


def add_generate_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``python -m wash generate`` options that make a config (``from_command_line`` reads them)."""
    parser.add_argument("--provider", action="append", metavar="SPEC",
                        help="MODEL:SCHEME:KEY[:param=value,...], repeat for each provider (1 to 8)")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-new-tokens", type=int, default=128, help=f"1 to {MAX_NEW_TOKENS_CAP}")
    parser.add_argument("--profile", choices=tuple(PROFILES), default=DEFAULT_PROFILE,
                        help="serving settings of every provider: " + "; ".join(
                            f"{p.name}: {p.description}" for p in PROFILES.values())
                        + f" (default {DEFAULT_PROFILE}); --temperature/--top-k/--top-p override it")
    parser.add_argument("--temperature", type=float, default=None, help="0 to 5 (0 = greedy)")
    parser.add_argument("--top-k", type=int, default=None,
                        help=f"keep the k most likely tokens, 0 to {MAX_TOP_K} (0 = off)")
    parser.add_argument("--top-p", type=float, default=None, help="nucleus mass in (0, 1]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=mode_names(), default="wash")
    parser.add_argument("--forwards", choices=FORWARDS, default="eager",
                        help="eager: every model runs each step and the token is drawn from the average; "
                             "lazy: one provider picked uniformly per step, only its model runs "
                             "(same law, faster)")
    parser.add_argument("--aggregate", default="mean", metavar="RULE[:xi=X]",
                        help="how the providers' distributions are combined: " + describe_rules()
                             + ". Rules other than mean need --forwards eager")
    parser.add_argument("--baseline-options", default="", metavar="PARAM=VALUE,...",
                        help=f"parameters of a baseline mode ({', '.join(baseline_names())}), e.g. block=8; "
                             "default: the values of the baseline's paper (docs/BASELINES.md)")
    add_backend_arguments(parser)


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--backend`` (``generate``, ``detect`` and ``bench``): where the models run, not what they say."""
    parser.add_argument("--backend", default=None, metavar="NAME[:param=value,...]",
                        help=f"where the base models run: {backend_summaries()} (default: $WASH_BACKEND, "
                             f"else {DEFAULT_BACKEND})")


def backend_settings(args: argparse.Namespace) -> dict[str, str]:
    """``backend`` from ``add_backend_arguments``' option, when given (else the default is the config's)."""
    return {} if args.backend is None else {"backend": args.backend}


def from_command_line(args: argparse.Namespace) -> GenerationConfig:
    """The config ``add_generate_arguments``' options describe (``command_line``'s inverse).

    Live detection is off: a command line prints the final detection only.
    """
    serving = {k: getattr(args, k) for k in ("temperature", "top_k", "top_p") if getattr(args, k) is not None}
    return GenerationConfig.from_profile(
        args.profile, providers=[ProviderSpec.parse(v) for v in args.provider or []], prompt=args.prompt,
        mode=args.mode, max_new_tokens=args.max_new_tokens, seed=args.seed, live_detection=False,
        forwards=args.forwards, aggregate=args.aggregate, baseline_options=args.baseline_options,
        **backend_settings(args), **serving)
