"""Do keys shared across texts explain a key-null's mismatch with fresh texts? One cell, keys drawn per text.

    python -m tools.key_per_text_probe [--folder results/tpr-paper] [--scheme its-edit] [--n 5]
        [--workers 2] [--out docs/key-per-text-probe.json]    # --out: a list of cells, this one added

The committed key-null scores every calibration text of a cell under its slot's same keys
(``key_null.slot_keys``). For a scheme whose key fixes one token order or list for every
text, the scores under one key move together, so the null's effective size is nearer its
number of keys than its number of scores. Here every (text, slot) pair gets keys of its own
(as many per pair as the committed cell, ``keys_per_slot``), scored by the slot's own
detector (``key_null.score_under_keys``); the result is compared with the check half's texts
under their own keys by the same KS and Anderson-Darling tests as the committed cell's
(``key_null.match_fresh``), beside the committed cell's. Pairs are shared out over
``--workers`` processes (each loads the cell's models once).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

_PROVIDERS: list = []


def _load(specs: list[str], slots: list[int]) -> None:
    import torch

    from wash.engine import ProviderSpec
    from wash.experiments import watermarked_providers

    torch.set_num_threads(1)
    providers = watermarked_providers([ProviderSpec.parse(s) for s in specs])
    _PROVIDERS[:] = [providers[s] for s in slots]


def _score(job: tuple[str, str, int, list[int]]) -> list[dict]:
    from wash.detection import key_null

    name, text, slot, keys = job
    provider = _PROVIDERS[slot]
    return [{"job": name, "provider": slot, "provider_model": provider.model, "key": k, "z": z}
            for k, (z, _m) in zip(keys, key_null.score_under_keys(provider, text, keys))]


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import pandas as pd

    from wash.detection import key_null
    from wash.core.errors import WashInputError
    from wash.experiments import calibration_cell, check_negatives, machine_description
    from wash.core.provenance import load_average

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", type=Path, default=Path("results/tpr-paper"))
    ap.add_argument("--scheme", default="its-edit")
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    try:
        cell = calibration_cell(args.folder, args.scheme, args.n)
    except WashInputError as err:
        ap.error(str(err))
    slots = sorted(cell["provider"].unique().tolist())
    specs = str(cell.iloc[0]["providers"]).split("|")
    texts = cell.drop_duplicates("job")[["job", "text"]].values.tolist()
    per_pair = key_null.keys_per_slot(len(texts), len(slots))
    keys = key_null.null_keys(per_pair * len(texts) * len(slots), salt="key-per-text")
    jobs = [(str(job), str(text), s, keys[(i * len(slots) + s) * per_pair:(i * len(slots) + s + 1) * per_pair])
            for i, (job, text) in enumerate(texts) for s in range(len(slots))]
    load_start, start = load_average(), time.perf_counter()
    with ProcessPoolExecutor(args.workers, initializer=_load, initargs=(specs, slots)) as pool:
        rows = [r for part in pool.map(_score, jobs) for r in part]
    seconds = time.perf_counter() - start
    probe = pd.DataFrame(rows)

    fresh = check_negatives(args.folder)
    fresh = fresh[(fresh["scheme"] == args.scheme) & (fresh["n"] == args.n)]
    committed = pd.read_csv(args.folder / "tpr_key_null.csv.gz")
    committed = committed[(committed["scheme"] == args.scheme) & (committed["n"] == args.n)]

    def describe(frame: pd.DataFrame) -> dict:
        match = key_null.match_fresh(frame["z"], fresh["z"])
        return {"scores": int(len(frame)), "distinct_keys": int(frame["key"].nunique()),
                "copies": key_null.duplicate_scores(frame),
                "mean_z_by_model": {m: round(float(g.mean()), 3) for m, g in frame.groupby("provider_model")["z"]},
                "sd_z": round(float(np.std(frame["z"], ddof=1)), 3),
                # None where every key scores one text: nothing lies between keys
                "between_key_share": {m: (round(key_null.within_text_correlation(g["key"].astype(str), g["z"]), 4)
                                          if g["key"].nunique() < len(g) else None)
                                      for m, g in frame.groupby("provider_model")},
                "ks_p_vs_fresh": round(match.ks_p, 4), "ad_p_vs_fresh": round(match.ad_p, 4)}

    report = {
        "command": "python -m tools.key_per_text_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_description(), "workers": args.workers, "threads_per_worker": 1, "seconds": round(seconds, 1),
        "load_average_start": load_start, "load_average_end": load_average(),
        "folder": str(args.folder), "scheme": args.scheme, "n": args.n, "texts": len(texts), "slots": len(slots),
        "keys_per_text_and_slot": per_pair,
        "fresh": {"scores": int(len(fresh)),
                  "mean_z_by_model": {m: round(float(g.mean()), 3) for m, g in fresh.groupby("provider_model")["z"]}},
        "keys_per_text": describe(probe), "committed_keys_per_slot": describe(committed)}
    print(json.dumps(report, indent=2))
    if args.out:  # a list of cells: this cell's entry replaces an earlier one
        cells = json.loads(args.out.read_text()) if args.out.exists() else []
        cells = [c for c in cells if (c["folder"], c["scheme"], c["n"]) != (report["folder"], args.scheme, args.n)]
        args.out.write_text(json.dumps([*cells, report], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
