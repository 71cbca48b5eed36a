"""The two headline tables of the committed results, beside the paper's reported values.

Pure pandas: the Results tab and the generated documents (``python -m wash report``)
both read the committed ``results/`` folders through these functions, so the page and
the app cannot show different numbers.

* :func:`detection_table` answers "is this text watermarked?": per scheme and setting,
  the share of texts a provider's own detector flags at a threshold that flags 5% of
  unwatermarked texts (``results/tpr-paper``), beside the paper's Table 2.
* :func:`identification_table` answers "is this model watermarked?": the calibrated
  Water-Probe verdict, its S interval and Water-Probe's own z
  (``results/identify-calibrated``), beside the paper's Table 1.

A cell the run has not reached stays missing (NaN), never filled in; a run whose meta
says ``jobs_done < jobs_total`` is flagged ``partial`` on every one of its rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from wash.watermarks import default_forms, form_params, paper_schemes

ROOT = Path(__file__).resolve().parents[2]
#: The committed results folder the tables are read from.
RESULTS_ROOT = ROOT / "results"

#: The folders the two headline tables come from.
DETECTION_FOLDER = "tpr-paper"
IDENTIFICATION_FOLDER = "identify-calibrated"
#: Every folder of each question, in the order of the comparison beside the paper: our forms with
#: independent keys (the headline's), the release's forms with independent keys, the release's
#: forms and line-up (one watermarked anchor). A folder not yet committed is left out.
DETECTION_FOLDERS = (DETECTION_FOLDER, "tpr-release-forms", "tpr-anchor")
IDENTIFICATION_FOLDERS = (IDENTIFICATION_FOLDER, "identify-release-forms", "identify-anchor")

#: The paper, as the project cites it (the paper does not ship with the project).
PAPER = ('Z. Wu, G. Gong, Q. Zhu, Y. Chen, R. Zhao, "Linear Ensembles Wash Away Watermarks: '
         'On the Fragility of Distributional Perturbations in LLMs"')

#: What each of the paper's tables measures (docs and the tab label their columns with these).
PAPER_TABLE1_MEASURES = ("model identification z: very probably Water-Probe's (Liu et al., ICLR 2025), "
                         "whose bands and settings it uses; the paper does not name the statistic")
PAPER_TABLE2_MEASURES = ("TPR at 5% FPR of each scheme's own per-text detector, the threshold calibrated "
                         "on unwatermarked text")

# --- The paper's reported values (facts copied as numbers; the paper's layout is not). ---

#: Table 2, TPR at 5% FPR in percent, per method and scheme (200 new tokens, Llama-3.1-8B family).
_TABLE2_PERCENT = {
    "watermarked": {"dipmark": 83.7, "kgw": 92.8, "aar": 95.9, "its-edit": 83.5, "exp-edit": 85.9},
    "de-mark": {"dipmark": 76.5, "kgw": 58.8},
    "toblend": {"dipmark": 28.2, "kgw": 38.4, "aar": 45.4, "its-edit": 21.4, "exp-edit": 11.2},
    "randomwalk": {"dipmark": 49.0, "kgw": 56.7, "aar": 24.2, "its-edit": 53.6, "exp-edit": 24.0},
    "wash N=5": {"dipmark": 27.6, "kgw": 38.9, "aar": 42.8, "its-edit": 16.2, "exp-edit": 11.3},
}

#: The routing ablation (the paper's Table 6): TPR at 5% FPR in percent, one number over its schemes.
PAPER_ABLATION_TPR_PERCENT = {"naive N=5": 41.3, "wash N=5": 33.3}

#: Table 1's columns: the schemes whose ``paper_columns`` place them there, in that order.
_T1_SCHEMES = paper_schemes(1)
#: Table 1, z per base model and method, in the order of ``_T1_SCHEMES`` (None: the paper's "---").
_TABLE1 = {
    "Llama3.1-8B": {
        "watermarked": (176.438, 58.127, 304.022, 50.113, 61.981, 10.237),
        "de-mark": (None, 99.281, None, 1.786, None, -10.687),
        "toblend": (3.636, 1.344, 0.489, 0.819, 0.482, -0.003),
        "wash N=3": (3.699, 1.477, 0.384, 0.634, -0.245, -0.109),
        "wash N=4": (3.082, 0.563, 0.408, 0.550, 0.372, 0.093),
        "wash N=5": (2.232, 0.182, 0.119, 0.372, -0.108, -0.111),
    },
    "Qwen3-8B": {
        "watermarked": (15.534, 14.210, 15.418, 34.547, 26.904, 5.245),
        "de-mark": (None, 4.560, None, 3.770, None, -8.452),
        "toblend": (1.941, 0.523, 0.464, 0.489, 0.175, -0.169),
        "wash N=3": (1.629, 0.236, 0.602, 0.058, 0.517, -0.205),
        "wash N=4": (1.286, 0.094, 0.068, 0.130, 0.200, 0.000),
        "wash N=5": (0.654, 0.189, 0.337, 0.222, 0.079, -2.570),
    },
    "Ministral3-8B": {
        "watermarked": (9.175, 23.135, 27.082, 27.407, 59.507, 9.568),
        "de-mark": (None, 91.174, None, -2.814, None, 0.729),
        "toblend": (1.204, 1.556, 0.711, 1.168, 0.623, 0.437),
        "wash N=3": (1.070, 0.059, 0.558, 1.732, 0.787, 0.775),
        "wash N=4": (1.901, 1.350, 1.363, 1.602, 0.630, -1.809),
        "wash N=5": (0.421, 0.141, 0.456, 0.461, 0.435, -0.382),
    },
}
#: The base model whose Table 1 value fills ``paper_z`` (the first of the paper's three);
#: ``paper_z_low`` / ``paper_z_high`` span all three.
PAPER_Z_MODEL = "Llama3.1-8B"


#: The paper's headline claims as numbers (its abstract and Sections 4.2-4.3): 3 models bring
#: z "below 2" and TPR at 5% FPR "below 50%"; WASH improves quality "by 27.5%" and runs
#: "6x" faster than the best baseline; ToBlend costs "~12x" one model, WASH "1.0x-2.4x".
PAPER_CLAIMS = {"z_below": 2.0, "tpr_below": 0.50, "quality_gain": 0.275, "speedup": 6.0,
                "toblend_cost": 12.0, "wash_cost_low": 1.0, "wash_cost_high": 2.4}


def paper_table2() -> pd.DataFrame:
    """The paper's Table 2 as rows ``method, scheme, tpr`` (a share, 0 to 1, like ours)."""
    rows = [{"method": m, "scheme": s, "tpr": v / 100} for m, cells in _TABLE2_PERCENT.items()
            for s, v in cells.items()]
    return pd.DataFrame(rows)


def paper_table1() -> pd.DataFrame:
    """The paper's Table 1 as rows ``base_model, method, scheme, z`` (its "---" cells left out)."""
    rows = [{"base_model": model, "method": method, "scheme": scheme, "z": z}
            for model, methods in _TABLE1.items() for method, values in methods.items()
            for scheme, z in zip(_T1_SCHEMES, values) if z is not None]
    return pd.DataFrame(rows)


def paper_tpr(scheme: str, method: str) -> float:
    """Table 2's TPR (a share) for ``method`` ("watermarked", "wash N=5", ...), NaN where it has none."""
    v = _TABLE2_PERCENT.get(method, {}).get(scheme)
    return math.nan if v is None else v / 100


def paper_z(scheme: str, method: str, base_model: str | None = PAPER_Z_MODEL) -> float:
    """Table 1's z for one base model, or (``base_model=None``) NaN; see :func:`paper_z_range`."""
    values = _TABLE1.get(base_model or "", {}).get(method)
    if values is None or scheme not in _T1_SCHEMES:
        return math.nan
    v = values[_T1_SCHEMES.index(scheme)]
    return math.nan if v is None else v


def paper_z_range(scheme: str, method: str) -> tuple[float, float]:
    """The lowest and highest of Table 1's z over its three base models (NaN, NaN where none)."""
    values = [paper_z(scheme, method, m) for m in _TABLE1]
    values = [v for v in values if not math.isnan(v)]
    return (min(values), max(values)) if values else (math.nan, math.nan)


# --- Forms and line-ups. ---

#: What a scheme with one form shows as its form. A scheme with several names its default
#: with its ``form_param`` (``registry.default_forms``): AAR and EXP-Edit serve the Gumbel
#: point mass (``form``; the WASH release serves a soft form), ITS-Edit one permutation per
#: key element (``permutation``).
NO_FORM = "—"
#: Every committed run gives each provider its own independent key.
DEFAULT_LINEUP = "independent"


def default_form(scheme: str) -> str:
    return default_forms().get(scheme, NO_FORM)


def scheme_and_form(token: str) -> tuple[str, str]:
    """An experiment's scheme token split into the scheme and its form: ``aar:form=soft`` ->
    ``("aar", "soft")``, ``kgw`` -> ``("kgw", "—")``; other parameters follow the form."""
    from wash.experiments import scheme_variant

    scheme, params = scheme_variant(token)
    # the parameters that name a form (``aar:form=soft``, ``its-edit:permutation=shared``)
    form = next((params.pop(k) for k in form_params() if k in params), default_form(scheme))
    extra = ", ".join(f"{k}={v}" for k, v in params.items())
    return scheme, form + (f" ({extra})" if extra else "")


def _column_or(frame: pd.DataFrame, column: str, fallback: pd.Series | str) -> pd.Series:
    if column in frame.columns:
        return frame[column].where(frame[column].notna(), fallback).astype(str)
    if isinstance(fallback, pd.Series):
        return fallback
    return pd.Series([fallback] * len(frame), index=frame.index, dtype=object)


# --- Run metadata. ---

@dataclass(frozen=True)
class RunInfo:
    """What a table says about the run it comes from (``*_meta.json``)."""
    folder: str
    experiment: str
    command: str
    date: str
    code: str
    engine: str
    profile: str
    jobs_done: int
    jobs_total: int
    lineup: str = DEFAULT_LINEUP

    @property
    def partial(self) -> bool:
        return self.jobs_done < self.jobs_total

    @property
    def jobs(self) -> str:
        """``"1912 of 2880 jobs"`` for a partial run, ``"650 jobs"`` for a finished one."""
        return f"{self.jobs_done} of {self.jobs_total} jobs" if self.partial else f"{self.jobs_total} jobs"


def run_info(folder: Path) -> RunInfo:
    """The :class:`RunInfo` of one results folder (its single ``*_meta.json``)."""
    metas = sorted(Path(folder).glob("*_meta.json"))
    if not metas:
        raise FileNotFoundError(f"no *_meta.json in {folder}")
    meta = json.loads(metas[0].read_text())
    total = int(meta.get("jobs_total", 0))
    profile = meta.get("profile") or {}
    return RunInfo(folder=Path(folder).name, experiment=meta.get("experiment", metas[0].stem[:-5]),
                   command=meta.get("command", ""), date=meta.get("date", ""),
                   code=meta.get("code", "not recorded"), engine=meta.get("engine", "not recorded"),
                   profile=profile.get("name", "open"), jobs_done=int(meta.get("jobs_done", total)),
                   jobs_total=total, lineup=meta.get("config", {}).get("lineup", DEFAULT_LINEUP))


def _source(root: Path, folder: str) -> str:
    return f"{Path(root).name}/{folder}"


def setting_label(mode: str, n: int) -> str:
    """``single``, ``WASH N=3``, ``naive N=5``, ``unwatermarked N=5``."""
    if mode == "single":
        return "single"
    return f"{'WASH' if mode == 'wash' else mode} N={int(n)}"


def _paper_method(mode: str, n: int) -> str:
    return "watermarked" if mode == "single" else f"{mode} N={int(n)}"


def _labels(s: pd.DataFrame, info: RunInfo) -> dict:
    """The columns both tables start with: scheme, its form, line-up, serving profile and setting."""
    split = [scheme_and_form(str(t)) for t in s["scheme"]]
    schemes = pd.Series([x[0] for x in split], index=s.index)
    return {"scheme": schemes, "form": _column_or(s, "form", pd.Series([x[1] for x in split], index=s.index)),
            "lineup": _column_or(s, "lineup", info.lineup), "profile": info.profile,
            "setting": [setting_label(m, n) for m, n in zip(s["mode"], s["n"])], "mode": s["mode"],
            "n": s["n"].astype(int)}


# --- The two tables. ---

DETECTION_COLUMNS = ["scheme", "form", "lineup", "profile", "setting", "mode", "n", "tpr", "tpr_low", "tpr_high",
                     "fpr_check", "fpr_check_low", "fpr_check_high", "texts", "negatives", "threshold", "null_scores",
                     "key_null", "tpr_any", "tpr_any_low", "tpr_any_high", "fpr_any_check", "fpr_any_check_low",
                     "fpr_any_check_high", "mean_z", "paper_tpr", "source", "partial", "jobs"]


def detection_table(root: Path = RESULTS_ROOT, folder_name: str = DETECTION_FOLDER) -> pd.DataFrame:
    """"Is this text watermarked?": one row per (scheme, setting) of ``tpr-paper``'s summary.

    ``tpr`` is the share of texts flagged (with its 95% interval over prompts);
    ``fpr_check`` the share of the held-out check half of unwatermarked texts flagged at
    the same threshold; ``texts`` the watermarked texts per cell and ``negatives`` the
    unwatermarked ones the threshold was fitted and checked on; ``null_scores`` the null
    scores the threshold is the 95% order statistic of (``key_null``: the calibration
    texts under many random keys, ``wash.detection.key_null``; else one score per
    calibration text and provider); ``tpr_any``/``fpr_any_check`` the "any provider
    flags" decision per text at a family-wise 5% (Simes over the providers' key-null p); ``paper_tpr`` the
    paper's Table 2 value for the same scheme and setting (NaN where it gives none).
    """
    folder = Path(root) / folder_name
    info = run_info(folder)
    s = pd.read_csv(folder / "tpr_summary.csv")
    labels = _labels(s, info)
    out = pd.DataFrame({
        **labels,
        "tpr": s["tpr"], "tpr_low": s["tpr_ci_low"], "tpr_high": s["tpr_ci_high"],
        "fpr_check": s["fpr_check"], "fpr_check_low": s["fpr_check_ci_low"],
        "fpr_check_high": s["fpr_check_ci_high"],
        "texts": s["n_pos"].astype(int),
        "negatives": (s["n_cal"] + s["n_check"]).astype(int),
        "threshold": s["threshold"],
        # how many null scores the threshold is an order statistic of, and whether they are the null over keys
        "null_scores": (s["n_null"] if "n_null" in s else s["n_cal"]).astype(int),
        "key_null": (s["calibration"].str.startswith("null over keys") if "calibration" in s
                     else pd.Series(False, index=s.index)),
        **{out: (s[col] if col in s else pd.Series(float("nan"), index=s.index)) for out, col in (
            ("tpr_any", "tpr_any"), ("tpr_any_low", "tpr_any_ci_low"), ("tpr_any_high", "tpr_any_ci_high"),
            ("fpr_any_check", "fpr_any_check"), ("fpr_any_check_low", "fpr_any_check_ci_low"),
            ("fpr_any_check_high", "fpr_any_check_ci_high"))},
        "mean_z": s["mean_z_pos"],
        "paper_tpr": [paper_tpr(sc, _paper_method(m, n)) for sc, m, n in zip(labels["scheme"], s["mode"], s["n"])],
        "source": _source(root, folder_name),
        "partial": info.partial,
        "jobs": info.jobs,
    })
    return out[DETECTION_COLUMNS]


IDENTIFICATION_COLUMNS = ["scheme", "form", "lineup", "profile", "setting", "mode", "n", "samples", "runs", "s",
                          "s_low", "s_high", "p", "p_holm", "holm_tests", "p_floor", "p_r3", "identified", "z_waterprobe", "band", "null_s_mean",
                          "null_s_sd", "null_runs", "contexts_scored", "paper_z", "paper_z_low", "paper_z_high",
                          "source", "partial", "jobs"]


def identification_table(root: Path = RESULTS_ROOT, folder_name: str = IDENTIFICATION_FOLDER) -> pd.DataFrame:
    """"Is this model watermarked?": one row per probed system of ``identify-calibrated``.

    ``p`` is the one-sided permutation p of the system's runs against the unwatermarked
    line-up's null runs, ``p_holm`` that p Holm-adjusted over the ``holm_tests`` systems of
    the folder sharing the null, and ``identified`` the verdict ``p_holm`` below
    ``wash.detection.thresholds.ALPHA_IDENTIFY`` (``wash.detection.identify_stats``); ``p_floor``
    the smallest p the test can give; ``p_r3`` the raw p of the first three runs; ``s_low``/``s_high`` S's 95% interval over
    contexts; ``z_waterprobe`` Water-Probe's own z over the first three runs, the number
    comparable with the paper's Table 1 (``paper_z``: its Llama-3.1-8B value;
    ``paper_z_low``/``paper_z_high``: the range over its three base models). The budget
    sweep's rows differ only in ``samples``.
    """
    folder = Path(root) / folder_name
    info = run_info(folder)
    s = pd.read_csv(folder / "identify_summary.csv")
    labels = _labels(s, info)
    methods = [_paper_method(m, n) for m, n in zip(s["mode"], s["n"])]
    ranges = [paper_z_range(sc, m) for sc, m in zip(labels["scheme"], methods)]
    out = pd.DataFrame({
        **labels,
        "samples": s["samples"].astype(int),
        "runs": s["runs"].astype(int),
        "s": s["s"], "s_low": s["s_low"], "s_high": s["s_high"],
        "p": s["p"], "p_holm": s["p_holm"], "holm_tests": s["holm_tests"].astype(int),
        "p_floor": s["p_floor"], "p_r3": s["p_r3"],
        "identified": s["identified"].astype(bool),
        "z_waterprobe": s["z"], "band": s["band"],
        "null_s_mean": s["null_s_mean"], "null_s_sd": s["null_s_sd"], "null_runs": s["null_runs"].astype(int),
        "contexts_scored": s["contexts_scored"].astype(int),
        "paper_z": [paper_z(sc, m) for sc, m in zip(labels["scheme"], methods)],
        "paper_z_low": [r[0] for r in ranges], "paper_z_high": [r[1] for r in ranges],
        "source": _source(root, folder_name),
        "partial": info.partial,
        "jobs": info.jobs,
    })
    return out[IDENTIFICATION_COLUMNS]


def detection_tables(root: Path = RESULTS_ROOT) -> pd.DataFrame:
    """:func:`detection_table` of every committed folder of ``DETECTION_FOLDERS``, stacked: the same
    scheme and setting under our forms, the release's forms and the release's line-up."""
    return _stacked(root, DETECTION_FOLDERS, detection_table, DETECTION_COLUMNS)


def identification_tables(root: Path = RESULTS_ROOT) -> pd.DataFrame:
    """:func:`identification_table` of every committed folder of ``IDENTIFICATION_FOLDERS``, stacked."""
    return _stacked(root, IDENTIFICATION_FOLDERS, identification_table, IDENTIFICATION_COLUMNS)


def _stacked(root: Path, folders, read, columns: list[str]) -> pd.DataFrame:
    parts = [read(root, f) for f in folders if any((Path(root) / f).glob("*_summary.csv"))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def unmeasured_schemes(root: Path = RESULTS_ROOT, folder: str = DETECTION_FOLDER) -> list[str]:
    """Schemes a run's plan (its meta's ``config.schemes``) names that its summary has no row for yet."""
    path = Path(root) / folder
    metas = sorted(path.glob("*_meta.json"))
    summaries = sorted(path.glob("*_summary.csv"))
    if not metas or not summaries:
        return []
    planned = json.loads(metas[0].read_text()).get("config", {}).get("schemes", [])
    have = set(pd.read_csv(summaries[0])["scheme"])
    return [s for s in planned if s not in have]


@dataclass(frozen=True)
class Exceedance:
    """How many unwatermarked (text, provider) scores of a run lie above a z line."""
    z: float
    above: int
    scores: int
    source: str

    @property
    def share(self) -> float:
        return self.above / self.scores if self.scores else math.nan


def null_exceedance(z: float, root: Path = RESULTS_ROOT, folder: str = DETECTION_FOLDER) -> Exceedance | None:
    """The share of a run's unwatermarked negatives (``role == "negative"``) whose own detector's z exceeds
    ``z``: the measured false-positive rate of the line ``z``. None where the run has no negatives."""
    path = Path(root) / folder
    # a Space build ships a runs CSV over the Hub's 10 MB limit gzip-compressed
    # (wash/publish/space.py): same rows
    runs = sorted(path.glob("*_runs.csv")) or sorted(path.glob("*_runs.csv.gz"))
    if not runs:
        return None
    frame = pd.read_csv(runs[0], usecols=lambda c: c in ("role", "z"))
    if "role" not in frame.columns:
        return None
    z_neg = frame.loc[frame["role"] == "negative", "z"].dropna()
    if z_neg.empty:
        return None
    return Exceedance(z=z, above=int((z_neg > z).sum()), scores=int(len(z_neg)), source=_source(root, folder))
