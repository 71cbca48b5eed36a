"""No result changes: seeded generations in every mode match the committed fingerprint.

``fingerprint.json`` was written from the engine before it was restructured
(``fingerprint_cases.py`` says what is hashed and how to rewrite it after an
intended change of behaviour). Each case hashes its text, its event stream and
every distribution a token was drawn from; an identification case hashes what it
reports. The text and the number of draws are checked on every machine; the hashes
of floats on the kinds of CPU recorded (their last bits differ between CPUs). A
mismatch names the case and the part.
"""

from __future__ import annotations

import json

import pytest

from fingerprint_cases import CASES, EXPECTED, IDENTIFY_CASES, check, run_case, run_identify_case

_EXPECTED = json.loads(EXPECTED.read_text())


def test_every_case_has_a_committed_fingerprint_on_every_recorded_platform():
    assert set(_EXPECTED["portable"]) == set(CASES)  # an identification has no portable part
    for where, cases in _EXPECTED["platforms"].items():
        assert set(cases) == set(CASES) | set(IDENTIFY_CASES), where


@pytest.mark.parametrize("name", sorted(CASES))
def test_seeded_generation_matches_the_committed_fingerprint(name, single_thread):
    check(name, run_case(name), _EXPECTED)


@pytest.mark.parametrize("name", sorted(IDENTIFY_CASES))
def test_seeded_identification_matches_the_committed_fingerprint(name, single_thread):
    check(name, run_identify_case(name), _EXPECTED)


def test_text_is_checked_everywhere_and_float_bits_only_where_their_platform_is_recorded(monkeypatch):
    import fingerprint_cases as fc

    record = {"portable": {"c": {"text": "t", "n_draws": 2}},
              "platforms": {"GenuineIntel *, torch 9.9": {"c": {"events": "e", "draws": "d"}}}}
    found = {"text": "t", "n_draws": 2, "events": "e", "draws": "d"}
    # an entry recorded before the dispatch level was matches that vendor and torch at any level
    assert fc.expected("c", record, "GenuineIntel AVX2, torch 9.9")[1] == {"events": "e", "draws": "d"}
    assert fc.expected("c", record, "AuthenticAMD AVX2, torch 9.9")[1] is None
    monkeypatch.setattr(fc, "platform", lambda: "GenuineIntel AVX512, torch 9.9")
    fc.check("c", found, record)
    with pytest.raises(AssertionError, match="float bits"):
        fc.check("c", {**found, "draws": "x"}, record)
    monkeypatch.setattr(fc, "platform", lambda: "AuthenticAMD AVX512, torch 9.9")
    with pytest.raises(AssertionError, match="text or number of draws"):
        fc.check("c", {**found, "text": "u"}, record)
    with pytest.raises(pytest.skip.Exception, match="add-platform"):
        fc.check("c", {**found, "draws": "x"}, record)
