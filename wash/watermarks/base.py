"""The contract every watermark scheme fulfils: a perturbation and its own detector.

WASH treats a watermark as nothing more than a keyed change to a model's next-token
distribution, so a scheme here has exactly two sides, mirroring the KGW reference
code's processor/detector pairing:

* ``distribution``: base logits over the scheme's token space plus the context ids
  -> the provider's watermarked next-token distribution p_i (a probability vector).
  Sampling-based schemes (AAR, ITS-Edit, EXP-Edit) return the exact law of the
  token their keyed sampling rule would emit, which is a point mass; AAR and
  EXP-Edit with ``form=soft`` serve the WASH release's soft law instead (``race.race_law``).
* ``detector``: an incremental scorer fed one token id at a time, whose ``result``
  is the scheme's own test statistic reported both as a p-value and as a z-score.

Token ids are in the scheme's *token space*: normally the model's own vocabulary
(``vocab_size`` = the width of its logits); for the coordinated control the
provider maps ids into the union vocabulary first (see ``coordinated.py``). A
scheme never needs to know which.

``distribution`` must be a pure function of (logits, ids, prompt_len, state): the
engine may call it for a position and then discard the token (routing peeks at the
next token to decide whether a word is complete). Per-generation randomness
(Water-Bag's key draw, EXP-Edit's key offset) lives in the object ``new_state``
returns, which is made once per generation and never mutated by ``distribution``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Hashable, Sequence

import torch

from wash.core.errors import WashInputError
from wash.core.options import SCHEME_PARAMS, parse_params
from wash.watermarks.scoring import Z_THRESHOLD, p_from_z, z_from_p

if TYPE_CHECKING:
    from wash.watermarks.laws import KeyedLaw, KeyedPicks


@dataclass
class Detection:
    """One detector's verdict on one token sequence.

    ``z`` and ``p`` describe the same evidence: schemes whose statistic is a
    z-score derive ``p = 1 - Phi(z)``; schemes whose statistic is a p-value derive
    ``z = Phi^-1(1 - p)``. ``per_token`` holds each token's contribution (1/0 for
    green/red schemes, a score for the others, ``None`` where a token was not
    scored: too little context, or a repeat of a (context, token) pair or of a
    context that was already scored; see ``Detector.first_occurrence``).
    """

    scheme: str
    z: float
    p: float
    tokens_scored: int
    per_token: list[float | None] = field(default_factory=list)
    statistic: float = 0.0
    note: str = ""
    #: (mean, sd) of one token's score on unwatermarked text: the absolute scale the
    #: app colours per-token evidence on (``None``: the scheme has no per-token null).
    token_null: tuple[float, float] | None = None

    def detected(self, z_threshold: float = Z_THRESHOLD) -> bool:
        return self.tokens_scored > 0 and self.z > z_threshold

    @classmethod
    def from_z(cls, scheme: str, z: float, **kw: Any) -> "Detection":
        return cls(scheme=scheme, z=float(z), p=float(p_from_z(z)), **kw)

    @classmethod
    def from_p(cls, scheme: str, p: float, **kw: Any) -> "Detection":
        return cls(scheme=scheme, z=float(z_from_p(p)), p=float(p), **kw)


class Detector(ABC):
    """Incremental detector: ``push`` one token at a time, ``result`` at any point.

    For the hashing schemes ``push`` and ``result`` each cost O(1) in the text
    length (running counts), so the app can redraw a live z trace every token.
    ``prefix`` ids (e.g. the prompt, when the caller knows it) serve only as
    hashing context and are never scored.
    """

    #: (mean, sd) of one ``per_token`` score without a watermark, where the scheme has one.
    token_null: tuple[float, float] | None = None
    #: True when every token is scored by ``result`` as a whole (an alignment), none on ``push``.
    scores_in_result: ClassVar[bool] = False
    #: True when the test is a binomial count of green tokens (``per_token`` 1/0, null rate
    #: ``null_rate``): what an entropy-weighted count (``statistics``' ``entropy``) reweights.
    counts_green: ClassVar[bool] = False
    #: True when each ``per_token`` score is Exp(1) without the key, so exp(-score) is a
    #: uniform pivot (higher criticism, ``statistics``' ``hc``, reads them).
    exp_scores: ClassVar[bool] = False

    def __init__(self, scheme: "WatermarkScheme", prefix: Sequence[int] = ()) -> None:
        self.scheme = scheme
        self.ids: list[int] = [int(t) for t in prefix]
        self.n_prefix = len(self.ids)
        self.per_token: list[float | None] = []
        self._trials: set[Hashable] = set()

    def first_occurrence(self, trial: Hashable) -> bool:
        """True the first time this detector meets ``trial``, False at every repeat.

        The one rule every hashing detector follows to score each piece of evidence
        once (Kirchenbauer et al.'s "ignore repeated n-grams"). A token's score is a
        deterministic function of the key, of what the scheme hashes from the context
        (a green list's seed, AAR's seed, SynthID's n-gram) and usually of the token:
        the scheme names that as ``trial``. A repeat of a trial copies an earlier
        score instead of adding an independent one, so counting it breaks the null law
        the test assumes: on looping text (small models loop) a KGW count then
        spreads like R copies of one binomial, sd about sqrt(R), and z > 4 becomes
        common without any watermark (measured in docs/DETECTORS.md).
        """
        if trial in self._trials:
            return False
        self._trials.add(trial)
        return True

    def push(self, token_id: int) -> float | None:
        """Score one more token given everything pushed before; returns its score."""
        token_id = int(token_id)
        score = self._score(token_id)
        self.ids.append(token_id)
        self.per_token.append(score)
        return score

    def extend(self, token_ids: Sequence[int]) -> "Detector":
        for t in token_ids:
            self.push(t)
        return self

    @abstractmethod
    def _score(self, token_id: int) -> float | None:
        """This token's contribution given ``self.ids`` (the tokens before it)."""

    @abstractmethod
    def result(self) -> Detection:
        """The scheme's test on every token pushed so far."""


class WatermarkScheme(ABC):
    """A keyed perturbation of next-token distributions, with its own detector.

    Subclasses set ``name``, ``Params`` (a frozen dataclass of the scheme's
    published defaults) and implement ``distribution`` and ``make_detector``.
    ``Params.__post_init__`` checks every field's range with :func:`check_range`
    / :func:`check_choice`, so a bad value fails when it is parsed (or when a
    ``Params`` is built in code), never later in a constructor or mid-generation.
    A subclass that defines its own ``Params`` gets ``Params.scheme_name`` set to
    its ``name`` (see ``__init_subclass__``), which the checks' messages name.
    """

    name: ClassVar[str]
    #: One line for CLI help and tables.
    summary: ClassVar[str] = ""
    #: A sentence or two for the app's pages; ``{field}`` placeholders are filled
    #: from the default ``Params`` so the words cannot drift from the code.
    description: ClassVar[str] = ""
    #: True when p_i is a point mass (the scheme samples by a keyed rule); a scheme
    #: whose ``form`` parameter decides it sets it per instance.
    point_mass: ClassVar[bool] = False
    #: False when ``Detector.result`` is costly (permutation tests): live traces
    #: then refresh it every few tokens instead of every token.
    cheap_result: ClassVar[bool] = True

    # -- facts the reports and experiments read (``registry``'s helpers list them). A class
    # that names itself gets the defaults for those it leaves out, never its parent's: a
    # variant (``biased-kgw``) is not its parent in the paper's tables. ``stateful`` is
    # read off the code.
    #: The name in prose and tables (``Water-Bag``); the registry name when left out.
    title: ClassVar[str] = ""
    #: A published watermark: one of the experiments' schemes (``registry.published_schemes``).
    #: False for the control ``none`` and the paper's biased construction.
    published: ClassVar[bool] = True
    #: The ``Params`` field that names the scheme's form, where it has several (``form``).
    form_param: ClassVar[str | None] = None
    #: The form the paper's release serves, where it is not the default (AAR's ``soft``).
    release_form: ClassVar[str | None] = None
    #: The paper's tables that report the scheme, each with the scheme's column there
    #: (``{1: 3}``: Table 1's fourth column).
    paper_columns: ClassVar[dict[int, int]] = {}
    #: Where the project's tables list it, lowest first (the registry's order is the app's,
    #: by family); schemes without one come last, by name.
    rank: ClassVar[int] = 99
    #: Whether a generation draws a state of its own (``new_state`` is overridden): a
    #: per-state cost for identification's v2 probe.
    stateful: ClassVar[bool] = False

    # -- what the scheme's law offers its callers (read instead of its class) --------------
    #: Its perturbation favours a keyed set of tokens per context with a logit-scale bias an
    #: observer can estimate (a green list; DiPMark's doubled tail): De-mark's target.
    green_list: ClassVar[bool] = False
    #: ``picks`` reads the token each per-generation state serves without building a law (a
    #: keyed point mass indexed by state, when ``point_mass`` holds).
    picks_states: ClassVar[bool] = False

    @dataclass(frozen=True)
    class Params:
        pass

    #: Former spelling -> field of ``Params``: old provider specs keep parsing.
    param_aliases: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Stamp the scheme's own Params (not an inherited one) with the name its
        # range checks report; an abstract base without a name stamps nothing.
        if "Params" in cls.__dict__ and "name" in cls.__dict__:
            cls.Params.scheme_name = cls.name
        if "name" in cls.__dict__:
            for fact, default in _OWN_FACTS.items():
                if fact not in cls.__dict__:
                    setattr(cls, fact, default)
            cls.title = cls.title or cls.name
        cls.stateful = cls.new_state is not WatermarkScheme.new_state

    @classmethod
    def default_form(cls) -> str | None:
        """The form its default ``Params`` name (``None`` for a scheme with one form)."""
        return getattr(cls.Params(), cls.form_param) if cls.form_param else None

    def __init__(self, key: int, vocab_size: int, params: "WatermarkScheme.Params | None" = None) -> None:
        self.key = int(key)
        self.vocab_size = int(vocab_size)
        self.params = params if params is not None else self.Params()

    @classmethod
    def explain(cls) -> str:
        """``description`` with the default parameters filled in (``summary`` if none)."""
        if not cls.description:
            return cls.summary
        return cls.description.format(**{f.name: getattr(cls.Params(), f.name) for f in fields(cls.Params)})

    # -- construction -------------------------------------------------------
    @classmethod
    def parse_params(cls, raw: dict[str, str]) -> "WatermarkScheme.Params":
        """Build ``Params`` from ``name=value`` strings (provider spec syntax).

        Names and types are checked here, ranges by ``Params.__post_init__``; either
        failure is a ``WashInputError``. A name in ``param_aliases`` (a parameter's
        former spelling) sets the field it stands for.
        """
        values = parse_params(cls.Params, f"scheme '{cls.name}'", raw, aliases=cls.param_aliases,
                              dialect=SCHEME_PARAMS)
        return cls.Params(**values)

    # -- the two sides ------------------------------------------------------
    def new_state(self, generation_seed: int) -> Any:
        """Per-generation state (drawn once, never mutated). Stateless by default."""
        return None

    @abstractmethod
    def distribution(
        self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int, state: Any
    ) -> torch.Tensor:
        """Watermarked next-token distribution over ``vocab_size`` entries.

        ``logits`` are the provider's base logits after temperature and top-p (masked
        entries are ``-inf``); ``ids`` are every token of the context so far, prompt
        included, of which the first ``prompt_len`` are the prompt.
        """

    @abstractmethod
    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        """A fresh incremental detector for this scheme and key."""

    def keyed_law(self) -> "KeyedLaw | KeyedPicks | None":
        """The scheme's law batched over a re-read text's positions, for the model-aware statistics
        (``laws``); ``None`` where none is built."""
        return None

    def picks(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int,
              states: Sequence[Any]) -> tuple[list[int], int]:
        """The token each of ``states`` serves after ``ids`` (where ``picks_states``), and how many
        distinct keyed draws that read."""
        raise NotImplementedError(f"{self.name}: no per-state picks")

    def keep_whole_key(self) -> None:
        """Keep every keyed draw once made: a probe serves hundreds of generations at one context.

        Nothing to keep by default (a context-keyed scheme draws per context)."""

    def detect(self, ids: Sequence[int], prefix: Sequence[int] = ()) -> Detection:
        """Score a whole sequence (convenience over the incremental detector)."""
        detector = self.make_detector(prefix).extend(ids)
        result = detector.result()
        if result.token_null is None and detector.token_null is not None:
            result.token_null = detector.token_null
        return result

    def detect_under_keys(self, schemes: Sequence["WatermarkScheme"], ids: Sequence[int]) -> list[Detection]:
        """Each of ``schemes`` (this scheme under other keys: the null over keys,
        ``wash.detection.key_null``) scoring ``ids``.

        One detector run per key here; a scheme whose keys can share work (the Edit
        schemes' permutation null) overrides it without changing any key's law."""
        return [s.detect(ids) for s in schemes]

    def describe(self) -> str:
        values = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(self.params).items())
        return f"{self.name}(key={self.key}{', ' + values if values else ''})"


#: The facts a class that names itself does not inherit, with their defaults.
_OWN_FACTS: dict[str, Any] = {"title": "", "published": True, "form_param": None, "release_form": None,
                              "paper_columns": {}, "rank": 99}


def _scheme_of(params: Any) -> str:
    return getattr(type(params), "scheme_name", type(params).__qualname__)


def _fmt(x: float) -> str:
    return str(x) if isinstance(x, numbers.Integral) else f"{x:g}"


def check_range(params: Any, name: str, lo: float | None = None, hi: float | None = None, *,
                lo_open: bool = False, hi_open: bool = False, integer: bool = False,
                why: str = "") -> None:
    """Reject ``params.<name>`` unless it is a number within the given bounds.

    ``integer`` fields need an int (not a bool, not 4.0); other fields any real,
    finite number (NaN and +-inf are always refused). ``lo``/``hi`` are inclusive
    unless ``lo_open``/``hi_open``; ``None`` leaves that side unbounded. The
    message names the scheme, the parameter, the accepted range and the value
    (plus ``why``, when the range depends on another parameter):
    ``parameter 'gamma' of scheme 'kgw' must be a number in (0, 1), got 1.5``.
    """
    value = getattr(params, name)
    if integer:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    else:
        ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
              and math.isfinite(float(value)))
    if ok:
        ok = ((lo is None or (value > lo if lo_open else value >= lo))
              and (hi is None or (value < hi if hi_open else value <= hi)))
    if ok:
        return
    bounded = lo is not None and hi is not None
    kind = "an integer" if integer else ("a number" if bounded else "a finite number")
    if bounded:
        bounds = f" in {'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"
    elif lo is not None:
        bounds = f" {'>' if lo_open else '>='} {_fmt(lo)}"
    elif hi is not None:
        bounds = f" {'<' if hi_open else '<='} {_fmt(hi)}"
    else:
        bounds = ""
    got = value if isinstance(value, numbers.Real) and not isinstance(value, bool) else repr(value)
    raise WashInputError(
        f"parameter '{name}' of scheme '{_scheme_of(params)}' must be {kind}{bounds}, got {got}"
        + (f" ({why})" if why else ""))


def check_choice(params: Any, name: str, choices: Sequence[Any]) -> None:
    """Reject ``params.<name>`` unless it is one of ``choices`` (same type: 1 is not True)."""
    value = getattr(params, name)
    if any(type(value) is type(c) and value == c for c in choices):
        return
    raise WashInputError(
        f"parameter '{name}' of scheme '{_scheme_of(params)}' must be one of "
        f"{', '.join(_show(c) for c in choices)}, got {value!r}")


def _show(x: Any) -> str:
    return str(x).lower() if isinstance(x, bool) else str(x)


#: ``check_choice`` values of a boolean parameter.
BOOL = (False, True)


def keyed_on(keyed: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A keyed tensor (a list, an order, uniforms) where the logits it perturbs are.

    Keyed draws are made on the host by seeded CPU generators, so a text's key, and
    with it its detection, does not depend on the device that served it. The copy to a
    GPU is asynchronous: the step queues it and never waits for it (a blocking copy would
    wait for every kernel queued before it).
    """
    return keyed if keyed.device == like.device else keyed.to(like.device, non_blocking=True)


def softmax(logits: torch.Tensor) -> torch.Tensor:
    """Softmax in float64: watermark reweights are small differences of large numbers."""
    return torch.softmax(logits.to(torch.float64), dim=-1)


#: Which test a scheme's detector runs, where the WASH release's detector differs
#: from ours (``aar``, ``exp-edit``, ``its-edit``): a ``detector`` parameter.
DETECTOR_VARIANTS = ("ours", "release")
