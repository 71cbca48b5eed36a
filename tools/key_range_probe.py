"""Does the key range change a detector's null? One key-null cell's calibration texts under two key ranges.

    python -m tools.key_range_probe [--folder results/tpr-release-forms]
        [--scheme its-edit:permutation=shared] [--n 5] [--texts 20] [--keys 8]

The null over keys draws keys at or above 2^40 (``key_null.null_keys``); experiment
keys are far below. For the cell's first provider slot, each of the first ``texts``
calibration texts is scored under ``keys`` keys of each range with the provider's own
detector (``detect_under_keys``); prints the mean and sd of z per range and the
two-sample KS p between them, as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    import torch
    from scipy import stats

    from wash.detection import key_null
    from wash.core.errors import WashInputError
    from wash.engine import ProviderSpec
    from wash.experiments import KEY_BASE, calibration_cell, watermarked_providers
    from wash.watermarks import build_scheme

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", type=Path, default=Path("results/tpr-release-forms"))
    ap.add_argument("--scheme", default="its-edit:permutation=shared")
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--texts", type=int, default=20)
    ap.add_argument("--keys", type=int, default=8)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    try:
        cell = calibration_cell(args.folder, args.scheme, args.n)
    except WashInputError as err:
        ap.error(str(err))
    specs = [ProviderSpec.parse(s) for s in str(cell.iloc[0]["providers"]).split("|")]
    provider = watermarked_providers(specs)[0]
    ranges = {"at_or_above_2^40": key_null.null_keys(args.keys, salt="probe-big"),
              "experiment_range": [KEY_BASE + 5000 + i for i in range(args.keys)]}
    z: dict[str, list[float]] = {name: [] for name in ranges}
    for text in cell.drop_duplicates("job")["text"].tolist()[:args.texts]:
        ids = provider.scheme_ids(provider.member.encode(text))
        for name, keys in ranges.items():
            schemes = [build_scheme(provider.spec.scheme, int(k), provider.scheme.vocab_size,
                                    dict(provider.spec.params)) for k in keys]
            z[name] += [d.z for d in schemes[0].detect_under_keys(schemes, ids)]
    a, b = z.values()
    print(json.dumps({"folder": str(args.folder), "scheme": args.scheme, "n": args.n, "provider": str(provider.spec),
                      "texts": args.texts, "keys_per_range": args.keys,
                      **{name: {"scores": len(v), "mean_z": round(float(np.mean(v)), 3),
                                "sd_z": round(float(np.std(v)), 3)} for name, v in z.items()},
                      "ks_p": round(float(stats.ks_2samp(a, b).pvalue), 4)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
