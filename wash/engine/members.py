"""Members: the base models of a system, behind one small interface.

A member is one base model as the engine uses it, and nothing above this module
touches a model directly. What it offers (``Member``, ``MemberContext``):

* ``context(prompt_ids)``: a context of its own ids with a KV cache: ``append`` ids
  (free until logits are needed), ``next_logits`` (feeds only the ids not fed yet),
  ``truncate`` / ``sync_to`` (cut back to a prefix, cropping the cache, and re-feed),
  ``catch_up_async`` (feed the committed ids in the background without the output
  layer: lazy catch-up) and ``restart`` (a fresh cache, as a new service holds);
* ``submit(task)`` / ``run(task)``: every call to one member runs on that member's
  own lane, one at a time, in the order submitted (``parallel.py``), which is what
  makes a seed fix the text whatever the load; ``side_by_side`` runs several
  members' calls at once;
* three whole-sequence computations: ``position_logits`` (the logits at every position
  of a text: the model-aware detection statistics), ``prefix_tree_logits`` (the last logits of many
  continuations of one prefix, batched over a shared KV cache: De-mark's probes) and
  ``token_nll`` (each token's negative log-likelihood after a prompt: perplexity, and
  RandomWalk's judge), run in the calling thread like ``next_logits`` (submit them);
* its tokenizer's facts (``name``, ``max_context``, ``vocab``, ``vocab_size``,
  ``bos_id``, ``eos_ids``, ``tokenizer``, ``encode``, ``encode_prompt``,
  ``decode_id``), answered in the calling process whatever the backend.

Nothing outside the members' own modules (this one, ``ray_members.py``, ``models.py``)
reads a member's model (``tests/test_member_protocol.py`` checks): a backend that
implements this protocol runs every caller, identification and the baselines included.

``LocalMember`` is the first implementation: a model loaded in this process
(``models.LoadedModel``) with a transformers KV cache (``ModelContext``), each
model's calls on its own executor thread. ``ray_members.RayMember`` is the second:
the same ``LocalMember`` and ``ModelContext`` inside a Ray actor, driven over the
network (``TokenizerSide`` and ``ContextIds`` are what both share on this side).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, Sequence, TypeVar

import torch

from wash.core import env
from wash.engine import parallel
from wash.engine.models import LoadedModel, load_model
from wash.engine.sampling import ServedRows
from wash.engine.vocab import ModelVocab, model_vocab
from wash.core.errors import WashInputError

T = TypeVar("T")


class MemberContext(Protocol):
    """One generation's context on a member: its own ids, cached, fed only when logits are asked for."""

    ids: list[int]
    prompt_len: int
    forward_calls: int
    ids_fed: int
    forward_s: float

    def append(self, new_ids: Sequence[int]) -> None: ...
    def truncate(self, length: int) -> None: ...
    def sync_to(self, target: Sequence[int]) -> int: ...
    def next_logits(self) -> torch.Tensor: ...
    def catch_up_async(self) -> None: ...
    def settle(self) -> None: ...
    def restart(self, ids: Sequence[int]) -> None: ...
    def generated_ids(self) -> list[int]: ...
    def belongs_to(self, member: "Member") -> bool:
        """Whether this context is on ``member``'s model (a context kept across runs is reused only there)."""


class Member(Protocol):
    """A base model: what EVERY member gives. Its tokenizer's facts, contexts (the next-token logits
    in context) and its calls kept in submission order; ``capabilities`` names which of the
    optional whole-sequence computations (``TokenNLL``, ``PositionLogits``, ``PrefixTreeLogits``)
    it gives as well. A feature that needs one asks ``require`` first."""

    name: str
    max_context: int
    vocab: ModelVocab
    vocab_size: int
    bos_id: int | None
    eos_ids: frozenset[int]
    #: The transformers tokenizer, for what the methods below do not cover (its special tokens).
    tokenizer: Any
    #: Which optional computations this member gives (names in ``CAPABILITIES``).
    capabilities: frozenset[str]
    #: Where its model runs, as the backend registry names it (``backends.py``): messages say it.
    backend: str

    def encode(self, text: str) -> list[int]: ...
    def encode_prompt(self, text: str) -> list[int]: ...
    def decode_id(self, token_id: int) -> str: ...
    def context(self, prompt_ids: Sequence[int], use_cache: bool = True,
                served: ServedRows | None = None) -> MemberContext:
        """A context; ``served``: the caller serves only these rows of its logits, the rest may arrive
        as -inf (a remote member sends only them; a local one has the whole row at no cost)."""
    def submit(self, task: Callable[[], T]) -> Future: ...
    def run(self, task: Callable[[], T]) -> T: ...


class TokenNLL(Member, Protocol):
    """A member that scores a continuation: perplexity, RandomWalk's judge."""

    def token_nll(self, prompt_ids: Sequence[int], ids: Sequence[int]) -> torch.Tensor:
        """Each of ``ids``' negative log-likelihoods (nats, float32, CPU) after ``prompt_ids``, raw distribution."""


class PositionLogits(Member, Protocol):
    """A member that re-reads a whole text in one forward: the model-aware detection statistics."""

    def position_logits(self, ids: Sequence[int]) -> torch.Tensor:
        """The logits after every prefix of ``ids`` (``(len(ids), V)``, float32, CPU): one forward, no cache."""


class PrefixTreeLogits(Member, Protocol):
    """A member that batches many continuations of one prefix over a shared KV cache: De-mark's probes."""

    def prefix_tree_logits(self, head: Sequence[int], branches: Sequence[Sequence[int]],
                           leaves: Sequence[tuple[int, Sequence[int]]], batch: int,
                           cost: "FeedCost") -> list[torch.Tensor]:
        """The last logits (float32, CPU) of every ``head + branches[b] + leaf`` for ``(b, leaf)`` in ``leaves``."""


#: The optional capabilities, by the method each names.
CAPABILITIES: dict[str, type] = {"token_nll": TokenNLL, "position_logits": PositionLogits,
                                 "prefix_tree_logits": PrefixTreeLogits}
#: What the members of this package's two backends give: all of them.
ALL_CAPABILITIES = frozenset(CAPABILITIES)


def require(member: Member, capability: str, feature: str) -> Any:
    """``member`` if it gives ``capability``; else one line naming the feature, the capability and the member.

    Why a check, not an ``AttributeError`` later: a backend that cannot give a whole-sequence
    computation (a server that streams one token at a time) must say so before any work starts."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability '{capability}' (known: {', '.join(CAPABILITIES)})")
    if capability not in member.capabilities:
        raise WashInputError(f"{feature} needs '{capability}', which model '{member.name}' on backend "
                             f"'{member.backend}' does not give")
    return member


def side_by_side(tasks: Sequence[tuple[Member, Callable[[], T]]]) -> list[T]:
    """Run ``(member, task)`` pairs, each on its member's lane, all at once; results in order."""
    futures = [member.submit(task) for member, task in tasks]
    return [f.result() for f in futures]


@dataclass
class FeedCost:
    """What a whole-sequence computation fed: forward passes, ids and seconds."""

    forwards: int = 0
    ids_fed: int = 0
    seconds: float = 0.0


@dataclass(eq=False)
class TokenizerSide:
    """What a member answers from its tokenizer alone, in the calling process.

    Shared by every implementation: a member whose model is elsewhere (``ray_members``)
    keeps its tokenizer here, so encoding and decoding never need a round trip.
    """

    lm: LoadedModel
    _vocab: ModelVocab | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.lm.name

    @property
    def max_context(self) -> int:
        return self.lm.max_context

    @property
    def vocab(self) -> ModelVocab:
        if self._vocab is None:
            self._vocab = model_vocab(self.lm)
        return self._vocab

    def encode(self, text: str) -> list[int]:
        return self.lm.encode(text)

    def encode_prompt(self, text: str) -> list[int]:
        return self.lm.encode_prompt(text)

    @property
    def vocab_size(self) -> int:
        return self.lm.vocab_size

    @property
    def bos_id(self) -> int | None:
        return self.lm.bos_id

    @property
    def eos_ids(self) -> frozenset[int]:
        return self.lm.eos_ids

    @property
    def tokenizer(self) -> Any:
        return self.lm.tokenizer

    def decode_id(self, token_id: int) -> str:
        return self.lm.tokenizer.decode([token_id])


@dataclass(eq=False)
class LocalMember(TokenizerSide):
    """A model loaded in this process, its forwards on its own executor thread (``parallel.py``)."""

    capabilities: ClassVar[frozenset[str]] = ALL_CAPABILITIES
    backend: ClassVar[str] = "local"

    #: The run's choice: this model's forwards on a thread of its own (side by side with the other
    #: models) or on the one thread all models share (``parallel.py``; default ``WASH_PARALLEL_FORWARDS``).
    parallel_forwards: bool = field(default_factory=env.parallel_forwards)

    @property
    def device(self) -> torch.device:
        return self.lm.device

    def context(self, prompt_ids: Sequence[int], use_cache: bool = True,
                served: ServedRows | None = None) -> "ModelContext":
        """``served`` is not needed here: the row is already in this process's memory."""
        return ModelContext(self.lm, prompt_ids, use_cache=use_cache, parallel_forwards=self.parallel_forwards)

    def submit(self, task: Callable[[], T]) -> Future:
        return parallel.submit(self.lm.name, task, self.lm.device, self.parallel_forwards)

    def run(self, task: Callable[[], T]) -> T:
        return self.submit(task).result()

    @torch.no_grad()
    def prefix_tree_logits(self, head: Sequence[int], branches: Sequence[Sequence[int]],
                           leaves: Sequence[tuple[int, Sequence[int]]], batch: int,
                           cost: FeedCost) -> list[torch.Tensor]:
        """The last logits of every ``head + branches[b] + leaf`` for ``(b, leaf)`` in ``leaves``.

        Computed as a prefix cache serves them: ``head`` once, each branch once (one
        batched forward; the branches are of equal length), then the leaves ``batch``
        at a time (of equal length too). The same logits as each sequence alone, fewer
        ids. ``cost`` is added to.
        """
        from transformers import DynamicCache

        model, device = self.lm.model, self.lm.device

        def feed(ids: list[list[int]], cache: Any) -> torch.Tensor:
            t0 = time.perf_counter()
            out = model(input_ids=torch.tensor(ids, dtype=torch.long, device=device), past_key_values=cache,
                        use_cache=True, logits_to_keep=1)
            cost.seconds += time.perf_counter() - t0
            cost.forwards += 1
            cost.ids_fed += len(ids) * len(ids[0])
            return out.logits[:, -1].float().cpu()

        prefix = DynamicCache(config=model.config)
        feed([list(head)], prefix)
        level1 = _branch(prefix, torch.zeros(len(branches), dtype=torch.long, device=device))
        feed([list(b) for b in branches], level1)
        rows: list[torch.Tensor] = []
        for start in range(0, len(leaves), batch):
            chunk = leaves[start:start + batch]
            cache = _branch(level1, torch.tensor([b for b, _ in chunk], dtype=torch.long, device=device))
            rows.extend(feed([list(leaf) for _, leaf in chunk], cache))
        return rows

    @torch.no_grad()
    def token_nll(self, prompt_ids: Sequence[int], ids: Sequence[int]) -> torch.Tensor:
        """Each of ``ids``' negative log-likelihoods (nats, float32, CPU) after ``prompt_ids``, raw distribution.

        One forward over the whole sequence; only the last ``len(ids) + 1`` positions go
        through the output layer (the same logits as the whole sequence's, bit for bit on
        both packaged models, checked 2026-11-28).
        """
        n = len(ids)
        if n == 0:
            return torch.zeros(0)
        x = torch.tensor([list(prompt_ids) + list(ids)], dtype=torch.long, device=self.lm.device)
        logits = self.lm.model(input_ids=x, logits_to_keep=n + 1).logits[0, :-1].float()
        target = x[0, len(prompt_ids):]
        return -torch.log_softmax(logits, dim=-1).gather(1, target[:, None])[:, 0].cpu()

    @torch.inference_mode()
    def position_logits(self, ids: Sequence[int]) -> torch.Tensor:
        """The logits after every prefix of ``ids`` (``(len(ids), V)``, float32, CPU): one forward, no cache."""
        x = torch.tensor([list(ids)], device=self.lm.device)
        return self.lm.model(input_ids=x).logits[0].float().cpu()


@dataclass(frozen=True)
class LocalBackend:
    """``local``: every model loaded in this process, one executor thread per model (``parallel.py``)."""

    name: ClassVar[str] = "local"
    in_process: ClassVar[bool] = True

    def members(self, names: Sequence[str], progress: Callable[[str], None] | None = None,
                parallel_forwards: bool | None = None) -> dict[str, LocalMember]:
        lanes = parallel.parallel_enabled(parallel_forwards)
        return {n: LocalMember(load_model(n, progress=progress), parallel_forwards=lanes) for n in names}

    def member(self, name: str, progress: Callable[[str], None] | None = None) -> LocalMember:
        return self.members([name], progress)[name]


def _branch(cache: Any, rows: torch.Tensor) -> Any:
    """A new cache holding ``rows`` of ``cache``'s batch; ``cache`` itself is left as it is."""
    import copy

    out = copy.copy(cache)
    out.layers = [copy.copy(layer) for layer in cache.layers]
    out.batch_select_indices(rows)
    return out


class ContextIds:
    """The ids side of a context, shared by every implementation: what only moves ids around.

    A subclass keeps ``ids`` and ``prompt_len`` and implements ``append`` and ``truncate``.
    """

    ids: list[int]
    prompt_len: int

    def append(self, new_ids: Sequence[int]) -> None:
        raise NotImplementedError

    def truncate(self, length: int) -> None:
        raise NotImplementedError

    def sync_to(self, target: Sequence[int]) -> int:
        """Make the context equal ``target`` keeping the common prefix; returns ids replaced."""
        common = 0
        limit = min(len(self.ids), len(target))
        while common < limit and self.ids[common] == target[common]:
            common += 1
        replaced = len(self.ids) - common
        self.truncate(common)
        self.append(target[common:])
        return replaced

    def generated_ids(self) -> list[int]:
        return self.ids[self.prompt_len:]

    def belongs_to(self, member: Any) -> bool:
        raise NotImplementedError


class ModelContext(ContextIds):
    """A model's context ids and KV cache; forwards run only the ids not fed yet.

    Thread contract: the generation's own thread appends, truncates and asks for
    logits; forwards run on the model's executor thread (``parallel.py``), which
    runs them in submission order. Logits are cached with the context length they
    belong to, so appending never needs to invalidate them.
    """

    def __init__(self, lm: LoadedModel, prompt_ids: Sequence[int], use_cache: bool = True,
                 parallel_forwards: bool | None = None) -> None:
        self.lm = lm
        #: Its member's lane choice (``LocalMember.parallel_forwards``; ``None``: the default).
        self.parallel_forwards = parallel.parallel_enabled(parallel_forwards)
        self.ids: list[int] = list(prompt_ids)
        self.prompt_len = len(self.ids)
        self.use_cache = use_cache
        self.cache = None
        self.n_cached = 0
        self._logits: torch.Tensor | None = None
        self._logits_len = -1
        #: The last background feed queued on the model's thread, and where it feeds up to.
        self._queued: Future | None = None
        self._queued_to = 0
        #: Forward passes and ids fed, for the cost accounting of benchmarks.
        self.forward_calls = 0
        self.ids_fed = 0
        self.forward_s = 0.0

    def append(self, new_ids: Sequence[int]) -> None:
        self.ids.extend(int(i) for i in new_ids)

    def belongs_to(self, member: Any) -> bool:
        """On ``member``'s loaded model: every ``LocalMember`` of one process's copy of a model shares it."""
        return isinstance(member, LocalMember) and member.lm is self.lm

    def restart(self, ids: Sequence[int]) -> None:
        """Hold ``ids`` instead, with a fresh cache: a service taking the text anew holds none of it."""
        self.truncate(0)
        self.cache, self.n_cached = None, 0
        self.append(ids)

    def settle(self) -> None:
        """Wait for a queued background feed (on the model's own thread it has already run)."""
        if self._queued is not None:
            if not parallel.on_model_thread(self.lm.name, self.parallel_forwards):
                self._queued.result()
            if self._queued.done():
                self._queued = None

    def catch_up_async(self) -> None:
        """Queue a feed of every committed id on the model's thread, and return at once.

        No logits are needed for these positions, so the feed skips the output layer
        (for Gemma 3 its 262k x 640 matrix is about half of a decode step). Meant for
        a model that will take at least one more id before it is next asked for
        logits (lazy forwards call it for the models not picked next); if it is asked
        sooner, ``next_logits`` crops and re-feeds the last id: correct, only slower.
        The chunk is fixed now (the ids committed so far), not when the thread gets
        to it, so the floating-point result does not depend on timing.
        """
        target = len(self.ids)
        if not self.use_cache or target <= max(self.n_cached, self._queued_to):
            return
        self._queued_to = target
        self._queued = parallel.submit(self.lm.name, lambda: self._feed(target, logits=False), self.lm.device,
                                       self.parallel_forwards)

    def truncate(self, length: int) -> None:
        """Drop ids from ``length`` on, cropping the KV cache to match."""
        if length >= len(self.ids):
            return
        self.settle()
        del self.ids[length:]
        self._queued_to = min(self._queued_to, length)
        if self._logits_len > length:
            self._logits, self._logits_len = None, -1
        if self.n_cached > length:
            self._crop(length)

    def _crop(self, length: int) -> None:
        window = getattr(self.lm.model.config, "sliding_window", None)
        if self.cache is not None and (not window or self.n_cached < window - 1):
            self.cache.crop(length - self.n_cached)  # negative: number of tokens removed
            self.n_cached = length
        else:  # a sliding-window layer has already evicted what the crop would need
            self.cache = None
            self.n_cached = 0

    def next_logits(self) -> torch.Tensor:
        """Logits for the token after ``self.ids`` (float32; on the CPU here, on its device for a compiled member)."""
        self.settle()
        if self._logits is not None and self._logits_len == len(self.ids):
            return self._logits
        if not self.use_cache:
            self.cache, self.n_cached = None, 0
        if self.n_cached == len(self.ids):  # cropped exactly to the end: re-feed the last id
            self._crop(len(self.ids) - 1)
        self._feed(len(self.ids))
        assert self._logits is not None
        return self._logits

    @torch.no_grad()
    def _feed(self, target: int, logits: bool = True) -> None:
        """Feed ``ids[n_cached:target]`` in one forward; keep the logits at ``target`` if asked."""
        from transformers import DynamicCache

        if self.cache is None:
            self.cache = DynamicCache(config=self.lm.model.config)
            self.n_cached = 0
        if target <= self.n_cached:
            return
        pending = torch.tensor([self.ids[self.n_cached:target]], dtype=torch.long, device=self.lm.device)
        t0 = time.perf_counter()
        if logits:
            out = self.lm.model(input_ids=pending, past_key_values=self.cache, use_cache=True,
                                logits_to_keep=1)
            self._logits, self._logits_len = out.logits[0, -1].float().cpu(), target
        else:  # the decoder alone fills the cache; the output layer is skipped
            self.lm.model.get_decoder()(input_ids=pending, past_key_values=self.cache, use_cache=True)
        self.forward_s += time.perf_counter() - t0
        self.forward_calls += 1
        self.ids_fed += pending.shape[1]
        self.n_cached = target
