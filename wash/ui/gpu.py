"""Where the app's model work runs on the Space's hardware: in this process, or inside ZeroGPU's ``spaces.GPU``.

The hardware target comes from the Space build (``space_build.json``'s ``hardware``, written
by ``python -m wash space --hardware``; none outside a build: cpu). On cpu and gpu the whole
process has its device, so ``on_gpu`` returns a handler as it is. On zero-gpu, when the
platform runs the app there (``SPACES_ZERO_GPU``, the variable the ``spaces`` package reads),
each handler that touches a model is wrapped by one ``spaces.GPU`` whose duration is a function
of the handler's inputs (``generate_seconds``, ``identify_seconds``, ``detect_seconds``).

ZeroGPU runs a decorated function in a worker process forked from the app's; its arguments and
results are pickled across. So this module keeps in the app's own process what must live
there, around the GPU call:

* the wait for the model preload: its thread does not exist in the fork, and a model
  loaded in the worker is lost with it (the ZeroGPU docs load models outside GPU functions);
* Stop: ``handlers.stop`` sets a flag in this process, which the worker never sees. The
  stream here checks it after every update and closes the GPU call's generator, which the
  ``spaces`` package answers by closing the handler's generator in the worker at its next
  update (its ``stop_event``); the handler's ``finally`` then stops the engine, as a Stop does;
* the quota: ``spaces`` refuses a call whose duration exceeds the visitor's remaining quota
  with a ``gr.Error`` titled "ZeroGPU quota exceeded" (or "ZeroGPU illegal duration"); it
  becomes one line naming the quota and what this run asked for (``quota_line``).
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import TYPE_CHECKING, Any, Callable, Iterator

import gradio as gr

from wash.core import env
from wash.core.version import ROOT

if TYPE_CHECKING:  # not imported here: this module is imported before torch (import_spaces)
    from wash.ui.preload import Preload

#: The hardware targets ``python -m wash space --hardware`` builds (``wash.publish.space.HARDWARE``).
TARGETS = ("cpu", "zero-gpu", "gpu")
#: Seconds a GPU call costs before its first token: ZeroGPU's worker start and the weights' move.
BASE_S = 20
#: Seconds of GPU per token per provider: 2.5x the 40 ms of an eager WASH step of the two
#: models' shapes, 3 providers at 121 ms, on an H200 in bf16 (docs/gpu-h200/smoke.json).
TOKEN_S = 0.1
#: Seconds of GPU per probed system (and per null) for each Identify probe size: fast probes
#: 20 contexts x 200 samples x 3 runs, standard 50 x 400 x 3 (5x the samples).
PROBE_S = {"fast": 15, "standard": 75}
#: Seconds of GPU per provider to score a pasted text (Detect): one pass over the text.
DETECT_S = 5
#: The ``spaces`` error titles that are about the visitor's quota (``spaces.zero.client.schedule``).
QUOTA_TITLES = ("ZeroGPU quota exceeded", "ZeroGPU illegal duration")


def target() -> str:
    """The hardware this build is for (``space_build.json``'s ``hardware``; cpu outside a build)."""
    from wash.publish.space import MARKER

    try:
        made = json.loads((ROOT / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "cpu"
    return made.get("hardware", "cpu") if made.get("hardware") in TARGETS else "cpu"


def zero_gpu() -> bool:
    """Whether handlers run inside ``spaces.GPU``: a zero-gpu build on ZeroGPU (``SPACES_ZERO_GPU``)."""
    return env.on_zero_gpu() and target() == "zero-gpu"


def import_spaces() -> None:
    """On ZeroGPU, import ``spaces`` before torch: it patches torch's CUDA calls at import, and its
    package says to import it before any CUDA-related package. Run when this module is imported
    (``app.py`` imports it first)."""
    if zero_gpu():
        import spaces  # noqa: F401


def _providers(table: Any) -> int:
    """Non-blank rows of a providers table (at least 1; a table the handler will refuse counts 1)."""
    from wash.ui.providers import normalise_rows

    try:
        return max(1, sum(1 for row in normalise_rows(table) if any(row)))
    except Exception:  # noqa: BLE001 - the handler reports bad input; its duration must not fail first
        return 1


def generate_seconds(table: Any, prompt: Any = None, max_new_tokens: Any = 0, temperature: Any = None,
                     seed: Any = None, mode: Any = None, compare: Any = "off", *_: Any, **__: Any) -> int:
    """GPU seconds a Generate click asks for: ``BASE_S`` + tokens x streams x ``TOKEN_S``, where streams
    counts the providers, 1 for provider 1 alone (or a baseline) beside them, and the providers again for
    the unwatermarked run beside them. Takes the handler's own inputs (ZeroGPU calls it with them)."""
    from wash.engine import MAX_NEW_TOKENS_CAP
    from wash.ui.run import SINGLE, UNMARKED, comparison_streams

    try:
        tokens = min(max(int(float(max_new_tokens)), 1), MAX_NEW_TOKENS_CAP)
    except (TypeError, ValueError):
        tokens = MAX_NEW_TOKENS_CAP
    try:
        beside = comparison_streams(compare)
        streams = _providers(table) * (1 + (UNMARKED in beside)) + (SINGLE in beside)
    except Exception:  # noqa: BLE001 - an unknown comparison is refused by the handler
        streams = _providers(table)
    return round(BASE_S + tokens * streams * TOKEN_S)


def identify_seconds(table: Any, systems: Any = (), probe: Any = "fast", *_: Any, **__: Any) -> int:
    """GPU seconds an Identify click asks for: ``BASE_S`` + (systems + their null) x ``PROBE_S[probe]``."""
    per = PROBE_S.get(probe, max(PROBE_S.values()))
    return round(BASE_S + (len(systems or ()) + 1) * per)


def detect_seconds(text: Any, table: Any = None, *_: Any, **__: Any) -> int:
    """GPU seconds a Detect click asks for: ``BASE_S`` + providers x ``DETECT_S``."""
    return round(BASE_S + _providers(table) * DETECT_S)


def quota_line(err: gr.Error, seconds: int) -> str | None:
    """One line for a ZeroGPU quota refusal (``QUOTA_TITLES``), naming what this run asked for; None
    for any other error."""
    title = getattr(err, "title", None) or ""
    if title not in QUOTA_TITLES:
        return None
    said = " ".join(str(getattr(err, "message", err)).split())
    return (f"{title}: {said} This run asked for {seconds} s of GPU time (from its tokens and providers); "
            "fewer ask for less.")


def _requery(err: gr.Error, seconds: int) -> gr.Error:
    """``err``, or its one-line quota form."""
    line = quota_line(err, seconds)
    return err if line is None else gr.Error(line, title="ZeroGPU quota", print_exception=False)


def _wait_for(preload: Preload | None) -> Iterator[str]:
    """Block until ``preload`` ends, yielding a status line every second (nothing when it is done)."""
    from wash.ui.run import preload_markdown

    while preload is not None and preload.started and not preload.done:
        yield f"**Waiting for the models** before asking ZeroGPU for a GPU: {preload_markdown(preload)}"
        preload.wait(1.0)


def _session(args: tuple, kwargs: dict) -> str:
    request = kwargs.get("request") or next((a for a in args if isinstance(a, gr.Request)), None)
    from wash.ui.run import session_of

    return session_of(request)


def _stream(decorated: Callable, seconds: Callable[..., int], preload: Preload | None,
            stopped: dict[str, Any]) -> Callable[..., Iterator[dict[str, Any]]]:
    """A generator handler run inside ZeroGPU, with this process's preload wait and Stop."""
    from wash.ui.handlers import STOPS

    @functools.wraps(decorated)
    def stream(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        session = _session(args, kwargs)
        flag = STOPS.start(session)
        try:
            for line in _wait_for(preload):
                yield {"status": line}
            runs = decorated(*args, **kwargs)
            try:
                for update in runs:
                    if STOPS.superseded(flag):
                        return
                    yield update
                    if flag.is_set():
                        yield stopped
                        return
            finally:
                runs.close()  # the spaces package closes the handler's generator in the worker
        except gr.Error as err:
            raise _requery(err, seconds(*args, **kwargs)) from None
        finally:
            STOPS.finish(session, flag)
    return stream


def _call(decorated: Callable, seconds: Callable[..., int], preload: Preload | None) -> Callable[..., Any]:
    """A plain handler run inside ZeroGPU, after this process's preload."""
    @functools.wraps(decorated)
    def call(*args: Any, **kwargs: Any) -> Any:
        for _ in _wait_for(preload):
            pass
        try:
            return decorated(*args, **kwargs)
        except gr.Error as err:
            raise _requery(err, seconds(*args, **kwargs)) from None
    return call


#: What a ZeroGPU stream shows once its Stop has ended the run in the worker.
STOPPED = {"status": "**Stopped**: the run ended at your Stop; the text above is what was generated."}


def on_gpu(handler: Callable, seconds: Callable[..., int], preload: Preload | None = None,
           stopped: dict[str, Any] | None = None) -> Callable:
    """``handler`` as the app registers it: itself, or on ZeroGPU inside one ``spaces.GPU`` of duration
    ``seconds(*inputs)`` (a generator handler also gets this process's Stop, ending with ``stopped``)."""
    if not zero_gpu():
        return handler
    # a zero-gpu build lists it (wash.publish.space.ZEROGPU_PACKAGE); imported first by import_spaces
    import spaces

    decorated = spaces.GPU(duration=seconds)(handler)
    if inspect.isgeneratorfunction(handler):
        return _stream(decorated, seconds, preload, stopped or STOPPED)
    return _call(decorated, seconds, preload)


import_spaces()
