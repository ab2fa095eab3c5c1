import hashlib

import pytest

from outside.errors import OutsideError
from outside.hits import Bounds, text_hash


@pytest.mark.parametrize(
    "fields",
    [{"timeout_seconds": 0}, {"timeout_seconds": -1}, {"max_results": 0}, {"max_bytes": 0}],
)
def test_bounds_refuse_a_limit_that_would_not_bound(fields):
    with pytest.raises(ValueError):
        Bounds(**fields)


def test_the_text_hash_is_sha256_of_the_utf8_text_as_koinon_hashes_an_extraction():
    assert (
        text_hash("Aufbewahrung: 10 Jahre") == hashlib.sha256(b"Aufbewahrung: 10 Jahre").hexdigest()
    )


def test_an_outside_errors_text_is_its_code_and_koinons_detail():
    error = OutsideError("provider_unavailable", "HTTP 503", retryable=True)
    assert (str(error), error.code, error.detail, error.retryable) == (
        "provider_unavailable: HTTP 503",
        "provider_unavailable",
        "HTTP 503",
        True,
    )
    assert str(OutsideError("timeout")) == "timeout"
