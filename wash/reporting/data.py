"""The committed results folders, read once per report: each folder's summary CSV and meta."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from wash.reporting.results_tables import RESULTS_ROOT


@dataclass(frozen=True)
class Folder:
    """One results folder: its name, experiment, meta and summary."""
    path: Path
    experiment: str
    meta: dict
    summary: pd.DataFrame
    summary_file: str
    figure: str | None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def config(self) -> dict:
        return self.meta.get("config", {})

    @property
    def engine(self) -> str:
        return self.meta.get("engine", "not recorded")

    @property
    def jobs_total(self) -> int | None:
        return self.meta.get("jobs_total")

    @property
    def jobs_done(self) -> int | None:
        return self.meta.get("jobs_done", self.meta.get("jobs_total"))

    @property
    def partial(self) -> bool:
        return self.jobs_total is not None and (self.jobs_done or 0) < self.jobs_total

    @property
    def profile(self) -> str:
        """The serving profile's name; ``open`` for a run made before profiles existed (it served open),
        ``–`` for an output that is no experiment run (the browser tour)."""
        return (self.meta.get("profile") or {}).get("name", "open" if "config" in self.meta else "–")

    def row(self, **where) -> pd.Series | None:
        """The one summary row matching every ``column=value``; None where there is none."""
        frame = self.select(**where)
        if len(frame) > 1:
            raise ValueError(f"{self.name}: {len(frame)} rows match {where}")
        return None if frame.empty else frame.iloc[0]

    def select(self, **where) -> pd.DataFrame:
        mask = pd.Series(True, index=self.summary.index)
        for column, value in where.items():
            mask &= self.summary[column] == value
        return self.summary[mask]


def _load(path: Path) -> Folder:
    metas = sorted(path.glob("*_meta.json"))
    summaries = sorted(path.glob("*_summary.csv"))
    if not metas or not summaries:
        raise FileNotFoundError(f"{path}: no *_meta.json or *_summary.csv")
    meta = json.loads(metas[0].read_text())
    stem = summaries[0].name[: -len("_summary.csv")]
    experiment = meta.get("experiment", stem)
    png = path / f"{stem}.png"
    return Folder(path=path, experiment=experiment, meta=meta, summary=pd.read_csv(summaries[0]),
                  summary_file=summaries[0].name, figure=png.name if png.exists() else None)


def folders(root: Path = RESULTS_ROOT) -> dict[str, Folder]:
    """Every results folder under ``root`` that has a summary, by name (sorted)."""
    return {p.name: _load(p) for p in sorted(Path(root).iterdir())
            if p.is_dir() and any(p.glob("*_summary.csv"))}
