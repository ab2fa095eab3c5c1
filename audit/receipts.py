"""Release receipts: the canonical serialisations and the hashes a client recomputes from a
response body (docs/releases.md). Pure functions, no database: the answer log, the services
and the presenters all hash through here.
"""

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import rfc8785

from core.json_value import JsonValue

# The release policy version new releases get. Version 1 hashed Python's own JSON
# serialisation; version 2 hashes RFC 8785 (JCS), which every language can reproduce
# (docs/releases.md). Releases keep the version they were sealed with.
POLICY_VERSION = "2"
POLICY_VERSIONS = ("1", "2")
# JCS numbers are IEEE 754 doubles: an integer beyond ±(2**53 - 1) is the double a
# JavaScript or Go verifier parses it as.
_SAFE_INTEGER = 2**53 - 1

# A published answer body, read by key (docs/releases.md). Bodies are hashed again when read
# back from storage, unvalidated: a malformed one raises KeyError or TypeError here, which
# those readers catch. So its values stay `Any` rather than a shape this code cannot promise.
type AnswerBodyJson = Mapping[str, Any]


def canonical_json(value: object) -> bytes:
    """Release policy version 1's serialisation (docs/releases.md): UTF-8 JSON, keys
    sorted by code point, no insignificant whitespace, non-ASCII characters kept as they
    are, numbers as Python writes them."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def canonical_jcs(value: object) -> bytes:
    """Release policy version 2's serialisation: RFC 8785 (JCS) of the JSON value a
    client decodes from the body — keys in UTF-16 order, numbers as ECMAScript writes
    doubles. Raises `rfc8785.CanonicalizationError` (a ValueError) for NaN or infinity."""
    decoded = json.loads(json.dumps(value, ensure_ascii=False))  # tuples, int keys as sent
    return rfc8785.dumps(_as_doubles(decoded))


def _as_doubles(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return {key: _as_doubles(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_doubles(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _SAFE_INTEGER:
        return float(value)
    return value


_CANONICAL = {"1": canonical_json, "2": canonical_jcs}


def release_canonical(value: object, *, policy_version: str) -> bytes:
    """The serialisation a release of `policy_version` hashes; ValueError for a version
    this server does not know."""
    try:
        canonical = _CANONICAL[policy_version]
    except KeyError:
        raise ValueError(f"unknown release policy version {policy_version!r}") from None
    return canonical(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def body_hashes(body: AnswerBodyJson, *, policy_version: str = POLICY_VERSION) -> dict[str, str]:
    """The four release hashes of a body under a release policy version, recomputable by
    a client from the response body (docs/releases.md). ValueError for an unknown
    version or a value JCS cannot represent."""

    def digest(value: object) -> str:
        return sha256_hex(release_canonical(value, policy_version=policy_version))

    answer = body["answer"]
    return {
        "text_sha256": sha256_hex(answer["text"].encode()),
        "citations_sha256": digest(answer["citations"]),
        "cards_sha256": digest(answer["cards"]),
        "policy_sha256": digest(body["evidence"]["policy"]),
    }
