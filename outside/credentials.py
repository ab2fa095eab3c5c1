"""An outside channel's credential at rest: encrypted with KOINON_CREDENTIALS_KEY (Fernet:
AES-128-CBC with an HMAC-SHA256, from `cryptography`). The database holds only the token;
the plain credential exists in memory for the call that sends it."""

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class CredentialUnreadable(Exception):
    """A stored credential that the configured key cannot open (the key changed, or the
    token was altered). The channel then counts as not configured; the message names no
    credential."""


def _fernet() -> Fernet:
    return Fernet(settings.KOINON_CREDENTIALS_KEY.encode())


def credential_seal(plain: str) -> bytes:
    """The token to store for `plain`."""
    return _fernet().encrypt(plain.encode())


def credential_open(token: bytes | memoryview) -> str:
    """The credential a stored token holds; CredentialUnreadable when this key cannot."""
    try:
        return _fernet().decrypt(bytes(token)).decode()
    except (InvalidToken, ValueError, UnicodeDecodeError) as error:
        raise CredentialUnreadable("the channel's credential cannot be opened") from error
