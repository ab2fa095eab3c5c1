from rest_framework import authentication, exceptions
from rest_framework.request import Request

from core.models import ApiKey
from core.services import api_key_authenticate
from core.types import User


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <key>`. The ApiKey becomes request.auth."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiKey] | None:
        header = authentication.get_authorization_header(request)
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower().encode():
            raise exceptions.AuthenticationFailed(
                "Use 'Authorization: Bearer <key>'.", code="malformed_credentials"
            )
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "The Authorization header must be 'Bearer <key>'.", code="malformed_credentials"
            )
        try:
            raw_key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(
                "The API key is not valid.", code="malformed_credentials"
            ) from None
        api_key = api_key_authenticate(raw_key=raw_key)
        if api_key is None:
            # Unknown and revoked keys look the same.
            raise exceptions.AuthenticationFailed(
                "The API key is not valid or has been revoked.", code="invalid_credentials"
            )
        return api_key.user, api_key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
