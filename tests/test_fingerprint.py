"""No result changes: seeded generations in every mode match the committed fingerprint.

``fingerprint.json`` was written from the engine before it was restructured
(``fingerprint_cases.py`` says what is hashed and how to rewrite it after an
intended change of behaviour). Each case hashes its text, its event stream and
every distribution a token was drawn from; a mismatch names the case and the part.
"""

from __future__ import annotations

import json

import pytest

from fingerprint_cases import CASES, EXPECTED, run_case

_EXPECTED = json.loads(EXPECTED.read_text())


def test_every_case_has_a_committed_fingerprint():
    assert set(_EXPECTED) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_seeded_generation_matches_the_committed_fingerprint(name, single_thread):
    assert run_case(name) == _EXPECTED[name]
