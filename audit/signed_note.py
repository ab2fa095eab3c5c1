"""Signed notes in the C2SP signed-note format, as Go's golang.org/x/mod/sumdb/note writes
and reads them, with Ed25519 keys: what the answer log's checkpoints are signed in, so
existing tlog verifiers and witnesses can read them.

A note is UTF-8 text ending in a newline, a blank line, then one or more lines
`— <name> <base64(key id ‖ signature)>`. The signature covers the text with its final
newline, not the blank line. A key id is the first 4 bytes of SHA-256(name ‖ "\\n" ‖ 0x01 ‖
public key); a verifier key is the string `<name>+<hex key id>+<base64(0x01 ‖ public key)>`
and a signer key `PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 ‖ seed)>`, as Go's."""

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ALG_ED25519 = 1
SIGNATURE_PREFIX = "— "
# As Go's Open: a note with more signatures than this is refused unread.
MAX_SIGNATURES = 100


class NoteMalformed(ValueError):
    """Text that is not a well-formed signed note (or checkpoint body)."""


class KeyMalformed(ValueError):
    """A verifier or signer key string that is not of the note format, or whose key id
    does not match its name and key."""


class SignatureInvalid(Exception):
    """A well-formed note that the trusted keys do not vouch for: a trusted key's signature
    does not verify, or no trusted key signed it at all."""


def key_id(name: str, public_key: bytes) -> bytes:
    """The 4-byte key id of an Ed25519 public key under name."""
    return hashlib.sha256(f"{name}\n".encode() + bytes([ALG_ED25519]) + public_key).digest()[:4]


def name_is_valid(name: str) -> bool:
    """Non-empty, no whitespace and no plus (the note format's only rules for a name)."""
    return bool(name) and "+" not in name and not any(c.isspace() for c in name)


def b64decode_canonical(text: str) -> bytes:
    """Standard base64 with padding, in its one canonical spelling (so no two spellings of a
    key or signature read the same)."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ValueError("not base64") from error
    if base64.b64encode(data).decode() != text:
        raise ValueError("not canonical base64")
    return data


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


@dataclass(frozen=True)
class NoteVerifier:
    """One trusted Ed25519 public key under its name."""

    name: str
    public_key: bytes

    def __post_init__(self) -> None:
        if not name_is_valid(self.name):
            raise KeyMalformed(f"invalid key name {self.name!r}")
        if len(self.public_key) != 32:
            raise KeyMalformed("an Ed25519 public key has 32 bytes")

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key)

    @classmethod
    def from_key(cls, vkey: str) -> "NoteVerifier":
        """Parse `<name>+<hex key id>+<base64(0x01 ‖ public key)>`."""
        name, _, rest = vkey.partition("+")
        hex_id, _, encoded = rest.partition("+")
        try:
            data = b64decode_canonical(encoded)
            claimed = bytes.fromhex(hex_id) if len(hex_id) == 8 else b""
        except ValueError as error:
            raise KeyMalformed("a verifier key is <name>+<hex id>+<base64 key>") from error
        if not name_is_valid(name) or len(claimed) != 4 or hex_id != hex_id.lower() or not data:
            raise KeyMalformed("a verifier key is <name>+<hex id>+<base64 key>")
        if data[0] != ALG_ED25519 or len(data) != 33:
            raise KeyMalformed("only Ed25519 verifier keys (algorithm 1, 32 bytes) are known")
        verifier = cls(name=name, public_key=data[1:])
        if verifier.key_id != claimed:
            raise KeyMalformed("the key id does not match the name and key")
        return verifier

    def key_string(self) -> str:
        encoded = base64.b64encode(bytes([ALG_ED25519]) + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{encoded}"

    def verifies(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class NoteSigner:
    """An Ed25519 private key under its name. Keep its key string secret."""

    name: str
    seed: bytes

    def __post_init__(self) -> None:
        if not name_is_valid(self.name):
            raise KeyMalformed(f"invalid key name {self.name!r}")
        if len(self.seed) != 32:
            raise KeyMalformed("an Ed25519 private key has a 32-byte seed")

    @classmethod
    def generate(cls, name: str) -> "NoteSigner":
        key = Ed25519PrivateKey.generate()
        return cls(name=name, seed=key.private_bytes_raw())

    @classmethod
    def from_key(cls, skey: str) -> "NoteSigner":
        """Parse `PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 ‖ seed)>`; the key id must
        be that of the public key the seed gives."""
        parts = skey.split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise KeyMalformed("a signer key is PRIVATE+KEY+<name>+<hex id>+<base64 key>")
        name, hex_id, encoded = parts[2:]
        try:
            data = b64decode_canonical(encoded)
            claimed = bytes.fromhex(hex_id) if len(hex_id) == 8 else b""
        except ValueError as error:
            raise KeyMalformed("a signer key's id or key is not hex and base64") from error
        if len(claimed) != 4 or not data or data[0] != ALG_ED25519 or len(data) != 33:
            raise KeyMalformed("only Ed25519 signer keys (algorithm 1, 32-byte seed) are known")
        signer = cls(name=name, seed=data[1:])
        if signer.verifier().key_id != claimed:
            raise KeyMalformed("the key id does not match the name and key")
        return signer

    def key_string(self) -> str:
        encoded = base64.b64encode(bytes([ALG_ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier().key_id.hex()}+{encoded}"

    def verifier(self) -> NoteVerifier:
        public = Ed25519PrivateKey.from_private_bytes(self.seed).public_key()
        return NoteVerifier(name=self.name, public_key=_raw_public(public))

    def sign(self, message: bytes) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).sign(message)


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True)
class Note:
    """An opened note: its text, the signatures the trusted keys verified, and those by keys
    not trusted (kept, unverified, as Go's Open keeps them)."""

    text: str
    verified: tuple[NoteSignature, ...]
    unverified: tuple[NoteSignature, ...]


def _check_text(text: str) -> None:
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise NoteMalformed("a note has no control characters other than newline")


def sign_note(text: str, signers: Iterable[NoteSigner]) -> str:
    """The signed note of text (which ends in a newline), one signature line per signer."""
    _check_text(text)
    if not text.endswith("\n"):
        raise NoteMalformed("a note's text ends in a newline")
    lines = []
    for signer in signers:
        blob = signer.verifier().key_id + signer.sign(text.encode())
        lines.append(f"{SIGNATURE_PREFIX}{signer.name} {base64.b64encode(blob).decode()}\n")
    if not lines:
        raise NoteMalformed("a signed note has at least one signature")
    return text + "\n" + "".join(lines)


def _signature_line(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        raise NoteMalformed("a signature line starts with an em dash and a space")
    name, _, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
    try:
        blob = b64decode_canonical(encoded)
    except ValueError as error:
        raise NoteMalformed("a signature is base64") from error
    if not name_is_valid(name) or len(blob) < 5:
        raise NoteMalformed("a signature line is — <name> <base64(key id ‖ signature)>")
    return NoteSignature(name=name, key_id=blob[:4], signature=blob[4:])


def open_note(message: str | bytes, verifiers: Iterable[NoteVerifier]) -> Note:
    """Parse a signed note and check its signatures against the trusted verifiers.

    Raises NoteMalformed for anything not of the format, SignatureInvalid when a trusted
    key's signature fails or no trusted key signed. Signatures by other keys are returned
    unverified; a repeated signature by one key counts once."""
    if isinstance(message, bytes):
        try:
            message = message.decode()
        except UnicodeDecodeError as error:
            raise NoteMalformed("a note is UTF-8") from error
    _check_text(message)
    split = message.rfind("\n\n")
    if split < 0:
        raise NoteMalformed("a note's signatures follow a blank line")
    text, block = message[: split + 1], message[split + 2 :]
    if not block.endswith("\n"):
        raise NoteMalformed("a note ends in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteMalformed(f"a note has at most {MAX_SIGNATURES} signatures")
    trusted = {(v.name, v.key_id): v for v in verifiers}
    verified: dict[tuple[str, bytes], NoteSignature] = {}
    unverified: dict[NoteSignature, None] = {}
    for signature in (_signature_line(line) for line in lines):
        verifier = trusted.get((signature.name, signature.key_id))
        if verifier is None:
            unverified[signature] = None
            continue
        if (signature.name, signature.key_id) in verified:
            continue
        if not verifier.verifies(text.encode(), signature.signature):
            raise SignatureInvalid(f"the signature of {verifier.key_string()} does not verify")
        verified[(signature.name, signature.key_id)] = signature
    if not verified:
        raise SignatureInvalid("no trusted key signed this note")
    return Note(text=text, verified=tuple(verified.values()), unverified=tuple(unverified))
