"""Structured model output: the JSON schemas koinon asks for, and the check that what came
back is exactly that. The endpoint's own enforcement of `strict` is never relied on.

Only the subset of JSON Schema the schemas here use is understood: object (all properties
required, no others), array (minItems, maxItems), string (maxLength, enum), integer
(minimum, maximum, enum), boolean, and a `[type, "null"]` union. An unknown keyword is a
programming error, not something the model can exploit.
"""

import json
from typing import Any

from answers.pipeline.providers.llm import PROVIDER_MALFORMED, Completion, ProviderError

_KNOWN = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "maxLength",
    "minLength",
    "enum",
    "minimum",
    "maximum",
}


def obj(**properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def array(items: dict[str, Any], *, min_items: int = 0, max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "minItems": min_items, "maxItems": max_items}


def string(*, max_length: int, min_length: int = 0) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": max_length}


def enum(values: list[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def integer(
    *, minimum: int = 0, maximum: int | None = None, nullable: bool = False
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": ["integer", "null"] if nullable else "integer",
        "minimum": minimum,
    }
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def conforms(value: object, schema: dict[str, Any]) -> bool:
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"unsupported schema keywords: {sorted(unknown)}")
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if value is None:
        return "null" in types
    kind = types[0]
    if "enum" in schema and value not in schema["enum"]:
        return False
    if kind == "object":
        if not isinstance(value, dict) or set(value) != set(schema["properties"]):
            return False
        return all(conforms(value[k], s) for k, s in schema["properties"].items())
    if kind == "array":
        if not isinstance(value, list):
            return False
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return False
        return all(conforms(item, schema["items"]) for item in value)
    if kind == "string":
        return isinstance(value, str) and (
            schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
        )
    if kind == "integer":
        return (
            type(value) is int
            and value >= schema.get("minimum", value)
            and value <= schema.get("maximum", value)
        )
    if kind == "boolean":
        return type(value) is bool
    raise ValueError(f"unsupported schema type {kind!r}")


def structured_parse(completion: Completion, schema: dict[str, Any]) -> dict[str, Any]:
    """The completion's JSON if it is complete and matches the schema exactly; otherwise
    ProviderError(provider_malformed). A body cut off by `max_tokens` is malformed even
    when what arrived happens to parse."""
    if completion.finish_reason == "length":
        raise ProviderError(PROVIDER_MALFORMED)
    try:
        value = json.loads(completion.content)
    except ValueError:
        raise ProviderError(PROVIDER_MALFORMED) from None
    if not conforms(value, schema) or not isinstance(value, dict):  # every schema is an object
        raise ProviderError(PROVIDER_MALFORMED)
    return value
