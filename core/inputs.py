"""Parsers for the raw values clients send: ids in paths and query strings, free text.

One id parser for every route, so ``²``, ``٣``, a 5000-digit number or a NUL byte are all just
"no such object" (404) and never reach ``int()`` or the database as something they cannot hold.
"""

from typing import Any, ClassVar, TypedDict, Unpack

from django.http import QueryDict
from rest_framework import serializers

from core.errors import UnprocessableError

# A JSON Schema (OpenAPI) fragment: JSON nested to any depth, read and written by key. It is
# drf-spectacular's own shape, which that library leaves untyped, so its values stay `Any`.
type JsonSchema = dict[str, Any]

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


def text_field_parse(value: object, *, field: str, limit: int, required: bool) -> str:
    """A person's free text for `field` (a reason, a title), stripped: the one check the
    API's serializers and the browser's forms share. Raises UnprocessableError (422, the
    field named) for a value that is not text (a number, a list), that PostgreSQL cannot
    store (NUL, a lone surrogate), that is longer than `limit`, or empty when required."""

    def refused(problem: str) -> UnprocessableError:
        return UnprocessableError(f"The {field} cannot be used.", fields={field: problem})

    if not isinstance(value, str):
        raise refused("Must be text.")
    if not text_is_storable(value):
        raise refused("Must be text without NUL characters or unpaired surrogates.")
    text = value.strip()
    if len(text) > limit:
        raise refused(f"At most {limit} characters.")
    if required and not text:
        raise refused("Required.")
    return text


class TextField(serializers.CharField):
    """A CharField that takes text only: DRF's own turns 5 or 1.5 into "5" or "1.5", so an
    erasure (which cannot be undone) took a number as its reason. Refuses what PostgreSQL
    cannot store too."""

    default_error_messages = {
        "not_text": "Must be text.",
        "not_storable": "Must be text without NUL characters or unpaired surrogates.",
    }

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("not_text")
        if not text_is_storable(data):
            self.fail("not_storable")
        return super().to_internal_value(data)


class ObjectIdFieldOptions(TypedDict, total=False):
    """The IntegerField options an id field is given (its bounds default to an id's)."""

    required: bool
    allow_null: bool
    default: int | None
    min_value: int
    max_value: int


class ObjectIdField(serializers.IntegerField):
    """An id in a request body: a positive integer that fits the database."""

    def __init__(self, **kwargs: Unpack[ObjectIdFieldOptions]) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)


# In a JSON body a value has the type the schema gives it: DRF's own fields read "5" and 5.0
# as 5, "yes" and 1 as true, and 0 as "0" (checked in this order: BooleanField is no
# IntegerField, and a CharField subclass such as TextField is covered by CharField).
# The first of each is the DRF field class, only ever given to isinstance.
JSON_TYPES: tuple[tuple[type, type, str], ...] = (
    (serializers.BooleanField, bool, "Must be true or false."),
    (serializers.IntegerField, int, "Must be an integer."),
    (serializers.CharField, str, "Must be text."),
)


class StrictSerializer(serializers.Serializer[object]):
    """A request body as its schema describes it (core.schema.StrictSerializerScheme):
    keys it does not know are refused (a saved payload's text cannot ride along), and in a
    JSON body each value must have its field's JSON type. A form's values are all text, so
    those are parsed as DRF does. `schema_extra` is merged into the body's schema: the rules
    a subclass's `validate` checks across fields, in JSON Schema."""

    schema_extra: ClassVar[JsonSchema] = {}

    def to_internal_value(self, data: object) -> dict[str, object]:
        if isinstance(data, dict) and not isinstance(data, QueryDict):
            wrong = {}
            for name, field in self.fields.items():
                expected = _json_type(field)
                if data.get(name) is not None and expected and type(data[name]) is not expected[0]:
                    wrong[name] = expected[1]
            if wrong:
                raise serializers.ValidationError(wrong)
        values: dict[str, object] = super().to_internal_value(data)  # DRF types it Any
        return values

    def validate(self, attrs: dict[str, object]) -> dict[str, object]:
        data = self.initial_data
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError({name: "Unknown field." for name in unknown})
        return attrs


def _json_type(field: object) -> tuple[type, str] | None:
    """The Python type a JSON body's value for `field` must have, and the message if not."""
    for kind, python_type, message in JSON_TYPES:
        if isinstance(field, kind):
            return python_type, message
    return None
