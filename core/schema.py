"""OpenAPI helpers: the error shape on every operation, and paginated list bodies."""

import copy
from collections.abc import Mapping

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from core.inputs import JsonSchema, StrictSerializer

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
    OpenApiParameter(
        "page_size",
        {"type": "integer", "minimum": 1},
        description="Rows per page (default 50); more than 200 is served as 200.",
    ),
]
# Text a CharField takes: no NUL (PostgreSQL cannot store it); `TEXT_NOT_BLANK` also needs
# one character that is not white space (the field strips it, then refuses "").
TEXT = "^[^\\u0000]*$"
TEXT_NOT_BLANK = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"
# One line of text (a title): no control characters, not blank.
ONE_LINE = "^[^\\u0000-\\u001f]*[^\\s\\u0000-\\u001f][^\\u0000-\\u001f]*$"


def paginated(
    item: type[serializers.Serializer[object]], name: str
) -> type[serializers.Serializer[Mapping[str, object]]]:
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
    result: JsonSchema, generator: object, request: object, public: bool
) -> JsonSchema:
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


class StrictSerializerScheme(OpenApiSerializerExtension):
    """A StrictSerializer's body as it is validated: no other keys (`additionalProperties:
    false`), every required field even on PATCH (the views never validate one partially),
    text fields say what they refuse (NUL; blank unless `allow_blank`), a file is a file
    part, and a serializer's `schema_extra` adds the rules it checks across fields."""

    target_class = StrictSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: str) -> JsonSchema:
        target = self.target
        serializer = target() if isinstance(target, type) else copy.copy(target)
        serializer.partial = False
        schema: JsonSchema = auto_schema._map_serializer(
            serializer, direction, bypass_extensions=True
        )
        if not type(serializer).__dict__.get("__doc__"):
            schema.pop("description", None)  # StrictSerializer's own, not the body's
        if direction != "request":
            return schema
        schema["additionalProperties"] = False
        properties = schema.setdefault("properties", {})
        for name, field in serializer.fields.items():
            prop = properties.get(name)
            if prop is None:
                continue
            if isinstance(field, serializers.FileField):
                prop.clear()
                prop.update({"type": "string", "format": "binary"})  # a part with a filename
            elif isinstance(field, serializers.CharField):
                blank = field.allow_blank or not field.trim_whitespace
                prop["pattern"] = TEXT if blank else TEXT_NOT_BLANK
                if not field.allow_blank:
                    prop["minLength"] = max(prop.get("minLength", 0), 1)
        extra = dict(getattr(serializer, "schema_extra", {}))
        for name, overrides in extra.pop("properties", {}).items():
            properties[name].update(overrides)
        schema.update(extra)
        return schema


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer kn_…` (keys from `manage.py apikey create`)."""

    target_class = "core.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "kn_ + 43 characters"}
