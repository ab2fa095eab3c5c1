"""audit.signed_note against Go's golang.org/x/mod/sumdb/note: its published example keys
and notes (the package documentation's PeterNeumann note, doubly signed by EnochRoot), and a
real sum.golang.org checkpoint, read through audit.checkpoint."""

import base64

import pytest

from audit.checkpoint import checkpoint_open
from audit.signed_note import (
    MAX_SIGNATURES,
    KeyMalformed,
    NoteMalformed,
    NoteSigner,
    NoteVerifier,
    SignatureInvalid,
    key_id,
    open_note,
    sign_note,
)

# golang.org/x/mod/sumdb/note: the package documentation's example and note_test.go's keys.
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_LINE = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdng"
    "otpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_LINE = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox"
    "33WWd1RvMc+QQ=\n"
)
PETER_NOTE = TEXT + "\n" + PETER_LINE

# A checkpoint sum.golang.org served (Go's checksum database), with its published key.
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_NOTE = (
    "go.sum database tree\n65209736\n5+uGFjx6xBZG8ip1+wi77v+grwbhhukIrxEUS8PXvRo=\n\n"
    "— sum.golang.org Az3grnbssgK7ubgFX36gVETtNv0U23qxyAhAMai2QUfeGa3nB/akvkMdlUErfcZz7l/R3cVt"
    "Yspg3dxXABkGZZKdsQ8=\n"
)


def test_it_reproduces_go_notes_keys_and_signature_byte_for_byte():
    signer = NoteSigner.from_key(PETER_SKEY)
    assert signer.key_string() == PETER_SKEY
    assert signer.verifier().key_string() == PETER_VKEY
    assert NoteVerifier.from_key(PETER_VKEY) == signer.verifier()
    assert key_id("PeterNeumann", signer.verifier().public_key).hex() == "c74f20a3"
    # Ed25519 is deterministic: the same key signs the same text the same way.
    assert sign_note(TEXT, [signer]) == PETER_NOTE


def test_it_opens_gos_doubly_signed_note_with_either_key_or_both():
    doubly = PETER_NOTE + ENOCH_LINE
    peter, enoch = NoteVerifier.from_key(PETER_VKEY), NoteVerifier.from_key(ENOCH_VKEY)
    both = open_note(doubly, [peter, enoch])
    assert both.text == TEXT
    assert [s.name for s in both.verified] == ["PeterNeumann", "EnochRoot"]
    only_enoch = open_note(doubly, [enoch])
    assert [s.name for s in only_enoch.verified] == ["EnochRoot"]
    assert [(s.name, s.key_id.hex()) for s in only_enoch.unverified] == [
        ("PeterNeumann", "c74f20a3")
    ]


def test_it_verifies_a_checkpoint_sum_golang_org_served():
    checkpoint = checkpoint_open(
        SUMDB_NOTE, verifier=NoteVerifier.from_key(SUMDB_VKEY), origin="go.sum database tree"
    )
    assert checkpoint.size == 65209736
    assert (
        base64.b64encode(checkpoint.root).decode() == "5+uGFjx6xBZG8ip1+wi77v+grwbhhukIrxEUS8PXvRo="
    )
    with pytest.raises(SignatureInvalid):
        checkpoint_open(
            SUMDB_NOTE.replace("65209736", "65209737"),
            verifier=NoteVerifier.from_key(SUMDB_VKEY),
            origin="go.sum database tree",
        )


def test_a_generated_key_round_trips_through_its_key_strings():
    signer = NoteSigner.generate("koinon.example/log")
    assert NoteSigner.from_key(signer.key_string()) == signer
    verifier = NoteVerifier.from_key(signer.verifier().key_string())
    assert open_note(sign_note("hello\n", [signer]), [verifier]).text == "hello\n"


def test_a_note_signed_by_another_key_is_rejected():
    ours, theirs = NoteSigner.generate("log.example"), NoteSigner.generate("log.example")
    note = sign_note("text\n", [theirs])
    # Same name, other key: its key id differs, so no trusted key signed it.
    with pytest.raises(SignatureInvalid):
        open_note(note, [ours.verifier()])
    # A signature line carrying our key id with their signature: our key rejects it.
    forged = note.replace(
        note.split(" ")[-1],
        base64.b64encode(ours.verifier().key_id + theirs.sign(b"text\n")).decode() + "\n",
    )
    with pytest.raises(SignatureInvalid):
        open_note(forged, [ours.verifier()])


def test_every_changed_byte_of_the_signed_text_fails():
    verifier = NoteVerifier.from_key(PETER_VKEY)
    for position, char in enumerate(TEXT):
        if char == "\n":
            continue
        changed = TEXT[:position] + chr(ord(char) ^ 1) + TEXT[position + 1 :]
        with pytest.raises(SignatureInvalid):
            open_note(changed + "\n" + PETER_LINE, [verifier])


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(TEXT + PETER_LINE, id="no blank line"),
        pytest.param(PETER_NOTE[:-1], id="no final newline"),
        pytest.param(TEXT + "\n" + PETER_LINE.replace("— ", "- "), id="hyphen for em dash"),
        pytest.param(TEXT + "\n" + PETER_LINE.replace("x08go", "x08g!"), id="not base64"),
        pytest.param(TEXT + "\n" + PETER_LINE.replace("AM=\n", "AN=\n"), id="non-canonical base64"),
        pytest.param(TEXT + "\n— PeterNeumann AAAA\n", id="signature under 5 bytes"),
        pytest.param(TEXT + "\n— Peter+Neumann " + PETER_LINE.split(" ")[-1], id="plus in name"),
        pytest.param(TEXT + "\n" + PETER_LINE + "\n", id="blank line after signatures"),
        pytest.param("tab\there\n\n" + PETER_LINE, id="control character"),
        pytest.param(TEXT + "\n" + PETER_LINE * (MAX_SIGNATURES + 1), id="too many signatures"),
        pytest.param(b"\xff\n\n" + PETER_LINE.encode(), id="not UTF-8"),
    ],
)
def test_it_refuses_a_malformed_note_with_a_typed_error(message):
    with pytest.raises(NoteMalformed):
        open_note(message, [NoteVerifier.from_key(PETER_VKEY)])


def test_it_signs_only_text_that_ends_in_a_newline_with_at_least_one_key():
    signer = NoteSigner.generate("log.example")
    for text, signers in (("no newline", [signer]), ("bell\a\n", [signer]), ("fine\n", [])):
        with pytest.raises(NoteMalformed):
            sign_note(text, signers)


def test_a_mangled_verifier_key_is_refused():
    """As Go's TestNewVerifier: every proper substring and every single changed character
    of a verifier key is refused (the key id covers name and key)."""
    for start in range(len(PETER_VKEY)):
        for end in range(start + 1, len(PETER_VKEY) + 1):
            if (start, end) != (0, len(PETER_VKEY)):
                with pytest.raises(KeyMalformed):
                    NoteVerifier.from_key(PETER_VKEY[start:end])
    for position, char in enumerate(PETER_VKEY):
        changed = PETER_VKEY[:position] + chr(ord(char) + 1) + PETER_VKEY[position + 1 :]
        with pytest.raises(KeyMalformed):
            NoteVerifier.from_key(changed)


def test_a_signer_key_whose_id_does_not_match_is_refused():
    wrong_id = PETER_SKEY.replace("c74f20a3", "c74f20a4")
    for skey in (wrong_id, PETER_SKEY.removeprefix("PRIVATE+"), PETER_VKEY, "PRIVATE+KEY+x+1+2"):
        with pytest.raises(KeyMalformed):
            NoteSigner.from_key(skey)
