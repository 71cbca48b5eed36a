"""End-of-run summaries: the detection table, routing statistics, download files.

They read the engine's ``RunResult`` and ``ProviderDetection`` dataclasses. The
detection table is a pandas DataFrame (one row per provider and run) so the
widget shows it and the CSV download writes exactly the same columns.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Sequence

import pandas as pd

from wash.engine import ProviderDetection, RunResult
from wash.detection import Z_THRESHOLD

DETECTED = f"detected (z > {Z_THRESHOLD:g})"
DETECTION_COLUMNS = ["run", "provider", "model", "scheme", "key", "tokens scored", "z", "p", DETECTED]


def detection_frame(rows: Sequence[ProviderDetection], run: str = "WASH",
                    threshold: float = Z_THRESHOLD) -> pd.DataFrame:
    """Verdicts -> the table's DataFrame."""
    records = [{
        "run": run,
        "provider": d.provider,
        "model": d.model,
        "scheme": d.scheme,
        "key": int(d.key),
        "tokens scored": int(d.tokens_scored),
        "z": round(float(d.z), 3),
        "p": float(f"{float(d.p):.3g}"),
        DETECTED: "yes" if d.detected else "no",
    } for d in rows]
    frame = pd.DataFrame.from_records(records, columns=DETECTION_COLUMNS)
    if threshold != Z_THRESHOLD:
        frame = frame.rename(columns={DETECTED: f"detected (z > {threshold:g})"})
    return frame


def empty_detection_frame() -> pd.DataFrame:
    return pd.DataFrame(columns=DETECTION_COLUMNS)


def combined_detection(result: RunResult, *comparisons: RunResult | None) -> pd.DataFrame:
    """The run's rows, then each comparison run's rows (P1 alone or a baseline; the models without
    watermarks) where there was one."""
    threshold = float(result.settings.get("z_threshold", Z_THRESHOLD))
    frames = [detection_frame(result.detection, run=result.mode, threshold=threshold)]
    for other in comparisons:
        if other is not None:
            name = "single (P1 alone)" if other.mode == "single" else other.mode
            frames.append(detection_frame(other.detection, run=name, threshold=threshold))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def tokens_per_second(result: RunResult) -> float:
    total = result.timing.total_s
    return result.routing.tokens / total if total > 0 else 0.0


def routing_markdown(result: RunResult, single_result: RunResult | None = None,
                     first_token_s: float | None = None, unmarked_result: RunResult | None = None) -> str:
    """Routing statistics and speed of the finished run(s)."""
    r, t = result.routing, result.timing
    first = "" if first_token_s is None else f" · first token {first_token_s:.1f} s after the click"
    forwards = result.settings.get("forwards", "eager")
    calls = ", ".join(f"{m} {c}" for m, c in t.forward_calls.items())
    lines = [
        f"**{r.tokens} tokens** ({result.mode} mode, {forwards} forwards, finish: {result.finish_reason}) · "
        f"**{tokens_per_second(result):.2f} tokens/s** · {t.per_token_ms:.0f} ms per token "
        f"(median {t.median_token_ms:.0f}){first}",
        f"Routed tokens: **{r.routed_token_fraction:.1%}** in {r.routed_spans} span(s), "
        f"mean span length {r.mean_routed_span_length:.2f} tokens.",
    ]
    if calls:
        lines.append(f"Forward calls per base model: {calls}.")
    for other in (single_result, unmarked_result):
        if other is not None:
            lines.append(f"Comparison run ({other.mode}): {other.routing.tokens} tokens at "
                         f"{tokens_per_second(other):.2f} tokens/s.")
    return "  \n".join(lines)


#: Download files older than this are deleted when new ones are written.
KEEP_DOWNLOADS_S = 6 * 3600


def _out_dir() -> Path:
    directory = Path(tempfile.gettempdir()) / "wash-app"
    directory.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - KEEP_DOWNLOADS_S
    for old in directory.glob("wash-*"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass
    return directory


def write_run_json(record: dict) -> str:
    """The whole run (settings and every event) as a JSON file; returns its path."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", prefix="wash-run-", dir=_out_dir(),
                                         delete=False, encoding="utf-8")
    with handle:
        json.dump(record, handle, ensure_ascii=False, indent=1)
    return handle.name


def write_csv(frame: pd.DataFrame, prefix: str = "wash-detection-") -> str:
    handle = tempfile.NamedTemporaryFile("w", suffix=".csv", prefix=prefix, dir=_out_dir(),
                                         delete=False, encoding="utf-8", newline="")
    with handle:
        frame.to_csv(handle, index=False)
    return handle.name
