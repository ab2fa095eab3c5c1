"""Parsers for the raw values clients send: ids in paths and query strings, free text.

One id parser for every route, so ``²``, ``٣``, a 5000-digit number or a NUL byte are all just
"no such object" (404) and never reach ``int()`` or the database as something they cannot hold.
"""

from typing import Any

from rest_framework import serializers

# Ids are PostgreSQL bigints (BigAutoField): 18 digits always fit below 2**63.
MAX_ID_DIGITS = 18
MAX_ID = 10**MAX_ID_DIGITS - 1


def object_id_parse(value: object) -> int | None:
    """A positive id written in 1-18 ASCII digits, else None (the caller answers 404)."""
    if type(value) is int:
        return value if 0 < value <= MAX_ID else None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_DIGITS:
        return None
    if not (value.isascii() and value.isdigit()):
        return None
    number = int(value)
    return number or None


def text_is_storable(value: str) -> bool:
    """False for text PostgreSQL cannot store or UTF-8 cannot encode: NUL, lone surrogates."""
    return "\x00" not in value and not any("\ud800" <= char <= "\udfff" for char in value)


class ObjectIdField(serializers.IntegerField):
    """An id in a request body: a positive integer that fits the database."""

    def __init__(self, **kwargs: Any) -> None:  # noqa: ANN401 - IntegerField's own options
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)


class StrictSerializer(serializers.Serializer[Any]):
    """Refuses keys it does not know: a saved payload's text cannot ride along."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        data = self.initial_data
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError({name: "Unknown field." for name in unknown})
        return attrs
