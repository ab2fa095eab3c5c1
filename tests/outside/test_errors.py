import pytest

from outside.errors import OUTSIDE_CODES, OutsideError, outcome_code

SPEC_OUTCOME_CODES = {
    "matched",
    "empty_corpus",
    "no_relevant_hit",
    "timeout",
    "cancelled",
    "embedding_configuration_invalid",
    "embedding_unavailable",
    "not_configured",
    "provider_unavailable",
    "access_denied",
    "permission_unavailable",
    "not_attempted",
}


def test_every_outside_code_is_reported_as_a_spec_outcome_code():
    for code in OUTSIDE_CODES:
        assert outcome_code(OutsideError(code)) in SPEC_OUTCOME_CODES, code


def test_a_refused_address_is_reported_as_access_denied():
    assert outcome_code(OutsideError("refused_address")) == "access_denied"


def test_a_body_over_the_cap_is_reported_as_the_provider_unavailable():
    assert outcome_code(OutsideError("too_large")) == "provider_unavailable"


def test_spec_codes_are_reported_as_they_are():
    for code in ("timeout", "provider_unavailable", "access_denied", "cancelled"):
        assert outcome_code(OutsideError(code)) == code


def test_it_rejects_a_code_outside_the_vocabulary():
    with pytest.raises(ValueError, match="unknown outside error code"):
        OutsideError("teapot")


def test_the_message_is_the_code_and_koinons_detail():
    error = OutsideError("provider_unavailable", "HTTP 503", retryable=True)
    assert str(error) == "provider_unavailable: HTTP 503"
    assert (error.code, error.detail, error.retryable) == ("provider_unavailable", "HTTP 503", True)
    assert str(OutsideError("timeout")) == "timeout"
