"""Can a detector see through the wash? The committed TPR texts re-scored with every statistic.

No text is generated: the positives and held-out negatives of ``results/tpr-paper``
and ``results/tpr-anchor`` are re-read by each provider's own model (one forward
per text and model, cached under ``out/see-through/served``) and scored under the
provider's key with each statistic of ``wash.detection.statistics``, at prefix
cuts of each text (the tokens-for-80%-TPR curve). Each cell (source, scheme, N,
role) and base model is one resumable CSV under ``out/see-through/rows``; ``summarize`` writes
``results/see-through``.

Run: ``python -m wash.experiments.see_through read`` (the forwards, in priority
order), ``... score`` (the statistics), ``... summarize``. A scheme scored later
joins the committed summary without re-scoring the others:
``... read --schemes S``, ``... score --schemes S``, ``... add``.

The line-up-aware ratio (``lr-lineup``) needs every text read by every base model of its
line-up too (``read --lineup``: the gemma3 forwards of the smollm2 providers' texts and
the reverse) and writes its own cell files (``<cell>-lr-lineup.csv``, resumable per cell
like the others), scored for the providers on ``--models``:

    python -m wash.experiments.see_through read --lineup --models smollm2 gemma3
    python -m wash.experiments.see_through score --statistics lr-lineup --models smollm2 gemma3 \
        --only-read --workers 16
    python -m wash.experiments.see_through summarize

The long texts (``results/tpr-long``: ``python -m wash experiment tpr --preset long --profile paper``,
every text 800 tokens) are scored at their own cuts (``SOURCE_CUTS``), with the sum and the quoted ratio,
into ``see_through_length.csv`` and the length figure besides the tables:

    python -m wash.experiments.see_through read --sources long --n 5 --workers 2
    python -m wash.experiments.see_through score --sources long --n 5 --statistics sum lr-mix --workers 2
    python -m wash.experiments.see_through add --sources long --statistics sum lr-mix

``summarize --committed`` recomputes every table from the committed per-text rows
(``results/see-through/see_through_rows.csv.gz``), with no cell file and no model.

A scoring that outlasts a session keeps its finished cells in the repository, since
``out/`` stays on one machine: ``keep --schemes S`` gzips them into
``results/see-through/pending``, and the next session, on any machine, runs ``restore``
before ``score`` resumes the rest; once ``add`` has the scheme's rows in the committed rows
file, its pending copies are removed.

``summarize`` reads every cell file under ``out/see-through/rows``, so the other
statistics' cells must be there as well (``add`` replaces a scheme's committed cells by
the rows present: run it only with all of a scheme's statistics scored).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

#: The committed TPR runs re-scored, by short name. ``long``: the 800-token texts of ``python -m wash experiment
#: tpr --preset long`` (every text exactly 800 tokens), which ask how much text a provider needs.
SOURCES = {"paper": "results/tpr-paper/tpr_runs.csv", "anchor": "results/tpr-anchor/tpr_runs.csv",
           "long": "results/tpr-long/tpr_runs.csv"}
#: The sources a step reads when ``--sources`` is not given (``long`` is scored with its own statistics).
DEFAULT_SOURCES = ("paper", "anchor")
OUT = Path("out/see-through")
SERVED = OUT / "served"
ROWS = OUT / "rows"
RESULTS = Path("results/see-through")
#: Finished cell files kept in the repository (gzipped) while a scoring spans sessions, possibly on another
#: machine: ``keep`` copies them here, ``restore`` back to ``ROWS`` (where ``score`` skips them and ``add``
#: reads them); after ``add`` their rows are in the committed rows file and the copies are removed.
PENDING = RESULTS / "pending"
PROFILE = "paper"
#: Providers re-read by default: every one, on both base models (the "any provider" decision is over all N
#: detectors; every statistic, the scheme's own sum included, is compared on the same rows).
MODELS = ("smollm2", "gemma3")
#: The check FPR's keys: each held-out negative is scored under its slot's committed key (``slot``: the
#: key of a positive line-up, so the ~70 negatives of a cell share about 30 keys) and under a key of its
#: own (``fresh``, ``check_key``): independent (text, slot) trials, the check FPR quoted.
KEY_KINDS = ("slot", "fresh")
#: Prefix lengths (text tokens) each text is also scored at.
CUTS = (10, 20, 30, 50, 75, 100, 150, 200)
#: ... for a source whose texts are longer: the length curve up to 800 tokens.
SOURCE_CUTS = {"long": (25, 50, 100, 150, 200, 300, 400, 600, 800)}
STATISTICS = ("sum", "lr", "lr-mix", "hc", "entropy")
#: Statistics that also read the line-up's other base models (their own cell files, ``cell_path``).
LINEUP_STATISTICS = ("lr-lineup",)
#: Cells in the order they are read and scored: N = 5 and 3 first (the question), then N = 1.
N_ORDER = (5, 3, 1)
#: Schemes in the order they are read and scored within an N (the issue's headline schemes first).
SCHEME_ORDER = ("aar", "aar:form=soft", "kgw", "synthid", "unigram", "dipmark")


def committed_rows(source: str) -> pd.DataFrame:
    """The rows re-scored: WASH and single-provider positives, and the held-out negatives."""
    df = pd.read_csv(SOURCES[source])
    # a run whose negatives are still to come has no ``role`` column yet
    df["role"] = df["role"].fillna("positive") if "role" in df else "positive"
    keep = ((df["role"] == "positive") & df["mode"].isin(["wash", "single"])) | (df["role"] == "negative")
    df = df[keep].copy()
    df["source"] = source
    df["spec"] = [p.split("|")[int(i)] for p, i in zip(df["providers"], df["provider"])]
    df["text_id"] = df["job"].factorize()[0]
    return df.reset_index(drop=True)


def model_aware(scheme: str) -> bool:
    """Whether the model-aware LR covers ``scheme`` (release-detector variants read the same law: skipped)."""
    from wash.detection import keyed_law
    from wash.watermarks import build_scheme

    name, _, params = scheme.partition(":")
    raw = dict(kv.split("=") for kv in params.split("+")) if params else {}
    if raw.get("detector") == "release":
        return False
    return keyed_law(build_scheme(name, 1, 1000, raw)) is not None


def cuts_of(source: str) -> tuple[int, ...]:
    """The prefix cuts a source's texts are scored at."""
    return SOURCE_CUTS.get(source, CUTS)


def cells(sources: tuple[str, ...] = DEFAULT_SOURCES, models: tuple[str, ...] = MODELS,
          n_values: tuple[int, ...] = N_ORDER,
          schemes: tuple[str, ...] | None = None) -> Iterator[tuple[str, str, int, pd.DataFrame]]:
    """(source, scheme, N, rows of both roles) in priority order: schemes the LR covers (or ``schemes``),
    providers on ``models``."""
    for n in n_values:
        for source in sources:
            df = committed_rows(source)
            df = df[df["provider_model"].isin(models)]
            present = list(dict.fromkeys(df["scheme"]))
            for scheme in sorted(present, key=lambda s: SCHEME_ORDER.index(s) if s in SCHEME_ORDER else 99):
                if not model_aware(scheme) or (schemes is not None and scheme not in schemes):
                    continue
                sub = df[(df["scheme"] == scheme) & (df["n"] == n)]
                if len(sub):
                    yield source, scheme, n, sub


def _member(model: str):
    from wash.engine import member_of

    return member_of(model)


def lineup_models(providers: str) -> list[str]:
    """The base model of each slot of a line-up (a committed row's ``providers``), in slot order."""
    from wash.engine import ProviderSpec

    return [ProviderSpec.parse(spec).model for spec in providers.split("|")]


def forwards(sub: pd.DataFrame, lineup: bool = False) -> list[tuple[str, str]]:
    """The (model, text) forwards a cell's rows need, in row order: each provider's own model and, with
    ``lineup``, every base model of the text's line-up."""
    pairs = zip(sub["provider_model"], sub["text"], sub["providers"])
    need = (((m, t), *(((o, t) for o in lineup_models(line)) if lineup else ())) for m, t, line in pairs)
    return list(dict.fromkeys(pair for group in need for pair in group))


def read(sources: tuple[str, ...], n_values: tuple[int, ...] = N_ORDER,
         roles: tuple[str, ...] = ("negative", "positive"), schemes: tuple[str, ...] | None = None,
         models: tuple[str, ...] = MODELS, lineup: bool = False, workers: int = 1) -> None:
    """Every (text, model) forward the cells need, cached on disk (resumable; negatives first in a cell),
    in ``workers`` processes of one thread each (a forward is one model on one text: no shared state)."""
    pending: list[tuple[str, str]] = []
    for source, scheme, n, sub in cells(sources, models=models, n_values=n_values, schemes=schemes):
        sub = sub[sub["role"].isin(roles)].sort_values("role", ascending=True)  # negative before positive
        pending += [pair for pair in forwards(sub, lineup) if not _cached(*pair)]
    pending = list(dict.fromkeys(pending))  # a negative text serves every scheme's cell: read once
    print(f"[read] {len(pending)} forwards to make", flush=True)
    from concurrent.futures import ProcessPoolExecutor
    from contextlib import nullcontext

    t0 = time.time()
    with ProcessPoolExecutor(workers, initializer=_one_thread) if workers > 1 else nullcontext() as pool:
        mapped = pool.map(_read_one, pending) if pool else map(_read_one, pending)
        for i, _ in enumerate(mapped, start=1):
            if i % 10 == 0 or i == len(pending):
                spent = time.time() - t0
                print(f"[read] {i} of {len(pending)} in {spent:.0f} s (about "
                      f"{spent / i * (len(pending) - i):.0f} s left)", flush=True)


def _cached(model: str, text: str) -> bool:
    from wash.detection import text_key

    return (SERVED / f"{text_key(model, PROFILE, text)}.npz").exists()


def _read_one(pair: tuple[str, str]) -> None:
    """One forward, stored (skipped when another reader got there first)."""
    from wash.detection import served_text

    model, text = pair
    if not _cached(model, text):
        served_text(_member(model), text, PROFILE, SERVED)


def cell_path(source: str, scheme: str, n: int, statistics: tuple[str, ...] = STATISTICS,
              model: str | None = None) -> Path:
    """A cell's rows file; statistics other than the default set write their own (``-lr-lineup``), and
    with ``model`` the cell's providers on that base model only (``-gemma3``: each model's providers are
    scored, and resumed, on their own)."""
    tag = "" if tuple(statistics) == STATISTICS else "-" + "+".join(statistics)
    part = "" if model is None else f"-{model}"
    return ROWS / f"{cell_stem(source, scheme)}{n}{part}{tag}.csv"


def cell_stem(source: str, scheme: str) -> str:
    """What every cell file of (source, scheme) starts with, up to its N."""
    return f"{source}-{scheme.replace(':', '_').replace('+', '_').replace('=', '-')}-n"


def lineup_of(row: pd.Series) -> Any:
    """``lineup_ratio`` of a row's text for its provider, from the reads ``read --lineup`` stored: the
    other slots of its line-up, each read by its base model."""
    from wash.detection import stored_lineup

    others = [m for j, m in enumerate(lineup_models(row["providers"])) if j != int(row["provider"])]
    return stored_lineup(row["text"], row["provider_model"], others, PROFILE, SERVED)


def check_key(row: pd.Series) -> int:
    """A held-out negative's own key for its slot: seeded by (source, scheme, N, text, slot), at least
    ``key_null.KEY_FLOOR`` (disjoint from every experiment key), so no two negatives share one."""
    from wash.detection import key_null
    from wash.watermarks import derive_seed

    seed = derive_seed("see-through-check", row["source"], row["scheme"], int(row["n"]), int(row["text_id"]),
                       int(row["provider"]))
    return key_null.KEY_FLOOR + seed % (2 ** 62 - key_null.KEY_FLOOR)


def _scheme(spec_text: str, vocab_size: int, key: int | None = None):
    """The provider's scheme and key (or ``key`` instead), built without its model (the stored text holds
    the vocabulary size)."""
    from wash.engine import ProviderSpec
    from wash.watermarks import build_scheme

    spec = ProviderSpec.parse(spec_text)
    return build_scheme(spec.scheme, spec.key if key is None else key, vocab_size, dict(spec.params))


def score_row(row: pd.Series, n_null: int, statistics: tuple[str, ...] = STATISTICS) -> list[dict[str, Any]]:
    """One (text, provider) under every statistic that applies: one record per statistic, cut and key kind
    (``keys``: a positive under its slot's key; a negative under its slot's and under its own, ``KEY_KINDS``).

    ``lr-lineup`` rows also say where q came from (``q_*``: slots, those on the provider's own model,
    (slot, token) pairs aligned and fallen back to p)."""
    from wash.detection import stored_text

    served = stored_text(row["provider_model"], row["text"], PROFILE, SERVED)
    lineup = lineup_of(row) if _needs_lineup(statistics) else None
    kinds = KEY_KINDS if row["role"] == "negative" else KEY_KINDS[:1]
    return [rec for kind in kinds
            for rec in _score_under(row, served, None if kind == "slot" else check_key(row), kind, n_null,
                                    statistics, lineup)]


def _needs_lineup(statistics: tuple[str, ...]) -> bool:
    from wash.detection import statistic

    return any(statistic(s).needs_lineup for s in statistics)


def _score_under(row: pd.Series, served: Any, key: int | None, kind: str, n_null: int,
                 statistics: tuple[str, ...], lineup: Any) -> list[dict[str, Any]]:
    from wash.detection import score_ids

    scheme = _scheme(row["spec"], served.vocab_size, key)
    length = len(served.ids)
    cuts = cuts_of(row["source"])
    scores = score_ids(scheme, served.ids, statistics, served, cuts=[*cuts, length], n_null=n_null,
                       lineup=lineup)
    base = {k: row[k] for k in ("source", "scheme", "n", "mode", "role", "prompt_id", "provider",
                                "provider_model", "provider_key", "text_id")}
    base["keys"] = kind
    # the scheme's own p as the TPR run recorded it (under the slot's key: sum must match)
    base["committed_p"] = float(row["p"]) if kind == "slot" else float("nan")
    out = []
    for name, sc in scores.items():
        at = {int(c): j for j, c in enumerate(sc.cuts)}
        # each nominal prefix (a text shorter than it counts whole), then the whole text
        for cut, full in [*((c, False) for c in cuts), (length, True)]:
            j = at[min(cut, length)]
            out.append({**base, "statistic": name, "cut": int(cut), "full": full, "length": length,
                        "value": float(sc.value[j]), "p": float(sc.p[j]), "tokens_scored": int(sc.tokens_scored[j]),
                        "null_scores": sc.null_scores,
                        **{k: v for k, v in sc.extra.items() if k.startswith("q_")}})
    return out


def _read_already(sub: pd.DataFrame, lineup: bool = False) -> bool:
    return all(_cached(m, t) for m, t in forwards(sub, lineup))


def score(sources: tuple[str, ...], n_null: int, only_read: bool = False, workers: int = 1,
          n_values: tuple[int, ...] = N_ORDER, schemes: tuple[str, ...] | None = None,
          statistics: tuple[str, ...] = STATISTICS, models: tuple[str, ...] = MODELS) -> None:
    """Each cell's rows scored once (a cell whose CSV exists is skipped: resumable per cell; each cell is
    written when its last row is scored, with progress every 50 rows).

    ``only_read``: skip the cells whose forwards ``read`` has not cached yet (to run beside it; with a
    line-up statistic, every model of the line-up).
    """
    ROWS.mkdir(parents=True, exist_ok=True)
    lineup = _needs_lineup(statistics)
    todo = [(cell_path(source, scheme, n, statistics, model), part)
            for source, scheme, n, sub in cells(sources, models=models, n_values=n_values, schemes=schemes)
            for model, part in sub.groupby("provider_model", sort=False)
            if not cell_path(source, scheme, n, statistics, model).exists()
            and (not only_read or _read_already(part, lineup))]
    if not todo:
        print("[score] nothing to score", flush=True)
        return
    t0 = time.time()
    rows = [(path, row, n_null, statistics) for path, part in todo for _, row in part.iterrows()]
    left = {}  # rows still to come per cell: a cell is written as soon as its last row is scored
    for path, *_ in rows:
        left[path] = left.get(path, 0) + 1
    by_cell: dict[Path, list[dict[str, Any]]] = {}

    def take(results: Iterator[list[dict[str, Any]]]) -> None:
        for i, ((path, *_), recs) in enumerate(zip(rows, results), start=1):
            by_cell.setdefault(path, []).extend(recs)
            left[path] -= 1
            if not left[path]:
                tmp = path.with_suffix(".csv.tmp")
                pd.DataFrame(by_cell.pop(path)).to_csv(tmp, index=False)
                tmp.replace(path)
                print(f"[score] {path.name} written", flush=True)
            if i % 50 == 0 or i == len(rows):
                spent = time.time() - t0
                print(f"[score] {i} of {len(rows)} rows in {spent:.0f} s (about {spent / i * (len(rows) - i):.0f} s "
                      f"left)", flush=True)

    if workers <= 1:
        take(_score_one(r) for r in rows)
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, initializer=_one_thread) as pool:
            take(pool.map(_score_one, rows, chunksize=4))  # results in order, as they complete
    print(f"[score] {len(rows)} rows of {len(left)} cells in {time.time() - t0:.0f} s", flush=True)


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _score_one(item: tuple[Path, pd.Series, int, tuple[str, ...]]) -> list[dict[str, Any]]:
    return score_row(item[1], item[2], item[3])


def keep(schemes: tuple[str, ...] | None, sources: tuple[str, ...], rows: Path = ROWS,
         pending: Path = PENDING) -> list[Path]:
    """Each finished cell file of ``schemes`` (all with None) under ``rows``, gzipped into ``pending``.

    Why: ``out/`` is scratch on one machine; a scoring of hours that a session cannot finish
    resumes on the next one from these (``restore``). A cell file is only ever written whole
    (``score`` writes it when its last row is scored), so every copy is a finished cell."""
    import gzip
    import shutil

    stems = None if schemes is None else tuple(cell_stem(src, s) for src in sources for s in schemes)
    pending.mkdir(parents=True, exist_ok=True)
    kept = []
    for path in sorted(rows.glob("*.csv")):
        if stems is not None and not path.name.startswith(stems):
            continue
        target = pending / (path.name + ".gz")
        with open(path, "rb") as src, open(target, "wb") as raw, \
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as dst:  # no date inside: equal files, equal bytes
            shutil.copyfileobj(src, dst)
        kept.append(target)
    return kept


def restore(rows: Path = ROWS, pending: Path = PENDING) -> list[Path]:
    """The kept cell files back under ``rows`` (those not there already): ``score`` then skips their cells."""
    import gzip
    import shutil

    rows.mkdir(parents=True, exist_ok=True)
    restored = []
    for kept in sorted(pending.glob("*.csv.gz")):
        path = rows / kept.name[:-len(".gz")]
        if not path.exists():
            with gzip.open(kept, "rb") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
            restored.append(path)
    return restored


def run_meta(args: argparse.Namespace) -> dict[str, Any]:
    """Where the summary came from: the commands, the date, the machine and its load."""
    from datetime import datetime, timezone

    from wash.core.provenance import cpu_description, load_average
    from wash.core.version import code_version

    return {
        "experiment": "see-through",
        "command": ("python -m wash.experiments.see_through read; python -m wash.experiments.see_through score "
                    "--only-read --workers 16; python -m wash.experiments.see_through summarize"),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"forwards and summary on {cpu_description()}", "load_average": load_average(),
        "scoring": args.note, "code": code_version(),
        "sources": {k: v for k, v in SOURCES.items() if k in args.sources},
        "profile": PROFILE, "cuts": list(CUTS), "statistics": list(STATISTICS), "null_draws": args.null,
        "rows_note": rows_note(tuple(args.sources)),
    }


#: What a row is, as the page says it (the run's meta keeps it).
ROWS_NOTE = ("every watermarked provider of each committed text, on smollm2 and on gemma3 (paper line-up: all 5 at "
             "N = 5, all 3 at N = 3; anchor: the one watermarked provider), positives under WASH (single at N = 1) "
             "and the held-out negatives; every statistic, the scheme's own sum included, on the same rows. A "
             "negative is scored under its slot's key (the key of a positive line-up: a cell's 70 negatives share "
             "30 line-ups' keys) and under a key of its own; the check FPR quoted is the latter's, whose (text, "
             "slot) trials are independent.")


#: ... for the long texts.
LONG_ROWS_NOTE = ("the 800-token texts of `tpr-long` (`python -m wash experiment tpr --preset long --profile paper`: "
                  "WASH under the paper's serving and line-up, 30 prompts, every text 800 generated tokens, end "
                  "of text masked until then), every watermarked provider of each text, on smollm2 and on "
                  "gemma3, scored at prefixes of {cuts} of the provider's own tokens (re-read by its tokenizer, "
                  "a text is a little shorter or longer than 800; a prefix past its end reads it whole); the "
                  "held-out negatives (30 unwatermarked texts of 800 tokens on 30 other prompts) under keys of "
                  "their own and under their slots' keys.")


def rows_note(sources: tuple[str, ...]) -> str:
    """What a row of the given sources is (the long texts have their own note)."""
    if tuple(sources) == ("long",):
        return LONG_ROWS_NOTE.format(cuts=", ".join(str(c) for c in cuts_of("long")))
    return ROWS_NOTE


def _schemes(args: argparse.Namespace) -> tuple[str, ...] | None:
    return tuple(args.schemes) if args.schemes else None


def added_meta(args: argparse.Namespace) -> dict[str, Any]:
    """Where cells added to the committed summary (``add``) came from."""
    from datetime import datetime, timezone

    from wash.core.provenance import cpu_description, load_average
    from wash.core.version import code_version

    chosen = " ".join(args.schemes or [])
    schemes = f" --schemes {chosen}" if chosen else ""
    sources = "" if tuple(args.sources) == DEFAULT_SOURCES else f" --sources {' '.join(args.sources)}"
    stats = "" if tuple(args.statistics) == STATISTICS else f" --statistics {' '.join(args.statistics)}"
    return {"command": (f"python -m wash.experiments.see_through read{schemes}{sources}; ... score{schemes}"
                        f"{sources}{stats}; ... add{schemes}{sources}"),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": cpu_description(), "load_average": load_average(), "code": code_version(),
            "scoring": args.note, "null_draws": args.null, "rows_note": rows_note(tuple(args.sources)),
            "sources": list(args.sources), "statistics": list(args.statistics)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m wash.experiments.see_through", description=__doc__)
    ap.add_argument("step", choices=("read", "score", "summarize", "add", "keep", "restore"))
    ap.add_argument("--schemes", nargs="+", help="read/score: only these schemes' cells")
    ap.add_argument("--sources", nargs="+", default=list(DEFAULT_SOURCES), choices=list(SOURCES),
                    help="the committed TPR runs to read (default: %(default)s; `long`: the 800-token texts)")
    ap.add_argument("--null", type=int, default=1000, help="null draws per text for a simulated p")
    ap.add_argument("--only-read", action="store_true", help="score: only the cells whose forwards are cached")
    ap.add_argument("--n", type=int, nargs="+", default=list(N_ORDER), help="the N values, in this order")
    ap.add_argument("--roles", nargs="+", default=["negative", "positive"], help="read: which rows' texts")
    ap.add_argument("--note", default="", help="summarize: where and how long the steps ran (kept in the meta)")
    ap.add_argument("--workers", type=int, default=1,
                    help="read: processes, each loading the models it reads; score: processes (no model needed)")
    ap.add_argument("--models", nargs="+", default=list(MODELS),
                    help="read/score: the base models whose providers are scored")
    ap.add_argument("--committed", action="store_true",
                    help="summarize: from the committed rows (results/see-through), without the scored cells")
    ap.add_argument("--lineup", action="store_true", help="read: every base model of each text's line-up too")
    ap.add_argument("--statistics", nargs="+", default=list(STATISTICS),
                    help=f"score: these statistics, in cell files of their own unless the default set "
                         f"(line-up-aware: {', '.join(LINEUP_STATISTICS)})")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.step == "read":
        read(tuple(args.sources), tuple(args.n), tuple(args.roles), _schemes(args), tuple(args.models),
             args.lineup, args.workers)
    elif args.step == "score":
        score(tuple(args.sources), args.null, args.only_read, args.workers, tuple(args.n), _schemes(args),
              tuple(args.statistics), tuple(args.models))
    elif args.step == "keep":
        for path in keep(_schemes(args), tuple(args.sources)):
            print(f"[keep] {path}", flush=True)
    elif args.step == "restore":
        for path in restore():
            print(f"[restore] {path}", flush=True)
    elif args.step == "add":
        from wash.experiments.see_through_summary import add_schemes

        add_schemes(ROWS, RESULTS, added=added_meta(args), sources=tuple(args.sources))
    elif args.committed:
        from wash.experiments.see_through_summary import summarize

        summarize(None, RESULTS)
    else:
        from wash.experiments.see_through_summary import summarize

        summarize(ROWS, RESULTS, meta=run_meta(args))


if __name__ == "__main__":
    main()
