"""Check a response against ../shared/contract/memory-plugin-v1.yaml.

The YAML is the law: each (method, path template, status) is looked up in the
spec, and the body validated against the declared schema with an OpenAPI 3.0
validator (nullable, formats). Statuses the spec does not list for a route
(405, 413, 500, 503 on writes) must still carry the `Error` envelope.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import yaml
from openapi_schema_validator import OAS30Validator
from referencing import Registry
from referencing import Resource
from referencing.jsonschema import DRAFT4

SPEC_PATH = Path(__file__).resolve().parents[3] / "shared" / "contract" / "memory-plugin-v1.yaml"
TESTDATA = SPEC_PATH.parent / "testdata"
SPEC_URI = "urn:memory-plugin-v1"


@functools.cache
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text())
    return loaded


@functools.cache
def _registry() -> Registry:
    return Registry().with_resource(SPEC_URI, Resource.from_contents(spec(), DRAFT4))


def _template(path: str) -> str | None:
    for template in spec()["paths"]:
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path.split("?")[0]):
            return str(template)
    return None


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def schema_for(method: str, path: str, status: int) -> dict[str, Any] | None:
    """The response schema ref for this exchange; Error when the spec lists no such status."""
    template = _template(path)
    operation = spec()["paths"][template].get(method.lower(), {}) if template else {}
    response = operation.get("responses", {}).get(str(status))
    if response is None:
        return {"$ref": f"{SPEC_URI}#/components/schemas/Error"}
    response = _resolve(response)
    content = response.get("content")
    if content is None:
        return None
    ref = content["application/json"]["schema"]["$ref"]
    return {"$ref": SPEC_URI + ref}


def validate(schema: dict[str, Any], body: Any) -> None:
    OAS30Validator(
        schema, registry=_registry(), format_checker=OAS30Validator.FORMAT_CHECKER
    ).validate(body)


def assert_conforms(method: str, path: str, status: int, body: Any) -> None:
    schema = schema_for(method, path, status)
    if schema is None:
        assert body in (None, b"", ""), f"{status} must have no body, got {body!r}"
        return
    validate(schema, body)
    if status >= 400:
        assert body["code"] in {"bad_request", "not_found", "forbidden", "internal", "unavailable"}


def component(name: str) -> dict[str, Any]:
    return {"$ref": f"{SPEC_URI}#/components/schemas/{name}"}
