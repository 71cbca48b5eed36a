"""No result changes: seeded generations in every mode match the committed fingerprint.

``fingerprint.json`` was written from the engine before it was restructured
(``fingerprint_cases.py`` says what is hashed and how to rewrite it after an
intended change of behaviour). Each case hashes its text, its event stream and
every distribution a token was drawn from; an identification case hashes what it
reports. A mismatch names the case and the part.
"""

from __future__ import annotations

import json

import pytest

from fingerprint_cases import CASES, EXPECTED, IDENTIFY_CASES, run_case, run_identify_case

_EXPECTED = json.loads(EXPECTED.read_text())


def test_every_case_has_a_committed_fingerprint():
    assert set(_EXPECTED) == set(CASES) | set(IDENTIFY_CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_seeded_generation_matches_the_committed_fingerprint(name, single_thread):
    assert run_case(name) == _EXPECTED[name]


@pytest.mark.parametrize("name", sorted(IDENTIFY_CASES))
def test_seeded_identification_matches_the_committed_fingerprint(name, single_thread):
    assert run_identify_case(name) == _EXPECTED[name]
