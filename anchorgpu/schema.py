"""OpenAPI extensions: how our bearer tokens appear in the schema."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token from POST /api/v1/auth/token/ or the tokens page.",
        }


class AgentCredentialScheme(OpenApiAuthenticationExtension):
    target_class = "telemetry.agents.AgentAuthentication"
    name = "agentAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A node agent's credential, sent as `Authorization: Agent <credential>` "
            "(issued by staff per node; docs/agent.md).",
        }


class PrometheusSdSecretScheme(OpenApiAuthenticationExtension):
    target_class = "telemetry.api.views.SdSecretAuthentication"
    name = "prometheusSdSecret"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "PROMETHEUS_SD_TOKEN, for the operator's Prometheus or "
            "VictoriaMetrics reading the targets (`authorization: {type: Bearer, credentials}` "
            "in its `http_sd_configs`).",
        }


PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "errors": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
    },
    "required": ["type", "title", "status", "detail"],
}

# Any operation can meet these: bad query or body, a bad or missing token, a permission
# it lacks, an object that is not the caller's, or a throttle.
COMMON_ERRORS = {
    "400": "Invalid input",
    "401": "Not authenticated, or a bad token",
    "403": "Not allowed",
    "404": "Not found (also another customer's object)",
    "405": "Method not allowed",
    "429": "Throttled, or locked out after failed sign-ins",
}


def add_problem_responses(result, generator, request, public):
    """Postprocessing hook: every error is documented as application/problem+json."""
    result.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    ref = {"$ref": "#/components/schemas/Problem"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for code, description in COMMON_ERRORS.items():
                responses.setdefault(code, {"description": description})
            for code, response in responses.items():
                if code.startswith(("4", "5")):
                    response["content"] = {"application/problem+json": {"schema": ref}}
    return result
