"""The event stream: what the engine tells its consumers (the app, the CLI, experiments).

``wash.engine.ensemble.generate_stream`` yields these dataclasses in order: ``LoadEvent``
while models load, one ``StepEvent`` per committed token, a ``ResyncEvent`` after
each routed span, and a final ``FinishedEvent`` carrying the ``RunResult``. A
final-text rewrite attack (``wash.baselines.randomwalk``) adds one ``RewriteEvent``
per rewrite attempt between the generation's last ``StepEvent`` and the end.
Consumers read their fields; they become plain JSON only when serialised
(``to_dict``), for a download or the CLI's ``--json``. ``event_from_dict`` turns a
``to_dict`` back into the event (the detection's per-token scores come back only
where ``with_tokens`` kept them): a recorded run (the Lesson's replays) is the same
stream a live run yields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Union


@dataclass
class LoadEvent:
    message: str

    def to_dict(self) -> dict:
        return {"event": "load", "message": self.message}

    @classmethod
    def from_dict(cls, d: dict) -> "LoadEvent":
        return cls(d["message"])


@dataclass
class StepEvent:
    """One committed token.

    ``candidates`` are the tokens worth plotting (top-k of p̄ and of p*), and each
    distribution is given on them: every provider's watermarked p_i, the average
    p̄ and the consensus p* (mean of the providers' unwatermarked base
    distributions), with ``linf`` = ‖p̄ − p*‖∞ over the whole union vocabulary.
    ``chosen`` is the provider whose own distribution the token was drawn from:
    the specialist on a routed step, the uniformly picked provider on a lazy step,
    ``None`` when the token was drawn from the average. When a step drew from one
    provider, only that provider's distribution exists (nothing else was computed):
    the candidates are its top-k and every other entry, p̄, p* and ``linf`` are
    ``None``.

    ``entropy`` is the Shannon entropy (nats) of the served base distribution the
    token came from (after temperature, top-k and top-p, before any watermark): how
    much room the step left a watermark. On a step drawn from the average it is the
    mean over the providers of their models' base entropies (weighted like p*, so it
    is the expectation of what a lazy step's uniformly picked provider records); on a
    step drawn from one provider (lazy, routed) it is that provider's model's.
    """

    step: int
    token: str
    union_id: int
    routed: bool
    span_id: int | None
    specialists: list[int]
    chosen: int | None
    candidates: list[str]
    candidate_ids: list[int]
    provider_probs: list[list[float] | None]
    average_probs: list[float] | None
    consensus_probs: list[float] | None
    linf: float | None
    live_z: list[float | None]
    elapsed_ms: float
    entropy: float | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["event"] = "step"
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "StepEvent":
        return cls(**_fields(d))


@dataclass
class ResyncEvent:
    """A routed span finished and was re-tokenised by every model."""

    span_id: int
    text: str
    specialists: list[int]
    tokens_per_model: dict[str, list[str]]
    ids_replaced: dict[str, int]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["event"] = "resync"
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ResyncEvent":
        return cls(**_fields(d))


@dataclass
class ProviderDetection:
    provider: str
    model: str
    scheme: str
    key: int
    z: float
    p: float
    tokens_scored: int
    detected: bool
    per_token: list[float | None] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    #: (mean, sd) of one token's score without a watermark (``Detection.token_null``).
    token_null: tuple[float, float] | None = None

    def to_dict(self, with_tokens: bool = False) -> dict:
        d = asdict(self)
        if not with_tokens:
            d.pop("per_token")
            d.pop("tokens")
            d.pop("token_null")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ProviderDetection":
        d = dict(d)
        if d.get("token_null") is not None:
            d["token_null"] = tuple(d["token_null"])
        return cls(**d)


@dataclass
class TokenRecord:
    """One committed token of the final text (``chosen`` and ``entropy`` as in ``StepEvent``)."""

    text: str
    union_id: int
    routed: bool
    span_id: int | None
    specialists: list[int]
    chosen: int | None
    entropy: float | None = None


@dataclass
class SpanRecord:
    """One routed span: where it starts among the tokens, how long, who could write it."""

    span_id: int
    text: str
    start: int
    length: int
    specialists: list[int]


@dataclass
class RoutingSummary:
    routed_token_fraction: float
    mean_routed_span_length: float
    routed_spans: int
    tokens: int


@dataclass
class Timing:
    """Wall-clock cost of a run; per-model counters show what each base model did."""

    per_token_ms: float
    median_token_ms: float
    total_s: float
    load_s: float
    forward_calls: dict[str, int]
    ids_fed: dict[str, int]
    forward_s: dict[str, float]
    #: Where the models ran (``settings.Backend``): how the run was served, not what it says.
    backend: str = "local"


@dataclass
class RunResult:
    text: str
    prompt: str
    mode: str
    seed: int
    providers: list[dict]
    tokens: list[TokenRecord]
    spans: list[SpanRecord]
    routing: RoutingSummary
    detection: list[ProviderDetection]
    timing: Timing
    model_ids: dict[str, list[int]]
    finish_reason: str
    settings: dict = field(default_factory=dict)

    def mean_entropy(self) -> float | None:
        """Mean served base entropy (nats) over the tokens that record one; ``None`` if none does."""
        values = [t.entropy for t in self.tokens if t.entropy is not None]
        return sum(values) / len(values) if values else None

    def marked_text(self) -> str:
        """The text with routed spans in ⟦brackets⟧, for terminals."""
        out, open_span = [], None
        for t in self.tokens:
            if t.span_id != open_span:
                if open_span is not None:
                    out.append("⟧")
                if t.span_id is not None:
                    out.append("⟦")
                open_span = t.span_id
            out.append(t.text)
        if open_span is not None:
            out.append("⟧")
        return "".join(out)

    def to_dict(self, with_tokens: bool = False) -> dict:
        """Plain JSON; ``with_tokens`` keeps each detection's per-token scores (a recorded run needs them)."""
        d = asdict(self)
        d["detection"] = [x.to_dict(with_tokens) for x in self.detection]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunResult":
        d = dict(d)
        d["tokens"] = [TokenRecord(**t) for t in d["tokens"]]
        d["spans"] = [SpanRecord(**x) for x in d["spans"]]
        d["routing"] = RoutingSummary(**d["routing"])
        d["detection"] = [ProviderDetection.from_dict(x) for x in d["detection"]]
        d["timing"] = Timing(**d["timing"])
        return cls(**d)


@dataclass
class RewriteEvent:
    """One rewrite attempt of a final-text attack: a span of the text replaced, kept or not.

    ``start`` and ``end`` are character offsets of the span in the generated text
    (prompt excluded) as it stood BEFORE this attempt; ``old_text`` is that span and
    ``new_text`` what the rewriter wrote instead. Applying every event with
    ``accepted`` or ``backtrack`` in order (``text[:start] + new_text + text[end:]``)
    to the watermarked text gives the final text. The judge scores are losses, lower
    is better: the candidate text's ``candidate_score`` was kept iff it is at most
    ``threshold`` (the ``reference_score`` it is compared with, plus the tolerance).
    A ``backtrack`` event is no attempt of its own: after too many rejections in a
    row the walk returns to the text before its last kept rewrite (its
    ``candidate_score`` is that text's score).
    """

    attempt: int
    start: int
    end: int
    old_text: str
    new_text: str
    accepted: bool
    candidate_score: float
    reference_score: float
    threshold: float
    elapsed_ms: float
    backtrack: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["event"] = "rewrite"
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RewriteEvent":
        return cls(**_fields(d))


@dataclass
class FinishedEvent:
    result: RunResult

    def to_dict(self, with_tokens: bool = False) -> dict:
        return {"event": "finished", "result": self.result.to_dict(with_tokens)}

    @classmethod
    def from_dict(cls, d: dict) -> "FinishedEvent":
        return cls(RunResult.from_dict(d["result"]))


Event = Union[LoadEvent, StepEvent, ResyncEvent, RewriteEvent, FinishedEvent]
#: The ``event`` tag of each kind's ``to_dict``.
EVENT_TYPES: dict[str, Any] = {"load": LoadEvent, "step": StepEvent, "resync": ResyncEvent, "rewrite": RewriteEvent,
                               "finished": FinishedEvent}


def _fields(d: dict) -> dict:
    """A ``to_dict`` without its ``event`` tag: the dataclass's own fields."""
    return {k: v for k, v in d.items() if k != "event"}


def event_from_dict(d: dict) -> Event:
    """The event a ``to_dict`` came from (its ``event`` tag names the kind)."""
    kind = EVENT_TYPES.get(d.get("event"))
    if kind is None:
        raise ValueError(f"unknown event {d.get('event')!r} (accepted: {', '.join(EVENT_TYPES)})")
    return kind.from_dict(d)
