"""The OpenAPI schema: served at schema/ with Swagger UI and Redoc from local static files,
every operation documents its errors, and schemathesis checks the live API against it
(authenticated): no server error, every response matches the schema, and every rejected
request leaves the database as it was."""

import inspect
import json

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from schemathesis import checks

from tests.factories import StaffFactory
from workflows.api.views import ApiViewMixin, ObjectLookupMixin

from .conftest import snapshot, start

pytestmark = pytest.mark.django_db(transaction=True)


def test_schema_documents_every_row_of_the_http_table_with_its_errors():
    schema = APIClient().get("/api/schema/?format=json").json()
    operations = {
        (method.upper(), path): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }
    expected = {
        ("GET", "/api/workflows/"),
        ("POST", "/api/invocations/"),
        ("GET", "/api/invocations/"),
        ("GET", "/api/invocations/{id}/"),
        ("GET", "/api/invocations/{id}/events/"),
        ("GET", "/api/invocations/{id}/stream/"),
        ("POST", "/api/invocations/{id}/cancel/"),
        ("POST", "/api/invocations/{id}/retry/"),
        ("GET", "/api/interrupts/"),
        ("POST", "/api/function-responses/"),
        ("POST", "/api/interrupts/{id}/decisions/"),
        ("POST", "/api/interrupts/{id}/claim/"),
        ("POST", "/api/interrupts/{id}/release/"),
        ("GET", "/api/grants/"),
        ("POST", "/api/grants/"),
        ("POST", "/api/grants/{id}/revoke/"),
        ("GET", "/api/delegations/"),
        ("POST", "/api/delegations/"),
        ("POST", "/api/delegations/{id}/end/"),
        ("GET", "/api/schema/"),
    }
    assert expected <= set(operations)
    for (method, path), operation in operations.items():
        if path == "/api/schema/":
            continue
        responses = operation["responses"]
        assert {"401", "429"} <= set(responses) or path == "/api/token/", (method, path)
        if method == "POST" and path != "/api/token/":
            assert {"400", "413", "415", "422"} <= set(responses), (method, path)
            names = {p["name"] for p in operation.get("parameters", [])}
            assert "Idempotency-Key" in names, (method, path)
    detail = schema["components"]["schemas"]["InterruptDetail"]["properties"]
    assert "response_schema" in detail and "payload" in detail
    assert "DESIGN" not in json.dumps(schema)  # descriptions say the rules themselves


def test_every_operation_describes_itself_not_an_internal_base_class():
    schema = APIClient().get("/api/schema/?format=json").json()
    internal = {inspect.getdoc(base) for base in (ApiViewMixin, ObjectLookupMixin)}
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert operation.get("summary") or path == "/api/schema/", (method, path)
            assert operation.get("description"), (method, path)
            assert operation["description"] not in internal, (method, path)


def test_components_are_named_once_and_usernames_are_not_described_as_input():
    schema = APIClient().get("/api/schema/?format=json").json()
    components = schema["components"]["schemas"]
    assert not [name for name in components if name.endswith("RequestRequest")]
    assert {"DecisionRequest", "ChallengeRequest", "GrantRequest", "DelegationRequest"} <= set(
        components
    )
    assert "150 characters or fewer" not in json.dumps(schema)
    # Every person an object names, by id and by username.
    people = {
        "InterruptSummary": ["claimed_by", "resolved_by"],
        "Invocation": ["started_by"],
        "Decision": ["actor", "on_behalf_of"],
        "Grant": ["granted_by", "revoked_by"],
        "Delegation": ["delegator", "delegate", "created_by"],
    }
    for component, names in people.items():
        properties = components[component]["properties"]
        for name in names:
            assert properties[f"{name}_id"]["type"] == "integer", (component, name)
            assert properties[f"{name}_username"]["type"] == "string", (component, name)
            assert properties[f"{name}_username"]["readOnly"] is True


def test_swagger_ui_and_redoc_load_their_assets_locally():
    for page in ("/api/schema/swagger-ui/", "/api/schema/redoc/"):
        html = APIClient().get(page).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html
        assert "cdn." not in html and "unpkg" not in html and "jsdelivr" not in html


# Read from the running API (a WSGI handler in this process), as a client would.
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())
# Every text field refuses NUL characters (DRF's CharField; PostgreSQL stores none), so a
# request with one is not a valid request.
schema.config.generation.update(allow_x00=False)


@pytest.fixture
def token_headers():
    """A superuser's token (every operation is allowed, so the generated requests get past
    permissions), and something to find: a waiting invocation with its question."""
    admin = StaffFactory()
    start("api_pair", {}, user=admin)
    return {"Authorization": f"Token {Token.objects.create(user=admin).key}"}


@schema.parametrize()
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_live_api_matches_its_schema(case, token_headers):
    before = snapshot()
    response = case.call(headers=token_headers)
    # The generated requests carry a valid token, which ignored_auth would take for an
    # invalid one (401 for bad credentials is tested in test_auth_and_errors.py). A wrong
    # password at token/ is a schema-valid request that must be refused, and so is a grant
    # for a gate the workflow does not have (no schema can say which node is gated), and a
    # delegation to a user who does not exist (nor which users exist).
    excluded = [checks.ignored_auth]
    refusable = {("/api/grants/", "POST"), ("/api/delegations/", "POST")}
    if case.path == "/api/token/" or (case.path, case.method) in refusable:
        excluded.append(checks.positive_data_acceptance)
    if case.method == "GET":
        # django-filter reads an empty filter value (`?status=`) as no filter.
        excluded.append(checks.negative_data_rejection)
    case.validate_response(response, excluded_checks=excluded)
    if response.status_code >= 400:
        assert snapshot() == before, f"{case.method} {case.path} answered {response.status_code}"
