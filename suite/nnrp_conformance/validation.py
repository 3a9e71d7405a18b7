"""JSON Schema loading and validation for the profile's documents (the schemas are package data).

Owns: reading ``schemas/*.schema.json`` through importlib.resources (so an installed wheel
works), the offline ``referencing`` registry that resolves their cross-``$ref``s, and turning
jsonschema errors into precise, printable :class:`Violation` records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing.jsonschema import DRAFT202012

from nnrp_conformance import contract

__all__ = [
    "SchemaViolationError",
    "UnknownSchemaError",
    "Violation",
    "check",
    "event_fields",
    "load_schema",
    "profile_event_fields",
    "recommended_violations",
    "registry",
    "schema_names",
    "schema_uri",
    "validate",
    "validate_event",
]

_SUFFIX = ".schema.json"
#: where an event schema keeps this suite's own preferences (limits, closed objects), apart
#: from the strict shape its top level holds: what the profile fixes, and nothing more
RECOMMENDED = "/$defs/recommended"
_MAX_SHOWN = 80  # characters of an offending value quoted in a message


@dataclass(frozen=True)
class Violation:
    """One broken rule: where in the instance, which JSON Schema keyword, and why."""

    pointer: str
    rule: str
    message: str
    schema_path: str
    #: what the schema expected there, as a value a report can show (``{"type": "integer"}``,
    #: ``{"required": [...]}``), never the schema's id
    expected: Any = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.message} [{self.rule}]"


class UnknownSchemaError(ValueError):
    """A schema name that is not one of :func:`schema_names`."""


class SchemaViolationError(ValueError):
    """A document broke its schema; ``violations`` lists every broken rule."""

    def __init__(self, name: str, violations: list[Violation]) -> None:
        self.name = name
        self.violations = list(violations)
        lines = [f"{name}: {len(self.violations)} schema violation(s)"]
        lines += [f"  {v}" for v in self.violations]
        super().__init__("\n".join(lines))


# --- loading ---------------------------------------------------------------------------------


def _schema_dir() -> Any:
    return resources.files("nnrp_conformance").joinpath("schemas")


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for entry in _schema_dir().iterdir():
        if entry.name.endswith(_SUFFIX):
            name = entry.name[: -len(_SUFFIX)]
            found[name] = json.loads(entry.read_text(encoding="utf-8"))
    return found


def schema_names() -> list[str]:
    """Names of the packaged schemas (file names without ``.schema.json``), sorted."""
    return sorted(_schemas())


def schema_uri(name: str) -> str:
    """The stable ``$id`` of schema ``name``."""
    return f"{contract.SCHEMA_BASE_URI}{name}{_SUFFIX}"


def load_schema(name: str) -> dict[str, Any]:
    """The schema document called ``name`` (e.g. ``"envelope"``, ``"event.usage"``); a copy."""
    schemas = _schemas()
    if name not in schemas:
        raise UnknownSchemaError(
            f"unknown schema {name!r}; known schemas: {', '.join(sorted(schemas))}"
        )
    copy: dict[str, Any] = json.loads(json.dumps(schemas[name]))
    return copy


@cache
def registry() -> referencing.Registry:
    """An offline registry of every packaged schema under its ``$id``; unknown URIs fail fast."""

    def refuse(uri: str) -> referencing.Resource:
        # Never fetch: a $ref outside the package is a packaging bug, not a network lookup.
        raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]

    resources_ = [
        (schema["$id"], DRAFT202012.create_resource(schema)) for schema in _schemas().values()
    ]
    # Registry is an attrs class: mypy sees no keyword for its ``retrieve`` field
    return referencing.Registry(retrieve=refuse).with_resources(  # type: ignore[call-arg]
        resources_
    ).crawl()


@cache
def _validator(name: str) -> Draft202012Validator:
    """A validator for schema ``name``, or for one of its parts: ``name#/$defs/x``."""
    base, _, fragment = name.partition("#")
    schema = _schemas().get(base)
    if schema is None:
        schema = load_schema(base)  # raises UnknownSchemaError with the list of names
    if fragment:
        uri = f"{schema_uri(base)}#{fragment}"
        try:
            registry().resolver().lookup(uri)
        except referencing.exceptions.Unresolvable:
            raise UnknownSchemaError(f"schema {base!r} has no part {fragment!r}") from None
        schema = {"$ref": uri}
    return Draft202012Validator(schema, registry=registry())


# --- error translation -----------------------------------------------------------------------


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _pointer(parts: Iterable[object]) -> str:
    return "".join(f"/{_escape(str(p))}" for p in parts)


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= _MAX_SHOWN else f"{text[:_MAX_SHOWN]}… ({len(text)} chars)"


def _label(path: Sequence[object]) -> str:
    if not path:
        return "the document"
    if isinstance(path[-1], int):
        owner = f"'{path[-2]}'" if len(path) > 1 else "the document"
        return f"item {path[-1]} of {owner}"
    return f"'{path[-1]}'"


_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _additional(error: ValidationError) -> list[str]:
    schema = error.schema if isinstance(error.schema, dict) else {}
    declared = schema.get("properties", {})
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [
        key for key in instance if key not in declared and not any(p.search(key) for p in patterns)
    ]


def _message(error: ValidationError, path: Sequence[object]) -> str:
    # the keyword's value and the instance are whatever JSON the schema and document hold
    rule = error.validator
    expected: Any = error.validator_value
    value: Any = error.instance
    label = _label(path)
    if rule == "type":
        names = expected if isinstance(expected, list) else [expected]
        return f"{label} must be of type {' or '.join(names)}, got {_json_type(value)}"
    if rule == "const":
        return f"{label} must be {_shown(expected)}, got {_shown(value)}"
    if rule == "enum":
        choices = ", ".join(_shown(c) for c in expected)
        return f"{label} must be one of [{choices}], got {_shown(value)}"
    if rule in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
        return f"{label} must be {op[rule]} {expected}, got {_shown(value)}"
    if rule == "minLength":
        if expected == 1:
            return f"{label} must not be empty"
        return f"{label} must be at least {expected} characters long, got {len(value)}"
    if rule == "maxLength":
        return f"{label} must be at most {expected} characters long, got {len(value)}"
    if rule == "minItems":
        return f"{label} must have at least {expected} item(s), got {len(value)}"
    if rule == "maxItems":
        return f"{label} must have at most {expected} item(s), got {len(value)}"
    if rule == "uniqueItems":
        return f"{label} must not contain duplicate items"
    if rule == "pattern":
        return f"{label} must match the pattern {expected!r}, got {_shown(value)}"
    if rule == "minProperties":
        return f"{label} must have at least {expected} field(s)"
    if rule == "maxContains":
        matching = error.schema.get("contains") if isinstance(error.schema, dict) else None
        return f"{label} must contain at most {expected} item(s) matching {_shown(matching)}"
    if rule == "not":
        return f"{label} breaks a 'not' rule: {_shown(expected)} must not hold"
    return f"{label}: {error.message}"


def _violations(error: ValidationError, name: str) -> Iterator[Violation]:
    if error.context and error.validator in ("anyOf", "oneOf"):
        # A compound keyword failed: report the alternative that came closest.
        best = max(error.context, key=lambda e: (len(e.absolute_path), -len(e.schema_path)))
        if len(best.absolute_path) > len(error.absolute_path):
            yield from _violations(best, name)
            return
    path = list(error.absolute_path)
    # a part (``base#fragment``) is validated through a root $ref, which the path omits
    base, _, fragment = name.partition("#")
    schema_path = f"{base}#{fragment}{_pointer(error.absolute_schema_path)}"
    rule = str(error.validator)
    required: Any = error.validator_value
    if rule == "required" and isinstance(error.instance, dict):
        for field_name in required:
            if field_name not in error.instance:
                yield Violation(
                    _pointer([*path, field_name]), rule,
                    f"missing required field '{field_name}'", schema_path,
                    {"required": list(required)},
                )
        return
    if rule == "additionalProperties":
        for key in _additional(error):
            yield Violation(
                _pointer([*path, key]),
                rule,
                f"unexpected field '{key}' is not allowed here",
                schema_path,
                {"properties": sorted((error.schema or {}).get("properties") or {})}
                if isinstance(error.schema, dict) else None,
            )
        return
    if "propertyNames" in error.relative_schema_path and isinstance(error.instance, str):
        # jsonschema reports a bad key at its parent object; point at the key itself.
        key = error.instance
        yield Violation(
            _pointer([*path, key]),
            "propertyNames",
            f"field name '{key}' is not allowed here ({rule} {_shown(error.validator_value)})",
            schema_path,
        )
        return
    if rule == "contains":
        yield Violation(
            _pointer(path),
            rule,
            f"{_label(path)} must contain an item matching {_shown(error.validator_value)}",
            schema_path,
        )
        return
    yield Violation(_pointer(path), rule, _message(error, path), schema_path,
                    {rule: error.validator_value})


def _collect(name: str, errors: Iterable[ValidationError]) -> list[Violation]:
    seen: set[Violation] = set()
    out: list[Violation] = []
    for error in errors:
        for violation in _violations(error, name):
            if violation not in seen:
                seen.add(violation)
                out.append(violation)
    return sorted(out, key=lambda v: (v.pointer, v.rule, v.schema_path))


# --- public validation -----------------------------------------------------------------------


def validate(name: str, instance: object) -> list[Violation]:
    """Every violation of schema ``name`` (or of its part ``name#/$defs/x``) by ``instance``,
    sorted by pointer ([] when valid)."""
    return _collect(name, _validator(name).iter_errors(instance))


def validate_event(event: object) -> list[Violation]:
    """Validate one profile event against the strict shape of the schema its ``type`` names:
    what the profile fixes (the contract's fields, the required fields of its §7 table), never
    this suite's limits (:func:`recommended_violations`).

    A non-object, a missing or non-string ``type`` or an unknown type yields exactly one
    violation; a known type is judged by its own schema, so messages name the real field.
    """
    event_schema = "event"
    if not isinstance(event, dict):
        return [
            Violation(
                "",
                "type",
                f"an event must be of type object, got {_json_type(event)}",
                f"{event_schema}#/type",
            )
        ]
    if "type" not in event:
        return [
            Violation(
                "/type", "required", "missing required field 'type'", f"{event_schema}#/required"
            )
        ]
    kind = event["type"]
    name = contract.EVENT_SCHEMA_NAMES.get(kind) if isinstance(kind, str) else None
    if name is None:
        known = ", ".join(contract.EVENT_TYPES)
        return [
            Violation(
                "/type",
                "enum",
                f"'type' must be one of [{known}], got {_shown(kind)}",
                f"{event_schema}#/properties/type/enum",
            )
        ]
    return validate(name, event)


def recommended_violations(event: object) -> list[Violation]:
    """Where ``event`` departs from this suite's own preferences for its type (the schema's
    ``$defs/recommended``: limits, closed objects, the error code list): never a breach of
    the profile. A non-object or an unknown type has none (:func:`validate_event` reports
    it)."""
    kind = event.get("type") if isinstance(event, dict) else None
    name = contract.EVENT_SCHEMA_NAMES.get(kind) if isinstance(kind, str) else None
    return validate(f"{name}#{RECOMMENDED}", event) if name else []


@cache
def event_fields(event_type: str) -> frozenset[str]:
    """The top-level fields the strict shape of ``event_type``'s schema names (an unknown
    type: none)."""
    name = contract.EVENT_SCHEMA_NAMES.get(event_type)
    return frozenset(_schemas()[name].get("properties", {})) if name else frozenset()


@cache
def profile_event_fields() -> frozenset[str]:
    """Every top-level field the schemas of the profile's own event types name (``usage``,
    ``error``, ``body``, ``delta``, ``item_id``, …): read from the schemas, never restated. A
    field of this set on an event type whose schema lacks it collides with the profile's
    meaning of that field (checks.stream)."""
    return frozenset().union(*(event_fields(t) for t in contract.PROFILE_TABLE_EVENT_TYPES))


def check(name: str, instance: object) -> None:
    """Raise :class:`SchemaViolationError` listing every violation unless ``instance`` is valid."""
    violations = validate_event(instance) if name == "event" else validate(name, instance)
    if violations:
        raise SchemaViolationError(name, violations)
