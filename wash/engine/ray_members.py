"""Members as Ray actors: each base model in a process of its own (a GPU of its own, a machine of its own).

Why: the local backend runs every model in the calling process, which caps a system
at what one machine holds. Here each base model is a Ray actor (``MemberActor``), so
N models can sit on N GPUs or N machines while the orchestrator stays where it is.

What runs where:

* the actor holds the weights and every context's KV cache, as a ``LocalMember`` and
  its ``ModelContext``s: the very code the local backend runs, forwards on the
  actor's own lane thread (``parallel.py``) with the same thread settings;
* this process keeps what is cheap and read every step: the tokenizer (shipped once
  from the actor, so encoding and decoding are the actor's own and need no round
  trip), each context's ids (``RayContext``: the routing, the re-synchronisation and
  the live detectors read them), and everything above the members (serving,
  watermarks, averaging, routing, re-synchronisation, detection), unchanged. A task
  given to ``RayMember.submit`` runs on the model's lane here, as a local member's
  does, and only its ``next_logits`` crosses to the actor.

What crosses per step: under a truncating profile (top-k, or greedy) only the rows
that serving can keep, with their raw logits (``sampling.ServedRows``: about k rows
instead of 49k-262k, the same served row bit for bit); otherwise the whole row.

Why the text is byte-identical to the local backend: a ``RayContext`` records
``append``, ``truncate`` and ``restart`` as a log and ships the log with the next call
that needs the model (``next_logits``, ``catch_up_async``); the actor replays it on
its ``ModelContext`` before answering. The actor's context thus receives exactly the
calls a local context would, in the same order, and feeds the same chunks of ids:
the same floating-point logits. Calls to one actor are submitted under one lock from
this process, and Ray runs a single-threaded actor's calls from one submitter in the
order they were submitted, which is the lane's guarantee (``members.py``).

Faults: an actor that dies or does not answer within ``WASH_RAY_CALL_TIMEOUT_S``
seconds (default 300; loading has ``WASH_RAY_LOAD_TIMEOUT_S``, default 1800) ends the
run with a ``MemberError`` naming the model; the actor is dropped, and the next run
starts a fresh one. An unreachable cluster address is a ``WashInputError`` at start.

Clusters: ``ray_address`` (else ``RAY_ADDRESS``) joins an existing cluster, whose nodes
must be able to import ``wash`` and load the models; without one, a local cluster
starts on this machine's cores. One GPU per member where the cluster has GPUs (the
model loads in bf16 there, as ``models.resolve_device`` decides), one CPU otherwise.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import socket
import threading
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, NoReturn, Sequence, TypeVar
from urllib.parse import urlparse

import torch

from wash.core import env
from wash.engine import parallel
from wash.engine.members import ALL_CAPABILITIES, ContextIds, FeedCost, LocalMember, ModelContext, TokenizerSide
from wash.engine.models import LoadedModel
from wash.engine.sampling import ServedRows
from wash.core.errors import MemberError, WashInputError

T = TypeVar("T")

#: (forward passes, ids fed, forward seconds) of one context, as the actor last reported them.
Counters = tuple[int, int, float]
#: One recorded context call: ``("append", ids)``, ``("truncate", length)`` or ``("restart", ids)``.
Op = tuple[str, Any]
#: A next-token row as the actor sends it: whole, or (row indices, their logits, row size).
Row = torch.Tensor | tuple[torch.Tensor, torch.Tensor, int]


def call_timeout_s() -> float:
    """How long one call may take before its member is declared lost (``WASH_RAY_CALL_TIMEOUT_S``)."""
    return env.ray_call_timeout_s()


def load_timeout_s() -> float:
    """How long an actor may take to load its model (``WASH_RAY_LOAD_TIMEOUT_S``; a first GGUF load dequantises)."""
    return env.ray_load_timeout_s()


# -- the actor -----------------------------------------------------------------------
class MemberActor:
    """One base model and its contexts' KV caches, in a Ray actor (``max_concurrency=1``).

    Every call runs the local backend's own code: ``LocalMember`` and ``ModelContext``,
    forwards on this process's lane for the model, so the thread settings (and with
    them the floating-point results) are the local backend's.
    """

    def __init__(self, name: str, allow_external: bool | None) -> None:
        from wash.engine.models import load_model

        self.member = LocalMember(load_model(name, allow_external=allow_external))
        self.contexts: dict[int, ModelContext] = {}
        #: Per context, the rows its caller serves (absent: the whole row goes back).
        self.served: dict[int, ServedRows] = {}

    def header(self) -> dict[str, Any]:
        """What the calling process needs to encode, decode and align without the weights."""
        lm = self.member.lm
        return {"tokenizer": lm.tokenizer, "vocab_size": lm.vocab_size, "eos_ids": lm.eos_ids,
                "bos_id": lm.bos_id, "max_context": lm.max_context, "load_seconds": lm.load_seconds,
                "device": str(lm.device), "pid": os.getpid()}

    def ping(self) -> int:
        return os.getpid()

    def open(self, cid: int, prompt_ids: list[int], use_cache: bool, served: ServedRows | None = None) -> None:
        self.contexts[cid] = self.member.context(prompt_ids, use_cache=use_cache)
        if served is not None:
            self.served[cid] = served

    def close(self, cid: int) -> None:
        self.served.pop(cid, None)
        ctx = self.contexts.pop(cid, None)
        if ctx is not None:
            ctx.settle()

    def _replay(self, cid: int, ops: Sequence[Op]) -> ModelContext:
        """The context after the calls the caller recorded since its last call, made in order."""
        ctx = self.contexts[cid]
        for op, arg in ops:
            if op == "append":
                ctx.append(arg)
            elif op == "truncate":
                ctx.truncate(arg)
            elif op == "restart":
                ctx.restart(arg)
            else:
                raise ValueError(f"unknown context call {op!r}")
        return ctx

    def logits(self, cid: int, ops: Sequence[Op]) -> tuple[Row, Counters]:
        """The next row: whole, or (rows, their logits, row size) where the caller serves only those."""
        ctx = self._replay(cid, ops)
        row = self.member.run(ctx.next_logits)
        served = self.served.get(cid)
        if served is None:
            return row, _counters(ctx)
        rows, values = served.select(row)
        return (rows, values, row.numel()), _counters(ctx)

    def catch_up(self, cid: int, ops: Sequence[Op]) -> Counters:
        """The local background catch-up, waited for here (the caller does not wait for this call)."""
        ctx = self._replay(cid, ops)
        ctx.catch_up_async()
        ctx.settle()
        return _counters(ctx)

    def prefix_tree_logits(self, head: list[int], branches: list[list[int]],
                           leaves: list[tuple[int, list[int]]], batch: int) -> tuple[list[torch.Tensor], FeedCost]:
        cost = FeedCost()
        rows = self.member.run(lambda: self.member.prefix_tree_logits(head, branches, leaves, batch, cost))
        return rows, cost

    def token_nll(self, prompt_ids: list[int], ids: list[int]) -> torch.Tensor:
        return self.member.run(lambda: self.member.token_nll(prompt_ids, ids))

    def position_logits(self, ids: list[int]) -> torch.Tensor:
        return self.member.run(lambda: self.member.position_logits(ids))


def _counters(ctx: ModelContext) -> Counters:
    return ctx.forward_calls, ctx.ids_fed, ctx.forward_s


# -- this process's side --------------------------------------------------------------
@dataclass(eq=False)
class RayMember(TokenizerSide):
    """A base model in a Ray actor; its tokenizer (``lm``, without weights) and its lane here."""

    capabilities: ClassVar[frozenset[str]] = ALL_CAPABILITIES
    backend: ClassVar[str] = "ray"

    actor: Any = None
    #: The actor's process id (tests and fault reports name it).
    pid: int = 0
    #: Submissions to the actor go one at a time, so their order is the order of the calls.
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _ids: Iterator[int] = field(default_factory=itertools.count, repr=False)
    #: Set once a call failed: the actor is gone for this process.
    lost: bool = False
    #: Whether this process's side of its calls has a lane of its own (``parallel.py``). The
    #: members are the process's, shared by its runs: ``ray_members`` sets the asking run's choice.
    #: Only the wall clock depends on it; the actor makes each context's calls in order either way.
    parallel_forwards: bool = field(default_factory=env.parallel_forwards)

    @property
    def device(self) -> torch.device:
        """Where its logits arrive (the actor's device is in ``header``)."""
        return torch.device("cpu")

    def context(self, prompt_ids: Sequence[int], use_cache: bool = True,
                served: ServedRows | None = None) -> "RayContext":
        """A context in the actor; with ``served``, only those rows of each next row cross back."""
        return RayContext(self, prompt_ids, use_cache, served)

    def submit(self, task: Callable[[], T]) -> "Future[T]":
        """Run ``task`` on this model's lane in this process (only its model calls cross to the actor)."""
        return parallel.submit(self.name, task, parallel_forwards=self.parallel_forwards)

    def run(self, task: Callable[[], T]) -> T:
        return self.submit(task).result()

    def prefix_tree_logits(self, head: Sequence[int], branches: Sequence[Sequence[int]],
                           leaves: Sequence[tuple[int, Sequence[int]]], batch: int,
                           cost: FeedCost) -> list[torch.Tensor]:
        """``LocalMember.prefix_tree_logits``, computed by the actor; ``cost`` is added to."""
        rows, spent = self.call("prefix_tree_logits", list(head), [list(b) for b in branches],
                                [(int(b), list(leaf)) for b, leaf in leaves], batch)
        cost.forwards += spent.forwards
        cost.ids_fed += spent.ids_fed
        cost.seconds += spent.seconds
        return rows

    def token_nll(self, prompt_ids: Sequence[int], ids: Sequence[int]) -> torch.Tensor:
        """``LocalMember.token_nll``, computed by the actor (only the per-token values cross back)."""
        return self.call("token_nll", list(prompt_ids), list(ids))

    def position_logits(self, ids: Sequence[int]) -> torch.Tensor:
        """``LocalMember.position_logits``, computed by the actor (every row crosses back)."""
        return self.call("position_logits", list(ids))

    # -- calls ------------------------------------------------------------------------
    def send(self, method: str, *args: Any) -> Any:
        """Submit a call to the actor and return its reference without waiting."""
        with self._lock:
            if self.lost:
                self._fail("was lost earlier in this run")
            return getattr(self.actor, method).remote(*args)

    def wait(self, ref: Any, loading: bool = False) -> Any:
        """A submitted call's answer; a dead or silent actor becomes a ``MemberError`` naming the model.

        A silent actor and one whose call raised are stopped too: either may hold a GPU,
        and its contexts may be half-updated.
        """
        import ray
        from ray import exceptions as rex

        limit, setting = ((load_timeout_s(), env.RAY_LOAD_TIMEOUT_S.name) if loading
                          else (call_timeout_s(), env.RAY_CALL_TIMEOUT_S.name))
        try:
            return ray.get(ref, timeout=limit)
        except rex.GetTimeoutError:
            self._fail(f"did not answer within {limit:g} s ({setting})", kill=True)
        except rex.RayActorError as err:
            self._fail(f"died ({_first_line(err)})")
        except rex.RayTaskError as err:
            cause = getattr(err, "cause", None)
            self._fail(f"failed: {_first_line(cause or err)}", kill=True, cause=cause)

    def call(self, method: str, *args: Any) -> Any:
        return self.wait(self.send(method, *args))

    def _fail(self, what: str, kill: bool = False, cause: BaseException | None = None) -> NoReturn:
        """Forget the actor (the next run starts a fresh one) and end the run naming the model.

        Bad input found by the actor (a ``WashInputError``) is raised as itself.
        """
        self.lost = True
        _forget(self)
        if kill:
            _kill(self.actor)
        if isinstance(cause, WashInputError):
            raise cause from None
        raise MemberError(f"member {self.name} (Ray actor, pid {self.pid}) {what}; this run is ended, "
                          "the next run starts a fresh actor")


def _kill(actor: Any) -> None:
    """Stop an actor that no longer answers (it holds its model and its reserved resources)."""
    import ray

    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone: nothing left to stop
        pass


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class RayContext(ContextIds):
    """A context whose KV cache lives in the member's actor; its ids (read every step) live here.

    ``append``, ``truncate`` and ``restart`` only record what they did; the record goes
    with the next call that needs the model, and the actor makes the same calls on its
    ``ModelContext`` in the same order (the module docstring says why that matters).
    Logits are kept with the length they belong to, as ``ModelContext`` keeps them.
    """

    def __init__(self, member: RayMember, prompt_ids: Sequence[int], use_cache: bool = True,
                 served: ServedRows | None = None) -> None:
        self.member = member
        self.ids: list[int] = [int(i) for i in prompt_ids]
        self.prompt_len = len(self.ids)
        self.use_cache = use_cache
        self.forward_calls = 0
        self.ids_fed = 0
        self.forward_s = 0.0
        #: Logit rows received from the actor so far (a whole row counts its size).
        self.rows_received = 0
        self._ops: list[Op] = []
        self._logits: torch.Tensor | None = None
        self._logits_len = -1
        self._queued: Any = None
        self._cid = next(member._ids)
        member.send("open", self._cid, list(self.ids), use_cache, served)
        # The actor's copy goes when this context does (a finished generation's KV cache).
        weakref.finalize(self, _close, member, self._cid)

    def belongs_to(self, member: Any) -> bool:
        """On ``member``'s actor (a fresh actor after a fault is another member, with contexts of its own)."""
        return member is self.member

    def append(self, new_ids: Sequence[int]) -> None:
        new = [int(i) for i in new_ids]
        self.ids.extend(new)
        if self._ops and self._ops[-1][0] == "append":  # the actor only extends its ids: one call will do
            self._ops[-1][1].extend(new)
        else:
            self._ops.append(("append", new))

    def truncate(self, length: int) -> None:
        """Drop ids from ``length`` on (the actor crops its KV cache on the next call)."""
        if length >= len(self.ids):
            return
        del self.ids[length:]
        self._ops.append(("truncate", length))
        if self._logits_len > length:
            self._logits, self._logits_len = None, -1

    def restart(self, ids: Sequence[int]) -> None:
        """Hold ``ids`` instead, with a fresh cache in the actor (``ModelContext.restart``)."""
        del self.ids[:]
        self.ids.extend(int(i) for i in ids)
        self._ops.append(("restart", list(self.ids)))
        if self._logits_len > 0:
            self._logits, self._logits_len = None, -1

    def _take_ops(self) -> list[Op]:
        ops, self._ops = self._ops, []
        return ops

    def _count(self, counters: Counters) -> None:
        """Take the actor's counters (they only grow; answers may be read out of order)."""
        calls, fed, seconds = counters
        self.forward_calls = max(self.forward_calls, calls)
        self.ids_fed = max(self.ids_fed, fed)
        self.forward_s = max(self.forward_s, seconds)

    def next_logits(self) -> torch.Tensor:
        """Logits for the token after ``self.ids`` (float32, on the CPU), computed by the actor.

        Opened with ``served``, the rows its caller cannot serve are -inf here (the actor sent the others).
        """
        if self._logits is not None and self._logits_len == len(self.ids):
            return self._logits  # the actor's context would answer from its own copy of these
        member = self.member
        sent, counters = member.wait(member.send("logits", self._cid, self._take_ops()))
        self._count(counters)
        row = sent if isinstance(sent, torch.Tensor) else ServedRows.rebuild(*sent)
        self.rows_received += sent.numel() if isinstance(sent, torch.Tensor) else len(sent[0])
        self._logits, self._logits_len = row, len(self.ids)
        return row

    def catch_up_async(self) -> None:
        """Queue the actor's background feed of every committed id (``ModelContext.catch_up_async``)."""
        if not self.use_cache:
            return
        self._queued = self.member.send("catch_up", self._cid, self._take_ops())

    def settle(self) -> None:
        """Wait for a queued catch-up (its counters, and its failure if the actor died)."""
        if self._queued is not None:
            ref, self._queued = self._queued, None
            self._count(self.member.wait(ref))


def _close(member: RayMember, cid: int) -> None:
    """Drop a finished context's KV cache in the actor (best effort: the actor may be gone)."""
    import ray

    if member.lost or not ray.is_initialized():  # after a shutdown a call would start a new cluster
        return
    try:
        member.send("close", cid)
    except Exception:  # the actor or the cluster is gone: so is the cache
        pass


# -- the cluster, and one actor per model -----------------------------------------------
_GUARD = threading.Lock()
_MEMBERS: dict[str, RayMember] = {}
#: How long a known actor may take to answer a ping before a run replaces it.
PING_TIMEOUT_S = 30.0


def _forget(member: RayMember) -> None:
    with _GUARD:
        if _MEMBERS.get(member.name) is member:
            del _MEMBERS[member.name]


def _reachable(address: str) -> None:
    """Refuse an address nothing listens at in seconds, not after Ray's minutes of retries."""
    if address in ("", "auto", "local"):
        return
    parsed = urlparse(address if "://" in address else f"ray://{address}")
    try:
        host, port = parsed.hostname, parsed.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise WashInputError(f"malformed Ray address '{address}' (expected HOST:PORT, ray://HOST:PORT or auto)")
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as err:
        raise WashInputError(f"cannot reach the Ray cluster at {address}: {err.strerror or err}") from None


#: What to install for ``--backend ray`` (Ray is optional: only this backend imports it).
RAY_INSTALL = "pip install -r requirements-ray.txt"


def _import_ray():
    """The ``ray`` module, or one line telling the user what to install."""
    try:
        import ray
    except ImportError:
        raise WashInputError(f"--backend ray needs Ray, which is not installed here: {RAY_INSTALL}") from None
    return ray


def connect(address: str = "") -> None:
    """Join the cluster at ``address`` (else ``RAY_ADDRESS``), or start a local one; once per process.

    Every use of Ray starts here (``ray_members``, ``bench``), so a missing Ray is one line, not a traceback."""
    ray = _import_ray()

    with _CONNECT_LOCK:  # two first runs at once start one cluster
        if ray.is_initialized():
            return
        address = address or env.ray_address()
        _reachable(address)
        if threading.current_thread() is not threading.main_thread() and not address:
            _init_on_owner_thread(address)
        else:
            _init(address)


_CONNECT_LOCK = threading.Lock()


def _init_on_owner_thread(address: str) -> None:
    """Start the local cluster from a thread that lives as long as the process.

    Ray spawns its GCS and raylet with a parent-death signal, which Linux ties to the
    spawning THREAD: started from the app's preload or generation thread, the whole
    cluster was killed seconds after that thread ended (the app's soak, 2026-11-27),
    and Ray then ended the app. The owner thread waits forever once the cluster is up.
    """
    done: queue.Queue = queue.Queue()

    def own() -> None:
        try:
            _init(address)
            done.put(None)
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            done.put(err)
            return
        threading.Event().wait()

    threading.Thread(target=own, name="wash-ray-owner", daemon=True).start()
    err = done.get()
    if err is not None:
        raise err


def _init(address: str) -> None:
    import ray

    try:
        if address:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        else:
            # A local cluster's workers import wash from this checkout.
            root = str(__import__("wash.core.version", fromlist=["ROOT"]).ROOT)
            path = env.python_path()
            if root not in path.split(os.pathsep):
                os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, path) if p)
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise WashInputError(f"cannot join the Ray cluster at {address or 'a new local cluster'}: "
                             f"{_first_line(err)}") from None


def _spawn(name: str, say: Callable[[str], None]) -> tuple[RayMember, Any]:
    """A fresh actor for ``name``, loading its model; returns it and its pending ``header`` call."""
    import ray

    from wash.engine.catalog import external_allowed

    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    # On CPUs a member reserves no core (spread over the nodes instead): a small cluster then
    # never waits forever to place its second model; the lane pins the model's torch threads.
    options: dict[str, Any] = {"num_cpus": 1 if gpus else 0, "num_gpus": gpus, "max_concurrency": 1,
                               "max_restarts": 0, "max_task_retries": 0}
    if not gpus:
        options["scheduling_strategy"] = "SPREAD"
    threads = env.threads_per_model()
    if threads:  # a pinned thread count travels with the actor (the fingerprint tests pin one)
        options["runtime_env"] = {"env_vars": {env.THREADS_PER_MODEL.name: str(threads)}}
    say(f"{name}: starting a Ray actor ({'on a GPU of its own' if gpus else 'on a CPU'})")
    actor = ray.remote(MemberActor).options(**options).remote(name, external_allowed())
    member = RayMember(lm=LoadedModel(name=name, model=None, tokenizer=None, device=torch.device("cpu"),
                                      vocab_size=0, eos_ids=frozenset(), bos_id=None, max_context=0),
                       actor=actor)
    return member, member.send("header")


def _ready(member: RayMember, header: Any, say: Callable[[str], None]) -> RayMember:
    """The spawned member once its model is loaded, its tokenizer brought here; registered for later runs."""
    head = member.wait(header, loading=True)
    member.lm = LoadedModel(name=member.name, model=None, tokenizer=head["tokenizer"],
                            device=torch.device("cpu"), vocab_size=head["vocab_size"], eos_ids=head["eos_ids"],
                            bos_id=head["bos_id"], max_context=head["max_context"],
                            load_seconds=head["load_seconds"])
    member.pid = head["pid"]
    say(f"{member.name}: ready in its actor on {head['device']} (pid {member.pid})")
    with _GUARD:
        _MEMBERS[member.name] = member
    return member


def _live(name: str, say: Callable[[str], None]) -> RayMember | None:
    """The process's actor for ``name`` if it answers a ping; a dead or hung one is stopped and forgotten."""
    import ray

    with _GUARD:
        member = _MEMBERS.get(name)
    if member is None:
        return None
    try:
        ray.get(member.actor.ping.remote(), timeout=PING_TIMEOUT_S)
        return member
    except Exception:  # dead since its last run (or hung): replace it
        say(f"{name}: its Ray actor is gone, starting a fresh one")
        member.lost = True
        _forget(member)
        _kill(member.actor)
        return None


def ray_member(name: str, progress: Callable[[str], None] | None = None) -> RayMember:
    """The process's actor for ``name``: the live one, or a fresh one if there is none or it died."""
    say = progress or (lambda _m: None)
    return _live(name, say) or _ready(*_spawn(name, say), say)


def ray_members(names: Sequence[str], address: str = "", progress: Callable[[str], None] | None = None,
                parallel_forwards: bool | None = None) -> dict[str, RayMember]:
    """A Ray actor for every model of ``names`` (joining the cluster first), by name.

    Fresh actors are all started before any is waited for, so the models load at once.
    ``parallel_forwards``: the asking run's lanes for this process's side (``None``: the default).
    """
    connect(address)
    say = progress or (lambda _m: None)
    live = {n: _live(n, say) for n in names}
    spawned = {n: _spawn(n, say) for n in names if live[n] is None}
    members = {n: live[n] or _ready(*spawned[n], say) for n in names}
    for member in members.values():
        member.parallel_forwards = parallel.parallel_enabled(parallel_forwards)
    return members


@dataclass(frozen=True)
class RayBackend:
    """``ray[:address=HOST:PORT]``: one Ray actor per model, on a GPU of its own where the cluster has GPUs.

    ``address``: the cluster to join (``HOST:PORT``, ``auto``, ``ray://...``); empty: ``RAY_ADDRESS``,
    else a local cluster on this machine's cores."""

    name: ClassVar[str] = "ray"
    in_process: ClassVar[bool] = False
    address: str = ""

    def members(self, names: Sequence[str], progress: Callable[[str], None] | None = None,
                parallel_forwards: bool | None = None) -> dict[str, RayMember]:
        return ray_members(names, self.address, progress, parallel_forwards)

    def member(self, name: str, progress: Callable[[str], None] | None = None) -> RayMember:
        return self.members([name], progress)[name]

    def connect(self) -> None:
        """Join (or start) the cluster before any model is asked for (the bench times members alone)."""
        connect(self.address)


def shutdown() -> None:
    """Forget every actor and leave the cluster (a local one stops)."""
    import ray

    with _GUARD:
        _MEMBERS.clear()
    if ray.is_initialized():
        ray.shutdown()
