"""The shared conformance vectors (clients/conformance/vectors.json, issue 31).

Two parts. `jcs`: RFC 8785's own examples and number samples, with the canonical text the
RFC prints. `releases`: bodies sealed here by the real pipeline (non-ASCII text, an
emoji, values with fractions and exponents, an integral double, a refusal with no
citations and no cards), their volatile ids and dates pinned, each with the hashes of
release policy versions 1 and 2. The Python, TypeScript and Go clients check every vector;
this module fails when the committed file is not what the server computes. After a
deliberate change of the bodies, rewrite it with
`KOINON_WRITE_VECTORS=1 .venv/bin/python -m pytest tests/audit/test_conformance.py`.
"""

import copy
import hashlib
import json
import os
import struct

import pytest
import rfc8785

from audit.models import OutputRelease
from audit.receipts import POLICY_VERSION, body_hashes, canonical_jcs, canonical_json
from datasets.services import dataset_upload
from tests.answers.helpers import INVOICES, ask, ingest
from tests.outside.channels import pages_channel
from tests.outside.helpers import LocalServer
from tests.services import ROOT

pytestmark = pytest.mark.django_db

VECTORS = ROOT / "clients" / "conformance" / "vectors.json"

# RFC 8785 §3.2.2 and §3.2.3 (the input as printed, and the canonical text it gives),
# then escapes, empty containers and an integer no double holds.
RFC8785_EXAMPLES = [
    (
        "rfc8785-3.2.2-serialization",
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}',
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    ),
    (
        "rfc8785-3.2.3-sorting",
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return",'
        ' "\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One",'
        ' "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control",'
        ' "\\u00f6": "Latin Small Letter O With Diaeresis"}',
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign",'
        '"😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    ),
    (
        "escapes-and-unescaped-characters",
        '{"s": "\\u0000\\u0008\\t\\n\\u000b\\f\\r\\u001f \\u007f\\u2028\\u2029\\"\\\\/é"}',
        '{"s":"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f \u007f\u2028\u2029\\"\\\\/é"}',
    ),
    (
        "nested-empty-and-integers",
        '{"b": [], "a": {}, "c": [[], {"z": -0.0, "y": 1.0, "x": 9007199254740991}]}',
        '{"a":{},"b":[],"c":[[],{"x":9007199254740991,"y":1,"z":0}]}',
    ),
    ("integer-beyond-doubles", "[12345678901234567891]", "[12345678901234567000]"),
]
# RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text (NaN and Infinity,
# which JSON cannot carry, left out).
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]

DOCUMENT = (
    "# Überprüfung\n\nDie Plattform-Betriebsgruppe 🚀 verantwortet die Dienstüberprüfungen in "
    "Zürich — «naïve» 東京.\n"
)
SAMPLES = b"sample,weight\nS-1,0.0000001\nS-2,0.00000005\n"
STARS = b"star,distance\nVega,2.365e14\nDeneb,2.5e16\n"
# (vector name, question, evidence policy): each seals a real body.
CASES = [
    # Strict judges at its own point: the question names the place and repeats the
    # sentence's non-ASCII tail, so the quote scores well above it (0.87; without the tail
    # 0.70, without the place 0.52).
    (
        "quote-non-ascii-emoji-strict",
        "Wer verantwortet die Dienstüberprüfungen in Zürich — «naïve» 東京?",
        "strict",
    ),
    ("value-small-exponent-fraction", "What is the total weight of the samples?", None),
    ("value-large-exponent", "What is the total distance of the stars?", None),
    ("value-integral-double", "What is the average amount of the invoices?", None),
    ("refusal-no-citations-no-cards", "What colour is the moon?", None),
    # A quote from an outside channel's snapshot (issue 50): its citation's `outside`.
    ("quote-outside-snapshot", "How long are invoices kept?", "fetch_url"),
]
# What an outside snapshot's citation says that differs per run: where the page was served
# and when it was fetched.
PINNED_PAGE = "https://pages.example/retention.html"
PINNED_FETCHED_AT = "2026-01-15T00:00:00+00:00"
PINNED_RUN = "00000000-0000-4000-8000-000000000031"
PINNED_DATE = "2026-01-15"
PINNED_IDS = ("document_id", "revision_id", "dataset_id", "snapshot_id", "query_id")


def jcs_vectors() -> list[dict]:
    examples = list(RFC8785_EXAMPLES)
    for bits, text in RFC8785_NUMBERS:
        (number,) = struct.unpack(">d", bytes.fromhex(bits))
        examples.append((f"rfc8785-appendix-b-{bits}", repr(number), text))
    return [
        {
            "name": name,
            "input_json": source,
            "canonical": expected,
            "sha256": hashlib.sha256(expected.encode()).hexdigest(),
        }
        for name, source, expected in examples
    ]


def pinned(body: dict) -> dict:
    """The parts of a sealed body a release covers, with run, release and row ids and the
    revision date replaced by fixed values (the same row keeps the same number)."""
    answer = copy.deepcopy(body["answer"])
    numbers: dict[tuple[str, object], int] = {}
    for item in [*answer["citations"], *answer["cards"]]:
        for key in PINNED_IDS:
            if key in item:
                same = [n for (k, _), n in numbers.items() if k == key]
                item[key] = numbers.setdefault((key, item[key]), len(same) + 1)
        if "revision_date" in item:
            answer["text"] = answer["text"].replace(item["revision_date"], PINNED_DATE)
            item["revision_date"] = PINNED_DATE
        outside = item.get("outside")
        if outside:
            served = outside["url"]
            host = served.split("/")[2].split(":")[0]
            answer["text"] = (
                answer["text"]
                .replace(served, PINNED_PAGE)
                .replace(f"fetched from {host} on ", "fetched from pages.example on ")
            )
            item["title"] = item["title"].replace(served, PINNED_PAGE)
            item["outside"] = {
                **outside,
                "snapshot_id": 1,
                "url": PINNED_PAGE,
                "fetched_at": PINNED_FETCHED_AT,
            }
    evidence = body["evidence"]
    return {
        "run_id": PINNED_RUN,
        "generation": 1,
        "mode": body["mode"],
        "answer": answer,
        "evidence": {
            "status": evidence["status"],
            "answer_status": evidence["answer_status"],
            "policy": evidence["policy"],
        },
    }


def release_vectors(name: str, body: dict, kind: str) -> list[dict]:
    vectors = []
    for version in ("1", "2"):
        canonical = canonical_json if version == "1" else canonical_jcs
        hashes = body_hashes(body, policy_version=version)
        sealed = {
            **body,
            "release": {
                "id": f"00000000-0000-4000-8000-00000000031{version}",
                "kind": kind,
                "policy_version": version,
                **hashes,
            },
        }
        vectors.append(
            {
                "name": f"{name}-v{version}",
                "policy_version": version,
                "body_json": json.dumps(sealed, ensure_ascii=False),
                "canonical": {
                    "citations": canonical(body["answer"]["citations"]).decode(),
                    "cards": canonical(body["answer"]["cards"]).decode(),
                    "policy": canonical(body["evidence"]["policy"]).decode(),
                },
                "release": hashes,
            }
        )
    return vectors


@pytest.fixture
def conformance_library(space, owner, settings):
    ingest(owner, space, "über.md", DOCUMENT)
    for filename, data, table in (
        ("tiny.csv", SAMPLES, "samples"),
        ("stars.csv", STARS, "stars"),
        ("invoices.csv", INVOICES, "orders"),
    ):
        dataset_upload(user=owner, space=space, filename=filename, data=data, table=table)
    # A page an outside channel (fetch_url) serves this space, from a loopback server.
    settings.KOINON_OUTSIDE_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    with LocalServer(b"%PDF-1.4") as server:
        pages_channel(owner=owner, space=space, urls=[server.url("/page.html")])
        yield


def test_rfc8785_gives_the_rfcs_own_canonical_text():
    for vector in jcs_vectors():
        decoded = json.loads(vector["input_json"])
        assert canonical_jcs(decoded).decode() == vector["canonical"], vector["name"]
        if vector["name"].startswith("rfc8785-"):  # the library alone, on the RFC's own
            assert rfc8785.dumps(decoded).decode() == vector["canonical"], vector["name"]


def test_integers_beyond_doubles_are_canonical_as_the_double_a_verifier_parses():
    assert canonical_jcs({"n": 2**60 + 1}) == b'{"n":1152921504606847000}'
    assert canonical_jcs([(1, 2)]) == b"[[1,2]]"  # a tuple is the list a client receives


def test_the_committed_vectors_are_what_the_server_computes(conformance_library, member):
    releases = []
    for name, question, mode in CASES:
        policy = {"evidence_policy": {"mode": mode}} if mode else {}
        if mode == "fetch_url":
            policy = {"evidence_policy": {"mode": "strict", "allowed_tools": ["fetch_url"]}}
        body = ask(member, question, **policy)
        # The server's own hashes of a version 2 release are the JCS reference's.
        received = json.loads(json.dumps(body, ensure_ascii=False))
        row = OutputRelease.objects.get(pk=body["release"]["id"])
        assert row.policy_version == POLICY_VERSION == "2"
        for field, value in (
            ("citations_sha256", received["answer"]["citations"]),
            ("cards_sha256", received["answer"]["cards"]),
            ("policy_sha256", received["evidence"]["policy"]),
        ):
            assert getattr(row, field) == hashlib.sha256(rfc8785.dumps(value)).hexdigest()
        releases += release_vectors(name, pinned(body), body["release"]["kind"])
    document = {
        "about": (
            "koinon's release conformance vectors (issue 31): generated and checked by "
            "tests/audit/test_conformance.py; see docs/releases.md."
        ),
        "jcs": jcs_vectors(),
        "releases": releases,
    }
    text = json.dumps(document, ensure_ascii=False, indent=1) + "\n"
    if os.environ.get("KOINON_WRITE_VECTORS") == "1":
        VECTORS.parent.mkdir(parents=True, exist_ok=True)
        VECTORS.write_text(text, encoding="utf-8")
    committed = json.loads(VECTORS.read_text(encoding="utf-8"))
    assert committed == document, (
        "clients/conformance/vectors.json is not what the server computes; after a deliberate "
        "change rewrite it with KOINON_WRITE_VECTORS=1 (see this module's docstring)"
    )


def test_the_vectors_cover_what_they_promise():
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    vectors = {v["name"]: v for v in document["releases"]}
    bodies = {name: json.loads(v["body_json"]) for name, v in vectors.items()}
    assert {v["policy_version"] for v in vectors.values()} == {"1", "2"}
    texts = " ".join(b["answer"]["text"] for b in bodies.values())
    assert "🚀" in texts and "東京" in texts and "ü" in texts
    assert any(not b["answer"]["citations"] and not b["answer"]["cards"] for b in bodies.values())
    values = [c["value"] for b in bodies.values() for c in b["answer"]["cards"]]
    assert any(0 < v < 1 for v in values) and any(v > 1e15 for v in values)
    assert any(float(v).is_integer() and isinstance(v, float) for v in values)
    raw = " ".join(v["body_json"] for v in vectors.values())
    assert "e-07" in raw and "e+16" in raw  # exponents as the server writes them
    # Version 1 and 2 disagree on these numbers: that is why version 2 exists.
    small = vectors["value-small-exponent-fraction-v1"], vectors["value-small-exponent-fraction-v2"]
    assert small[0]["release"]["cards_sha256"] != small[1]["release"]["cards_sha256"]
    assert '"value":1.5e-7' in small[1]["canonical"]["cards"]
    assert len(document["jcs"]) == len(RFC8785_EXAMPLES) + len(RFC8785_NUMBERS)
