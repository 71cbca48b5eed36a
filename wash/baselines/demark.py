"""De-mark (Chen, Wu, Guo and Huang 2024): probe the watermarked model, then undo its green-list bias.

**Method.** De-mark ("De-mark: Watermark Removal in Large Language Models", ICML
2025; the WASH paper's ``chen2024mark``) attacks n-gram red/green-list watermarks
(KGW and its relatives: the previous ``h`` token ids seed a green list whose
logits get ``+delta``) without knowing the hash or the key. Its tool is *random
selection probing*: a crafted prompt asks the watermarked model to "randomly start
your answer with" one of two phrases ``c a`` and ``c b`` that share the context
n-gram ``c``, and the answer is opened with ``c``. The next token is then a choice
between ``a`` and ``b`` made under the very green list that follows ``c`` in real
text; an unwatermarked model has no reason to prefer either (the two orders of the
phrases are both asked, to cancel position bias), so the log ratio
``R(a, b) = log (P(a) / P(b))`` of the two answers is about ``+delta`` when only
``a`` is green, ``-delta`` when only ``b`` is, and about 0 when they share a colour
(Algorithm 1). Over every pair of a token set, a pair's score
``sign(R) min(|R| / delta, delta / |R|)`` says how much it looks like a
green-red pair, and a token whose pairs, weighted by how decisive the other token
is, come out positive is called green (Algorithm 2). Before generating, the
attacker learns the watermark's two numbers once per service: the n-gram length
``h`` (Algorithm 3: probe one random token set with shorter and shorter context
windows; the colours stay put while the window still holds the whole n-gram and
turn into coin flips once it does not) and the strength ``delta`` (Algorithm 4:
the mean ``R`` between tokens confidently green and confidently red). Then, at
every generated token, the top-``k`` tokens of the watermarked distribution are
probed with the current context's last ``h`` ids, ``eta * delta`` is taken off the
logits of those estimated green, and the token is drawn from the result,
renormalised over the ``k`` candidates. Here the watermarked model is provider 1
(mode ``demark`` takes the first provider only), queried through what its API
returns and nothing else: the served next-token probabilities of a probe prompt
(gray-box) or sampled answers (black-box); never its key, scheme or green list.

**Parameters** (``--baseline-options k=20,access=gray,...``), defaults from
De-mark's paper and its released code (github.com/RayRuiboChen/De-mark):

* ``k`` (default 20): candidates per generated token, the top-k of provider 1's
  served distribution. The removal scripts (``run_exp_watermark_removal_KGW.sh``
  and ``..._Dipmark.sh``) set ``total_word_num=20``, the top-20 log-probabilities a
  gray-box API returns; sampling is restricted to these candidates, as there.
  Each token costs ``k (k - 1)`` probe queries: 380 at the default. 2 to 100.
* ``access`` (default ``gray``): ``gray`` reads the two answers' probabilities
  off each probe (the paper's gray-box setting, its main removal results);
  ``black`` samples ``samples`` answers per probe order and uses the counts
  (the paper's black-box setting: ``R = log(n / (2s - n))``, ``n`` clipped to
  ``1..2s-1``, each sample a conditional draw between the two phrases).
* ``samples`` (default 10): black-box answers per probe order (``sample_num=10``
  in the released probing code). 1 to 1000.
* ``h`` (default 0 = estimate): the context n-gram length. 0 runs Algorithm 3
  before the first token (as the attacker would, once per service); a positive
  value skips it, as the removal scripts do by passing ``ctx_width``.
* ``max_h`` (default 5): the widest window Algorithm 3 tries (``max_h=5`` in the
  released ``estimate_h``). 1 to 16.
* ``delta`` (default 0 = estimate): the bias removed. 0 runs Algorithm 4; a
  positive value skips it, as the removal scripts do by passing
  ``delta_predicted=2`` (the value their estimation found for their delta-2 KGW).
* ``words`` (default 50): random tokens per calibration probe set (Algorithm 3's
  ``random_word_num=50`` in the released ``estimate_h``; Algorithm 4 takes its
  count on the command line, so the same 50 serve here). 4 to 200.
* ``eta`` (default 1.0): multiplier of the removed bias (``delta_reduce_multiplier``,
  the paper's eta, 1 in every removal script). 0 to 5.
* ``per_query_draw`` (default false): whether every probe query is served as a
  generation of its own, with the scheme's per-generation draw made anew. Only
  Water-Bag draws anything per generation (which bag key, which of its two
  lists): that is its defence against probing. False serves the probes under the
  attacked generation's draw (as if the service kept one draw per session: the
  reading under which the WASH paper reports De-mark removing Water-Bag); true is
  the stricter reading of one request per query. Not in De-mark, whose
  experiments attack only stateless schemes.

Fixed thresholds, from the released estimation code: Algorithms 3 and 4 count a
ratio as "green over red" when ``0.2 < R < 10`` (``alpha1``, ``alpha2``), and
Algorithm 4 calls a token confidently green (red) when its count exceeds
(falls below minus) 0.1 times the number of words. The released ``estimate_h``
only prints each window's sign agreement for a person to read; here ``h`` is
the narrowest window whose agreement with the next wider one, and every wider
one's with its own, reaches 0.75 (halfway between a coin's 0.5 and
certainty's 1), scanning from ``max_h`` down and stopping at the first window
that falls short.

**Schemes.** The green-list family (``kgw``, ``biased-kgw``, ``unigram``,
``waterbag``) and ``dipmark``, which De-mark's own code attacks with the same
subtraction (it is no constant bias, so the subtraction cannot undo it: the WASH
paper finds De-mark collapsing there). Schemes that sample by a keyed rule
(``aar``, ``exp-edit``, ``its-edit``, ``synthid``) have no green list or bias to
estimate, and ``none`` has no watermark: refused with a one-line error.

**Faithful here**: Algorithms 1 to 5 as published (the probe prompt's wording,
both orders per pair, the pairwise and token scores, the per-token probing with
the current n-gram, the top-k restriction and the subtraction), calibration of
``h`` and ``delta`` by probing, the black-box counts, and every query actually
computed by provider 1's model and served through its real watermark on the
probe's own ids (temperature, top-k and top-p as the config serves them). The
attacker remembers a (context, pair) it already asked and does not ask again.
**Not reproduced**: the paper's models (Llama 3, Mistral, ChatGPT: instruction
followers; SmolLM2-135M-Instruct barely follows the probe's instruction, so its
own preference between the two phrases adds noise of about the size of
delta = 2 to every ratio, and Gemma-3-270M is a base model, probed with the same
words and no chat template), and its word list (English words from a corpus;
offline here: random word-start tokens `` [a-z]{3,}`` of the model's own
vocabulary, for both the calibration words and the random calibration contexts).
How well the estimate works on these models is measured, never assumed: the
tests compare it with the real scheme's green list.

**Cost.** Probing is the method, so it is paid in full: ``k (k - 1)`` queries
per token (380 by default; ``k (k - 1) samples`` in black-box), each a prompt of
about 60 to 70 ids. The queries of one token share their prompt's beginning, so
they are computed as the provider's prefix cache would serve them: the shared
prefix once, each first phrase once, then one short forward per query (batched);
that saves compute, never queries. On SmolLM2-135M on one CPU thread a token
costs several seconds of probing instead of about 30 ms. Calibration probes
``words (words - 1)`` queries per window (2,450 by default), for up to
``max_h`` windows, once per service and process: a second generation against the
same provider, serving settings and parameters reuses it (its costs are still
reported, marked ``cached``), and since it is seeded apart from the generation
the text is the same either way.

**Events.** One ``StepEvent`` per token: ``chosen`` = 0 (provider 1 is queried),
``provider_probs`` holds the de-biased distribution on the step's candidates,
the average and consensus are ``None``, ``entropy`` is provider 1's served base
entropy. Calibration yields ``LoadEvent`` messages before the first token (the
app shows them as the status until a token arrives). Costs go to
``RunResult.settings["baseline"]``: ``h`` and ``delta`` used and where they came
from; ``calibration`` (``same_rate`` per window, ``queries``, ``prompt_ids``,
``forwards``, ``ids_fed``, ``seconds``, ``cached``); per generation
``probe_queries`` (requests made), ``probe_pairs`` (token pairs asked),
``memo_pairs`` (pairs answered from memory), ``probe_prompt_ids`` (ids of every
query's prompt: what an API bills), ``probe_forwards`` and ``probe_ids_fed``
(what was computed), ``probe_s``, ``queries_per_token``, ``probe_s_per_token``,
``candidates_per_token`` and ``green_fraction`` (the share of candidates
estimated green, which the attacker knows; how many were right it does not).
``Timing`` counts the probe forwards too (generation and calibration of this run).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import torch

from wash.engine.decode import Generation, Stepper, Strategy
from wash.core.errors import WashInputError
from wash.engine.events import LoadEvent, RunResult, StepEvent
from wash.engine.members import FeedCost, Member, require, side_by_side
from wash.engine.modes import register
from wash.core.options import check_range
from wash.engine.readback import ShownProvider, read_step
from wash.engine.sampling import draw, entropy_of, process_logits, uniform
from wash.engine.vocab import served_mask
from wash.watermarks import SCHEMES
from wash.watermarks.hashing import derive_seed

if TYPE_CHECKING:
    from wash.engine.config import GenerationConfig
    from wash.engine.providers import Provider, ProviderSet

#: What each probe answer reveals: probabilities (gray-box) or sampled answers (black-box).
ACCESS = ("gray", "black")
#: Algorithms 3 and 4 count a ratio as "green over red" when ALPHA1 < R < ALPHA2 (released code).
ALPHA1, ALPHA2 = 0.2, 10.0
#: Algorithm 4: a token is confidently green (red) when its count is above (below minus) this x words.
CONFIDENT = 0.1
#: Algorithm 3 (our reading rule): windows agree when this share of the words keep their colour.
SAME_RATE = 0.75
#: De-mark's probe, with the two phrases' places marked.
PROBE_MESSAGE = ('I need you to randomly choose a phrase without exact meaning. '
                 'Randomly start your answer with: "\x00A" or "\x00B".')
#: A base model (no chat template) gets the message and an answer line.
PLAIN_ANSWER = "\nAnswer: "
#: Queries per batched forward (the released probing code batches 32).
PROBE_BATCH = 32
#: Calibration words: a space and three or more lower-case letters, as the model spells them.
_WORD = re.compile(rb"^ [a-z]{3,}$")


def attackable() -> list[str]:
    """The schemes De-mark applies to: the green-list family and DiPMark."""
    return [n for n, cls in SCHEMES.items() if cls.green_list]


#: One line for help texts and the mode table.
_SUMMARY = ("baseline De-mark (Chen et al. 2024): probe provider 1 with crafted prompts for "
            "each context's green list and the bias, then generate with the bias removed "
            "(green-list schemes and DiPMark only)")


@dataclass(frozen=True)
@register
class DeMark(Strategy, name="demark", scope="first", routing=False, baseline=True,
             summary=_SUMMARY):
    """Probe provider 1 for each context's green list and its bias; draw with the bias taken off."""

    k: int = 20
    access: str = "gray"
    samples: int = 10
    h: int = 0
    max_h: int = 5
    delta: float = 0.0
    words: int = 50
    eta: float = 1.0
    per_query_draw: bool = False

    def __post_init__(self) -> None:
        """Refuse out-of-range parameters when the mode is parsed, before any model loads."""
        check_range("mode 'demark'", "k", self.k, 2, 100, True)
        if self.access not in ACCESS:
            raise WashInputError(f"mode 'demark': unknown access '{self.access}' (accepted: {', '.join(ACCESS)})")
        check_range("mode 'demark'", "samples", self.samples, 1, 1000, True)
        check_range("mode 'demark'", "h", self.h, 0, 16, True)
        check_range("mode 'demark'", "max_h", self.max_h, 1, 16, True)
        check_range("mode 'demark'", "delta", self.delta, 0.0, 20.0, False)
        check_range("mode 'demark'", "words", self.words, 4, 200, True)
        check_range("mode 'demark'", "eta", self.eta, 0.0, 5.0, False)

    def load(self, config: "GenerationConfig", pset: "ProviderSet") -> Iterator[LoadEvent]:
        check_scheme(pset.providers[0])  # refused before the generation starts
        return iter(())

    def start(self, run: Generation) -> Stepper:
        return _DeMarkSteps(self, run)


def check_scheme(provider: "Provider") -> None:
    """De-mark estimates a green list and a logit bias: refuse a provider without them."""
    if not provider.scheme.green_list:
        raise WashInputError(
            f"mode 'demark' attacks green-list watermarks ({', '.join(attackable())}); provider 1's scheme "
            f"'{provider.spec.scheme}' has no green list and logit bias to estimate")


# -- Algorithms 2, 3 and 4 on a matrix of ratios (pure functions) -----------------------
def pair_scores(ratios: torch.Tensor, delta: float) -> torch.Tensor:
    """Algorithm 2's pairwise score ``sign(R) min(|R| / delta, delta / |R|)``: 1 at R = ±delta.

    A ratio that is not finite (one answer had probability 0, e.g. cut by the
    serving top-k) carries no evidence: score 0.
    """
    r = ratios.to(torch.float64)
    size = r.abs()
    score = torch.sign(r) * torch.minimum(size / delta, delta / size.clamp_min(1e-300))
    return torch.where(torch.isfinite(r), score, torch.zeros_like(r))


def token_scores(ratios: torch.Tensor, delta: float) -> torch.Tensor:
    """Algorithm 2's token score: each pair score weighted by how decisive the other token is overall."""
    s = pair_scores(ratios, delta)
    weight = s.sum(dim=1).abs()
    return (s * weight[None, :]).sum(dim=1)


def estimate_green(ratios: torch.Tensor, delta: float) -> list[bool]:
    """Algorithm 5: the tokens whose score is positive are called green."""
    return [bool(v > 0) for v in token_scores(ratios, delta)]


def threshold_scores(ratios: torch.Tensor) -> torch.Tensor:
    """Algorithms 3 and 4's count per token: ratios in (alpha1, alpha2) minus those in (-alpha2, -alpha1)."""
    r = ratios.to(torch.float64)
    up = ((r > ALPHA1) & (r < ALPHA2)).sum(dim=1)
    down = ((r < -ALPHA1) & (r > -ALPHA2)).sum(dim=1)
    return up - down


def same_rate(scores: torch.Tensor, wider: torch.Tensor) -> float:
    """Share of tokens whose count keeps a strict sign from one window to the next (a zero never agrees)."""
    return float(((scores * wider) > 0).to(torch.float64).mean())


def context_width(rates: dict[int, float], max_h: int) -> int:
    """Algorithm 3's answer: one wider than the widest window that falls short of ``SAME_RATE``.

    ``rates[w]`` compares window ``w`` with ``w + 1``. Colours hold while the
    window covers the whole n-gram and scatter below it; if no window falls short,
    a single id decides the list (or none does: a context-free list), so 1.
    """
    for w in range(max_h - 1, 0, -1):
        if w in rates and rates[w] < SAME_RATE:
            return w + 1
    return 1


def strength(ratios: torch.Tensor) -> float | None:
    """Algorithm 4: the mean ratio from a confidently green token to a confidently red one (None: none)."""
    n = ratios.shape[0]
    scores = threshold_scores(ratios)
    green = (scores > CONFIDENT * n).nonzero().flatten().tolist()
    red = (scores < -CONFIDENT * n).nonzero().flatten().tolist()
    values = [float(ratios[g, r]) for g in green for r in red if math.isfinite(float(ratios[g, r]))]
    return sum(values) / len(values) if values else None


# -- the probe: provider 1's API as De-mark queries it ----------------------------------
@dataclass(frozen=True)
class ProbeTemplate:
    """A model's probe prompt in three pieces of ids: ``t1 c a t2 c b t3 c`` is one query."""

    t1: list[int]
    t2: list[int]
    t3: list[int]

    def query(self, context: Sequence[int], first: int, second: int) -> list[int]:
        c = list(context)
        return self.t1 + c + [first] + self.t2 + c + [second] + self.t3 + c


def probe_template(lm: Member) -> ProbeTemplate:
    """De-mark's message in the model's chat template (an instruction model), else as plain text.

    The template is rendered with markers where the phrases go and split there, so
    the context and the two tokens enter as ids (as in De-mark), never re-tokenised.
    """
    tok = lm.tokenizer
    if getattr(tok, "chat_template", None):
        text = tok.apply_chat_template([{"role": "user", "content": PROBE_MESSAGE}], tokenize=False,
                                       add_generation_prompt=True)
    else:
        text = PROBE_MESSAGE + PLAIN_ANSWER
    head, rest = text.split("\x00A", 1)
    middle, tail = rest.split("\x00B", 1)
    bos = [lm.bos_id] if lm.bos_id is not None and not text.startswith(str(tok.bos_token or "\x01")) else []
    return ProbeTemplate(t1=bos + lm.encode(head), t2=lm.encode(middle), t3=lm.encode(tail))


@dataclass
class ProbeCosts:
    """What probing spent: requests made, ids billed, and what was actually computed."""

    queries: int = 0
    pairs: int = 0
    memo_pairs: int = 0
    prompt_ids: int = 0
    forwards: int = 0
    ids_fed: int = 0
    #: Seconds in the model's forwards alone, and in probing as a whole (serving the answers too).
    forward_s: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {"queries": self.queries, "pairs": self.pairs, "memo_pairs": self.memo_pairs,
                "prompt_ids": self.prompt_ids, "forwards": self.forwards, "ids_fed": self.ids_fed,
                "forward_s": self.forward_s, "seconds": self.seconds}


class Prober:
    """Provider 1 answering De-mark's probe queries, and the attacker's memory of the answers.

    The provider side serves each query exactly as it serves text: its model's
    logits after the prompt, the config's temperature, top-k and top-p, then its
    watermark applied on the query's own ids. The attacker side sees only the two
    answers' probabilities (gray-box) or sampled answers (black-box).
    """

    def __init__(self, provider: "Provider", config: "GenerationConfig", method: DeMark, seed: int) -> None:
        self.provider = provider
        self.member = require(provider.member, "prefix_tree_logits", "mode 'demark'")
        self.method = method
        self.serving = (config.temperature, config.top_p, config.top_k)
        self.template = probe_template(self.member)
        # A probe is answered by its first token: end of text masked, as before min_new_tokens.
        self.invalid = served_mask(self.member.vocab, end_of_text=False)
        #: Seeds the per-query draws and the black-box answers (the generation's, or calibration's own).
        self.seed = seed
        self.requests = 0  # served so far: numbers the fresh per-query draws
        self.coins = torch.Generator()
        self.coins.manual_seed(derive_seed("demark-black-box", seed))
        self.memo: dict[tuple, float] = {}

    # -- attacker side -----------------------------------------------------------------
    def ratios(self, context: Sequence[int], tokens: Sequence[int], costs: ProbeCosts,
               remember: bool = True) -> torch.Tensor:
        """Algorithm 1 for every pair of ``tokens`` after ``context``: the antisymmetric matrix R."""
        ctx = tuple(int(t) for t in context)
        k = len(tokens)
        r = torch.zeros((k, k), dtype=torch.float64)
        todo: list[tuple[int, int]] = []
        for i, j in itertools.combinations(range(k), 2):
            known = self.memo.get((ctx, tokens[i], tokens[j])) if remember else None
            if known is None:
                todo.append((i, j))
            else:
                r[i, j], r[j, i] = known, -known
                costs.memo_pairs += 1
        if todo:
            pairs = [(int(tokens[i]), int(tokens[j])) for i, j in todo]
            for (i, j), value in zip(todo, self._ask(ctx, pairs, costs)):
                r[i, j], r[j, i] = value, -value
                if remember:
                    self.memo[(ctx, tokens[i], tokens[j])] = value
                    self.memo[(ctx, tokens[j], tokens[i])] = -value
        return r

    def _ask(self, ctx: tuple[int, ...], pairs: list[tuple[int, int]], costs: ProbeCosts) -> list[float]:
        """Both orders of every pair, asked of the provider; one ratio per pair."""
        t0 = time.perf_counter()
        ordered = [q for a, b in pairs for q in ((a, b), (b, a))]
        rows = self._forward(ctx, ordered, costs)
        per_query = self.method.samples if self.method.access == "black" else 1
        out = []
        for n, (a, b) in enumerate(pairs):
            ab = self._answers(self.template.query(ctx, a, b), rows[2 * n], a, b, per_query)
            ba = self._answers(self.template.query(ctx, b, a), rows[2 * n + 1], a, b, per_query)
            out.append(self._ratio(ab, ba))
        query_len = len(self.template.query(ctx, 0, 0))
        costs.pairs += len(pairs)
        costs.queries += len(ordered) * per_query
        costs.prompt_ids += len(ordered) * per_query * query_len
        costs.seconds += time.perf_counter() - t0
        return out

    def _ratio(self, ab: tuple[float, float], ba: tuple[float, float]) -> float:
        """Gray-box: log of the summed probabilities. Black-box: log of the clipped counts."""
        a, b = ab[0] + ba[0], ab[1] + ba[1]
        if self.method.access == "black":
            total = 2 * self.method.samples
            n = min(max(a, 1.0), total - 1.0)
            return math.log(n / (total - n))
        if a == 0.0 and b == 0.0:
            return 0.0  # neither answer is served at all: no evidence either way
        if a > 0 and b > 0:
            return math.log(a / b)
        return math.inf if a > 0 else -math.inf  # one answer never served: no finite ratio

    # -- provider side -----------------------------------------------------------------
    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        """A probe's raw last logits as provider 1 serves them, before its watermark (float64)."""
        return process_logits(logits, self.invalid, *self.serving)

    def _answers(self, query: list[int], logits: torch.Tensor, a: int, b: int,
                 requests: int) -> tuple[float, float]:
        """What the API gives back for ``requests`` identical queries: P(a), P(b) or answer counts."""
        served = self.serve(logits)
        if self.method.access == "gray":
            dist = self._watermarked(served, query)
            return float(dist[a]), float(dist[b])
        hits = misses = 0
        dist = None
        for _ in range(requests):
            if dist is None or self.method.per_query_draw:
                dist = self._watermarked(served, query)
            pa, pb = float(dist[a]), float(dist[b])
            # An answer starting with neither phrase is asked again: the draw is between the two.
            share = pa / (pa + pb) if pa + pb > 0 else 0.5
            if float(torch.rand(1, generator=self.coins, dtype=torch.float64)) < share:
                hits += 1
            else:
                misses += 1
        return float(hits), float(misses)

    def _watermarked(self, served: torch.Tensor, query: list[int]) -> torch.Tensor:
        """Provider 1's watermarked distribution after ``query`` (a whole prompt: prompt_len = its length)."""
        p = self.provider
        state = p.state
        if self.method.per_query_draw:
            self.requests += 1
            state = p.scheme.new_state(derive_seed("demark-probe", self.seed, p.index, self.requests))
        return p.distribution(served, query, len(query), state)

    def _forward(self, ctx: tuple[int, ...], ordered: list[tuple[int, int]], costs: ProbeCosts) -> list[torch.Tensor]:
        """The last logits of every ordered query, computed as a prefix cache serves them.

        ``t1 c`` is computed once, ``a t2 c`` once per first phrase, ``b t3 c`` once
        per query (batched): the same logits as each whole query alone, fewer ids.
        """
        tpl, c = self.template, list(ctx)
        firsts = list(dict.fromkeys(a for a, _ in ordered))
        row_of = {a: i for i, a in enumerate(firsts)}
        cost = FeedCost()
        rows = self.member.prefix_tree_logits(tpl.t1 + c, [[a] + tpl.t2 + c for a in firsts],
                                              [(row_of[a], [b] + tpl.t3 + c) for a, b in ordered], PROBE_BATCH, cost)
        costs.forwards += cost.forwards
        costs.ids_fed += cost.ids_fed
        costs.forward_s += cost.seconds
        return rows


# -- calibration: h and delta, learnt once per service ----------------------------------
@dataclass
class Calibration:
    """What De-mark learns about a service before generating (Algorithms 3 and 4), and its cost."""

    h: int
    delta: float
    h_source: str  # "estimated" or "given"
    delta_source: str
    same_rate: dict[int, float] = field(default_factory=dict)
    costs: ProbeCosts = field(default_factory=ProbeCosts)
    cached: bool = False

    def as_dict(self) -> dict:
        return {"same_rate": dict(self.same_rate), **self.costs.as_dict(), "cached": self.cached}


#: Calibrations of this process, by service and settings: the attacker learns h and delta once.
_CALIBRATIONS: dict[tuple, Calibration] = {}


def calibration_words(lm: Member, count: int, context: int,
                      gen: torch.Generator) -> tuple[list[int], list[int]]:
    """``count`` random word tokens to probe and ``context`` more as a random context, all distinct.

    De-mark draws English words from a corpus; offline, the model's own word-start
    tokens (a space and three or more lower-case letters) stand in for them.
    """
    pool = [i for i, b in enumerate(lm.vocab.token_bytes) if b is not None and _WORD.match(b)]
    if len(pool) < count + context:
        raise WashInputError(f"mode 'demark': model {lm.name} has only {len(pool)} word tokens; "
                             f"words + max_h must not exceed that")
    picked = [pool[i] for i in torch.randperm(len(pool), generator=gen)[:count + context].tolist()]
    return picked[:count], picked[count:]


# -- the generation ---------------------------------------------------------------------
class _DeMarkSteps(Stepper):
    """Provider 1 drawn from De-mark's de-biased distribution, after calibrating h and delta."""

    def __init__(self, method: DeMark, run: Generation) -> None:
        super().__init__(method, run)
        self.method = method
        self.config = run.config
        self.m = run.prov_model[0]
        self.member = run.members[self.m]
        self.prober = Prober(run.providers[0], run.config, method, seed=run.config.seed)
        self.costs = ProbeCosts()
        self.calibration: Calibration | None = None
        self.candidate_counts: list[int] = []
        self.green_counts: list[int] = []

    def _probe(self, prober: Prober, context: Sequence[int], tokens: Sequence[int], costs: ProbeCosts,
               remember: bool = True) -> torch.Tensor:
        """Algorithm 1 on provider 1's model thread (where its forwards run)."""
        return side_by_side([(self.member, lambda: prober.ratios(context, tokens, costs, remember))])[0]

    # -- before the first token ------------------------------------------------------
    def _calibration_key(self) -> tuple:
        p, c, method = self.run.providers[0], self.config, self.method
        # Probes served under the generation's draw (Water-Bag) learn that draw's list.
        state = None if method.per_query_draw else repr(p.state)
        return (str(p.spec), state, c.temperature, c.top_k, c.top_p, method.access, method.samples,
                method.h, method.max_h, method.delta, method.words, method.per_query_draw)

    def before(self, should_stop: Callable[[], bool]) -> Iterator[LoadEvent]:
        """Learn h (Algorithm 3) and delta (Algorithm 4) by probing, unless given or already learnt."""
        method = self.method
        if method.h and method.delta:
            self.calibration = Calibration(method.h, method.delta, "given", "given")
            return
        key = self._calibration_key()
        if key in _CALIBRATIONS:
            self.calibration = dataclasses.replace(_CALIBRATIONS[key], cached=True)
            return
        seed = derive_seed("demark-calibration", self.m)
        prober = Prober(self.run.providers[0], self.config, method, seed=seed)
        gen = torch.Generator()
        gen.manual_seed(seed)
        words, context = calibration_words(self.member, method.words, method.h or method.max_h, gen)
        costs = ProbeCosts()
        asked = method.words * (method.words - 1) * (method.samples if method.access == "black" else 1)
        by_width: dict[int, torch.Tensor] = {}
        rates: dict[int, float] = {}
        h = method.h
        if not h:
            wider = None
            for w in range(method.max_h, 0, -1):
                if should_stop():
                    self.run.finish = "stopped"
                    return
                yield LoadEvent(f"De-mark: estimating the n-gram length h (Algorithm 3), window {w} of "
                                f"{method.max_h}: {asked} probe queries")
                by_width[w] = self._probe(prober, context[-w:], words, costs, remember=False)
                scores = threshold_scores(by_width[w])
                if wider is not None:
                    rates[w] = same_rate(scores, wider)
                    if rates[w] < SAME_RATE:
                        break  # the colours scattered: the n-gram is one id wider than this window
                wider = scores
            h = context_width(rates, method.max_h)
        delta = method.delta
        if not delta:
            if h not in by_width:
                if should_stop():
                    self.run.finish = "stopped"
                    return
                yield LoadEvent(f"De-mark: estimating the bias delta (Algorithm 4): {asked} probe queries")
                by_width[h] = self._probe(prober, context[-h:], words, costs, remember=False)
            delta = max(0.0, strength(by_width[h]) or 0.0)
        self.calibration = Calibration(h, delta, "given" if method.h else "estimated",
                                       "given" if method.delta else "estimated", rates, costs)
        _CALIBRATIONS[key] = self.calibration

    # -- one token -------------------------------------------------------------------
    def step(self) -> StepEvent | None:
        """Probe the current n-gram's top-k candidates, take the estimated bias off, draw one token."""
        assert self.calibration is not None
        t0 = time.perf_counter()
        run, m, method = self.run, self.m, self.method

        def served() -> tuple[torch.Tensor, torch.Tensor]:
            base = run.base_logits(m)
            return run.provider_dist(0, base), entropy_of(base)

        dist, h_base = side_by_side([(self.member, served)])[0]
        top = torch.topk(dist, min(method.k, dist.numel()))
        rows = [int(r) for r, p in zip(top.indices, top.values) if p > 0]
        green = [False] * len(rows)
        delta = self.calibration.delta
        if delta > 0 and len(rows) > 1:
            ids = run.contexts[m].ids
            ngram = ids[max(0, len(ids) - self.calibration.h):]
            green = estimate_green(self._probe(self.prober, ngram, rows, self.costs), delta)
        self.candidate_counts.append(len(rows))
        self.green_counts.append(sum(green))
        index = torch.tensor(rows, dtype=torch.long)
        logits = torch.log(dist[index]) - method.eta * delta * torch.tensor(green, dtype=torch.float64)
        debiased = torch.zeros_like(dist)
        debiased[index] = torch.softmax(logits, dim=0)
        q = run.system.on_union(m, debiased)
        shown = read_step(draw(q, uniform(run.gen)), h_base, [q], self.config.view_k, [ShownProvider(q)])
        if run.end_of_step(shown.token):
            return None
        return run.commit(shown.token, t0, 0, shown)

    def finish(self, result: RunResult) -> RunResult:
        cal = self.calibration
        this_run = [self.costs] + ([cal.costs] if cal is not None and not cal.cached else [])
        timing = result.timing
        timing.forward_calls[self.m] += sum(c.forwards for c in this_run)
        timing.ids_fed[self.m] += sum(c.ids_fed for c in this_run)
        timing.forward_s[self.m] += sum(c.forward_s for c in this_run)
        result.settings["baseline"] = self._costs_dict(len(self.run.tokens))
        return result

    def _costs_dict(self, tokens: int) -> dict:
        cal, c = self.calibration, self.costs
        per = max(tokens, 1)
        counts = self.candidate_counts
        return {
            "method": self.method.name, "params": str(self.method),
            "variant": f"{self.method.access}-box",
            "h": cal.h if cal else None, "delta": cal.delta if cal else None,
            "h_source": cal.h_source if cal else None, "delta_source": cal.delta_source if cal else None,
            "calibration": cal.as_dict() if cal else None,
            "probe_queries": c.queries, "probe_pairs": c.pairs, "memo_pairs": c.memo_pairs,
            "probe_prompt_ids": c.prompt_ids, "probe_forwards": c.forwards, "probe_ids_fed": c.ids_fed,
            "probe_forward_s": c.forward_s, "probe_s": c.seconds, "queries_per_token": c.queries / per, "probe_s_per_token": c.seconds / per,
            "candidates_per_token": sum(counts) / len(counts) if counts else 0.0,
            "green_fraction": sum(self.green_counts) / sum(counts) if sum(counts) else 0.0,
        }
