"""OpenAPI helpers: the error shape on every operation, and paginated list bodies."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

# Every operation may answer these with the one error shape (core.errors).
ERROR_STATUSES = {
    "400": "Malformed body (unparseable JSON, unreadable multipart).",
    "401": "Missing, malformed, unknown or revoked credentials.",
    "403": "Authenticated, but the role does not allow this operation.",
    "404": "Missing, or not visible to the caller (the two look the same).",
    "413": "Body or file larger than the configured limit.",
    "415": "Unsupported content type.",
    "422": "Invalid values; `fields` names each offending field.",
}
ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "fields"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "fields": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        }
    },
}
PAGE_PARAMETERS = [
    OpenApiParameter("cursor", str, description="Opaque cursor from `next` or `previous`."),
    OpenApiParameter("page_size", int, description="Rows per page (at most 200, default 50)."),
]


def paginated(
    item: type[serializers.Serializer[Any]], name: str
) -> type[serializers.Serializer[Any]]:
    """The body of a cursor-paginated list: `{"results": [...], "next", "previous"}`."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "results": item(many=True),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "__module__": item.__module__,
        },
    )


def error_responses_hook(
    result: dict[str, Any], generator: object, request: object, public: bool
) -> dict[str, Any]:
    """Add the error shape to every operation for every status it does not document itself."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, description in ERROR_STATUSES.items():
                responses.setdefault(status, {"description": description, "content": reference})
            for status, response in responses.items():
                if status.startswith("4") and not response.get("content"):
                    response["content"] = reference  # e.g. a 409 an operation documents
    return result


# For operations that can refuse because of the current state (`code` says which).
CONFLICT = {409: OpenApiResponse(description="Conflicts with the current state; see `code`.")}


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer kn_…` (keys from `manage.py apikey create`)."""

    target_class = "core.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "kn_ + 43 characters"}
