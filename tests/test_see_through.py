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
    assert list(STATISTICS) == ["sum", "lr", "lr-mix", "lr-lineup", "hc", "entropy"]
    assert statistic("lr-lineup").needs_lineup and not statistic("lr-mix").needs_lineup
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
        assert pct_ci(r["tpr"], *st.bounds(r, "tpr")) in text
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


def test_kept_cells_come_back_byte_for_byte_and_only_the_asked_schemes(tmp_path) -> None:
    """``keep`` then ``restore`` (a scoring resumed on another machine): the chosen schemes' finished cell
    files come back unchanged, the others' are not kept, and a file already in place is not overwritten."""
    from wash.experiments import see_through as st

    rows, pending = tmp_path / "rows", tmp_path / "pending"
    rows.mkdir()
    names = {"paper-its-edit-n5-smollm2.csv": "a,b\n1,2\n",
             "paper-its-edit_permutation-shared-n5-smollm2.csv": "a,b\n3,4\n",
             "anchor-its-edit_permutation-shared-n3-smollm2.csv": "a,b\n5,6\n",
             "paper-kgw-n5-gemma3.csv": "a,b\n7,8\n"}
    for name, text in names.items():
        (rows / name).write_text(text)
    kept = st.keep(("its-edit", "its-edit:permutation=shared"), ("anchor",), rows, pending)
    assert [k.name for k in kept] == ["anchor-its-edit_permutation-shared-n3-smollm2.csv.gz"]
    kept = st.keep(("its-edit",), ("paper", "anchor"), rows, pending)
    assert [k.name for k in kept] == ["paper-its-edit-n5-smollm2.csv.gz"]
    fresh = tmp_path / "fresh"
    assert sorted(p.name for p in st.restore(fresh, pending)) == [
        "anchor-its-edit_permutation-shared-n3-smollm2.csv", "paper-its-edit-n5-smollm2.csv"]
    for path in fresh.iterdir():
        assert path.read_bytes() == (rows / path.name).read_bytes()
    (fresh / "paper-its-edit-n5-smollm2.csv").write_text("newer\n")
    assert st.restore(fresh, pending) == []
    assert (fresh / "paper-its-edit-n5-smollm2.csv").read_text() == "newer\n"


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
                             "provider_key": 1, "text_id": text_id, "keys": "slot", "committed_p": p,
                             "statistic": "lr", "cut": cut, "full": full, "length": 200, "value": 1.0, "p": p,
                             "tokens_scored": cut, "null_scores": 1000})
    (tmp_path / "rows").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "rows" / "paper-newscheme.csv", index=False)
    table = add_schemes(tmp_path / "rows", out, added={"command": "test"})
    cells = pd.read_csv(out / "see_through_cells.csv")
    assert set(cells["scheme"]) == set(before["see_through_cells.csv"]["scheme"]) | {"newscheme"}
    kept = cells[cells["scheme"] != "newscheme"].reset_index(drop=True)
    old = before["see_through_cells.csv"]
    pd.testing.assert_frame_equal(kept[list(old.columns)], old)  # columns added later stay empty there
    assert cells.loc[cells["scheme"] == "newscheme", ["fisher_tpr", "fisher_fpr"]].notna().all().all()
    new = table[table["scheme"] == "newscheme"].set_index("n")
    assert list(new.index) == [1, 3] and (new["positives"] == 10).all() and (new["negatives"] == 10).all()
    meta = json.loads((out / "see_through_run.json").read_text())
    assert meta["added"][-1] == {"command": "test", "schemes": ["newscheme"], "replaced": []}
    committed = pd.read_csv(out / "see_through_rows.csv.gz")  # the new scheme's rows join the committed ones
    assert (committed["scheme"] == "newscheme").sum() == 40
    assert len(committed) == len(pd.read_csv("results/see-through/see_through_rows.csv.gz")) + 40


def _scored_rows(rng: np.random.Generator, cells: int = 2) -> pd.DataFrame:
    """Long records as ``score`` writes them: 6 prompts x 2 texts, 3 providers each, negatives under both
    key kinds, every cut and the whole text."""
    from wash.experiments.see_through import CUTS

    rows = []
    for n in range(3, 3 + cells):
        for text_id in range(24):
            role = "positive" if text_id < 12 else "negative"
            for provider in range(3):
                for kind in (("slot",) if role == "positive" else ("slot", "fresh")):
                    base = rng.random() * (0.2 if role == "positive" else 1.0)
                    for cut, full in [*((c, False) for c in CUTS), (180, True)]:
                        p = min(1.0, base * (200 / min(cut, 180)) ** 0.5)
                        rows.append({"source": "paper", "scheme": "kgw", "n": n, "mode": "wash", "role": role,
                                     "prompt_id": f"q{text_id // 2}", "provider": provider,
                                     "provider_model": "smollm2", "provider_key": 10 + provider,
                                     "text_id": text_id, "keys": kind, "committed_p": base, "statistic": "lr",
                                     "cut": cut, "full": full, "length": 180, "value": 1.0, "p": p,
                                     "tokens_scored": min(cut, 180), "null_scores": 1000})
    return pd.DataFrame(rows)


def test_compact_rows_expand_to_what_the_tables_read() -> None:
    from wash.experiments.see_through_summary import cell_table, compact, expand, token_tables

    rows = _scored_rows(np.random.default_rng(1))
    lines = compact(rows)
    assert len(lines) == len(rows) // 9  # one line per (text, provider, statistic, key kind), p at 8 cuts
    back = expand(lines)
    pd.testing.assert_frame_equal(cell_table(back), cell_table(rows))
    for mine, theirs in zip(token_tables(back), token_tables(rows)):
        pd.testing.assert_frame_equal(mine, theirs)


def test_the_committed_rows_recompute_the_committed_tables(tmp_path) -> None:
    """``summarize --committed``: every committed cell whose rows are committed comes out of those rows,
    value for value as the tables print them, with no cell file and no model. (Cells scored before the rows
    were kept, the Edit schemes', stay as first committed: the page names them.)"""
    import shutil

    from wash.experiments.see_through_summary import ROWS_FILE, TABLES, summarize

    shutil.copytree("results/see-through", tmp_path / "st")
    summarize(None, tmp_path / "st")
    rows = pd.read_csv(Path("results/see-through", ROWS_FILE), usecols=["source", "scheme"]).drop_duplicates()
    pairs = set(zip(rows["source"], rows["scheme"]))
    assert len(pairs) >= 10
    for name in TABLES:
        old = pd.read_csv(Path("results/see-through", name))
        old = old[[pair in pairs for pair in zip(old["source"], old["scheme"])]]
        new = pd.read_csv(tmp_path / "st" / name)
        key = [c for c in ("source", "scheme", "n", "statistic") if c in old]
        sort = lambda t: t.sort_values(key).reset_index(drop=True)[list(old.columns)]
        pd.testing.assert_frame_equal(sort(new), sort(old), check_dtype=False, obj=name)


def test_the_check_fpr_reads_the_negatives_under_keys_of_their_own() -> None:
    from wash.experiments.see_through_summary import cell_table

    rows = _scored_rows(np.random.default_rng(2), cells=1)
    full = rows[rows["full"]]
    fresh = full[(full["role"] == "negative") & (full["keys"] == "fresh")]
    slot = full[(full["role"] == "negative") & (full["keys"] == "slot")]
    t = cell_table(rows).iloc[0]
    assert t["check_keys"] == "fresh" and t["negatives"] == len(fresh) == 36
    assert t["fpr"] == (fresh["p"] < 0.05).mean() and t["fpr_slot"] == (slot["p"] < 0.05).mean()
    assert t["positives"] == 36 and t["texts"] == 12 and t["providers_scored"] == 3
    # a bootstrap over 6 prompts, not over 36 rows: at least as wide as Wilson's here
    assert t["tpr_boot_lo"] <= t["tpr"] <= t["tpr_boot_hi"]


def test_each_negative_and_slot_has_a_check_key_of_its_own() -> None:
    from wash.detection.key_null import KEY_FLOOR
    from wash.experiments.see_through import check_key

    rows = [pd.Series({"source": "paper", "scheme": "kgw", "n": 5, "text_id": t, "provider": k})
            for t in range(40) for k in range(5)]
    keys = [check_key(r) for r in rows]
    assert len(set(keys)) == len(keys) and min(keys) >= KEY_FLOOR
    assert check_key(rows[7]) == keys[7]  # seeded: the same row, the same key


def test_tokens_for_80_has_a_prompt_bootstrap_interval_and_an_exponent_only_over_three_n() -> None:
    from wash.experiments.see_through_summary import token_tables, tokens_interval

    cuts = np.array([10.0, 20.0, 40.0, 80.0])
    rng = np.random.default_rng(5)
    # 40 prompts, one row each: reach 80% between 20 and 40 tokens
    flags = np.stack([rng.random(40) < q for q in (0.3, 0.6, 0.9, 0.97)], axis=1).astype(float)
    lo, hi = tokens_interval(flags, np.arange(40), cuts)
    assert 20 <= lo <= hi <= 80
    never = np.zeros((40, 4))
    assert all(np.isnan(v) for v in tokens_interval(never, np.arange(40), cuts))
    rows = _scored_rows(np.random.default_rng(3), cells=2)
    toks, exps = token_tables(rows)
    assert {"tokens_lo", "tokens_hi"} <= set(toks.columns)
    assert exps["exponent"].isna().all()  # two N reach 80%: no exponent without a standard error


def test_the_page_lists_every_check_fpr_interval_that_misses_five_percent() -> None:
    from wash.reporting import see_through as st

    def cell(scheme, fpr, lo, hi):
        return {"source": "paper", "n": 5, "scheme": scheme, "statistic": "sum", "fpr": fpr, "fpr_lo": lo,
                "fpr_hi": hi, "fpr_boot_lo": lo, "fpr_boot_hi": hi}

    t = pd.DataFrame([cell("kgw", 0.019, 0.007, 0.048), cell("aar", 0.05, 0.03, 0.08),
                      cell("synthid", 0.093, 0.055, 0.152)])
    assert st.fpr_misses(t) == ["KGW tpr-paper N = 5, own sum: 2% [1, 5] (below)",
                                "SynthID tpr-paper N = 5, own sum: 9% [6, 15] (above)"]
    assert st.misses_paragraph(t).startswith("2 of the 3 check-FPR intervals exclude 5%")
    assert st.misses_paragraph(t.iloc[[1]]) == "Every one of the 1 check-FPR intervals contains 5%."


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

    subs = {("paper", "kgw", 5): pd.DataFrame({"text": ["a", "b", "c"], "role": ["negative"] * 3,
                                               "provider_model": ["smollm2", "smollm2", "gemma3"]}),
            ("paper", "kgw", 3): pd.DataFrame({"text": ["d"], "role": ["positive"], "provider_model": ["smollm2"]})}
    monkeypatch.setattr(st, "ROWS", tmp_path)
    monkeypatch.setattr(st, "cells", lambda *a, **k: ((s, sc, n, sub) for (s, sc, n), sub in subs.items()))
    monkeypatch.setattr(st, "_score_one", lambda item: [{"text": item[1]["text"], "p": 0.5}])
    st.score(("paper",), n_null=10)
    five, three = st.cell_path("paper", "kgw", 5, model="smollm2"), st.cell_path("paper", "kgw", 3, model="smollm2")
    assert list(pd.read_csv(five)["text"]) == ["a", "b"] and list(pd.read_csv(three)["text"]) == ["d"]
    assert list(pd.read_csv(st.cell_path("paper", "kgw", 5, model="gemma3"))["text"]) == ["c"]
    assert five.name == "paper-kgw-n5-smollm2.csv"  # each base model's providers: a file of their own
    out = capsys.readouterr().out
    assert f"{five.name} written" in out and "4 of 4 rows" in out
    st.score(("paper",), n_null=10)
    assert "nothing to score" in capsys.readouterr().out


# -- the line-up-aware ratio (lr-lineup) -------------------------------------------------------------
#: Keyed specs the line-up-aware ratio is calibrated on: a green list, a point-mass race and the Edit picks.
LINEUP_CALIBRATED = ["kgw", "aar", "exp-edit:keylen=105"]


def _read_by(lm, text: str):
    from wash.detection.statistics.lineup import ReadBy
    from wash.engine.vocab import model_vocab

    return ReadBy(read_ids(LocalMember(lm), lm.encode(text)), model_vocab(lm).token_bytes)


def test_lineup_terms_reduce_to_lr_mix_and_the_point_mass_shortcut_holds_with_q() -> None:
    """r = 1 gives lr-mix's term; with r (zeros included) the Edit null's shortcut still equals summing the
    terms directly, a token the alternative cannot give (rho = 0 where r = 0) included."""
    from wash.detection.statistics import tests as st_tests

    rng = np.random.default_rng(11)
    T = 50
    rho = rng.exponential(1.0, (4, T))
    np.testing.assert_allclose(st_tests.glr_terms(rho, np.ones(T)), st_tests.glr_terms(rho), rtol=0,
                               atol=1e-15)
    assert (st_tests.glr_terms(rho, rng.random(T))[..., 0] == 0).all()  # w = 0: no evidence either way
    ratio = 1.0 / rng.uniform(0.05, 1.0, T)
    live = rng.random(T) < 0.8
    r = rng.uniform(0.0, 3.0, T)
    r[::7] = 0.0
    wins = rng.random((6, 3, T)) < 1.0 / ratio
    wins[0, 0] = True
    cuts = np.array([0, 5, 17, 30, 50])
    want = st_tests.log_ratio_sums(np.where(live, np.where(wins, ratio, 0.0), 1.0), cuts, r)
    got = st_tests.point_mass_sums(wins, ratio, live, cuts, r)
    assert np.isneginf(got[..., 1:]).any() and np.isfinite(got[0, 0, :, 1:]).all()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_lineup_slot_law_aligns_on_bytes(tiny_smollm2, tiny_gemma3) -> None:
    """q_j at a SmolLM2 token is Gemma 3's served probability of its tokens spanning exactly those bytes
    (a product over them), NaN where a Gemma token crosses a boundary; a model against itself gives p."""
    from wash.detection.statistics.lineup import byte_spans, slot_law

    text = TEXT + " Thereafter, the naïve keeper's 都 lamp glowed\n\nuntil dawn."
    small, gem = _read_by(tiny_smollm2, text), _read_by(tiny_gemma3, text)
    p = small.served.observed_probs()
    own = slot_law(small, small)
    np.testing.assert_array_equal(own[small.served.has_law], p[small.served.has_law])
    q = slot_law(small, gem)
    s_start, s_end, s_text = byte_spans(small.served.ids, small.token_bytes)
    g_start, g_end, g_text = byte_spans(gem.served.ids, gem.token_bytes)
    assert s_text == g_text == text.encode("utf-8")
    g_p = gem.served.observed_probs()
    for t in range(len(s_start)):  # brute force: gemma tokens whose spans tile [start, end) exactly
        inside = [s for s in range(len(g_start)) if s_start[t] <= g_start[s] and g_end[s] <= s_end[t]]
        tiles = bool(inside) and g_start[inside[0]] == s_start[t] and g_end[inside[-1]] == s_end[t]
        if tiles and gem.served.has_law[inside].all():
            assert q[t] == pytest.approx(float(np.prod(g_p[inside])), rel=1e-9, abs=1e-300), t
        else:
            assert np.isnan(q[t]), t
    aligned = np.isfinite(q)
    assert 0.5 < aligned.mean() < 1.0, aligned.mean()  # most tokens cut alike, some not ("Thereafter", 都)


def test_lineup_of_one_base_model_is_lr_mix(tiny_smollm2) -> None:
    """Every slot on the provider's own base model: q = p, so lr-lineup's value is lr-mix's and its p (the
    same key simulation, the same draws) is lr-mix's p, through the product's entry point too."""
    from wash.detection import detect_text
    from wash.detection.statistics.lineup import read_lineup
    from wash.engine.providers import build_providers
    from wash.engine.settings import ProviderSpec

    member = LocalMember(tiny_smollm2)
    ratio = read_lineup(member, TEXT, [member, member])
    assert (ratio.r == 1.0).all() and ratio.same_model == 2 and ratio.matched == ratio.fallback == 0
    ids = tiny_smollm2.encode(TEXT)
    served = read_ids(member, ids)
    for spec in ("kgw", "aar", "synthid", "exp-edit:keylen=64", "waterbag"):
        got = score_ids(_scheme(spec, 31, tiny_smollm2.vocab_size), ids, ["lr-mix", "lr-lineup"], served,
                        cuts=[20, 60, len(ids)], n_null=200, lineup=ratio)
        np.testing.assert_allclose(got["lr-lineup"].value, got["lr-mix"].value, rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(got["lr-lineup"].p, got["lr-mix"].p)
    specs = [ProviderSpec.parse(f"tiny-smollm2:kgw:{k}") for k in (5, 6, 7)]
    providers = build_providers(specs, backend="local").providers
    mix = detect_text(providers, TEXT, statistic="lr-mix")
    lineup = detect_text(providers, TEXT, statistic="lr-lineup")
    assert [d.p for d in lineup] == [d.p for d in mix]


def test_lineup_refuses_a_member_that_cannot_reread_a_text(tiny_smollm2, tiny_gemma3) -> None:
    """A slot's member without ``position_logits`` is refused in one line naming it, before any forward;
    score_ids without a line-up says what lr-lineup needs."""
    from wash.core.errors import WashInputError
    from wash.detection import statistics
    from wash.engine.providers import build_providers
    from wash.engine.settings import ProviderSpec

    class NextTokenOnly(LocalMember):
        capabilities = frozenset()
        backend = "next-token-only"

    [provider] = build_providers([ProviderSpec.parse("tiny-smollm2:kgw:1")], backend="local").providers
    text = " a text no cache has read, for the line-up capability test"
    with pytest.raises(WashInputError, match=r"^the line-up-aware ratio 'lr-lineup' needs 'position_logits', "
                                             r"which model 'tiny-gemma3' on backend 'next-token-only' "
                                             r"does not give$"):
        statistics.detect_with(provider, text, "lr-lineup", lineup=[NextTokenOnly(tiny_gemma3)])
    from wash.detection.statistics.served_text import _MEMORY

    assert not any(key[2] == text for key in _MEMORY)  # refused before the provider's own forward
    ids = tiny_smollm2.encode(text)
    with pytest.raises(ValueError, match="needs the line-up's other base models"):
        score_ids(provider.scheme, ids, ["lr-lineup"], read_ids(LocalMember(tiny_smollm2), ids))


@pytest.fixture(scope="module")
def lineup_null_text(smollm2, gemma3):
    """The calibration text (real SmolLM2 held-out negative, its first CAL_TOKENS tokens) as SmolLM2 and the
    real Gemma 3 re-read it, and its line-up ratio with two other slots, both on Gemma 3: q is Gemma's law
    wherever the tokenizers cut alike (the hardest case: no slot shares the provider's model)."""
    from wash.detection.statistics.lineup import lineup_ratio

    ids = smollm2.encode(_committed("negative", "unwatermarked", "kgw", 1, 1)[0])[:CAL_TOKENS]
    text = smollm2.tokenizer.decode(ids)
    own, other = _read_by(smollm2, text), _read_by(gemma3, text)
    ratio = lineup_ratio(own, [other, other])
    return own.served, ratio


@pytest.mark.parametrize("spec", LINEUP_CALIBRATED)
def test_lineup_null_is_uniform_over_keys_on_real_text(spec: str, lineup_null_text, smollm2) -> None:
    """lr-lineup's p on one real unwatermarked text under 200 real keys: P(p <= a) within 3 sd of a, as for
    the other statistics (its null is the same key simulation; r does not depend on the key)."""
    served, ratio = lineup_null_text
    assert ratio.matched > ratio.fallback > 0 and ratio.r.min() > 0 and ratio.r.std() > 0.1
    scores = [score_ids(_scheme(spec, 900_001 + k, smollm2.vocab_size), served.ids, ["lr-lineup"], served,
                        n_null=_n_null(spec), lineup=ratio)["lr-lineup"] for k in range(KEYS)]
    ps = np.array([s.p[-1] for s in scores])
    for a in (0.05, 0.1, 0.25):
        rate = float(np.mean(ps <= a))
        tol = 3 * np.sqrt(a * (1 - a) / KEYS) + 1.0 / (_n_null(spec) + 1)
        print(f"lr-lineup {spec}: P(p <= {a}) = {rate:.3f}")
        assert a - tol <= rate <= a + tol, (spec, a, rate)


# -- the text-level decision: Fisher beside Bonferroni ----------------------------------------------
def test_fisher_is_scipys_combination_per_text_and_flags_where_bonferroni_does_not() -> None:
    from scipy import stats

    from wash.experiments.see_through_summary import _any_provider, _any_provider_fisher, fisher_p

    known = [0.02, 0.03, 0.04, 0.2, 0.5]  # no p below 0.05 / 5, yet jointly strong
    assert fisher_p(np.array(known)) == stats.combine_pvalues(known, method="fisher").pvalue
    assert fisher_p(np.array([np.nan, 0.3])) == pytest.approx(0.3) and fisher_p(np.array([])) == 1.0
    rows = pd.DataFrame({"text_id": [0] * 5 + [1] * 3 + [2] * 2,
                         "p": known + [0.005, 0.9, 0.9] + [0.6, 0.7]})
    fisher, bonferroni = _any_provider_fisher(rows), _any_provider(rows)
    want = {t: stats.combine_pvalues(g["p"], method="fisher").pvalue < 0.05
            for t, g in rows.groupby("text_id")}
    assert fisher.to_dict() == want
    assert fisher[0] and not bonferroni[0]  # Fisher flags the text Bonferroni misses
    assert bonferroni[1] and not fisher[1]  # and the reverse: one strong p among two nulls
    assert not fisher[2] and not bonferroni[2]


def test_fisher_holds_the_fpr_on_independent_nulls() -> None:
    from wash.experiments.see_through_summary import _any_provider_fisher

    rng = np.random.default_rng(4)
    texts, m = 4000, 5
    rows = pd.DataFrame({"text_id": np.repeat(np.arange(texts), m), "p": rng.random(texts * m)})
    rate = float(_any_provider_fisher(rows).mean())
    assert abs(rate - 0.05) <= 3 * np.sqrt(0.05 * 0.95 / texts), rate


def test_the_cell_table_reports_both_decisions_over_the_scored_providers() -> None:
    from wash.experiments.see_through_summary import cell_table

    rows = []
    for text_id, (role, ps) in enumerate([("positive", [0.02, 0.03, 0.04]), ("positive", [0.001, 0.5, 0.6]),
                                          ("negative", [0.5, 0.6, 0.7]), ("negative", [0.3, 0.04, 0.9])]):
        for k, p in enumerate(ps):
            rows.append({"source": "paper", "scheme": "kgw", "n": 5, "statistic": "lr-lineup", "role": role,
                         "text_id": text_id, "prompt_id": f"q{text_id}", "provider": k, "full": True, "p": p,
                         "null_scores": 1000})
    t = cell_table(pd.DataFrame(rows)).iloc[0]
    assert t["providers_scored"] == 3
    assert t["any_tpr"] == 0.5 and t["fisher_tpr"] == 1.0  # 0.02, 0.03, 0.04: Fisher only
    assert t["any_fpr"] == 0.0 and t["fisher_fpr"] == 0.0


def test_score_row_reads_the_lineup_from_the_stored_forwards(tmp_path, monkeypatch, tiny_smollm2,
                                                              tiny_gemma3) -> None:
    """The experiment's lr-lineup path: ``forwards`` lists every line-up model's read of a text, and
    ``score_row`` scores from the stored reads alone, with where q came from in its records."""
    from wash.detection import stored_text, text_key
    from wash.detection.statistics.served_text import read_text
    from wash.experiments import see_through as st

    monkeypatch.setattr(st, "SERVED", tmp_path)
    line = "tiny-smollm2:kgw:11|tiny-gemma3:kgw:12|tiny-smollm2:kgw:13"
    row = pd.Series({"source": "paper", "scheme": "kgw", "n": 3, "mode": "wash", "role": "positive",
                     "prompt_id": "p0", "provider": 2, "provider_model": "tiny-smollm2", "provider_key": 13,
                     "text_id": 0, "p": 0.5, "text": TEXT, "providers": line, "spec": "tiny-smollm2:kgw:13"})
    sub = pd.DataFrame([row])
    assert st.forwards(sub) == [("tiny-smollm2", TEXT)]
    assert st.forwards(sub, lineup=True) == [("tiny-smollm2", TEXT), ("tiny-gemma3", TEXT)]
    assert not st._read_already(sub, lineup=True)
    for lm in (tiny_smollm2, tiny_gemma3):  # stored as ``read`` stores them (the memory cache may hold them)
        path = tmp_path / f"{text_key(lm.name, st.PROFILE, TEXT)}.npz"
        read_text(LocalMember(lm), TEXT, st.PROFILE).to_npz(path)
    assert st._read_already(sub, lineup=True)
    recs = st.score_row(row, n_null=50, statistics=("lr-lineup",))
    assert {r["statistic"] for r in recs} == {"lr-lineup"} and len(recs) == len(st.CUTS) + 1
    whole = recs[-1]
    assert whole["full"] and 0 < whole["p"] <= 1 and whole["null_scores"] == 50
    assert whole["q_slots"] == 2 and whole["q_same_model"] == 1
    own = stored_text("tiny-smollm2", TEXT, st.PROFILE, tmp_path)
    served_tokens = int((own.observed_probs() > 0).sum())
    assert whole["q_matched"] + whole["q_fallback"] == served_tokens  # one slot on another model
    assert st.cell_path("paper", "kgw", 3, ("lr-lineup",)).name == "paper-kgw-n3-lr-lineup.csv"


def test_the_page_sets_the_lineup_ratio_beside_the_own_model_ratio_cell_by_cell() -> None:
    from wash.reporting import see_through as st

    def cell(scheme, stat, tpr, lo, hi):
        return {"source": "paper", "n": 5, "scheme": scheme, "statistic": stat, "tpr": tpr, "tpr_lo": lo,
                "tpr_hi": hi, "fpr": 0.05, "fpr_lo": 0.03, "fpr_hi": 0.08}

    t = pd.DataFrame([cell("kgw", "lr-mix", 0.5, 0.4, 0.6), cell("kgw", "lr-lineup", 0.8, 0.7, 0.9),
                      cell("aar", "lr-mix", 0.86, 0.77, 0.91), cell("aar", "lr-lineup", 0.88, 0.8, 0.93),
                      cell("unigram", "lr-mix", 0.3, 0.2, 0.4)])
    text = st.lineup_paragraph(t)
    assert "KGW tpr-paper N = 5: 50% [40, 60] → 80% [70, 90]" in text and "Unigram" not in text
    assert text.endswith("The intervals separate for KGW at N = 5 (line-up ratio higher).")
    assert "No pair of intervals separates" in st.lineup_paragraph(t[t["scheme"] == "aar"])
    assert st.lineup_paragraph(t[t["statistic"] == "lr-mix"]) == ""


# -- the committed rows: the null at realistic length and the power at N = 3 and 5 ---------------------------
@pytest.fixture(scope="module")
def committed_whole_texts() -> pd.DataFrame:
    from wash.experiments.see_through_summary import ROWS_FILE

    return pd.read_csv(Path("results/see-through", ROWS_FILE),
                       usecols=["source", "scheme", "n", "role", "keys", "statistic", "p", "length"])


def _band(m: int, rate: float = 0.05) -> tuple[float, float]:
    """The 99.9% binomial band of a flagged share of m independent trials at ``rate``."""
    from scipy import stats

    lo, hi = stats.binom.interval(0.999, m, rate)
    return lo / m, hi / m


@pytest.mark.parametrize("stat", ["sum", "lr", "lr-mix", "lr-lineup"])
def test_the_check_fpr_on_committed_negatives_holds_and_a_doubled_fpr_fails(stat, committed_whole_texts) -> None:
    """The held-out negatives of the paper line-up (unwatermarked WASH texts of the real models, about 200
    tokens), each under a key of its own, pooled over the schemes per N: flagged at p < 0.05 within the
    99.9% binomial band of 5%, a band that excludes 10%. Given a text, the keys are independent, so the
    (text, slot) trials are; ``lr``'s atom at w = 0 makes it conservative, so only its upper side holds."""
    t = committed_whole_texts
    neg = t[(t["source"] == "paper") & (t["role"] == "negative") & (t["keys"] == "fresh") & (t["statistic"] == stat)]
    assert neg["n"].nunique() >= 2 and neg["length"].median() >= 150
    for n, g in neg.groupby("n"):
        rate, (lo, hi) = float((g["p"] < 0.05).mean()), _band(len(g))
        print(f"{stat} N = {n}: {rate:.3%} of {len(g)} (band {lo:.2%} to {hi:.2%})")
        assert hi < 0.10 and rate <= hi, (stat, n, rate)
        if stat != "lr":
            assert rate >= lo, (stat, n, rate)


@pytest.mark.parametrize("n", [3, 5])
def test_the_ratio_has_power_at_n_3_and_5_on_committed_texts(n, committed_whole_texts) -> None:
    """Pooled over the paper line-up's schemes, the own-model ratio flags the providers' texts at N = 3 and
    N = 5 far above the null band's top, and at least as often as the schemes' own sums."""
    t = committed_whole_texts
    pos = t[(t["source"] == "paper") & (t["role"] == "positive") & (t["n"] == n)]
    mix = pos[pos["statistic"] == "lr-mix"]
    own = pos[(pos["statistic"] == "sum") & pos["scheme"].isin(set(mix["scheme"]))]
    tpr_mix, tpr_own = float((mix["p"] < 0.05).mean()), float((own["p"] < 0.05).mean())
    print(f"N = {n}: lr-mix {tpr_mix:.1%} of {len(mix)}, sum {tpr_own:.1%} of {len(own)}")
    assert len(mix) >= 300 and tpr_mix > 2 * _band(len(mix))[1]
    assert tpr_mix >= tpr_own


# -- how much text a provider needs (the long texts) ---------------------------------------------------
def _long_rows(rng: np.random.Generator) -> pd.DataFrame:
    """Long records of a ``long`` source: 8 prompts, one 800-token positive and one negative each, 2
    providers; a positive's p falls with length, so TPR rises along the cuts."""
    from wash.experiments.see_through import cuts_of

    rows = []
    for text_id in range(16):
        role = "positive" if text_id < 8 else "negative"
        for provider in range(2):
            for kind in (("slot",) if role == "positive" else ("slot", "fresh")):
                u = rng.random()
                for cut, full in [*((c, False) for c in cuts_of("long")), (800, True)]:
                    p = min(1.0, u * 10 / cut) if role == "positive" else u
                    rows.append({"source": "long", "scheme": "kgw", "n": 5, "mode": "wash", "role": role,
                                 "prompt_id": f"q{text_id % 8}", "provider": provider, "provider_model": "smollm2",
                                 "provider_key": 10 + provider, "text_id": text_id, "keys": kind,
                                 "committed_p": u, "statistic": "lr-mix", "cut": cut, "full": full,
                                 "length": 800, "value": 1.0, "p": p, "tokens_scored": cut, "null_scores": 1000})
    return pd.DataFrame(rows)


def test_the_length_table_reads_each_prefix_of_the_long_texts(tmp_path) -> None:
    from wash.experiments.see_through_summary import LENGTH_FILE, length_table, token_tables, write_length

    rows = _long_rows(np.random.default_rng(11))
    other = _scored_rows(np.random.default_rng(12), cells=1)  # a 200-token source: not in the length table
    t = length_table(pd.concat([rows, other], ignore_index=True))
    assert set(t["source"]) == {"long"} and list(t["cut"]) == [25, 50, 100, 150, 200, 300, 400, 600, 800]
    for r in t.itertuples():
        at = rows[(rows["cut"] == r.cut) & ~rows["full"]]
        pos = at[at["role"] == "positive"]
        fresh = at[(at["role"] == "negative") & (at["keys"] == "fresh")]
        assert r.tpr == (pos["p"] < 0.05).mean() and r.positives == 16
        assert r.fpr == (fresh["p"] < 0.05).mean() and r.negatives == 16 and r.check_keys == "fresh"
        assert r.tpr_boot_lo <= r.tpr <= r.tpr_boot_hi
    assert t["tpr"].is_monotonic_increasing and t["tpr"].iloc[0] < t["tpr"].iloc[-1]
    # the tokens table reads the same curve to 800 tokens
    toks, _ = token_tables(rows)
    assert toks["longest_cut"].iloc[0] == 800
    write_length(rows, tmp_path)
    assert (tmp_path / LENGTH_FILE).exists() and (tmp_path / "see_through_length.png").exists()
    empty = tmp_path / "none"
    empty.mkdir()
    assert write_length(other, empty).empty and not (empty / LENGTH_FILE).exists()


def test_the_length_section_quotes_its_table_and_says_where_80_is_not_reached() -> None:
    from wash.experiments.see_through_summary import length_table, token_tables
    from wash.reporting import see_through as st

    rows = _long_rows(np.random.default_rng(11))
    sums = rows.assign(statistic="sum", p=np.minimum(1.0, rows["p"] * 20))  # a weak sum: never 80%
    both = pd.concat([rows, sums], ignore_index=True)
    length, (tokens, _) = length_table(both), token_tables(both)
    data = {"length": length, "tokens": tokens}
    text = st.length_sentence(data, 5)
    ratio = tokens[tokens["statistic"] == "lr-mix"].iloc[0]
    own = tokens[tokens["statistic"] == "sum"].iloc[0]
    assert np.isnan(own["tokens_for_80"]) and not np.isnan(ratio["tokens_for_80"])
    assert f"KGW {st._tokens(own)} / {st._tokens(ratio)}" in text and f"> 800 ({own['tpr_at_longest']:.0%})" in text
    assert st.length_sentence(data, 3) == "" and st.length_sentence({"length": None, "tokens": tokens}) == ""
    table = st.length_rows(length, tokens)
    assert [r[2] for r in table] == ["own sum", "model-aware LR (mean over w)"]
    at400 = length[(length["statistic"] == "sum") & (length["cut"] == 400)].iloc[0]
    assert table[0][5] == st._cell(at400, "tpr")
    section = st.length_section(data)
    assert section[0] == f"## {st.LENGTH_TITLE}" and any("see_through_length.png" in ln for ln in section)


def test_the_detect_tab_prefers_the_long_texts_curve(tmp_path) -> None:
    from wash.reporting import see_through as st

    folder = tmp_path / st.FOLDER
    folder.mkdir()
    cols = ["source", "scheme", "statistic", "n", "tokens_for_80", "tpr_at_longest", "longest_cut", "tokens_lo",
            "tokens_hi"]
    pd.DataFrame([("paper", "kgw", "sum", 5, np.nan, 0.36, 200, np.nan, np.nan),
                  ("long", "kgw", "sum", 5, 520.0, 0.9, 800, 410.0, 700.0),
                  ("paper", "kgw", "sum", 3, 150.0, 0.83, 200, 110.0, np.nan)], columns=cols).to_csv(
        folder / st.TOKENS_FILE, index=False)
    assert st.tokens_needed("kgw", "sum", 5, 300, tmp_path) == (
        "80% TPR at N = 5 needs about 520 tokens [410, 700] (`sum`, tpr-long texts); this text has 300 tokens: "
        "about 220 more")
    assert st.tokens_needed("kgw", "sum", 4, 300, tmp_path) == (
        "N = 4 is not measured; at N = 3: 150 tokens [110, > 200] (tpr-paper), at N = 5: 520 tokens [410, 700] "
        "(tpr-long) (`sum`); this text has 300 tokens")
    assert st.tokens_needed("kgw", "hc", 5, 300, tmp_path).endswith("(tpr-long or tpr-paper texts)")


def test_results_tab_draws_tpr_against_length_once_the_long_texts_are_scored(tmp_path) -> None:
    import shutil

    from wash.experiments.see_through_summary import write_length
    from wash.reporting import see_through as st
    from wash.ui import results

    shutil.copytree("results/see-through", tmp_path / st.FOLDER)
    (tmp_path / st.FOLDER / st.LENGTH).unlink(missing_ok=True)
    assert "not scored yet" in results.see_through_length_figure(tmp_path).layout.annotations[0].text
    write_length(_long_rows(np.random.default_rng(11)), tmp_path / st.FOLDER)
    fig = results.see_through_length_figure(tmp_path)
    assert [t.name for t in fig.data] == ["KGW: model-aware LR (mean over w), N=5"]
    assert list(fig.data[0].x) == [25, 50, 100, 150, 200, 300, 400, 600, 800]
    assert fig.data[0].error_y.array is not None and fig.layout.xaxis.type == "log"
