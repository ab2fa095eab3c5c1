"""Typed views of koinon's answer bodies (SPEC §5, docs/releases.md).

Every class keeps to what the server sent: nothing is inferred. An answer body without an
`evidence` report reads as `unknown`, never as success; a body without `release` has no
verified release.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import rfc8785

from koinon_client.transparency import (
    Checkpoint,
    LogVerificationError,
    checkpoint_open,
    entry_from_receipt,
    leaf_hash,
    proof_hashes,
    verify_inclusion,
)


class ProofSource(Protocol):
    """What `Release.verify_inclusion` asks of a client: one JSON request. `Client` is one;
    the models never import it (the client builds models from what it reads)."""

    def request(self, method: str, path: str, **kwargs: Any) -> Any: ...


UNKNOWN = "unknown"
# Release policy versions this client verifies: 1 hashes Python's JSON serialisation,
# 2 (koinon's current one) RFC 8785, the JSON Canonicalization Scheme (docs/releases.md).
POLICY_VERSIONS = ("1", "2")
HASH_NAMES = ("text_sha256", "citations_sha256", "cards_sha256", "policy_sha256")
_SAFE_INTEGER = 2**53 - 1


def canonical(value: Any, policy_version: str = "2") -> bytes:
    """The bytes a release of `policy_version` hashes (docs/releases.md).

    Version 2: RFC 8785 (JCS) — keys in UTF-16 order, numbers as ECMAScript writes
    doubles (an integer beyond ±(2**53 - 1) as the double it parses to). Version 1: keys
    sorted by code point, `,`/`:` separators, non-ASCII as itself, numbers as Python
    writes them. ValueError for another version.

    >>> canonical({"b": 1.5e-07, "a": "é"})
    b'{"a":"\xc3\xa9","b":1.5e-7}'
    """
    if policy_version == "2":
        return rfc8785.dumps(_as_doubles(value))
    if policy_version == "1":
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    raise ValueError(f"unknown release policy version {policy_version!r}")


def _as_doubles(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _as_doubles(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_doubles(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _SAFE_INTEGER:
        return float(value)
    return value


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class EvidencePolicy:
    """What evidence an answer may and must use.

    >>> EvidencePolicy(mode="strict", required_tools=("keyword_search",)).to_dict()
    {'mode': 'strict', 'required_tools': ['keyword_search']}

    `mode`: `auto`, `strict` or `general_knowledge`; `allowed_tools` None leaves the
    server's default (every implemented tool).
    """

    mode: str = "auto"
    allowed_tools: tuple[str, ...] | None = None
    required_tools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"mode": self.mode}
        if self.allowed_tools is not None:
            body["allowed_tools"] = list(self.allowed_tools)
        if self.required_tools:
            body["required_tools"] = list(self.required_tools)
        return body

    @classmethod
    def from_dict(cls, data: Any) -> EvidencePolicy | None:
        if not isinstance(data, dict):
            return None
        allowed = data.get("allowed_tools")
        return cls(
            mode=str(data.get("mode", UNKNOWN)),
            allowed_tools=tuple(allowed) if isinstance(allowed, list) else None,
            required_tools=tuple(data.get("required_tools") or ()),
        )


@dataclass(frozen=True)
class RetrievalOutcome:
    """One retrieval tool's outcome: `state` `succeeded`/`failed`, `code` such as
    `matched`, `empty_corpus`, `no_relevant_hit`, `embedding_unavailable`, `timeout`."""

    tool: str
    state: str
    code: str
    result_count: int = 0
    retryable: bool = False

    @classmethod
    def from_dict(cls, data: Any) -> RetrievalOutcome:
        data = data if isinstance(data, dict) else {}
        return cls(
            tool=str(data.get("tool", UNKNOWN)),
            state=str(data.get("state", UNKNOWN)),
            code=str(data.get("code", UNKNOWN)),
            result_count=int(data.get("result_count") or 0),
            retryable=bool(data.get("retryable", False)),
        )


@dataclass(frozen=True)
class EvidenceReport:
    """The answer's evidence report. HTTP 200 proves nothing; read this.

    `status`: `available`, `absent`, `partial`, `unavailable`, `not_requested` or `unknown`;
    `answer_status`: `evidence_backed`, `partial`, `general_knowledge`, `unverified`,
    `abstained` or `unknown`. A body without a report gives `unknown` for both:

    >>> EvidenceReport.from_body({"answer": {"text": "Trust me."}}).answer_status
    'unknown'
    """

    status: str = UNKNOWN
    answer_status: str = UNKNOWN
    policy: EvidencePolicy | None = None
    sources: tuple[dict, ...] = ()
    outcomes: tuple[RetrievalOutcome, ...] = ()

    @property
    def is_known(self) -> bool:
        return self.status != UNKNOWN and self.answer_status != UNKNOWN

    @property
    def is_evidence_backed(self) -> bool:
        """True only when the server said so: fully backed by permitted evidence."""
        return self.answer_status == "evidence_backed"

    @classmethod
    def from_body(cls, body: Any) -> EvidenceReport:
        evidence = body.get("evidence") if isinstance(body, dict) else None
        if not isinstance(evidence, dict):
            return cls()
        outcomes = evidence.get("outcomes")
        sources = evidence.get("sources")
        return cls(
            status=str(evidence.get("status") or UNKNOWN),
            answer_status=str(evidence.get("answer_status") or UNKNOWN),
            policy=EvidencePolicy.from_dict(evidence.get("policy")),
            sources=tuple(s for s in sources if isinstance(s, dict))
            if isinstance(sources, list)
            else (),
            outcomes=tuple(RetrievalOutcome.from_dict(o) for o in outcomes)
            if isinstance(outcomes, list)
            else (),
        )


@dataclass(frozen=True)
class Release:
    """The output release (receipt) of a published answer or refusal.

    `verify(body)` recomputes the four hashes from a response body, by the canonical form
    of the receipt's `policy_version`, and compares them with the receipt's: a changed
    text, citation, card or policy does not verify.

    >>> body = client.answer.create("Who owns service reviews?").body  # doctest: +SKIP
    >>> Release.from_body(body).verify(body)  # doctest: +SKIP
    True
    """

    id: str
    kind: str
    text_sha256: str
    citations_sha256: str
    cards_sha256: str
    policy_sha256: str
    reset_context: int | None = None
    publication_sequence: int | None = None
    policy_version: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> Release | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                id=str(data["id"]),
                kind=str(data["kind"]),
                text_sha256=str(data["text_sha256"]),
                citations_sha256=str(data["citations_sha256"]),
                cards_sha256=str(data["cards_sha256"]),
                policy_sha256=str(data["policy_sha256"]),
                reset_context=data.get("reset_context"),
                publication_sequence=data.get("publication_sequence"),
                policy_version=data.get("policy_version"),
            )
        except KeyError:
            return None

    @classmethod
    def from_body(cls, body: Any) -> Release | None:
        """The body's release, or None: no verified release was recorded for it."""
        return cls.from_dict(body.get("release")) if isinstance(body, dict) else None

    def mismatches(self, body: Any) -> list[str]:
        """Names of the hashes that do not match `body` (empty: it verifies), recomputed
        the way the receipt's `policy_version` says (none given: version 1, the only one
        before versions were reported). A version this client does not know verifies
        nothing: every name is returned."""
        version = self.policy_version or "1"
        if not isinstance(body, dict) or version not in POLICY_VERSIONS:
            return list(HASH_NAMES)
        answer = body.get("answer") if isinstance(body.get("answer"), dict) else {}
        evidence = body.get("evidence") if isinstance(body.get("evidence"), dict) else {}
        wrong = []
        text = answer.get("text")
        if not isinstance(text, str) or sha256_hex(text.encode()) != self.text_sha256:
            wrong.append("text_sha256")
        for name, value in (
            ("citations_sha256", answer.get("citations")),
            ("cards_sha256", answer.get("cards")),
            ("policy_sha256", evidence.get("policy")),
        ):
            try:
                digest = None if value is None else sha256_hex(canonical(value, version))
            except (ValueError, TypeError, RecursionError):  # no JSON value: NaN, a set …
                digest = None
            if digest != getattr(self, name):
                wrong.append(name)
        return wrong

    def verify(self, body: Any) -> bool:
        """True when every hash of the receipt matches the body."""
        return not self.mismatches(body)

    def verify_inclusion(
        self,
        client: ProofSource,
        body: dict,
        *,
        verifier_key: str,
        checkpoint: str | Checkpoint | None = None,
    ) -> Checkpoint:
        """Check that this receipt is in koinon's answer log, trusting only the log's public
        key (`verifier_key`, `<name>+<hex id>+<base64 key>`, obtained out of band): the body
        must match the receipt (`verify`); the log entry is rebuilt from the receipt as the
        server builds it (RFC 8785 JSON, leaf SHA-256(0x00 ‖ entry)); the inclusion proof
        fetched from `GET /v1/releases/<id>/proof` must lead to the root of a checkpoint
        that key signed — `checkpoint` (a signed note you kept, e.g. a witness's) or, by
        default, the latest one the server offers. Returns that checkpoint; raises
        LogVerificationError (or the server's typed error, e.g. NotFoundError code
        `not_integrated`) otherwise.

        >>> answer = client.runs.get(run_id)  # doctest: +SKIP
        >>> answer.release.verify_inclusion(client, answer.body, verifier_key=KEY)  # doctest: +SKIP
        Checkpoint(origin='koinon.example/answers', size=1207, ...)
        """
        if self.mismatches(body) or Release.from_body(body) != self:
            raise LogVerificationError("the body does not match this receipt", code="receipt")
        trusted = None
        if checkpoint is not None:
            trusted = checkpoint_open(
                checkpoint.note if isinstance(checkpoint, Checkpoint) else checkpoint,
                verifier_key,
            )
        params = {"tree_size": trusted.size} if trusted is not None else {}
        served = client.request("GET", f"/v1/releases/{self.id}/proof", params=params)
        if trusted is None:
            if not served.get("checkpoint"):
                raise LogVerificationError(
                    "no signed checkpoint covers this release yet", code="no_checkpoint"
                )
            trusted = checkpoint_open(served["checkpoint"], verifier_key)
        if served.get("tree_size") != trusted.size or not isinstance(served.get("index"), int):
            raise LogVerificationError("the proof is for another tree", code="proof_invalid")
        try:
            served_entry = json.loads(served["entry"])
        except (KeyError, TypeError, ValueError):
            raise LogVerificationError("the served entry is not JSON", code="malformed") from None
        entry = entry_from_receipt(body, served_entry)
        verify_inclusion(
            leaf=leaf_hash(canonical(entry, "2")),
            index=served["index"],
            tree_size=trusted.size,
            proof=proof_hashes(served.get("proof")),
            root=trusted.root,
        )
        log = body["release"].get("log")
        if isinstance(log, dict) and log.get("index") != served["index"]:
            raise LogVerificationError("the receipt names another log index", code="proof_invalid")
        return trusted


@dataclass(frozen=True)
class Answer:
    """A sealed answer body, typed. `body` keeps the server's JSON exactly as received
    (verify releases against it, not against a re-serialised copy)."""

    run_id: str
    generation: int | None
    text: str
    language: str | None
    citations: tuple[dict, ...]
    cards: tuple[dict, ...]
    evidence: EvidenceReport
    release: Release | None
    quality: dict = field(default_factory=dict)
    body: dict = field(default_factory=dict, repr=False)

    @property
    def verified(self) -> bool:
        """A release exists and its hashes match this body."""
        return self.release is not None and self.release.verify(self.body)

    @classmethod
    def from_body(cls, body: dict) -> Answer:
        answer = body.get("answer") if isinstance(body.get("answer"), dict) else {}
        return cls(
            run_id=str(body.get("run_id", "")),
            generation=body.get("generation"),
            text=str(answer.get("text", "")),
            language=answer.get("language"),
            citations=tuple(answer.get("citations") or ()),
            cards=tuple(answer.get("cards") or ()),
            evidence=EvidenceReport.from_body(body),
            release=Release.from_body(body),
            quality=body.get("quality") if isinstance(body.get("quality"), dict) else {},
            body=body,
        )


@dataclass(frozen=True)
class Event:
    """One server-sent event of a run: `id` is `<run_id>:<generation>:<seq>`; `event` is
    `started`, `tool`, `completed`, `failed`, `generation` or `timeout`."""

    id: str | None
    event: str
    data: Any

    @property
    def is_final(self) -> bool:
        return self.event in FINAL_EVENTS


FINAL_EVENTS = frozenset({"completed", "failed", "timeout", "complete", "error"})


@dataclass(frozen=True)
class SearchResults:
    """Raw retrieval candidates: `label` is always `unverified` (not an answer)."""

    label: str
    results: tuple[dict, ...]
    outcomes: tuple[RetrievalOutcome, ...]

    @classmethod
    def from_body(cls, body: dict) -> SearchResults:
        return cls(
            label=str(body.get("label", UNKNOWN)),
            results=tuple(body.get("results") or ()),
            outcomes=tuple(RetrievalOutcome.from_dict(o) for o in body.get("outcomes") or ()),
        )
