"""Detection statistics beside each scheme's own (wash.detection.statistics).

Null calibration on real unwatermarked text with the real smollm2 over many keys
(the simulated null must match real random keys), power on committed
single-provider texts, the looping-text null, and the batched helpers against the
engine's own functions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from wash.detection.statistics import STATISTICS, score_ids, statistic
from wash.detection.statistics.served_text import read_ids
from wash.engine.members import LocalMember
from wash.watermarks import build_scheme
from wash.watermarks.dipmark import alpha_reweight

pytestmark = pytest.mark.usefixtures("single_thread")

#: Keys the null calibration scores one unwatermarked text under.
KEYS = 200
#: Text tokens of the calibration text (enough for dozens of scored tokens, cheap per key).
CAL_TOKENS = 90
#: Null draws per key: a p-value's resolution, 1/201, is part of the tolerance (3 sd over 200 keys
#: plus 1/(N_NULL + 1)); the draws are half of a key's cost for SynthID and Water-Bag.
N_NULL = 200
#: Null draws for the Edit schemes' ratio (each draw is keylen x T wins: one keyed law per offset).
#: Their calibration runs at keylen 105: each key element is still read by T (offset, position)
#: pairs, what the simulated null draws independently, at a quarter of the cost.
N_NULL_EDIT = 200


def _n_null(spec: str) -> int:
    return N_NULL_EDIT if "edit" in spec else N_NULL


def _committed(role: str, mode: str, scheme: str, n: int, k: int) -> list[str]:
    df = pd.read_csv("results/tpr-paper/tpr_runs.csv")
    df["role"] = df["role"].fillna("positive")
    sub = df[(df.role == role) & (df["mode"] == mode) & (df.scheme == scheme) & (df.n == n)
             & (df.provider_model == "smollm2")]
    return list(dict.fromkeys(sub["text"]))[:k]


def test_batched_reweight_is_dipmarks_alpha_reweight_row_by_row() -> None:
    rng = np.random.default_rng(1)
    probs = torch.as_tensor(rng.dirichlet(np.ones(10), size=6))
    probs[2, 7:] = 0.0
    probs = probs / probs.sum(-1, keepdim=True)
    rank = torch.as_tensor(rng.random((6, 10)))
    got = alpha_reweight(probs, torch.argsort(rank, dim=-1), 0.45)
    for i in range(6):
        assert torch.allclose(got[i], alpha_reweight(probs[i], torch.argsort(rank[i]), 0.45), atol=1e-12)


def _synthetic_served(vocab: int, T: int, K: int, seed: int):
    """A ServedText over ``vocab`` ids whose observed token is served at most positions (not at two)."""
    from wash.detection.statistics.served_text import ServedText

    rng = np.random.default_rng(seed)
    rows = np.stack([rng.choice(vocab, K, replace=False) for _ in range(T)])
    rows[4, K - 2:] = -1  # a position with fewer rows
    logits = np.where(rows >= 0, rng.normal(0, 2, rows.shape), -np.inf)
    ids = [int(r[rng.integers(K - 2)]) for r in rows]
    ids[7] = ids[11] = next(v for v in range(vocab) if v not in rows[7] and v not in rows[11])
    return ServedText("synthetic", "paper", ids, rows, logits, np.ones(T, dtype=bool), vocab)


@pytest.mark.parametrize("spec", ["exp-edit", "its-edit", "its-edit:permutation=shared"])
def test_edit_law_reads_the_element_each_offset_reaches(spec: str) -> None:
    """The batched picks over every (offset, position) equal the scheme's own law, one position at a time:
    rho is 1/p where offset o's element (o + t) puts its mass on the observed token, 0 elsewhere."""
    from wash.detection.statistics.keyed import keyed_law
    from wash.watermarks.keyseq import EditState

    st = _synthetic_served(vocab=600, T=30, K=8, seed=2)
    name, _, params = spec.partition(":")
    scheme = build_scheme(name, 17, 600, {"keylen": "24", **dict(kv.split("=") for kv in params.split("+") if kv)})
    batched = keyed_law(scheme).observed(st, np.ones(len(st), dtype=bool))
    cols, probs = st.observed(), st.probs()
    one_by_one = np.ones((24, 30))  # each offset through scheme.distribution, one position at a time
    for o in range(24):
        for t in np.flatnonzero(cols >= 0):
            law = scheme.distribution(st.full_row(t), st.ids[:t], 0, EditState(o))
            one_by_one[o, t] = float(law[st.rows[t][cols[t]]]) / probs[t][cols[t]]
    assert batched.shape == (24, 30)
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-9)
    p = st.probs()[np.arange(30), np.maximum(st.observed(), 0)]
    won = batched > 1.0
    assert won.any() and (batched[:, [7, 11]] == 1.0).all()  # an unserved token carries no evidence
    np.testing.assert_allclose(batched[won], np.broadcast_to(1.0 / p, batched.shape)[won])
    assert (batched[~won] == 0.0).sum() > 0 and ((batched[~won] == 0.0) | (batched[~won] == 1.0)).all()


def test_point_mass_sums_are_the_log_ratio_sums_of_their_rho() -> None:
    """The Edit null's shortcut (wins times a table) equals summing log((1 - w) + w rho) directly."""
    from wash.detection.statistics import tests as st_tests

    rng = np.random.default_rng(5)
    T = 40
    ratio = 1.0 / rng.uniform(0.05, 1.0, T)
    live = rng.random(T) < 0.8
    wins = rng.random((6, 3, T)) < 1.0 / ratio
    wins[0, 0] = True  # every live position a win: w = 1 stays finite
    rho = np.where(live, np.where(wins, ratio, 0.0), 1.0)
    cuts = np.array([0, 5, 17, 30, 40])
    want = st_tests.log_ratio_sums(rho, cuts)
    got = st_tests.point_mass_sums(wins, ratio, live, cuts)
    assert np.isfinite(got[0, 0, :, -1]).all() and np.isneginf(got[..., -1]).any()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.fixture(scope="module")
def null_text(smollm2):
    """A committed held-out unwatermarked text, read once by the real smollm2."""
    ids = smollm2.encode(_committed("negative", "unwatermarked", "kgw", 1, 1)[0])[:CAL_TOKENS]
    return ids, read_ids(LocalMember(smollm2), ids)


CALIBRATED = [("lr", "aar"), ("lr", "kgw"), ("lr-mix", "kgw"), ("lr-mix", "aar"), ("lr", "unigram"), ("lr", "dipmark"), ("lr", "synthid"),
              ("lr", "aar:form=soft"), ("hc", "aar"), ("entropy", "kgw"), ("lr", "waterbag"), ("lr-mix", "waterbag"),
              ("lr", "exp-edit:keylen=105"), ("lr-mix", "its-edit:keylen=105")]


def _scheme(spec: str, key: int, vocab: int):
    name, _, params = spec.partition(":")
    return build_scheme(name, key, vocab, dict(kv.split("=") for kv in params.split("+")) if params else {})


def _ps_by_statistic(pairs, spec: str, cases, vocab_size: int) -> dict[str, np.ndarray]:
    """p of every statistic that ``pairs`` pair with ``spec``, one ``score_ids`` call per (key, ids, served) case.

    Scoring them together reads each case's evidence and ratios once (``lr`` and ``lr-mix``
    share them); each statistic draws its null from its own generator (``null_rng``), so
    every p is the one a separate call gives.
    """
    stats = [stat for stat, s in pairs if s == spec]
    rows = [score_ids(_scheme(spec, key, vocab_size), ids, stats, served, n_null=_n_null(spec))
            for key, ids, served in cases]
    return {stat: np.array([r[stat].p[-1] for r in rows]) for stat in stats}


@pytest.fixture(scope="module")
def key_null_ps(null_text, smollm2):
    """``get(spec)``: the KEYS real keys' p on the calibration text, per statistic, scored once per spec."""
    ids, served = null_text
    done: dict[str, dict[str, np.ndarray]] = {}

    def get(spec: str) -> dict[str, np.ndarray]:
        if spec not in done:
            cases = [(900_001 + k, ids, served) for k in range(KEYS)]
            done[spec] = _ps_by_statistic(CALIBRATED, spec, cases, smollm2.vocab_size)
        return done[spec]

    return get


@pytest.mark.parametrize("stat,spec", CALIBRATED)
def test_null_is_uniform_over_keys_on_real_text(stat: str, spec: str, key_null_ps) -> None:
    """The p-value of one real unwatermarked text under 200 real keys: P(p <= a) within 3 sd of a.

    The simulated null draws what a random key does on each position's served rows;
    if it misread a scheme's keyed law, real keys would not give uniform p-values.
    At 0.25 only the upper side is held: the likelihood ratio is 0 (p near 1) on
    most unwatermarked texts (its maximum sits at w = 0), which makes p conservative
    above the share of texts where it is positive.
    """
    ps = key_null_ps(spec)[stat]
    for a in (0.05, 0.1, 0.25):
        rate = float(np.mean(ps <= a))
        tol = 3 * np.sqrt(a * (1 - a) / KEYS) + 1.0 / (_n_null(spec) + 1)
        print(f"{stat} {spec}: P(p <= {a}) = {rate:.3f}")
        assert rate <= a + tol, (stat, spec, a, rate)
        if a < 0.25:
            assert rate >= a - tol, (stat, spec, a, rate)


@pytest.mark.parametrize("scheme", ["aar", "kgw", "waterbag", "exp-edit", "its-edit"])
def test_power_on_single_provider_text(scheme: str, smollm2) -> None:
    """On committed single-provider texts the LR flags (p < 0.05) about as many as the scheme's own sum."""
    from wash.engine.providers import build_providers
    from wash.engine.settings import ProviderSpec

    df = pd.read_csv("results/tpr-paper/tpr_runs.csv")
    df["role"] = df["role"].fillna("positive")
    rows = df[(df["mode"] == "single") & (df.scheme == scheme) & (df.provider_model == "smollm2")].head(8)
    flags = {"sum": 0, "lr": 0, "lr-mix": 0}
    for _, r in rows.iterrows():
        prov = build_providers([ProviderSpec.parse(r.providers)]).providers[0]
        ids = smollm2.encode(r.text)
        served = read_ids(LocalMember(smollm2), ids)
        scores = score_ids(prov.scheme, ids, list(flags), served, n_null=_n_null(scheme))
        for k in flags:
            flags[k] += int(scores[k].p[-1] < 0.05)
    print(scheme, flags, "of", len(rows))
    assert min(flags["lr"], flags["lr-mix"]) >= flags["sum"] - 1


#: Looping texts (and keys) per statistic (100 before: the binomial bound below scales with them).
LOOPING_KEYS = 50
LOOPING = [("lr", "kgw"), ("lr", "aar"), ("lr-mix", "kgw"), ("lr", "unigram"), ("hc", "aar"), ("entropy", "kgw"),
           ("lr", "waterbag"), ("lr", "its-edit:permutation=shared")]


@pytest.fixture(scope="module")
def looping_ps(tiny_smollm2):
    """``get(spec)``: p per statistic on the LOOPING_KEYS looping texts (20 tokens x 4), text i under
    key 7_000_001 + i; tiny smollm2 re-reads each text once for every statistic and spec."""
    from wash.detection.null import Loop, english_ids, looping_texts

    texts = looping_texts(english_ids("smollm2"), Loop(20, 4), LOOPING_KEYS)
    cases = [(7_000_001 + i, ids, read_ids(LocalMember(tiny_smollm2), ids)) for i, ids in enumerate(texts)]
    done: dict[str, dict[str, np.ndarray]] = {}

    def get(spec: str) -> dict[str, np.ndarray]:
        if spec not in done:
            done[spec] = _ps_by_statistic(LOOPING, spec, cases, tiny_smollm2.vocab_size)
        return done[spec]

    return get


@pytest.mark.parametrize("stat,spec", LOOPING)
def test_null_on_looping_text(stat: str, spec: str, looping_ps) -> None:
    """Looping text (a natural span repeated): the statistic's p < 0.05 for at most its share of keys.

    Under a calibrated null the count is Binomial(50, 0.05), 2.5 on average; 8 or more happens
    with probability 0.3 %."""
    ps = looping_ps(spec)[stat]
    above = int(np.sum(ps < 0.05))
    print(f"{stat} {spec} on 20x4 loops: {above} of {LOOPING_KEYS} below p = 0.05")
    assert above <= 7


def test_registry_names_and_scope() -> None:
    assert list(STATISTICS) == ["sum", "lr", "lr-mix", "hc", "entropy"]
    assert statistic("lr").needs_model and not statistic("sum").needs_model
    assert statistic("lr").applies(build_scheme("waterbag", 1, 1000, {}))
    assert statistic("lr").applies(build_scheme("exp-edit", 1, 1000, {}))
    assert statistic("lr").applies(build_scheme("its-edit", 1, 1000, {"permutation": "shared"}))
    assert not statistic("lr").applies(build_scheme("exp-edit", 1, 1000, {"form": "soft"}))
    assert statistic("entropy").applies(build_scheme("kgw", 1, 1000, {}))
    assert not statistic("hc").applies(build_scheme("kgw", 1, 1000, {}))


# -- the summary: the "any provider" decision and tokens for 80% TPR ---------------------------------
def test_any_provider_holds_the_fpr_on_independent_nulls() -> None:
    """Holm's first step over m independent uniform p flags at most 5% of texts (about 4.9% for m = 5)."""
    from wash.experiments.see_through_summary import _any_provider

    rng = np.random.default_rng(3)
    texts, m = 4000, 5
    rows = pd.DataFrame({"text_id": np.repeat(np.arange(texts), m), "p": rng.random(texts * m)})
    rate = float(_any_provider(rows).mean())
    sd = np.sqrt(0.05 * 0.95 / texts)
    assert 1 - 0.99 ** m - 3 * sd <= rate <= 0.05 + 3 * sd, rate


def test_tokens_for_80_interpolates_in_log_tokens() -> None:
    from wash.experiments.see_through_summary import tokens_for

    cuts = np.array([10.0, 20.0, 40.0])
    assert tokens_for(cuts, np.array([0.5, 0.7, 0.9])) == pytest.approx(np.exp(np.log(20) + 0.5 * np.log(2)))
    assert tokens_for(cuts, np.array([0.85, 0.9, 0.95])) == 10.0
    assert np.isnan(tokens_for(cuts, np.array([0.1, 0.2, 0.3])))


def test_the_committed_section_quotes_its_cells() -> None:
    """RESULTS.md's section and the page print the committed TPRs of the own sum and the quoted ratio."""
    from wash.reporting import see_through as st
    from wash.reporting.fmt import pct_ci

    root = Path("results")
    data = st.load(root)
    assert data is not None, "results/see-through is not committed"
    text = "\n".join(st.section(root)) + st.page(root)
    t = data["summary"]
    at5 = t[(t["source"] == "paper") & (t["n"] == 5) & t["statistic"].isin(["sum", st.QUOTED])]
    assert len(at5) >= 4
    for _, r in at5.iterrows():
        assert pct_ci(r["tpr"], r["tpr_lo"], r["tpr_hi"]) in text
    assert (t["null_scores"][t["statistic"] != "sum"] >= 1000).all()


def test_separated_names_each_side_and_points_to_why_only_where_intervals_overlap() -> None:
    from wash.reporting import see_through as st

    def cell(scheme, stat, lo, hi):
        return {"source": "paper", "n": 5, "scheme": scheme, "statistic": stat, "tpr_lo": lo, "tpr_hi": hi}

    apart = pd.DataFrame([cell("dipmark", "sum", 0.2, 0.4), cell("dipmark", st.QUOTED, 0.5, 0.7)])
    both = pd.concat([apart, pd.DataFrame([cell("kgw", "sum", 0.3, 0.5), cell("kgw", st.QUOTED, 0.4, 0.6)])])
    assert st.separated(apart) == "At N = 5 the ratio's interval lies above the sum's for DiPMark."
    text = st.separated(both)
    assert "lies above the sum's for DiPMark; the two intervals overlap for KGW." in text
    assert text.endswith('"Where the ratio gains little".')
    assert "Where the ratio gains little, and why" in Path("docs/DETECTORS.md").read_text()


def test_a_scheme_scored_later_joins_the_committed_summary(tmp_path) -> None:
    """``add``: the new scheme's cells are summarised from its rows; every other cell stays as committed."""
    import json
    import shutil

    from wash.experiments.see_through_summary import TABLES, add_schemes

    out = tmp_path / "results"
    shutil.copytree("results/see-through", out)
    before = {name: pd.read_csv(out / name) for name in TABLES}
    rng = np.random.default_rng(0)
    rows = []
    for n in (1, 3):
        for text_id in range(20):
            role = "positive" if text_id < 10 else "negative"
            p = rng.random() * (0.1 if role == "positive" else 1.0)
            for cut, full in ((10, False), (200, False), (200, True)):
                rows.append({"source": "paper", "scheme": "newscheme", "n": n, "mode": "wash", "role": role,
                             "prompt_id": f"p{text_id}", "provider": 0, "provider_model": "smollm2",
                             "provider_key": 1, "text_id": text_id, "committed_p": p, "statistic": "lr",
                             "cut": cut, "full": full, "length": 200, "value": 1.0, "p": p,
                             "tokens_scored": cut, "null_scores": 1000})
    (tmp_path / "rows").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "rows" / "paper-newscheme.csv", index=False)
    table = add_schemes(tmp_path / "rows", out, added={"command": "test"})
    cells = pd.read_csv(out / "see_through_cells.csv")
    assert set(cells["scheme"]) == set(before["see_through_cells.csv"]["scheme"]) | {"newscheme"}
    kept = cells[cells["scheme"] != "newscheme"].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, before["see_through_cells.csv"])
    new = table[table["scheme"] == "newscheme"].set_index("n")
    assert list(new.index) == [1, 3] and (new["positives"] == 10).all() and (new["negatives"] == 10).all()
    meta = json.loads((out / "see_through_run.json").read_text())
    assert meta["added"][-1] == {"command": "test", "schemes": ["newscheme"]}


# -- in the product ---------------------------------------------------------------------------------
TEXT = ("The old lighthouse keeper climbed the stairs one last time, and as the storm rolled in "
        "over the harbour he began to tell the children the story of the ship that never came home.")


def test_cli_detect_takes_a_statistic(capsys, tiny_smollm2) -> None:
    from wash.cli import main

    assert main(["detect", "--provider", "tiny-smollm2:kgw:42", "--provider", "tiny-smollm2:waterbag:3",
                 "--provider", "tiny-smollm2:exp-edit:5:form=soft", "--provider", "tiny-smollm2:its-edit:9",
                 "--statistic", "lr-mix", "--text", TEXT, "--json"]) == 0
    rows = __import__("json").loads(capsys.readouterr().out)
    kgw, bag, edit, its = rows
    ids = tiny_smollm2.encode(TEXT)
    own = build_scheme("kgw", 42, tiny_smollm2.vocab_size, {}).detect(ids)
    assert kgw["tokens_scored"] == own.tokens_scored and kgw["p"] != own.p  # the ratio's p, not the sum's
    assert bag["p"] != build_scheme("waterbag", 3, tiny_smollm2.vocab_size, {}).detect(ids).p  # mixed over the bag
    # a scheme the ratio does not cover keeps its own sum
    assert edit["p"] == build_scheme("exp-edit", 5, tiny_smollm2.vocab_size, {"form": "soft"}).detect(ids).p
    # ITS-Edit's ratio averages over the 420 offsets a generation may have started at
    assert its["tokens_scored"] == len(ids) and its["p"] != build_scheme("its-edit", 9, tiny_smollm2.vocab_size,
                                                                        {}).detect(ids).p


def test_detect_tab_statistic_colours_the_tokens_it_leans_on(tiny_smollm2) -> None:
    from wash.ui.detect import detect, statistic_choices

    assert statistic_choices()[0] == "sum"
    (row,) = detect(TEXT, [["tiny-smollm2", "aar", "7", ""]], choices=["tiny-smollm2"], statistic="lr")
    scored = [s for s in row.per_token if s is not None]
    assert len(row.per_token) == len(row.tokens) and scored and len(scored) == row.tokens_scored


def test_results_tab_draws_the_see_through_section() -> None:
    from wash.ui import results

    fig = results.see_through_figure()
    names = {t.name for t in fig.data}
    assert {"own sum, N=5", "model-aware LR (mean over w), N=5"} <= names, names
    assert all(t.error_y.array is not None for t in fig.data)
    text = results.see_through_markdown()
    assert "tpr-paper" in text and "not committed" not in text


def test_score_writes_each_cell_when_its_last_row_is_scored(tmp_path, monkeypatch, capsys) -> None:
    """``score`` is resumable per cell: a cell's CSV appears once its rows are scored, a written cell
    is skipped on the next call, and progress is printed as rows come in."""
    from wash.experiments import see_through as st

    subs = {("paper", "kgw", 5): pd.DataFrame({"text": ["a", "b", "c"], "role": ["negative"] * 3}),
            ("paper", "kgw", 3): pd.DataFrame({"text": ["d"], "role": ["positive"]})}
    monkeypatch.setattr(st, "ROWS", tmp_path)
    monkeypatch.setattr(st, "cells", lambda *a, **k: ((s, sc, n, sub) for (s, sc, n), sub in subs.items()))
    monkeypatch.setattr(st, "_score_one", lambda item: [{"text": item[1]["text"], "p": 0.5}])
    st.score(("paper",), n_null=10)
    five, three = st.cell_path("paper", "kgw", 5), st.cell_path("paper", "kgw", 3)
    assert list(pd.read_csv(five)["text"]) == ["a", "b", "c"] and list(pd.read_csv(three)["text"]) == ["d"]
    out = capsys.readouterr().out
    assert f"{five.name} written" in out and "4 of 4 rows" in out
    st.score(("paper",), n_null=10)
    assert "nothing to score" in capsys.readouterr().out
