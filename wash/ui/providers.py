"""The providers table and the one-click presets, as plain rows of strings.

One table row is one provider: ``[model, scheme, key, params]`` where ``params``
is the spec's optional ``name=value,...`` part (``coordinated=true`` included).
Rows are joined into the CLI's ``MODEL:SCHEME:KEY[:params]`` syntax and parsed by
``ProviderSpec.parse``, so the app and the CLI accept exactly the same input and
report it with the same messages (prefixed with the row number here).
"""

from __future__ import annotations

from typing import Any, Sequence

from wash.engine import MAX_PROVIDERS, GenerationConfig, ProviderSpec
from wash.core.errors import WashInputError
from wash.content.presets import preset
from wash.ui.settings import MAX_PROMPT_CHARS, check_app_model

HEADERS = ["model", "scheme", "key", "params"]
Row = list[str]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def normalise_rows(table: Any) -> list[Row]:
    """Rows of four stripped strings from whatever the Dataframe widget or API sent."""
    if table is None:
        return []
    if isinstance(table, dict):  # the API payload {"headers": [...], "data": [[...]]}
        table = table.get("data") or []
    elif hasattr(table, "values") and hasattr(table, "columns"):  # a pandas DataFrame
        table = table.values.tolist()
    rows = []
    for raw in table:
        cells = [_cell(c) for c in list(raw)[:4]]
        rows.append(cells + [""] * (4 - len(cells)))
    return rows


def row_to_spec_text(row: Row) -> str:
    model, scheme, key, params = row
    return f"{model}:{scheme}:{key}" + (f":{params}" if params else "")


def rows_to_specs(table: Any, choices: list[str] | None = None) -> list[ProviderSpec]:
    """Parse every non-blank row; a bad one raises naming its row number."""
    specs = []
    for number, row in enumerate(normalise_rows(table), start=1):
        if not any(row):
            continue
        try:
            if not row[0]:
                raise WashInputError("choose a model")
            if not row[1]:
                raise WashInputError("choose a watermark scheme")
            check_app_model(row[0], choices)
            specs.append(ProviderSpec.parse(row_to_spec_text(row)))
        except WashInputError as err:
            raise WashInputError(f"provider row {number}: {err}") from None
    return specs


def add_row(table: Any, model: str, scheme: str, key: Any, params: str = "",
            coordinated: bool = False) -> list[Row]:
    """The table with one more provider appended (refused past the maximum)."""
    rows = [r for r in normalise_rows(table) if any(r)]
    if len(rows) >= MAX_PROVIDERS:
        raise WashInputError(f"already {len(rows)} providers; at most {MAX_PROVIDERS} are supported")
    extra = [p.strip() for p in (params or "").split(",") if p.strip()]
    if coordinated and "coordinated=true" not in extra:
        extra.append("coordinated=true")
    return rows + [[_cell(model), _cell(scheme), _cell(key), ",".join(extra)]]


def remove_last_row(table: Any) -> list[Row]:
    rows = [r for r in normalise_rows(table) if any(r)]
    return rows[:-1] if rows else []


def build_config(table: Any, prompt: str, max_new_tokens: Any, temperature: Any, seed: Any,
                 mode: str, choices: list[str] | None = None, forwards: str = "eager", top_k: Any = 0,
                 top_p: Any = 1.0, aggregate: Any = "mean") -> GenerationConfig:
    """A validated GenerationConfig from the Generate tab's inputs (or WashInputError)."""
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        raise WashInputError(f"the prompt is too long ({len(prompt)} characters; at most {MAX_PROMPT_CHARS})")
    try:  # the slider's whole float as an int; anything else goes on as given, for validate to name
        whole = float(max_new_tokens)
        max_new = int(whole) if whole.is_integer() else max_new_tokens
    except (TypeError, ValueError):
        max_new = max_new_tokens
    try:
        temp = float(temperature)
    except (TypeError, ValueError):
        raise WashInputError(f"temperature must be a number, got {temperature!r}") from None
    try:
        k = float(0 if top_k is None else top_k)
        if not k.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise WashInputError(f"top-k must be an integer (0 = no truncation), got {top_k!r}") from None
    try:
        nucleus = float(1.0 if top_p is None else top_p)
    except (TypeError, ValueError):
        raise WashInputError(f"top-p must be a number in (0, 1], got {top_p!r}") from None
    try:
        seed_value = float(0 if seed is None else seed)
        if not seed_value.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise WashInputError(f"seed must be an integer, got {seed!r}") from None
    config = GenerationConfig(providers=rows_to_specs(table, choices), prompt=prompt or "", mode=mode,
                              max_new_tokens=max_new, temperature=temp, top_k=int(k), top_p=nucleus,
                              seed=int(seed_value),
                              forwards=forwards if forwards is not None else "eager",
                              **({} if aggregate in (None, "") else {"aggregate": aggregate}))
    config.validate()
    return config


# -- presets (defined in wash.content.presets, shared with ``experiment presets``) ---------------
def preset_rows(name: str, models: Sequence[str]) -> tuple[list[Row], str]:
    """The preset's rows with A/B resolved to the offered models, and its mode."""
    if not models:
        raise WashInputError("this app offers no model")
    p = preset(name)
    return [[m, scheme, str(key), params] for m, scheme, key, params in p.resolved(models)], p.mode
