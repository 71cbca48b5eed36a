"""The results CSV of one experiment: every row tagged with the id of the job that made it.

Only the driver's parent process writes it, after each finished job, so an
interruption loses at most the jobs that were running. Each write replaces the
file atomically (a temporary file, then ``os.replace``): a run killed mid-write
leaves the previous complete CSV, never a half-written row. Rows of jobs outside
the current plan (other settings written to the same folder) are kept untouched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from wash.experiments.jobs import Job


class ResultTable:
    """The rows of ``path`` in memory, the set of finished job ids, and atomic saves."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.frame = read_rows(self.path)
        self.done: set[str] = set(self.frame["job"].astype(str))

    def add(self, job: Job, rows: list[dict[str, Any]]) -> None:
        """Record ``job``'s rows (a job that produced none still counts as done) and save."""
        if job.id in self.done:
            return
        new = pd.DataFrame([{"job": job.id, **job.key, **r} for r in (rows or [{}])])
        self.frame = new if self.frame.empty else pd.concat([self.frame, new], ignore_index=True)
        self.done.add(job.id)
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        self.frame.to_csv(tmp, index=False)
        os.replace(tmp, self.path)

    def order_by(self, jobs: Sequence[Job]) -> None:
        """Put the rows of ``jobs`` in plan order, others after them, and save.

        Worker processes finish jobs in any order; sorting once at the end makes
        the CSV (and every summary grouped in order of appearance) independent of
        how many workers ran it.
        """
        position = {j.id: i for i, j in enumerate(jobs)}
        rank = self.frame["job"].astype(str).map(position).fillna(len(position))
        ordered = self.frame.assign(_rank=rank).sort_values("_rank", kind="stable").drop(columns="_rank")
        if not ordered.index.equals(self.frame.index):
            self.frame = ordered.reset_index(drop=True)
            self.save()

    def rows_of(self, jobs: Sequence[Job]) -> pd.DataFrame:
        """The rows of ``jobs`` (rows of other plans in the same file are left out)."""
        ids = {j.id for j in jobs}
        return self.frame[self.frame["job"].astype(str).isin(ids)].reset_index(drop=True)


def read_rows(path: Path) -> pd.DataFrame:
    """A results CSV, or an empty frame with its ``job`` column when there is none yet."""
    if path.exists() and path.stat().st_size:
        # only an empty cell is missing: pandas' default list would read a job's mode
        # "null" (an identification null) or a scheme "None" as NaN and write it back empty
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    return pd.DataFrame({"job": pd.Series(dtype=str)})
