"""Score a committed ``tpr`` folder's calibration negatives under many random keys (the null over keys).

    python -m wash.experiments.key_null_scores results/tpr-paper --schemes kgw aar
    python -m wash.experiments.key_null_scores results/tpr-paper --merge   # write tpr_key_null.csv.gz

For every (scheme, model set) cell of the folder, the held-out negatives of the
calibration half (``tpr.negative_split``: by prompt, never by key) are re-read from
the runs CSV and each provider slot's own detector scores them under
``key_null.keys_per_slot`` random keys of its own (``key_null.slot_keys``: no two slots
on one model share a key), so the cell gets at least ``key_null.MIN_NULL_SCORES``
distinct scores. No text is generated. Scoring is cached
per cell under ``runs/key-null/<folder>/`` (resumable); ``--merge`` gathers the
cells into ``<folder>/tpr_key_null.csv.gz``, which ``tpr.summarize`` reads (gzip: every row repeats its
text's job description, 26 MB as plain CSV for the three committed folders).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

import pandas as pd

from wash.detection import key_null
from wash.engine import ProviderSpec
from wash.core.errors import WashInputError
from wash.experiments.registry import load
from wash.experiments.driver import machine_description
from wash.experiments.scoring import watermarked_providers
from wash.core.provenance import load_average, portable
from wash.core.version import git_commit
from wash.experiments.tpr import KEY_NULL_FILE as FILE


def folder_config(folder: Path):
    """The ``tpr`` config a results folder was run with (its meta), with ``out`` set to the folder."""
    meta = json.loads((folder / "tpr_meta.json").read_text())
    module = load(meta["experiment"])
    recorded = {k: v for k, v in meta["config"].items() if k != "preset"}
    return module, module.Config.from_preset(meta["config"].get("preset", "full"), **{**recorded, "out": str(folder)})


def calibration_negatives(folder: Path) -> tuple[object, pd.DataFrame]:
    """The config and the negative rows of the calibration half (one row per text and scored provider)."""
    module, config = folder_config(folder)
    cols = ["job", "scheme", "n", "prompt_id", "seed", "providers", "provider", "z", "text", "role"]
    rows = pd.read_csv(folder / "tpr_runs.csv", usecols=cols)
    cal, _check = module.negative_split(config)
    neg = rows[rows["role"].eq(module.NEGATIVE) & rows["prompt_id"].isin(cal)]
    return config, neg


def cell_of(neg: pd.DataFrame, scheme: str, n: int) -> pd.DataFrame:
    """The rows of one (scheme, N) cell of ``calibration_negatives``."""
    return neg[(neg["scheme"] == scheme) & (neg["n"] == n)]


def calibration_cell(folder: Path, scheme: str, n: int) -> pd.DataFrame:
    """One cell's calibration negatives; a cell the folder does not hold is an input error, said in one line."""
    _config, neg = calibration_negatives(folder)
    cell = cell_of(neg, scheme, n)
    if cell.empty:
        raise WashInputError(f"no calibration negatives for {scheme} N={n} in {folder}")
    return cell


def check_negatives(folder: Path) -> pd.DataFrame:
    """The negative rows of the check half, each scored under its own provider's key: the fresh texts
    a key-null is compared with (``key_null.match_fresh``)."""
    module, config = folder_config(folder)
    rows = pd.read_csv(folder / "tpr_runs.csv", usecols=["scheme", "n", "prompt_id", "provider_model", "z", "role"])
    _cal, check = module.negative_split(config)
    return rows[rows["role"].eq(module.NEGATIVE) & rows["prompt_id"].isin(check)]


def cache_path(folder: Path, scheme: str, n: int) -> Path:
    safe = scheme.replace(":", "_").replace("=", "-").replace("+", "_")
    return Path("runs") / "key-null" / folder.name / f"{safe}__n{n}.csv"


def score_folder(folder: Path, schemes: list[str] | None = None, ns: list[int] | None = None,
                 minimum: int = key_null.MIN_NULL_SCORES) -> None:
    config, neg = calibration_negatives(folder)
    for scheme in schemes or list(config.schemes):
        for n in ns or config.model_sets():
            cell = cell_of(neg, scheme, n)
            if cell.empty:
                continue
            slots = sorted(cell["provider"].unique().tolist())
            first = cell.iloc[0]
            specs = [ProviderSpec.parse(s) for s in str(first["providers"]).split("|")]
            providers = [watermarked_providers(specs)[s] for s in slots]
            texts = [key_null.NullText(str(r["job"]), str(r["prompt_id"]), int(r["seed"]), str(r["text"]))
                     for _, r in cell.drop_duplicates("job").iterrows()]
            per_slot = key_null.keys_per_slot(len(texts), len(slots), minimum)
            keys = key_null.slot_keys([p.model for p in providers], per_slot)
            cache = key_null.CellCache(cache_path(folder, scheme, n))
            load = load_average()
            seconds = key_null.score_cell(scheme, n, providers, texts, keys, cache)
            timing = cache.path.with_suffix(".json")
            before = json.loads(timing.read_text())["seconds"] if timing.exists() else 0.0
            timing.write_text(json.dumps({"seconds": round(before + seconds, 1), "load_average_start": load,
                                          "load_average_end": load_average()}))
            print(f"{scheme} N={n}: {len(texts)} texts x {len(slots)} providers x {per_slot} keys, "
                  f"{seconds:.0f} s scoring", flush=True)


def merge(folder: Path) -> pd.DataFrame:
    """Every COMPLETE cached cell of ``folder`` in one frame, written to ``folder / FILE``.

    A cell is complete when every calibration text has been scored by every provider
    slot under the same number of keys, no score is a copy of another (``key_null.duplicate_scores``:
    two slots on one model under one key) and there are at least ``MIN_NULL_SCORES``
    scores; any other cell is left out (its threshold stays the old one)."""
    _config, neg = calibration_negatives(folder)
    parts = []
    for path in sorted((Path("runs") / "key-null" / folder.name).glob("*.csv")):
        part = pd.read_csv(path).drop_duplicates(["job", "provider", "key"])  # two runs may overlap a cell
        if part.empty:
            continue
        scheme, n = part["scheme"].iloc[0], int(part["n"].iloc[0])
        cell = cell_of(neg, scheme, n)
        pairs = part.groupby(["job", "provider"]).size()
        expected = len(cell.drop_duplicates(["job", "provider"]))
        copies = key_null.duplicate_scores(part)
        if copies:
            print(f"{path.name}: {copies} of {len(part)} scores repeat a (text, model, key): left out")
        elif len(pairs) == expected and pairs.nunique() == 1 and len(part) >= key_null.MIN_NULL_SCORES:
            parts.append(part)
        else:
            print(f"{path.name}: incomplete ({len(pairs)} of {expected} text-provider pairs), left out")
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=key_null.COLUMNS)
    frame = frame[key_null.COLUMNS].sort_values(["scheme", "n", "job", "provider", "key"], kind="stable")
    frame.to_csv(folder / FILE, index=False, compression={"method": "gzip", "mtime": 0})  # same bytes each time
    record_in_meta(folder, frame)
    return frame


def record_in_meta(folder: Path, frame: pd.DataFrame) -> dict:
    """Write how the key-null was made and how it matches fresh texts into the folder's meta (``key_null``).

    Per cell: scores, texts, keys per (text, provider), the scoring's CPU seconds and
    load, the within-text correlation of the scores (``key_null.within_text_correlation``)
    and the two-sample KS and Anderson-Darling p of the key-null against the check
    half's texts scored under their own keys (``key_null.match_fresh``)."""
    fresh = check_negatives(folder)
    cells = {}
    for (scheme, n), cell in frame.groupby(["scheme", "n"], sort=False):
        own = fresh[(fresh["scheme"] == scheme) & (fresh["n"] == n)]["z"]
        match = key_null.match_fresh(cell["z"], own)
        timing_path = cache_path(folder, scheme, int(n)).with_suffix(".json")
        timing = json.loads(timing_path.read_text()) if timing_path.exists() else {}
        cells[f"{scheme} N={n}"] = {
            "scores": int(len(cell)), "texts": int(cell["job"].nunique()),
            "keys_per_text_and_provider": int(cell.groupby(["job", "provider"]).size().max()),
            "distinct_keys": int(cell["key"].nunique()),
            "providers": int(cell["provider"].nunique()),
            "within_text_correlation": round(key_null.within_text_correlation(cell["job"], cell["z"]), 4),
            "ks_p_vs_fresh": round(match.ks_p, 4), "ad_p_vs_fresh": round(match.ad_p, 4),
            "fresh_scores": match.n_fresh, **timing}
    meta_path = folder / "tpr_meta.json"
    meta = json.loads(meta_path.read_text())
    meta["key_null"] = {
        "command": f"python -m wash.experiments.key_null_scores {portable(str(folder))} --schemes ...; "
                   f"python -m wash.experiments.key_null_scores {portable(str(folder))} --merge",
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_description(), "code": git_commit(),
        "what": "calibration-half negatives re-scored by each provider slot's own detector under seeded random "
                "keys (wash/detection/key_null.py); KS/AD p treat every score as independent, which the "
                "scores of one text under several keys are not (within_text_correlation)",
        "cells": cells}
    meta_path.write_text(json.dumps(meta, indent=2))
    return meta["key_null"]


def main(argv: list[str] | None = None) -> int:
    import torch

    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--schemes", nargs="*")
    ap.add_argument("--n", nargs="*", type=int)
    ap.add_argument("--merge", action="store_true", help="gather the cached cells into the folder's " + FILE)
    args = ap.parse_args(argv)
    if args.merge:
        frame = merge(args.folder)
        print(f"{len(frame)} key-null scores written to {args.folder / FILE}")
        return 0
    score_folder(args.folder, args.schemes, args.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
