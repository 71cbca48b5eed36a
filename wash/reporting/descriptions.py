"""The fixed prose of each per-experiment page: what the experiment measures and how to read it.

No measured number is typed here: a template may only name the run's settings through
``{placeholders}`` filled from its meta (``{prompts}``, ``{tokens}``, ``{profile}``, ...),
and the page's tables and figure carry the numbers. ``tests/test_report_docs.py``
refuses a decimal number or a percentage in these templates.
"""

from __future__ import annotations

from wash.detection import PERMUTATION_RESAMPLES

#: Per experiment: what it measures (the paper's counterpart in parentheses).
EXPERIMENTS = {
    "decay": (
        "Per-text detection z against the number of providers N (the paper's Fig. 3a/3b). The providers "
        "hold independent keys; `fixed` serves them all from smollm2, `mixed` cycles smollm2 and gemma3; "
        "`mix` gives provider i the i-th scheme of a rotation, and `mix/SCHEME` keeps that scheme's "
        "providers only. Each row pools every (text, provider) detection, with a bootstrap interval over "
        "prompts. `mean_times_n` is mean z x N: flat when z falls like 1/N, which is what one provider's "
        "detector should see, since the average weights its perturbation 1/N. The paper predicts "
        "O(1/sqrt(N)) for the distance of the average from the unwatermarked law (the sum of N "
        "perturbations), not for one provider's own z."),
    "tpr": (
        "TPR at 5% FPR of each provider's own detector, the paper's Table 2. A threshold is fitted on "
        "unwatermarked texts of the same model set (held-out prompts, split in half by prompt: one half "
        "fits, the other checks, `fpr_check`, Clopper-Pearson interval): where `calibration` says "
        "\"null over keys\", on `n_null` scores of the fitting half's texts under random keys "
        "(`tpr_key_null.csv.gz`), else on their own scores. A cell's TPR is the share of texts flagged, "
        "averaged over the ensemble's providers, with a bootstrap interval over prompts (exact binomial "
        "where it is 0 or 1); `tpr_any` and `fpr_any_check` are the \"any provider flags\" decision per "
        "text with the family-wise FPR at the same level (Simes). `naive` averages without routing (the paper's routing "
        "ablation); `flagged` lists each provider's count."),
    "identify": (
        "Model identification with Water-Probe (Liu et al., ICLR 2025): is a served system watermarked at "
        "all, without a key? Two crafted prompts ask for list entries; after each answer prefix the next "
        "token is sampled under both, and every pair of prefixes scores the cosine of the rank-sign "
        "changes between the prompts. S is the mean over pairs. The paper's Table 1 very probably reports "
        "Water-Probe's z = (mean S - mu) / sd over three runs (the paper does not name its statistic). "
        "Runs with a `p` column are calibrated: each line-up is also probed without watermarks (the null); "
        "`p` is a one-sided two-sample permutation test of the system's runs against the null's runs, "
        "`p_holm` that p Holm-adjusted over the `holm_tests` systems of the run that share the null, and "
        "`identified` the verdict, `p_holm` below the identification level (`ALPHA_IDENTIFY`); "
        "older runs report Water-Probe's z alone, which is a t statistic with two degrees of freedom "
        "against a mean that is not our models' null."),
    "quality": (
        "Quality (the paper's Tables 3 and 6): perplexity of the same continuations under each "
        "unwatermarked base model, the share of a text's word 3-grams that repeat an earlier one "
        "(`words`), and arithmetic accuracy of the instruct model on the project's integer word problems "
        "(`exact integer`). `median` is over texts."),
    "entropy": (
        "When does averaging wash a watermark out? Each scheme's z at N = 1, 3, 5 over a grid of top-k and "
        "temperature, against the measured entropy (nats) of the served base distributions of the model "
        "that drew each token. `z_single_over_n` is the single provider's z divided by N: the 1/N law "
        "predicts `z` equals it."),
    "baselines": (
        "WASH beside the paper's baselines (its Tables 1, 2, 3 and 5): ToBlend, De-mark and RandomWalk run "
        "as generation modes on the same providers, prompts and detectors (docs/BASELINES.md). WASH and "
        "ToBlend use N providers with independent keys; the single model, De-mark and RandomWalk attack "
        "provider 1 alone. TPR negatives are unwatermarked texts of the same size and model set; `ppl` is "
        "the mean of the two unwatermarked models' perplexities; `cost_ratio` is seconds per text over the "
        "single model's in the same run."),
    "rules": (
        "Aggregation rules beyond the mean (`wash/engine/aggregation.py`, README \"Aggregation rules\"): each "
        "rule's provider z and perplexity per scheme. `beats_mean` says whether a rule's z is below the "
        "mean rule's, `beats_mean_every_scheme` whether it is for every scheme. A screen: few prompts, "
        "short texts, wide intervals; it says which rules to measure properly, not how well they work."),
    "routing": (
        "Fluency-aware routing per domain (the paper's Table 7): the share of generated tokens written by "
        "a routed span (a word only some providers can spell, finished by them) and the mean routed-span "
        "length, under WASH with mixed base models."),
    "coordinated": (
        "The control of the paper's Fig. 3c: the same providers with one shared key applied in the union "
        "vocabulary (`coordinated`) against independent keys (WASH) and provider 0 alone (`single`). A "
        "coordinated watermark adds up instead of cancelling, so it should survive the average."),
    "biased": (
        "A biased green list (the paper's Appendix C): one fixed list promoted by `bias`, every provider "
        "with the same coordinated key, so the bias is shared and survives averaging; quality is the "
        "continuation's perplexity under each unwatermarked model."),
    "cost": (
        "Latency and peak memory per token (the paper's Table 5), each variant in a fresh process: "
        "`single` is smollm2 alone (the reference of every ratio), `wash-par` keeps both models resident, "
        "`wash-seq` loads the weights from disk module by module for each forward, `reencode` is the "
        "no-KV-cache reference loop."),
    "presets": (
        "The app's presets run as the page runs them, over several seeds: the z range each preset's "
        "description quotes comes from here."),
    "tour": (
        "The app's presets clicked in headless Chromium (`python -m tools.preset_tour`): the z each page "
        "showed, per preset, condition and provider, to check that the page shows what `presets` measured."),
}

#: Per folder: what sets this run apart (appended to its experiment's text).
FOLDERS = {
    "tpr-paper": (
        "Served as the paper's release serves ({profile} profile), all of the plan's schemes. The "
        "positives are {prompts} prompts x {tokens} new tokens; the negatives come from the prompts the "
        "positives do not use, for each model set. A run stopped before its plan finished leaves schemes "
        "without rows: they are not measured yet, not zero."),
    "tpr-long": (
        "The long texts (`--preset long`): WASH only, {prompts} prompts x {tokens} new tokens, every text "
        "that many generated tokens (end of text masked until then), so that prefixes of one text set can be "
        "read at growing lengths; the negatives are unwatermarked texts of the same length on held-out prompts. "
        "How the detection grows with length, per statistic, is in docs/results/see-through.md. A run "
        "stopped before its plan finished leaves cells without rows: they are not measured yet."),
    "identify-calibrated": (
        "The calibrated run: mixed base models, each line-up's null probed many times at the same budget, "
        "serving and prompts with another seed. `p_r3` is the same test over the first three runs, as the "
        "paper runs three (raw, not adjusted); `p_floor` is the smallest p the test can give: 1 over the "
        "number of splits where every split is enumerated (three runs), else 1 over the "
        f"{PERMUTATION_RESAMPLES:,} random splits plus one (ten runs). The rows with fewer "
        "`samples` are a budget sweep of one system. Water-Probe's `z` and `band` stay for comparison with "
        "the paper only."),
    "decay-kgw-paper": (
        "KGW only, every provider on smollm2, served as the paper's release serves ({profile} profile): "
        "the 1/N law read off one scheme. Its single-provider texts are the same texts as `tpr-paper`'s "
        "(the shared generation store)."),
    "decay-kgw-open": (
        "KGW in both settings under open serving (no truncation)."),
    "decay-mix-paper": (
        "Every scheme mixed in one ensemble, base models alternating, served as the paper's release "
        "serves: each scheme has few texts per N, hence the wide intervals."),
    "entropy": (
        "{prompts} prompts x {tokens} new tokens per cell. The run predates the engine of the headline's "
        "runs; its law (the ratio of `z` to `z_single_over_n`) is what carries over, not its exact values."),
    "quality-paper": (
        "{prompts} prompts x {tokens} new tokens, N = {n} over smollm2 / gemma3, served as the paper's "
        "release serves; the single provider and the unwatermarked baseline are smollm2. One WASH text "
        "that stopped early with a made-up word drives KGW's WASH mean: read the medians."),
    "baselines-10x100": "{prompts} prompts x {tokens} new tokens, N = {n}, the arms {arms}.",
    "baselines-quick": "The quick preset, every arm including De-mark, whose probing costs hundreds of "
                       "queries per token.",
    "identify-v2-mixed": (
        "Water-Probe v2 with mixed base models, uncalibrated (Water-Probe's z is the verdict): superseded "
        "by `identify-calibrated`, kept for the schemes that run does not reach."),
    "identify-v2-smollm2": "Water-Probe v2 on smollm2 alone, uncalibrated: every Table 1 scheme seen alone "
                           "and under WASH.",
    "identify-v1-small": "Water-Probe v1 (forced prefixes), a small probe of the paper's six schemes, "
                         "uncalibrated.",
    "identify-quick": "The quick preset of Water-Probe v1, uncalibrated.",
    "rules-screen": "An earlier screen: one scheme per ensemble, very short texts.",
    "rules-mix-screen": "An earlier screen: one ensemble mixing KGW, DiPMark and AAR, very short texts.",
}

#: Shown on every page of a quick or screening run.
QUICK = ("A quick or screening run: few prompts and short texts, made to check that the pipeline runs end to "
         "end and which way it points. Its intervals are wide; it is not an estimate. Detection z grows "
         "like the square root of the scored tokens, so short texts give smaller z than the paper's "
         "length.")


def is_quick(folder: str) -> bool:
    return any(folder.endswith(s) for s in ("-quick", "-screen", "-small"))
