"""What a user writes, as types with no engine behind them: providers, serving, limits.

``ProviderSpec`` (``MODEL:SCHEME:KEY[:param=value,...]``), the serving profiles,
the forwards kinds and the limits every setting is checked against. Light on
purpose: the engine's modules import these, and ``config.py`` (the generation's
settings, parsed once at the edge) builds on them, so nothing here imports back.
Every check raises ``WashInputError`` with a one-line message naming the problem
and the accepted values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

from wash.core.errors import WashInputError


class Forwards(StrEnum):
    """How a step runs the base models (equal to its text: ``Forwards.LAZY == "lazy"``).

    ``eager``: every base model runs its forward each step and the token is drawn
    from the average. ``lazy``: one provider is picked uniformly at random and the
    token is drawn from its distribution alone (the same law as drawing from the
    average); only that provider's model runs, the others catch up in one batched
    forward later.
    """

    EAGER = "eager"
    LAZY = "lazy"


FORWARDS = tuple(f.value for f in Forwards)


MAX_PROVIDERS = 8
#: Longest generation a request accepts (the app, ``wash.api``, ``python -m wash``): keeps a
#: CPU demo responsive. (Contexts longer than a sliding-window model's window stay correct:
#: re-synchronisation then re-encodes that model's context instead of cropping its cache;
#: see members.ModelContext._crop.)
MAX_NEW_TOKENS_CAP = 400
#: Longest generation the engine runs: an experiment measuring detection against length
#: (``python -m wash experiment tpr --preset long``, 800 tokens) goes past the demo's cap.
MAX_NEW_TOKENS_ENGINE = 2048
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


