"""Loading the app's models in the background, before the first click needs them."""

from __future__ import annotations

import threading
import time
from typing import Callable

from wash.engine import Progress, is_loaded, load_model
from wash.core.errors import WashInputError


class Preload:
    """Load models in a background thread before anyone asks for them.

    ``start()`` returns at once; a daemon thread calls ``load_model`` for each name
    (``load_model`` is thread-safe and loads each model once, so nothing is loaded
    twice when a request needs a model meanwhile), then the optional ``then(say)``
    hook (a warm-up, say). Every progress message is kept in ``messages``; ``done``,
    ``error`` and ``elapsed_s`` say where it stands, ``wait`` blocks until it ends.
    ``echo`` also receives each message (a log, a terminal). ``missing``: models the app
    would offer but cannot load here, each with why (``settings.missing_models``), for the
    page and the ``status`` API to name.
    """

    def __init__(self, names: list[str] | tuple[str, ...], then: Callable[[Progress], None] | None = None,
                 echo: Progress | None = None, missing: dict[str, str] | None = None) -> None:
        self.names = list(names)
        self.missing = dict(missing or {})
        self.messages: list[str] = []
        self.error: BaseException | None = None
        self._then = then
        self._echo = echo
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._started: float | None = None
        self._finished: float | None = None

    def start(self) -> "Preload":
        """Start the loading thread (once; later calls do nothing)."""
        with self._lock:
            if self._thread is None:
                self._started = time.perf_counter()
                self._thread = threading.Thread(target=self._run, name="wash-preload", daemon=True)
                self._thread.start()
        return self

    def say(self, message: str) -> None:
        with self._lock:
            self.messages.append(message)
        if self._echo is not None:
            self._echo(message)

    def _run(self) -> None:
        try:
            for name in self.names:
                load_model(name, progress=self.say)
            if self._then is not None:
                self._then(self.say)
        except BaseException as err:  # kept for whoever waits; the thread itself ends quietly
            self.error = err
            # our own refusals are written for people; anything else keeps its type
            what = str(err) if isinstance(err, WashInputError) else f"{type(err).__name__}: {err}"
            self.say(f"loading failed: {what.rstrip('.')}")
        finally:
            self._finished = time.perf_counter()
            self._done.set()

    @property
    def started(self) -> bool:
        return self._started is not None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def ready(self) -> bool:
        """Finished without an error."""
        return self.done and self.error is None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the preload ends (or ``timeout`` seconds); True once it has ended."""
        return self._done.wait(timeout)

    @property
    def elapsed_s(self) -> float:
        """Seconds since ``start`` (until the end, once finished)."""
        if self._started is None:
            return 0.0
        return (self._finished or time.perf_counter()) - self._started

    def messages_from(self, index: int) -> list[str]:
        with self._lock:
            return self.messages[index:]

    @property
    def last_message(self) -> str | None:
        with self._lock:
            return self.messages[-1] if self.messages else None

    def loaded(self) -> list[str]:
        """The names among ``names`` already in memory."""
        return [n for n in self.names if is_loaded(n)]

    def to_dict(self) -> dict:
        return {"models": list(self.names), "missing": dict(self.missing), "loaded": self.loaded(),
                "started": self.started, "done": self.done, "ready": self.ready,
                "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}",
                "elapsed_s": round(self.elapsed_s, 3), "messages": self.messages_from(0)}
