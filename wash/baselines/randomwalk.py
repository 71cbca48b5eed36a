"""RandomWalk (Zhang et al. 2023): rewrite random spans of the final text, keep what a judge accepts.

**Method.** "Watermarks in the Sand: Impossibility of Strong Watermarking for
Generative Models" (Zhang, Edelman, Francati, Venturi, Ateniese and Barak,
arXiv 2311.04378) attacks a finished watermarked text with two oracles and no key:
a *perturbation oracle* changes the text a little (mask one span of words and let
a model fill it in) and a *quality oracle* says whether the changed text is still
at least as good a response to the prompt; a random walk of many such steps, each
kept only when the quality oracle accepts it, drifts away from the watermarked
text while staying among good responses, until the watermark's statistics are
gone. The WASH paper (Sec. 3, Baselines; it cites ``liu2024can``) runs it as its
final-text rewrite attack: it "repeatedly rewrites spans of the generated text
using a weaker unwatermarked model and accepts only quality-preserving variants
based on a quality-check oracle", and charges it 4-10x the runtime (its
quality-and-time table). Here provider 1 (mode ``randomwalk`` takes the first
provider only) first writes the watermarked text exactly as mode ``single`` does
(same engine, same seed, same ``StepEvent``s); then the rewrite phase runs: pick a
span of ``span`` words uniformly at random (never the first word, as in the
authors' release), let the **rewriter** write ``span`` new words in its place,
and let the **judge** score the whole candidate text; keep the candidate iff its
score is not worse than the reference by more than ``tolerance``.

**Who rewrites and who judges.** The rewriter is the weaker model, unwatermarked:
it samples from its base model's own distribution, shaped by the run's serving
settings (temperature, top-k, top-p; no watermark; end-of-text and special
tokens masked until the span is written). It is a causal model, so it sees the
prompt and the text BEFORE the span only (its KV cache is kept across steps where
that prefix is unchanged, as an attacker running its own model would); the text
AFTER the span reaches the decision through the judge, which scores the whole
candidate, so a replacement that does not fit what follows raises the score of
the tokens after it. The judge is the stronger model's mean negative
log-likelihood per token (nats, the log of its perplexity) of the generated text
given the prompt, on its raw distribution; lower is better. The judge is never a
watermark detector: the attacker has no key and no detector. With the two
offline models, SmolLM2-135M rewrites (the weaker; the paper's rewriter is
"weaker") and Gemma-3-270M judges (the stronger; a quality oracle is meant to be
the more capable party). The rewriter may be the base model of provider 1 itself
(then it is that model without the watermark, which is what "unwatermarked"
means); any catalog model may fill either role.

**Parameters** (``--baseline-options steps=400,span=6,...``). The numbers come
from the authors' release (github.com/hlzhang109/impossibility-watermark,
``text/main.py`` and ``text/evaluation/tools/text_editor.py``, the
``RandomWalkAttack`` of their text experiments):

* ``steps`` (default 400): rewrite attempts at most (release: ``total_steps=400``).
  0 skips the rewrite phase. 0 to 5000.
* ``max_accepted`` (default 70): the walk also ends after this many accepted
  attempts (release: ``target_valid_steps=70``); 0 removes this limit. 0 to 5000.
* ``span`` (default 6): words per rewritten span (release: ``span_len = 6``).
  Words are maximal runs of non-whitespace; a text of n words shorter than
  ``span + 1`` words gets spans of n - 1 words. The rewriter writes exactly as
  many words as the span held (its next word's first token ends the replacement
  and is not kept), at most ``4 * span`` tokens (a guard against a rewriter that
  never ends a word; the release caps T5 at ``2 * span`` T5 tokens). 1 to 64.
* ``tolerance`` (default 0.0): the candidate is kept iff its judge score is at
  most the reference score plus ``tolerance`` nats per token (release: the
  quality oracle's ``maintain_quality(..., tie_threshold=0)``, keep iff the
  reward is not lower). A negative tolerance demands an improvement. Any finite
  number.
* ``reference`` (default ``original``): what the candidate is compared with:
  ``original``, the watermarked text's score (the release compares every
  candidate with the original response), or ``current``, the score of the text
  the walk stands on (a chain of small losses can then add up).
* ``patience`` (default 40): after more than ``patience`` rejections in a row the
  walk steps back to the text before its last kept rewrite (release:
  ``backtrack_patience=40``, a revert once ``patience > backtrack_patience``); 0
  never steps back. 0 to 5000.
* ``rewriter`` (default ``smollm2``) and ``judge`` (default ``gemma3``): catalog
  model names (``wash.engine.catalog.CATALOG``; the tests use ``tiny-smollm2`` and
  ``tiny-gemma3``). The release fills spans with T5-v1.1-XL and judges with the
  OpenAssistant DeBERTa-v3-large reward model; neither is available offline here.

Random choices are seeded by the generation seed on their own streams (spans:
``derive_seed("randomwalk-spans", seed)``, the rewriter's draws:
``derive_seed("randomwalk-rewrite", seed)``), so a seed fixes the whole run and the
watermarked text is the one mode ``single`` writes.

**Faithful here**: the random walk itself (uniform span positions, the
span-length word masks, rewriting by an unwatermarked weaker model, a
keep-iff-not-worse quality check against the original, backtracking, the release's
step and acceptance budgets), the watermarked text written by the real provider,
the providers' real detectors on the final text. **Not reproduced**: T5's
bidirectional infilling (a causal rewriter does not see the text after the span;
the judge does), the reward model (a language model's perplexity is a much cruder
judge of quality, and it can be gamed by bland, predictable words), the release's
grammar correction of each candidate with Gramformer and its punctuation
clean-up (no such model offline, and re-spacing would change text outside the
span), and its stopping rule, which also keeps walking while the watermark
detector's z is above 2: that uses the detector, which this attacker does not
have, so the walk here stops on its budgets alone. The release's spans also never
include the last word (an exclusive bound); here they may.

**Events.** The generation's ``StepEvent``s as in mode ``single``, then one
``events.RewriteEvent`` per attempt (span offsets in the text before the attempt,
old and new span text, the judge's scores, kept or not, time) and one per
backtrack, then the ``FinishedEvent``. Its ``RunResult`` describes the FINAL
text: ``text``, ``tokens`` (provider 1's tokenisation of the final text; tokens
before the first change keep their generation records, later ones have
``chosen`` and ``entropy`` ``None``), ``model_ids`` (those ids) and
``detection`` (every provider's real detector on the final text).

**Costs** (``RunResult.settings["baseline"]``): ``attempts`` (rewrite attempts
made), ``accepted`` (kept), ``changed`` (kept and different from the text they
replaced), ``backtracks``, ``ended_by`` (``steps``, ``max_accepted``,
``stopped``, ``too few words``), ``rewriter_tokens`` (tokens the rewriter drew,
the dropped word-opening tokens included), ``rewriter_forwards`` /
``rewriter_ids_fed`` / ``rewriter_s`` (its forward passes, ids encoded, seconds),
``judge_forwards`` / ``judge_ids_fed`` / ``judge_s`` (one full-text forward per
candidate plus one for the watermarked text), ``generation_s`` and
``rewrite_s`` (wall seconds of the two phases), and the watermarked text with its
detection (``watermarked_text``, ``watermarked_detection``). ``Timing.total_s`` is
both phases; its per-model forward counters add the rewriter's and the judge's
forwards to the generation's; ``per_token_ms`` is the generation's.
"""

from __future__ import annotations

import codecs
import dataclasses
import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

import torch

from wash.engine import parallel
from wash.engine.decode import Generation, Stepper, Strategy
from wash.detection.per_text import detect_text
from wash.engine.ensemble import EagerSteps, LazySteps
from wash.core.errors import WashInputError
from wash.engine.events import LoadEvent, RewriteEvent, RoutingSummary, RunResult, StepEvent, Timing, TokenRecord
from wash.engine.members import Member, require, side_by_side
from wash.engine.modes import register
from wash.engine.catalog import check_model_name
from wash.engine.providers import member_of
from wash.core.options import check_range
from wash.engine.sampling import process_logits, sample
from wash.engine.settings import Forwards
from wash.engine.vocab import served_mask
from wash.watermarks.base import softmax
from wash.watermarks.hashing import derive_seed

if TYPE_CHECKING:
    from wash.engine.config import GenerationConfig
    from wash.engine.providers import ProviderSet

#: What each candidate's judge score is compared with (see the module docstring).
REFERENCES = ("original", "current")
#: Most attempts (and accepted attempts, and patience) accepted: about an hour on a CPU.
MAX_STEPS = 5000
MAX_SPAN = 64
#: The rewriter writes at most this many tokens per word of the span.
TOKENS_PER_WORD_CAP = 4
_WORD = re.compile(r"\S+")


#: One line for help texts and the mode table.
_SUMMARY = ("baseline RandomWalk (Zhang et al. 2023): provider 1 writes, then random spans "
            "are rewritten by a weaker unwatermarked model and kept when a judge model's "
            "perplexity does not get worse")


@dataclass(frozen=True)
@register
class RandomWalk(Strategy, name="randomwalk", scope="first", routing=False, baseline=True,
                 summary=_SUMMARY):
    """Provider 1 writes; then random spans are rewritten by a weaker model and kept when a judge accepts."""

    steps: int = 400
    max_accepted: int = 70
    span: int = 6
    tolerance: float = 0.0
    reference: str = "original"
    patience: int = 40
    rewriter: str = "smollm2"
    judge: str = "gemma3"

    def __post_init__(self) -> None:
        """Refuse bad parameters when the mode is parsed, before any model loads."""
        check_range("mode 'randomwalk'", "steps", self.steps, 0, MAX_STEPS)
        check_range("mode 'randomwalk'", "max_accepted", self.max_accepted, 0, MAX_STEPS, note=" (0: no limit)")
        check_range("mode 'randomwalk'", "span", self.span, 1, MAX_SPAN)
        check_range("mode 'randomwalk'", "patience", self.patience, 0, MAX_STEPS, note=" (0: never step back)")
        if not math.isfinite(self.tolerance):
            raise WashInputError(f"mode 'randomwalk': tolerance must be a finite number, got {self.tolerance}")
        if self.reference not in REFERENCES:
            raise WashInputError(f"mode 'randomwalk': unknown reference '{self.reference}' "
                                 f"(accepted: {', '.join(REFERENCES)})")
        for role in ("rewriter", "judge"):
            try:
                check_model_name(getattr(self, role))
            except WashInputError as err:
                raise WashInputError(f"mode 'randomwalk': {role}: {err}") from None

    def load(self, config: "GenerationConfig", pset: "ProviderSet") -> Iterator[LoadEvent]:
        """The rewriter and the judge, loaded beside the providers."""
        messages: list[str] = []
        for role in ("rewriter", "judge"):  # on the providers' backend, so the walk runs where they do
            if getattr(self, role) not in pset.members:
                pset.members[getattr(self, role)] = member_of(getattr(self, role), config.backend,
                                                              progress=messages.append)
        pset.members[self.rewriter].vocab  # its token bytes, read once per process
        yield from (LoadEvent(m) for m in messages)

    def start(self, run: Generation) -> Stepper:
        return _WalkSteps(self, run)


class _WalkSteps(Stepper):
    """Provider 1 writes the watermarked text as mode ``single`` does; then the walk rewrites it."""

    def __init__(self, method: RandomWalk, run: Generation) -> None:
        super().__init__(method, run)
        self.method = method
        writer = LazySteps if run.config.forwards == Forwards.LAZY else EagerSteps
        self.writer = writer(method, run)  # one provider, one vocabulary: no token is ever routed
        self.walk: _Walk | None = None
        self.rewrite_s = 0.0

    def step(self) -> StepEvent | None:
        return self.writer.step()

    def after(self, result: RunResult, should_stop: Callable[[], bool]) -> Iterator[RewriteEvent]:
        members = self.run.pset.members
        self.walk = walk = _Walk(self.method, self.run.config, result.text, members[self.method.rewriter],
                                 members[self.method.judge])
        t_walk = time.perf_counter()
        if self.run.finish == "stopped":
            walk.costs.ended_by = "stopped"
        else:
            with parallel.caller_on_one_thread():
                yield from walk.run(should_stop)
        self.rewrite_s = time.perf_counter() - t_walk

    def finish(self, result: RunResult) -> RunResult:
        assert self.walk is not None
        return _final_result(self.method, self.run, result, self.walk, result.timing.total_s, self.rewrite_s)


# -- the rewrite phase --------------------------------------------------------------------
@dataclass
class _Costs:
    """What the rewrite phase spent (``settings["baseline"]``)."""

    attempts: int = 0
    accepted: int = 0
    changed: int = 0
    backtracks: int = 0
    ended_by: str = "steps"
    rewriter_tokens: int = 0
    rewriter_forwards: int = 0
    rewriter_ids_fed: int = 0
    rewriter_s: float = 0.0
    judge_forwards: int = 0
    judge_ids_fed: int = 0
    judge_s: float = 0.0


@dataclass
class _Kept:
    """The last kept rewrite, to step back over: where it sits now, what it replaced, the score before."""

    start: int
    old_text: str
    new_text: str
    score_before: float


class _Walk:
    """The random walk over the text: spans, rewrites, the judge's verdicts, backtracking."""

    def __init__(self, method: RandomWalk, config: "GenerationConfig", text: str, rewriter: Member,
                 judge: Member) -> None:
        self.method = method
        self.config = config
        self.text = text
        self.rewriter = rewriter
        self.judge = require(judge, "token_nll", "mode 'randomwalk' (its judge)")
        self.token_bytes = rewriter.vocab.token_bytes
        # A rewrite fills a span inside the text: it never ends the text.
        self.non_text = served_mask(rewriter.vocab, end_of_text=False)
        self.context = rewriter.context(rewriter.encode_prompt(config.prompt))
        self.judge_prompt = judge.encode_prompt(config.prompt)
        self.spans = torch.Generator()
        self.spans.manual_seed(derive_seed("randomwalk-spans", config.seed))
        self.draws = torch.Generator()
        self.draws.manual_seed(derive_seed("randomwalk-rewrite", config.seed))
        self.costs = _Costs()
        self.kept: _Kept | None = None
        #: The judge's score of ``text`` (set once the walk scores the watermarked text).
        self.current_score = math.nan

    def run(self, should_stop: Callable[[], bool]) -> Iterator[RewriteEvent]:
        m = self.method
        if m.steps == 0:
            return
        if len(_WORD.findall(self.text)) < 2:
            self.costs.ended_by = "too few words"  # no span leaves a word before it
            return
        original = self.current_score = self.score(self.text)
        rejections = 0
        for attempt in range(m.steps):
            if should_stop():
                self.costs.ended_by = "stopped"
                return
            if m.max_accepted and self.costs.accepted >= m.max_accepted:
                self.costs.ended_by = "max_accepted"
                return
            reference = original if m.reference == "original" else self.current_score
            event = self.attempt(attempt, reference)
            rejections = 0 if event.accepted else rejections + 1
            yield event
            if m.patience and rejections > m.patience:
                rejections = 0  # the release resets its count whether or not there is a copy to return to
                back = self.step_back(attempt, original if m.reference == "original" else self.current_score)
                if back is not None:
                    yield back

    def attempt(self, index: int, reference: float) -> RewriteEvent:
        """Rewrite one random span; keep the candidate iff the judge's score is within the tolerance."""
        t0 = time.perf_counter()
        start, end, words = self.pick_span()
        new = self.rewrite(self.text[:start], words)
        candidate = self.text[:start] + new + self.text[end:]
        score = self.score(candidate)
        threshold = reference + self.method.tolerance
        accepted = score <= threshold
        old = self.text[start:end]
        self.costs.attempts += 1
        if accepted:
            self.costs.accepted += 1
            self.costs.changed += int(new != old)
            self.kept = _Kept(start, old, new, self.current_score)
            self.text, self.current_score = candidate, score
        return RewriteEvent(attempt=index, start=start, end=end, old_text=old, new_text=new, accepted=accepted,
                            candidate_score=score, reference_score=reference, threshold=threshold,
                            elapsed_ms=(time.perf_counter() - t0) * 1000)

    def step_back(self, index: int, reference: float) -> RewriteEvent | None:
        """Return to the text before the last kept rewrite (once: the release keeps one copy)."""
        kept, self.kept = self.kept, None
        if kept is None:
            return None
        end = kept.start + len(kept.new_text)
        assert self.text[kept.start:end] == kept.new_text
        self.text = self.text[:kept.start] + kept.old_text + self.text[end:]
        self.current_score = kept.score_before
        self.costs.backtracks += 1
        return RewriteEvent(attempt=index, start=kept.start, end=end, old_text=kept.new_text,
                            new_text=kept.old_text, accepted=False, candidate_score=kept.score_before,
                            reference_score=reference, threshold=reference + self.method.tolerance,
                            elapsed_ms=0.0, backtrack=True)

    def pick_span(self) -> tuple[int, int, int]:
        """A uniformly random span of words, never the first: (start, end) characters and its word count.

        The span runs from the end of the word before it to the end of its last
        word, so it carries its leading whitespace and the rewriter continues a text
        that ends in a word, as a causal model was trained to.
        """
        words = [w.end() for w in _WORD.finditer(self.text)]
        k = min(self.method.span, len(words) - 1)
        first = 1 + int(torch.randint(len(words) - k, (1,), generator=self.spans))
        return words[first - 1], words[first + k - 1], k

    def rewrite(self, before: str, words: int) -> str:
        """The rewriter's next ``words`` words after the prompt and ``before``, from its own distribution."""
        ctx = self.context
        ctx.sync_to(ctx.ids[:ctx.prompt_len] + self.rewriter.encode(before))
        calls, fed, seconds = ctx.forward_calls, ctx.ids_fed, ctx.forward_s
        written = bytearray()
        text = ""
        try:
            for _ in range(TOKENS_PER_WORD_CAP * words):
                def draw() -> int:
                    return sample(softmax(self.serve(ctx.next_logits())), self.draws)

                row = side_by_side([(self.rewriter, draw)])[0]
                self.costs.rewriter_tokens += 1
                ctx.append([row])
                written += self.token_bytes[row] or b""
                text = written.decode("utf-8", errors="replace")
                found = list(_WORD.finditer(text))
                if len(found) > words:  # this token opens the word after the span: not kept
                    return text[:found[words - 1].end()]
            return text
        finally:
            self.costs.rewriter_forwards += ctx.forward_calls - calls
            self.costs.rewriter_ids_fed += ctx.ids_fed - fed
            self.costs.rewriter_s += ctx.forward_s - seconds

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        """The rewriter's raw next-token logits as the config's profile serves them (float64)."""
        c = self.config
        return process_logits(logits, self.non_text, c.temperature, c.top_p, c.top_k)

    def score(self, text: str) -> float:
        """The judge: mean negative log-likelihood per token (nats) of ``text`` after the prompt."""
        judge = self.judge
        ids = judge.encode(text)
        if not ids:
            return 0.0
        t0 = time.perf_counter()
        nll = float(side_by_side([(judge, lambda: judge.token_nll(self.judge_prompt, ids))])[0].mean())
        self.costs.judge_s += time.perf_counter() - t0
        self.costs.judge_forwards += 1
        self.costs.judge_ids_fed += len(self.judge_prompt) + len(ids)
        return nll


# -- the result: the final text -----------------------------------------------------------
def _final_tokens(run: Generation, text: str, watermarked: RunResult) -> tuple[list[TokenRecord], list[int]]:
    """Provider 1's tokenisation of the final text; tokens before the first change keep their records."""
    m = run.prov_model[0]
    member, a = run.members[m], run.alignment
    sampled = run.contexts[m].generated_ids()
    ids = member.encode(text)
    same = 0
    while same < min(len(ids), len(sampled)) and ids[same] == sampled[same]:
        same += 1
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    records = []
    for j, i in enumerate(ids):
        u = int(a.to_union[m][i])
        data = a.token_bytes(u) if u >= 0 else member.decode_id(i).encode("utf-8")
        piece = decoder.decode(data)
        if j < same:
            records.append(dataclasses.replace(watermarked.tokens[j], text=piece))
        else:
            records.append(TokenRecord(text=piece, union_id=u, routed=False, span_id=None, specialists=[],
                                       chosen=None, entropy=None))
    if records:
        records[-1].text += decoder.decode(b"", final=True)
    return records, ids


def _merged(*counters: dict) -> dict:
    out: dict = {}
    for counter in counters:
        for k, v in counter.items():
            out[k] = out.get(k, 0) + v
    return out


def _final_result(method: RandomWalk, run: Generation, watermarked: RunResult, walk: _Walk, generation_s: float,
                  rewrite_s: float) -> RunResult:
    """The run's result for the FINAL text, with the walk's costs beside the generation's."""
    text = walk.text
    if text == watermarked.text:  # nothing changed: the generation's own record stands
        tokens, model_ids, detection = watermarked.tokens, watermarked.model_ids, watermarked.detection
    else:
        tokens, ids = _final_tokens(run, text, watermarked)
        model_ids = {run.prov_model[0]: ids}
        detection = detect_text(run.providers, text, run.config.z_threshold) if text else []
    c, t = walk.costs, watermarked.timing
    rw, jd = method.rewriter, method.judge
    timing = Timing(per_token_ms=t.per_token_ms, median_token_ms=t.median_token_ms,
                    total_s=generation_s + rewrite_s, load_s=t.load_s,
                    forward_calls=_merged(t.forward_calls, {rw: c.rewriter_forwards}, {jd: c.judge_forwards}),
                    ids_fed=_merged(t.ids_fed, {rw: c.rewriter_ids_fed}, {jd: c.judge_ids_fed}),
                    forward_s=_merged(t.forward_s, {rw: c.rewriter_s}, {jd: c.judge_s}))
    costs = {"method": method.name, "params": str(method), **dataclasses.asdict(c),
             "generation_s": generation_s, "rewrite_s": rewrite_s,
             "watermarked_text": watermarked.text,
             "watermarked_detection": [d.to_dict() for d in watermarked.detection]}
    return dataclasses.replace(
        watermarked, text=text, tokens=tokens, model_ids=model_ids, detection=detection, timing=timing,
        routing=RoutingSummary(routed_token_fraction=0.0, mean_routed_span_length=0.0, routed_spans=0,
                               tokens=len(tokens)),
        finish_reason="stopped" if c.ended_by == "stopped" else watermarked.finish_reason,
        settings={**watermarked.settings, "baseline": costs})
