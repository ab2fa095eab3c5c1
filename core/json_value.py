"""JSON values as Python types: no Django, so any module (a pure hashing one too) may use it."""

# What `json.dumps` writes as it is and `json.loads` gives back.
type JsonValue = bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None
