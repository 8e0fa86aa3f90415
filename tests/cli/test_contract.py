"""agpu and the API cannot drift apart unnoticed: every operation in agpu's table
(agpu.api.OPERATIONS, which is all it may send) exists in the server's OpenAPI schema with
the method, query parameters, body fields and headers agpu sends, and every field of the
answer agpu reads is one the schema promises."""

import json

import pytest
from agpu.api import OPERATIONS, Operation
from drf_spectacular.generators import SchemaGenerator


@pytest.fixture(scope="module")
def schema():
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(json.dumps(generated, default=str))


def _resolved(schema, node):
    """A schema object with its $ref followed and allOf/oneOf/anyOf merged."""
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    parts = node.get("allOf", []) + node.get("oneOf", []) + node.get("anyOf", [])
    if not parts:
        return node
    merged = {k: v for k, v in node.items() if k not in ("allOf", "oneOf", "anyOf")}
    for part in parts:
        part = _resolved(schema, part)
        merged.setdefault("properties", {}).update(part.get("properties", {}))
        for key in ("type", "items"):
            if key in part:
                merged.setdefault(key, part[key])
    return merged


def _field_missing(schema, node, dotted: str) -> str | None:
    node = _resolved(schema, node)
    for part in dotted.split("."):
        name, is_list = part.removesuffix("[]"), part.endswith("[]")
        properties = node.get("properties", {})
        if name not in properties:
            return f"no field {name!r} (has {sorted(properties)})"
        node = _resolved(schema, properties[name])
        if is_list:
            if node.get("type") != "array":
                return f"{name!r} is not a list"
            node = _resolved(schema, node["items"])
    return None


def disagreements(schema, name: str, operation: Operation) -> list[str]:
    """What of `operation` the schema does not have."""
    item = schema["paths"].get(operation.path)
    method = operation.method.lower()
    if item is None or method not in item:
        return [f"{name}: no {operation.method} {operation.path}"]
    spec = item[method]
    found = []
    parameters = {(p["in"], p["name"]) for p in spec.get("parameters", [])}
    found += [f"{name}: no query parameter {q!r}" for q in operation.query
              if ("query", q) not in parameters]  # fmt: skip
    found += [f"{name}: no header {h!r}" for h in operation.headers
              if ("header", h) not in parameters]  # fmt: skip
    if operation.body:
        body = spec.get("requestBody", {}).get("content", {}).get("application/json")
        if body is None:
            return [*found, f"{name}: takes no JSON body"]
        fields = _resolved(schema, body["schema"]).get("properties", {})
        found += [f"{name}: body has no {f!r}" for f in operation.body if f not in fields]
    if operation.reads:
        answers = spec["responses"]
        success = next((answers[s] for s in ("200", "201") if s in answers), None)
        content = (success or {}).get("content", {}).get("application/json")
        if content is None:
            return [*found, f"{name}: no JSON answer"]
        answer = _resolved(schema, content["schema"])
        if operation.paginated:
            answer = _resolved(schema, answer["properties"]["results"])
        if answer.get("type") == "array":
            answer = _resolved(schema, answer["items"])
        for field in operation.reads:
            missing = _field_missing(schema, answer, field)
            if missing:
                found.append(f"{name}: answer's {field}: {missing}")
    if operation.binary:
        success = spec["responses"].get("200", {}).get("content", {})
        if not success or "application/json" in success:
            found.append(f"{name}: not a file")
    return found


def test_every_operation_agpu_uses_is_in_the_schema_as_agpu_uses_it(schema):
    assert [d for name, op in OPERATIONS.items() for d in disagreements(schema, name, op)] == []


def test_the_check_sees_a_disagreement(schema):
    """A misspelt field, parameter or path would fail the test above."""
    wrong = {
        "path": Operation("GET", "/api/v1/allocation/"),
        "query": Operation("GET", "/api/v1/allocations/", query=("colour",)),
        "body": Operation("POST", "/api/v1/quotes/", body=("gpu_modle",)),
        "read": Operation("GET", "/api/v1/allocations/{id}/", reads=("access.hots",)),
        "list": Operation("GET", "/api/v1/allocations/", reads=("gpus[].serial",), paginated=True),
        "header": Operation("POST", "/api/v1/bookings/", headers=("Idempotency-Token",)),
    }
    for name, operation in wrong.items():
        assert len(disagreements(schema, name, operation)) == 1, name
