"""The blind quiz: a few questions, each a prompt and two or three texts a class must sort, as plain data.

A question names a preset (``wash.content.presets``: its providers and keys), a prompt of the
project's set, a seed and a token count, and the systems that wrote its texts, one text each:

* ``unwatermarked``: the same providers with every watermark off (the base models' consensus);
* ``single``: provider 1 alone, watermarked;
* ``wash``: WASH over all the preset's providers (N = 3 or 5), each watermarked with its own key.

The answer key is no hand-written list: a text is watermarked when its system's mode serves
watermarked distributions (the engine's own class fact, ``MODE_TABLE[mode].watermark``), so a
WASH text counts as watermarked even where no detector finds it, which is the quiz's point.
What the detectors say is never written here either: ``wash/ui/quiz.py`` reads each text's
verdicts and z traces from the recorded runs (``tools/quiz_record.py``).

The texts of a question appear under the letters A, B, C in an order shuffled once, with a
fixed seed per question (``order``): shuffled, so the letters give nothing away (the
unwatermarked text is not always A); fixed, so every student sees the same text under the
same letter, the class tally's "ticked B" counts one text, and "text B" means one text
when the class discusses it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable

from wash.content.presets import Preset, preset
from wash.content.prompts import load_prompts
from wash.core.errors import WashInputError
from wash.engine import MODE_TABLE

#: The modes a quiz text may come from.
UNWATERMARKED, SINGLE, WASH = "unwatermarked", "single", "wash"
#: Seeds every question's shuffle (``order``); question q uses ``ORDER_SEED + q``. 5800 put the
#: unwatermarked text first in both questions that have one; 5803 is the first seed after it that does not.
ORDER_SEED = 5803
#: The letters the texts go by, in the order they are shown.
LETTERS = ("A", "B", "C")
#: The Quiz tab's first lines: how to take it.
INTRO = ("**A blind quiz.** Each question shows two or three continuations of one prompt, written by the "
         "engine: by the models with every watermark off, by one watermarked provider alone, or by WASH "
         "averaging several watermarked providers. Tick every text you think was made by watermarked "
         "providers (none is a possible answer), then submit: each text's system, each provider's detector "
         "verdict and z, and its z trace appear. The class tally counts every student's first answer to each "
         "question; the teacher resets it.")


@dataclass(frozen=True)
class Question:
    """One question: a preset's providers, a prompt, a seed and token count, and one text per mode."""

    preset: str
    modes: tuple[str, ...]
    prompt_id: str
    seed: int = 0
    tokens: int = 80

    def __post_init__(self) -> None:
        known = (UNWATERMARKED, SINGLE, WASH)
        if not 2 <= len(self.modes) <= len(LETTERS) or len(set(self.modes)) != len(self.modes) \
                or not set(self.modes) <= set(known):
            raise WashInputError(f"a question has two or three distinct texts of {', '.join(known)}; "
                                 f"got {', '.join(self.modes)}")
        if WASH in self.modes and self.n not in (3, 5):
            raise WashInputError(f"a quiz's WASH text averages 3 or 5 providers; preset '{self.preset}' has {self.n}")

    @property
    def line_up(self) -> Preset:
        return preset(self.preset)

    @property
    def n(self) -> int:
        """How many providers the preset lines up (WASH's N)."""
        return len(self.line_up.rows)

    @property
    def aggregate(self) -> str:
        return self.line_up.aggregate

    def prompt(self) -> str:
        """The prompt's text, from the project's prompt set."""
        for p in load_prompts():
            if p.id == self.prompt_id:
                return p.text
        raise WashInputError(f"unknown prompt '{self.prompt_id}'")

    def short(self, mode: str) -> str:
        """The text's system in a few words (a figure's title)."""
        return {UNWATERMARKED: "unwatermarked", SINGLE: "provider 1 alone", WASH: f"WASH, N = {self.n}"}[mode]

    def system(self, mode: str) -> str:
        """What wrote the text of ``mode``, in words."""
        scheme = self.line_up.rows[0][1]
        return {UNWATERMARKED: f"the same {self.n} providers with every watermark off (unwatermarked)",
                SINGLE: f"provider 1 alone, watermarked ({scheme.upper()})",
                WASH: f"WASH over the {self.n} watermarked providers (N = {self.n})"}[mode]


def watermarked(mode: str) -> bool:
    """Whether a text of ``mode`` was made by watermarked providers: the mode's own fact in the engine."""
    return MODE_TABLE[mode].watermark


#: Every question uses 80 new tokens and seed 0, as the Lesson's steps do: long enough that one KGW
#: provider alone crossed z = 4 on every seed the Lesson measured (docs/bench-lesson.json).
QUESTIONS: tuple[Question, ...] = (
    Question("One model, 5 independent keys", (UNWATERMARKED, SINGLE, WASH), "fic-01"),
    Question("Paper setting: 3 providers, 2 model families", (UNWATERMARKED, WASH), "news-01"),
    Question("Five providers, five schemes", (SINGLE, WASH), "how-01"),
)


def question(number: int) -> Question:
    """Question ``number`` (1-based), or a one-line error naming the accepted numbers."""
    if not 1 <= int(number) <= len(QUESTIONS):
        raise WashInputError(f"unknown quiz question {number} (accepted: 1 to {len(QUESTIONS)})")
    return QUESTIONS[int(number) - 1]


def order(number: int) -> tuple[int, ...]:
    """Which of question ``number``'s modes each letter shows: ``order(q)[i]`` indexes ``modes`` for
    ``LETTERS[i]``. The same for every student and every call (see the module's docstring)."""
    shuffled = list(range(len(question(number).modes)))
    random.Random(ORDER_SEED + int(number)).shuffle(shuffled)
    return tuple(shuffled)


def letters(number: int) -> tuple[str, ...]:
    """The letters question ``number``'s texts go by."""
    return LETTERS[:len(question(number).modes)]


def mode_of(number: int, letter: str) -> str:
    """The mode that wrote text ``letter`` of question ``number``."""
    q = question(number)
    return q.modes[order(number)[letters(number).index(letter)]]


def key(number: int) -> frozenset[str]:
    """The letters of question ``number``'s watermarked texts: the answer."""
    return frozenset(x for x in letters(number) if watermarked(mode_of(number, x)))


@dataclass(frozen=True)
class Grade:
    """One answer, graded: whether the ticked letters are exactly the watermarked ones, and per letter."""

    number: int
    ticked: frozenset[str]
    key: frozenset[str]

    @property
    def right(self) -> bool:
        return self.ticked == self.key

    def letter_right(self, letter: str) -> bool:
        """Whether the student's call on one text (ticked or not) matches the key."""
        return (letter in self.ticked) == (letter in self.key)


def grade(number: int, ticked: Iterable[str]) -> Grade:
    """``ticked`` (letters of question ``number``; others are refused) against the key."""
    picked = frozenset(ticked or ())
    unknown = picked - set(letters(number))
    if unknown:
        raise WashInputError(f"question {number} has no text {', '.join(sorted(unknown))} "
                             f"(its texts: {', '.join(letters(number))})")
    return Grade(int(number), picked, key(number))
