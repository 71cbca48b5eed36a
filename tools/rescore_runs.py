"""Re-score the committed texts of some schemes in a runs CSV with the current detectors.

Why: a detector change (the release AAR test now scores repeated tokens, as the
release does) changes z on texts that are already committed; the texts do not
change, so they are re-read from the CSV and scored again, no text is generated.
Only the detection columns (z, p, tokens_scored, detected) of the named schemes'
rows change; every other byte of the file is kept.

    python -m tools.rescore_runs results/tpr-anchor --schemes aar:form=soft+detector=release
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from wash.engine import ProviderSpec
from wash.experiments import detect, ResultTable


def rescore(folder: Path, schemes: list[str], z_threshold: float = 4.0) -> int:
    """Re-score the rows of ``schemes`` in ``folder``'s runs CSV in place; returns how many rows changed."""
    path = next(folder.glob("*_runs.csv"))
    frame = ResultTable(path).frame
    changed = 0
    for job, rows in frame[frame["scheme"].isin(schemes)].groupby("job", sort=False):
        first = rows.iloc[0]
        specs = [ProviderSpec.parse(s) for s in str(first["providers"]).split("|")]
        text = "" if pd.isna(first["text"]) else str(first["text"])
        scored = detect(specs, text, z_threshold)
        for i, r in rows.iterrows():
            d = scored[int(r["provider"])]
            new = {"z": float(d.z), "p": float(d.p), "tokens_scored": int(d.tokens_scored),
                   "detected": bool(d.detected)}
            changed += int(any(new[k] != r[k] for k in new))
            for k, v in new.items():
                frame.at[i, k] = v
    frame.to_csv(path, index=False)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--schemes", nargs="+", required=True)
    args = ap.parse_args(argv)
    print(f"{rescore(args.folder, args.schemes)} rows changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
