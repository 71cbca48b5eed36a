"""Every environment setting the package reads, read here and nowhere else.

Why one module: a setting read in two places drifts (``WASH_THREADS_PER_MODEL`` was
parsed twice, by two rules), and a reader far from a table hides a setting from the
docs. Each variable has one row in ``VARIABLES`` (its name, its default as the docs
write it, what it does) and one typed accessor below. Accessors read the environment
when called, never at import: tests and the app change it between runs. Every on/off
setting follows one rule (``flag``).

Writing variables for a child process stays where the child starts (the experiment
workers' ``driver.init_worker``, Ray's local cluster in ``ray_members``); what a child
inherits is ``child_environment``. ``tests/test_env.py`` checks that no other module
of ``wash/``, nor ``app.py``, reads ``os.environ``, and that every ``WASH_*`` name the
code and docs mention has a row here; ``python -m wash.publish.facts --write`` copies the
table into the docs (the ``environment`` block).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from wash.core.errors import WashInputError


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, its default as the docs write it, what it does."""

    name: str
    default: str
    meaning: str

    def raw(self) -> str:
        """The variable's text as set ("" when unset)."""
        return os.environ.get(self.name, "")

    def text(self) -> str:
        """The variable's text without surrounding blanks ("" when unset)."""
        return self.raw().strip()


APP_MODELS = Variable(
    "WASH_APP_MODELS", "`smollm2,gemma3`",
    "models offered (and accepted) by the app, comma-separated; `tiny-smollm2,tiny-gemma3` for tests. Unset, "
    "the app also offers `qwen2.5-0.5b,smollm2-1.7b` where a GPU and the model hub are present")
ALLOW_EXTERNAL_MODELS = Variable(
    "WASH_ALLOW_EXTERNAL_MODELS", "off",
    "`1` also accepts Hugging Face hub ids or local directories as models (never remote code); a Ray "
    "actor is told the calling process's answer")
APP_CONCURRENCY = Variable(
    "WASH_APP_CONCURRENCY", "`2`", "generations the app runs at once (`demo.queue(default_concurrency_limit=…)`)")
APP_QUEUE_SIZE = Variable(
    "WASH_APP_QUEUE_SIZE", "`64`",
    "requests the app's queue holds waiting at most (`demo.queue(max_size=…)`); one more is refused "
    "with Gradio's \"queue is full\" message")
#: The Lesson's reading speed when ``WASH_LESSON_TOKENS_PER_S`` is unset (the handout quotes it).
LESSON_READING_SPEED = 8.0
LESSON_TOKENS_PER_S = Variable(
    "WASH_LESSON_TOKENS_PER_S", f"`{LESSON_READING_SPEED:g}`",
    "how fast the Lesson replays a step's recorded run at reading speed, in tokens per second")
LESSON_RECORDINGS = Variable(
    "WASH_LESSON_RECORDINGS", "`assets/lesson`",
    "the folder of the Lesson's recorded runs (`python -m tools.lesson_record --out`; relative to the repository)")
QUIZ_RECORDINGS = Variable(
    "WASH_QUIZ_RECORDINGS", "`assets/quiz`",
    "the folder of the Quiz's recorded runs (`python -m tools.quiz_record --out`; relative to the repository)")
QUIZ_TEACHER_CODE = Variable(
    "WASH_QUIZ_TEACHER_CODE", "unset",
    "the code the Quiz's *Reset tally* button asks for; unset: anyone on the page can reset the class tally")
MALLOC_ARENAS = Variable(
    "WASH_MALLOC_ARENAS", "unset",
    "a cap on glibc's malloc arenas in the app process (`mallopt(M_ARENA_MAX)`; unset or `0`: glibc's "
    "default, 8 per core). Off by default: in two 10-minute soaks it lowered memory growth from 4.0% to "
    "3.0% but the capped run served 17% fewer tokens/s, one run each (docs/BENCHMARKS.md, \"Soak\")")
MALLOC_TRIM = Variable(
    "WASH_MALLOC_TRIM", "on",
    "after each Generate run, hand the free pages inside glibc's heaps back to the system "
    "(`malloc_trim(0)`); `0` turns it off. The heaps keep the memory a run freed resident otherwise "
    "(docs/BENCHMARKS.md, \"Soak\")")
CACHE_DIR = Variable(
    "WASH_CACHE_DIR", "`~/.cache/wash`",
    "where the dequantised model copies and tokenizers live (an empty one means a first-ever start)")
BACKEND = Variable(
    "WASH_BACKEND", "`local`",
    "where the members' models run when `--backend` is not given: `NAME[:param=value,...]`, a backend "
    "`--backend`'s help lists (docs/USAGE.md)")
RAY_CALL_TIMEOUT_S = Variable(
    "WASH_RAY_CALL_TIMEOUT_S", "`300`",
    "seconds one call to a Ray actor may take before its member is declared lost and the run ends")
RAY_LOAD_TIMEOUT_S = Variable(
    "WASH_RAY_LOAD_TIMEOUT_S", "`1800`", "seconds a Ray actor may take to load its model")
THREADS_PER_MODEL = Variable(
    "WASH_THREADS_PER_MODEL", "cores // 2",
    "torch threads of each model's executor thread (travels to Ray actors); experiment workers get "
    "cores // workers")
PARALLEL_FORWARDS = Variable(
    "WASH_PARALLEL_FORWARDS", "on",
    "the default of a run's `parallel_forwards`: `0` puts every model on one shared executor thread "
    "(the same eager text, slower; experiment workers run so)")
GPU_RUN_CPU = Variable(
    "WASH_GPU_RUN_CPU", "off", "`1` runs every step of `tools/gpu_run.py` on the CPU with tiny shapes")
RAY_ADDRESS = Variable(
    "RAY_ADDRESS", "unset", "the Ray cluster `--backend ray` joins when no `ray:address=HOST:PORT` is given "
                            "(unset: a local cluster on this machine's cores)")
HF_HUB_OFFLINE = Variable(
    "HF_HUB_OFFLINE", "off", "`1`: no model is fetched from the hub (a missing package is then named on the "
                             "app's page); the cost experiment's subprocesses default to `1`")
TRANSFORMERS_VERBOSITY = Variable(
    "TRANSFORMERS_VERBOSITY", "transformers' own", "the cost experiment's subprocesses default to `error`")
GRADIO_SERVER_NAME = Variable("GRADIO_SERVER_NAME", "`0.0.0.0`", "where `app.py` listens")
GRADIO_SERVER_PORT = Variable("GRADIO_SERVER_PORT", "`7860`", "the port `app.py` listens on")
PORT = Variable("PORT", "unset", "a hosting platform's port, used when `GRADIO_SERVER_PORT` is unset")
SPACES_ZERO_GPU = Variable(
    "SPACES_ZERO_GPU", "unset", "set by Hugging Face on a ZeroGPU Space (`true`); with a `--hardware zero-gpu` "
                               "build, the app then runs every model call inside `spaces.GPU` (docs/SPACE.md)")
PYTHONPATH = Variable(
    "PYTHONPATH", "unset", "a local Ray cluster's workers get this checkout prepended, so they import it")

#: Every variable the package reads, in the order the docs list them.
VARIABLES: tuple[Variable, ...] = (
    APP_MODELS, ALLOW_EXTERNAL_MODELS, APP_CONCURRENCY, APP_QUEUE_SIZE, LESSON_TOKENS_PER_S, LESSON_RECORDINGS,
    QUIZ_RECORDINGS, QUIZ_TEACHER_CODE,
    MALLOC_ARENAS, MALLOC_TRIM, CACHE_DIR, BACKEND, RAY_CALL_TIMEOUT_S, RAY_LOAD_TIMEOUT_S, THREADS_PER_MODEL,
    PARALLEL_FORWARDS, GPU_RUN_CPU, RAY_ADDRESS, HF_HUB_OFFLINE, TRANSFORMERS_VERBOSITY, GRADIO_SERVER_NAME,
    GRADIO_SERVER_PORT, PORT, SPACES_ZERO_GPU, PYTHONPATH)

#: What turns an on/off setting off (any case); anything else set turns it on.
OFF = ("0", "false", "no", "off")


def flag(variable: Variable, default: bool) -> bool:
    """An on/off setting: ``default`` when unset or blank, off for ``OFF``, else on."""
    text = variable.text().lower()
    if not text:
        return default
    return text not in OFF


def _seconds(variable: Variable, default: float) -> float:
    text = variable.text()
    return float(text) if text else default


# -- the accessors, one per variable ----------------------------------------------------
def app_models() -> list[str]:
    """The app's model names as given (empty: the app's defaults)."""
    return [n.strip() for n in APP_MODELS.text().split(",") if n.strip()]


def allow_external_models() -> bool:
    return flag(ALLOW_EXTERNAL_MODELS, False)


def app_concurrency(default: int = 2) -> int:
    """At least 1; ``default`` for a value that is no whole number."""
    try:
        return max(1, int(APP_CONCURRENCY.text() or default))
    except ValueError:
        return default


def app_queue_size(default: int = 64) -> int:
    """At least 1; ``default`` for a value that is no whole number."""
    try:
        return max(1, int(APP_QUEUE_SIZE.text() or default))
    except ValueError:
        return default


def lesson_tokens_per_s(default: float = LESSON_READING_SPEED) -> float:
    """Above 0; ``default`` for a value that is no positive number."""
    try:
        value = float(LESSON_TOKENS_PER_S.text() or default)
    except ValueError:
        return default
    return value if value > 0 and value == value and value != float("inf") else default


def lesson_recordings(root: Path) -> Path | None:
    """The recordings' folder as set (relative paths under ``root``), or ``None``: the default."""
    text = LESSON_RECORDINGS.text()
    return (root / text if not Path(text).is_absolute() else Path(text)) if text else None


def quiz_recordings(root: Path) -> Path | None:
    """The Quiz's recordings folder as set (relative paths under ``root``), or ``None``: the default."""
    text = QUIZ_RECORDINGS.text()
    return (root / text if not Path(text).is_absolute() else Path(text)) if text else None


def quiz_teacher_code() -> str:
    """The teacher's code for resetting the Quiz's tally ("" when unset: no code is asked)."""
    return QUIZ_TEACHER_CODE.text()


def malloc_arenas() -> int:
    """The arena cap (0: glibc's default); a value that is no whole number is an input error."""
    text = MALLOC_ARENAS.text() or "0"
    try:
        return int(text)
    except ValueError:
        raise WashInputError(f"{MALLOC_ARENAS.name} must be a whole number, got '{text}'") from None


def malloc_trim() -> bool:
    return flag(MALLOC_TRIM, True)


def cache_dir() -> Path:
    return Path(CACHE_DIR.raw() or os.path.join(Path.home(), ".cache", "wash"))


def backend() -> str:
    """The backend's name as given ("" when unset: ``wash.engine.settings.default_backend`` decides)."""
    return BACKEND.text()


def ray_call_timeout_s() -> float:
    return _seconds(RAY_CALL_TIMEOUT_S, 300.0)


def ray_load_timeout_s() -> float:
    return _seconds(RAY_LOAD_TIMEOUT_S, 1800.0)


def threads_per_model() -> int | None:
    """The pinned torch thread count of each model's thread (at least 1), or ``None`` when unset."""
    text = THREADS_PER_MODEL.text()
    return max(1, int(text)) if text else None


def parallel_forwards() -> bool:
    """The default of a run's ``parallel_forwards`` (each run may set its own)."""
    return flag(PARALLEL_FORWARDS, True)


def gpu_run_cpu() -> bool:
    return flag(GPU_RUN_CPU, False)


def ray_address() -> str:
    return RAY_ADDRESS.raw()


def hub_offline() -> bool:
    return flag(HF_HUB_OFFLINE, False)


def on_zero_gpu() -> bool:
    """Whether Hugging Face runs this process on ZeroGPU, read as ``spaces`` reads it (1, t, true)."""
    return SPACES_ZERO_GPU.text().lower() in ("1", "t", "true")


def server_name() -> str:
    return GRADIO_SERVER_NAME.raw() or "0.0.0.0"


def server_port() -> int:
    return int(GRADIO_SERVER_PORT.raw() or PORT.raw() or 7860)


def python_path() -> str:
    return PYTHONPATH.raw()


def child_environment(defaults: dict[str, str] | None = None, **values: str) -> dict[str, str]:
    """The environment a child process inherits: this one, ``defaults`` where unset, ``values`` set."""
    return {**(defaults or {}), **os.environ, **values}


def table() -> str:
    """The docs' table of every variable (``python -m wash.publish.facts``' ``environment`` block)."""
    rows = ["| variable | default | effect |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {v.default} | {v.meaning} |" for v in VARIABLES]
    return "\n".join(rows)
