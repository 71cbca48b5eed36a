"""Compiled members: each model's one-id decode step through ``torch.compile``, on a static KV cache.

Why: a decode step of a small model is mostly per-kernel launch and Python overhead.
A static cache (fixed-shape key and value tensors, written in place) gives the step
one shape at every length, so it compiles once; on CUDA, ``mode="reduce-overhead"``
then replays it as a CUDA graph. The text is the local backend's up to the float
sums the compiled kernels reorder (docs/USAGE.md, ``tests/test_compiled_members.py``).

What runs how (``CompiledContext``, a ``members.ModelContext`` with a static cache):

* a feed of ONE id that needs logits (every eager WASH step after the prompt) runs the
  compiled step, shared by every context of the model;
* every other feed (the prompt, a catch-up of several ids after a routed span's
  re-synchronisation, a lazy catch-up without the output layer) runs the eager model
  on the same static cache: their lengths vary, and compiling each length (or padding
  them to buckets) would buy a few rare calls at the price of a graph per length;
* ``truncate`` moves the cache's write position back (``_set_length``). Nothing is
  erased: a query at position ``q`` attends keys ``<= q`` only (transformers' causal
  mask, built from the position the cache reports), and the ids fed next overwrite
  those positions before they are attended;
* a context longer than its cache moves to a cache twice as long (its keys and values
  copied), a new shape that the step compiles once more.

Every layer, sliding-window ones included, holds every position: the sliding-window
mask is applied on absolute positions, so attention is the model's at any length (at
the memory of the cache's length in every layer), while transformers' own sliding
static layer keeps its length as a Python int that the compiled step would
specialise on (a recompilation per id).

The whole-sequence computations (``token_nll``, ``position_logits``,
``prefix_tree_logits``) are the local member's, on the same weights, uncompiled.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence, TypeVar

import torch

from wash.core import env
from wash.engine import parallel
from wash.engine.members import ALL_CAPABILITIES, FeedCost, LocalMember, ModelContext, TokenizerSide
from wash.engine.models import LoadedModel, load_model
from wash.engine.sampling import ServedRows
from wash.core.errors import WashInputError
from wash.core.options import check_range

T = TypeVar("T")

#: ``torch.compile`` modes; empty: ``reduce-overhead`` (CUDA graphs) on CUDA, ``default`` elsewhere.
MODES = ("", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: Layer kinds a static cache of full layers holds with the model's own attention.
_HELD_LAYERS = ("full_attention", "sliding_attention")

#: One compiled step per (model, mode): a second ``torch.compile`` of the same model would compile again.
_STEPS: dict[tuple[str, str], Callable[[torch.Tensor, Any], torch.Tensor]] = {}
_STEPS_GUARD = threading.Lock()


def compile_mode(mode: str, device: torch.device) -> str:
    """The mode a member compiles with: ``mode``, else CUDA graphs on CUDA and the default elsewhere."""
    return mode or ("reduce-overhead" if device.type == "cuda" else "default")


def compiled_step(lm: LoadedModel, mode: str) -> Callable[[torch.Tensor, Any], torch.Tensor]:
    """The one-id step: ids ``(1, 1)`` and a static cache -> logits ``(1, 1, V)``, compiled when first run."""
    key = (lm.name, mode)
    with _STEPS_GUARD:
        if key not in _STEPS:
            model = lm.model

            def step(ids: torch.Tensor, cache: Any) -> torch.Tensor:
                return model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits

            _STEPS[key] = torch.compile(step, mode=mode, dynamic=False)
        return _STEPS[key]


def static_cache(config: Any, length: int) -> Any:
    """A cache of ``length`` positions, one full static layer per attention layer of ``config``."""
    from transformers.cache_utils import Cache, StaticLayer, get_layer_types_and_kwargs

    kinds, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    return Cache(layers=[StaticLayer(max_cache_len=length) for _ in kinds])


def check_layers(lm: LoadedModel) -> None:
    """Refuse, in one line, a model whose layers a cache of full attention layers cannot hold."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    kinds, _ = get_layer_types_and_kwargs(lm.model.config.get_text_config(decoder=True))
    other = sorted(set(kinds) - set(_HELD_LAYERS))
    if other:
        raise WashInputError(f"backend 'compiled' cannot hold model '{lm.name}': its layers include "
                             f"{', '.join(other)} (accepted: {', '.join(_HELD_LAYERS)})")


def _set_length(cache: Any, length: int) -> None:
    """Move every layer's write position to ``length`` in place: the compiled step keeps its addresses."""
    for layer in cache.layers:
        layer.cumulative_length.fill_(length)


def _capacity(cache: Any) -> int:
    return cache.layers[0].max_cache_len


def _doubled(length: int, target: int) -> int:
    """``length`` doubled until it holds ``target``: few lengths, so few shapes for the step to compile."""
    while length < target:
        length *= 2
    return length


@dataclass(eq=False)
class CompiledMember(TokenizerSide):
    """A model loaded in this process whose contexts decode through its compiled step."""

    capabilities: ClassVar[frozenset[str]] = ALL_CAPABILITIES
    backend: ClassVar[str] = "compiled"

    #: The run's choice of lanes, as ``LocalMember.parallel_forwards``.
    parallel_forwards: bool = field(default_factory=env.parallel_forwards)
    #: Whether one-id steps run compiled (``False``: the same static-cache path, eager).
    compile: bool = True
    #: ``torch.compile``'s mode (``compile_mode``).
    mode: str = ""
    #: A new context's cache length; a longer context doubles it.
    cache_len: int = 256
    #: Copy each step's logits to the host (the local backend's way); by default they stay on the model's
    #: device and the served step runs there (``readback``).
    host_logits: bool = False

    @property
    def device(self) -> torch.device:
        return self.lm.device

    @property
    def step(self) -> Callable[[torch.Tensor, Any], torch.Tensor] | None:
        """The compiled one-id step, or ``None`` when this member runs eagerly."""
        return compiled_step(self.lm, compile_mode(self.mode, self.lm.device)) if self.compile else None

    @property
    def eager(self) -> LocalMember:
        """The local member on the same weights: the whole-sequence computations are its own."""
        return LocalMember(self.lm, parallel_forwards=self.parallel_forwards)

    def context(self, prompt_ids: Sequence[int], use_cache: bool = True,
                served: ServedRows | None = None) -> "CompiledContext":
        """``served`` is not needed here: the row is already in this process's memory."""
        return CompiledContext(self, prompt_ids, use_cache=use_cache)

    def submit(self, task: Callable[[], T]) -> Future:
        return parallel.submit(self.lm.name, task, self.lm.device, self.parallel_forwards)

    def run(self, task: Callable[[], T]) -> T:
        return self.submit(task).result()

    def prefix_tree_logits(self, head: Sequence[int], branches: Sequence[Sequence[int]],
                           leaves: Sequence[tuple[int, Sequence[int]]], batch: int,
                           cost: FeedCost) -> list[torch.Tensor]:
        return self.eager.prefix_tree_logits(head, branches, leaves, batch, cost)

    def token_nll(self, prompt_ids: Sequence[int], ids: Sequence[int]) -> torch.Tensor:
        return self.eager.token_nll(prompt_ids, ids)

    def position_logits(self, ids: Sequence[int]) -> torch.Tensor:
        return self.eager.position_logits(ids)


class CompiledContext(ModelContext):
    """``ModelContext``'s ids, chunks and threads on a static cache: only the cache and the forwards differ.

    The same chunks of ids are fed as on the local backend, so the forwards differ from
    its ones only in kernels (the static cache's masked attention, the compiled step)."""

    def __init__(self, member: CompiledMember, prompt_ids: Sequence[int], use_cache: bool = True) -> None:
        super().__init__(member.lm, prompt_ids, use_cache=use_cache,
                         parallel_forwards=member.parallel_forwards)
        self.step = member.step
        self.cache_len = member.cache_len
        self.host_logits = member.host_logits
        #: The step's input id, written in place: no host-to-device copy to wait for, and a CUDA graph's
        #: input keeps its address.
        self._next_id = torch.zeros((1, 1), dtype=torch.long, device=member.lm.device)
        #: The static cache, kept when ``restart`` or an uncached step drops ``cache``: its addresses stay.
        self._static: Any = None

    def belongs_to(self, member: Any) -> bool:
        """On ``member``'s loaded model, decoding the same way (compiled with the same mode, or eager)."""
        return isinstance(member, CompiledMember) and member.lm is self.lm and member.step is self.step

    def _crop(self, length: int) -> None:
        """Move the write position back: positions from ``length`` on are masked until overwritten."""
        if self.cache is not None:
            _set_length(self.cache, length)
        self.n_cached = length

    def _hold(self, target: int) -> None:
        """Make ``cache`` a static cache of at least ``target`` positions holding the ``n_cached`` fed."""
        if self.cache is None:
            if self._static is None:
                self._static = static_cache(self.lm.model.config, _doubled(self.cache_len, target))
            self.cache, self.n_cached = self._static, 0
            _set_length(self.cache, 0)
        if target <= _capacity(self.cache):
            return
        bigger = static_cache(self.lm.model.config, _doubled(_capacity(self.cache), target))
        for old, new in zip(self.cache.layers, bigger.layers):
            if old.is_initialized:
                new.lazy_initialization(old.keys[:, :, :0], old.values[:, :, :0])
                new.keys[:, :, :self.n_cached].copy_(old.keys[:, :, :self.n_cached])
                new.values[:, :, :self.n_cached].copy_(old.values[:, :, :self.n_cached])
        _set_length(bigger, self.n_cached)
        self.cache = self._static = bigger

    @torch.no_grad()
    def _feed(self, target: int, logits: bool = True) -> None:
        """Feed ``ids[n_cached:target]``: one id with logits through the compiled step; anything else as
        ``ModelContext`` feeds it (the eager model), on the static cache ``_hold`` provides."""
        self._hold(target)
        if self.step is None or not logits or target - self.n_cached != 1:
            return super()._feed(target, logits)
        t0 = time.perf_counter()
        self._next_id.fill_(int(self.ids[target - 1]))
        out = self.step(self._next_id, self.cache)
        # a copy: a CUDA graph's output is overwritten by its next replay
        row = out[0, -1].to(torch.float32, copy=True)
        self._logits, self._logits_len = (row.cpu() if self.host_logits else row), target
        self.forward_s += time.perf_counter() - t0
        self.forward_calls += 1
        self.ids_fed += 1
        self.n_cached = target


@dataclass(frozen=True)
class CompiledBackend:
    """``compiled[:device=cuda,mode=reduce-overhead,compile=true,cache_len=256,host_logits=false]``: models
    in this process, their one-id decode steps compiled on a static KV cache.

    ``device``: where a model loads when this process loads it first (empty: ``models.resolve_device``);
    ``mode``: ``torch.compile``'s (empty: ``reduce-overhead`` on CUDA, ``default`` elsewhere);
    ``compile=false``: the same static-cache path, eager; ``cache_len``: a context's first cache length;
    ``host_logits=true``: each step's logits copied to the host, as the local backend does (by default
    they stay on the device and the whole served step runs there, ``readback``)."""

    name: ClassVar[str] = "compiled"
    in_process: ClassVar[bool] = True
    device: str = ""
    mode: str = ""
    compile: bool = True
    cache_len: int = 256
    host_logits: bool = False

    def __post_init__(self) -> None:
        what = f"backend '{self.name}'"
        if self.mode not in MODES:
            accepted = ", ".join(m for m in MODES if m)
            raise WashInputError(f"{what}: mode={self.mode!r} is not one of {accepted}")
        check_range(what, "cache_len", self.cache_len, 1, 1 << 18)
        if self.device:
            try:
                device = torch.device(self.device)
            except RuntimeError:
                raise WashInputError(f"{what}: device={self.device!r} is not a torch device") from None
            if device.type == "cuda" and not torch.cuda.is_available():
                raise WashInputError(f"{what}: device={self.device!r}, but this machine has no CUDA device")

    def members(self, names: Sequence[str], progress: Callable[[str], None] | None = None,
                parallel_forwards: bool | None = None) -> dict[str, CompiledMember]:
        loaded = {n: load_model(n, progress=progress, device=self.device or None) for n in names}
        # On a GPU with the logits kept there, a step returns once its kernels are queued: one driver
        # thread queues every member's (threads would only queue on the interpreter).
        on_gpu = not self.host_logits and any(lm.device.type == "cuda" for lm in loaded.values())
        lanes = False if on_gpu else parallel.parallel_enabled(parallel_forwards)
        for lm in loaded.values():
            check_layers(lm)
        return {n: CompiledMember(lm, parallel_forwards=lanes, compile=self.compile, mode=self.mode,
                                  cache_len=self.cache_len, host_logits=self.host_logits)
                for n, lm in loaded.items()}

    def member(self, name: str, progress: Callable[[str], None] | None = None) -> CompiledMember:
        return self.members([name], progress)[name]
