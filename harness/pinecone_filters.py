"""Pinecone's metadata filter language, validated and evaluated as the server does.

Kept apart from the fake so the rules can be read (and tested) on their own. Semantics:

- `{"k": v}` is `{"k": {"$eq": v}}`; several keys, or several operators on one key, are ANDed.
- Numbers compare as floats (Pinecone stores every number as float64); booleans are not numbers.
- A list-of-strings value matches `$eq`/`$in` when ANY element matches, and `$ne`/`$nin` when
  NO element does.
- A missing field never matches `$eq $gt $gte $lt $lte $in`. It DOES match `$ne` and `$nin`:
  the filter language is MongoDB's, where a negation admits records without the field. Code
  that must not rely on this either way should pair a negation with `{"$exists": true}`.
- Anything else (unknown operator, nested object, null operand, empty `$and`) raises
  `FilterError`, which the fake answers with a 400.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

Metadata = Mapping[str, Any]

_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
_FIELD_OPERATORS = frozenset({"$eq", "$ne", "$in", "$nin", "$exists", *_COMPARISONS})
IN_MAX_VALUES = 10_000


class FilterError(ValueError):
    """A filter Pinecone would refuse with 400; the message is what the fake sends back."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | bool) or _is_number(value)


def validate_filter(expr: Any) -> None:
    """Raise FilterError unless `expr` is a well-formed, non-empty filter object."""
    if not isinstance(expr, dict):
        raise FilterError(f"Invalid filter: expected an object, got {expr!r}")
    if not expr:
        raise FilterError("Invalid filter: empty filter")
    for key, value in expr.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise FilterError(f"Invalid filter: {key} requires a non-empty array")
            for clause in value:
                validate_filter(clause)
        elif key.startswith("$"):
            raise FilterError(f"Invalid filter: unsupported operator '{key}'")
        elif isinstance(value, dict):
            _validate_field(key, value)
        elif not _is_scalar(value):
            raise FilterError(f"Invalid filter: unsupported value {value!r} for field '{key}'")


def _validate_field(name: str, ops: dict[str, Any]) -> None:
    if not ops:
        raise FilterError(f"Invalid filter: no operator for field '{name}'")
    for op, operand in ops.items():
        if op not in _FIELD_OPERATORS:
            raise FilterError(f"Invalid filter: unsupported operator '{op}' for field '{name}'")
        if op in _COMPARISONS and not _is_number(operand):
            raise FilterError(f"Invalid filter: {op} requires a number, got {operand!r}")
        if op in ("$eq", "$ne") and not _is_scalar(operand):
            raise FilterError(f"Invalid filter: {op} requires a scalar, got {operand!r}")
        if op == "$exists" and not isinstance(operand, bool):
            raise FilterError(f"Invalid filter: $exists requires a boolean, got {operand!r}")
        if op in ("$in", "$nin"):
            if not isinstance(operand, list) or not all(_is_scalar(v) for v in operand):
                raise FilterError(f"Invalid filter: {op} requires an array of scalars")
            if len(operand) > IN_MAX_VALUES:
                raise FilterError(f"Invalid filter: {op} accepts at most {IN_MAX_VALUES} values")


def _same(stored: Any, wanted: Any) -> bool:
    """Scalar equality as Pinecone sees it: floats for numbers, booleans kept apart."""
    if _is_number(stored) and _is_number(wanted):
        return float(stored) == float(wanted)
    return type(stored) is type(wanted) and bool(stored == wanted)


def _any_same(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, list):
        return any(_same(item, wanted) for item in stored)
    return _same(stored, wanted)


def _field_matches(metadata: Metadata, name: str, op: str, operand: Any) -> bool:
    present = name in metadata
    stored: Any = metadata.get(name)
    if op == "$exists":
        return present is operand
    if op == "$ne":
        return not present or not _any_same(stored, operand)
    if op == "$nin":
        return not present or not any(_any_same(stored, v) for v in operand)
    if not present:
        return False
    if op == "$eq":
        return _any_same(stored, operand)
    if op == "$in":
        return any(_any_same(stored, v) for v in operand)
    return _is_number(stored) and _COMPARISONS[op](float(stored), float(operand))


def matches(expr: Mapping[str, Any], metadata: Metadata | None) -> bool:
    """Whether a record's metadata satisfies a filter already passed by validate_filter."""
    meta: Metadata = metadata or {}
    for key, value in expr.items():
        if key == "$and":
            ok = all(matches(clause, meta) for clause in value)
        elif key == "$or":
            ok = any(matches(clause, meta) for clause in value)
        elif isinstance(value, dict):
            ok = all(_field_matches(meta, key, op, operand) for op, operand in value.items())
        else:
            ok = _field_matches(meta, key, "$eq", value)
        if not ok:
            return False
    return True
