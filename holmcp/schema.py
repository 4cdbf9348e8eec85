"""The JSON schemas holmcp publishes, kept small: an agent host pays for them in every context.

Input schemas come from the tool signatures (pydantic), minus what an agent
does not need: titles that repeat the names, `anyOf: [X, null]` for an
optional argument (leaving it out is how one says "none"), `default: null`.
They do not say `additionalProperties: false`, though holmcp refuses an
argument it does not list: the refusal names the one meant, which teaches
more than a schema line every agent pays for.

Output schemas name each top-level field of the reply struct and its JSON
type, with the values of the fields an agent branches on (`verdict`,
`state`) as descriptions (not enums: a value a newer daemon adds must not
make a host reject the answer); nested objects are described in the text
answer instead.  That
keeps the contract a host checks structured content against at a tenth of
the full schema's size: structured content is still the whole reply.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import inspect

_JSON_TYPES: dict[type, str] = {
    inspect.StrType: "string",
    inspect.IntType: "integer",
    inspect.FloatType: "number",
    inspect.BoolType: "boolean",
    inspect.NoneType: "null",
    inspect.ListType: "array",
    inspect.DictType: "object",
    inspect.StructType: "object",
}


def compact_input(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (pydantic's, for a tool's arguments) without titles, null options or null defaults."""
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k != "title" and not (k == "default" and v is None)}
        options = prop.pop("anyOf", None)
        if options is not None:
            kept = [option for option in options if option != {"type": "null"}]
            prop = {**kept[0], **prop} if len(kept) == 1 else {"anyOf": kept, **prop}
        properties[name] = prop
    compact: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        compact["required"] = schema["required"]
    return compact


def compact_output(reply_type: type[msgspec.Struct], described: dict[str, str] | None = None) -> dict[str, Any]:
    """A reply struct's top-level fields and their JSON types; `described` gives some a description.

    Fields the daemon leaves out when they hold their default (the wire omits
    defaults) are not required.
    """
    info = inspect.type_info(reply_type)
    assert isinstance(info, inspect.StructType)
    properties: dict[str, Any] = {}
    if info.tag_field is not None:
        properties[info.tag_field] = {"const": info.tag}
    for field in info.fields:
        prop: dict[str, Any] = {"type": _json_type(field.type)}
        if described and field.encode_name in described:
            prop["description"] = described[field.encode_name]
        properties[field.encode_name] = prop
    required = [info.tag_field] if info.tag_field is not None else []
    required += [f.encode_name for f in info.fields if f.required]
    return {"type": "object", "properties": properties, "required": required}


def either(*schemas: dict[str, Any]) -> dict[str, Any]:
    """One output schema for a tool that answers with any of several replies (compact
    schemas): every field any of them has, the tags as an enum, and only what all require."""
    properties: dict[str, Any] = {}
    for one in schemas:
        for name, prop in one["properties"].items():
            properties.setdefault(name, prop)
    tags = [one["properties"]["type"]["const"] for one in schemas]
    properties["type"] = {"enum": tags}
    required = [name for name in schemas[0]["required"] if all(name in one["required"] for one in schemas)]
    return {"type": "object", "properties": properties, "required": required}
def or_handle(schema: dict[str, Any], handle_type: type[msgspec.Struct]) -> dict[str, Any]:
    """`schema` (a `compact_output`), or a `handle_type` reply instead (the job handle a call with
    defer_after gets): the properties are `schema`'s, the required fields each reply's own."""
    handle = compact_output(handle_type)
    tags = [schema["properties"]["type"]["const"], handle["properties"]["type"]["const"]]
    return {
        "type": "object", "properties": {**schema["properties"], "type": {"enum": tags}}, "required": ["type"],
        "anyOf": [{"required": schema["required"]},
                  {"properties": {"type": {"const": tags[1]}}, "required": ["id"]}],
    }


def _json_type(t: inspect.Type) -> str | list[str]:
    if isinstance(t, inspect.UnionType):
        names = sorted({name for option in t.types for name in _as_list(_json_type(option))})
        return names[0] if len(names) == 1 else names
    return _JSON_TYPES.get(type(t), "object")


def _as_list(name: str | list[str]) -> list[str]:
    return name if isinstance(name, list) else [name]
