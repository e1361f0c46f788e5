"""Authentication, throttling, the request guards every endpoint shares, and the one error
format: `{"error": code, "detail": ..., "field": ...}` with the status the code implies."""

import pytest
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from workflows.api.exceptions import STATUS_BY_CODE
from workflows.engine import errors as engine_errors

from .conftest import error_of, pending, snapshot, start

pytestmark = pytest.mark.django_db(transaction=True)


def test_anonymous_requests_get_401_with_a_challenge():
    response = APIClient().get("/api/interrupts/")
    assert error_of(response) == (401, "not_authenticated", None)
    assert response["WWW-Authenticate"] == "Token"


def test_a_wrong_token_gets_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert error_of(client.get("/api/workflows/"))[:2] == (401, "authentication_failed")


def test_session_authentication_works_too(operator):
    client = APIClient()
    client.force_login(operator)
    assert client.get("/api/workflows/").status_code == 200


def test_token_endpoint_exchanges_a_password_for_the_token(operator):
    operator.set_password("s3cret-pass")
    operator.save()
    response = APIClient().post(
        "/api/token/", {"username": operator.username, "password": "s3cret-pass"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["token"] == operator.auth_token.key
    refused = APIClient().post(
        "/api/token/", {"username": operator.username, "password": "wrong"}, format="json"
    )
    assert error_of(refused)[:2] == (400, "invalid_request")


def test_password_guesses_at_the_token_endpoint_are_throttled(operator, settings):
    guess = {"username": operator.username, "password": "wrong"}
    for _ in range(10):
        assert APIClient().post("/api/token/", guess, format="json").status_code == 400
    refused = APIClient().post("/api/token/", guess, format="json")
    assert error_of(refused)[:2] == (429, "throttled")
    assert int(refused["Retry-After"]) > 0
    settings.HITL = {**settings.HITL, "TOKEN_THROTTLE_RATE": "100/min"}
    assert APIClient().post("/api/token/", guess, format="json").status_code == 400


def test_throttling_answers_429(api, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "user", "2/minute")
    assert api.get("/api/workflows/").status_code == 200
    assert api.get("/api/workflows/").status_code == 200
    response = api.get("/api/workflows/")
    assert error_of(response)[:2] == (429, "throttled")
    assert int(response["Retry-After"]) > 0


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (
            "workflow=api_approval",
            "application/x-www-form-urlencoded",
            (415, "unsupported_media_type"),
        ),
        ("{not json", "application/json", (400, "parse_error")),
        ('{"workflow": "api_approval", "input": NaN}', "application/json", (400, "parse_error")),
        (
            '{"workflow": "api_approval", "input": Infinity}',
            "application/json",
            (400, "parse_error"),
        ),
        ("[" * 50_000 + "]" * 50_000, "application/json", (400, "parse_error")),
    ],
    ids=["form", "malformed", "nan", "infinity", "deep"],
)
def test_bodies_that_are_not_plain_json_are_refused_and_change_nothing(
    api, body, content_type, expected
):
    before = snapshot()
    response = api.generic("POST", "/api/invocations/", body, content_type=content_type)
    assert error_of(response)[:2] == expected
    assert snapshot() == before


@pytest.mark.parametrize(
    ("url", "setting", "body"),
    [
        (
            "/api/function-responses/",
            "MAX_RESPONSE_BYTES",
            {"function_responses": [{"id": "x", "response": {"note": "x" * 2000}}]},
        ),
        (
            "/api/invocations/",
            "MAX_VALUE_BYTES",
            {"workflow": "api_approval", "input": {"note": "x" * 2000}},
        ),
    ],
    ids=["answer", "start"],
)
def test_a_body_over_the_size_limit_is_refused_before_it_is_read(api, settings, url, setting, body):
    settings.HITL = {**settings.HITL, setting: 1000}
    before = snapshot()
    response = api.post(url, body, format="json")
    assert error_of(response) == (413, "payload_too_large", None)
    assert "limit is 1000" in response.json()["detail"]
    assert snapshot() == before


@pytest.mark.parametrize("escaped", ["\\ud800", "nul\\u0000byte"], ids=["lone-surrogate", "nul"])
def test_strings_no_store_can_keep_are_refused_with_400(api, escaped):
    before = snapshot()
    body = '{"workflow": "api_approval", "input": {"note": "' + escaped + '"}}'
    response = api.generic("POST", "/api/invocations/", body, content_type="application/json")
    status, code, _ = error_of(response)
    assert (status, code) in {(400, "invalid_input"), (400, "unencodable_value")}
    assert snapshot() == before


def codes_below(cls):
    codes = set()
    for sub in cls.__subclasses__():
        codes |= {sub.code} | codes_below(sub)
    return codes


def test_every_code_a_caller_can_cause_has_a_status():
    """Every named error a request can cause maps to a status (an unmapped one would answer
    400 where 404 or 409 is right). The others never reach a request: they stop or fail a
    run (ExecutionAbortedError and below), or a definition at import time."""
    internal = codes_below(engine_errors.ExecutionAbortedError) | {
        "workflow_error",
        "invalid_graph",
        "duplicate_output",
        "node_timeout",
    }
    unmapped = codes_below(engine_errors.WorkflowError) - set(STATUS_BY_CODE) - internal
    assert unmapped == set()


def test_only_a_request_of_the_wrong_shape_lists_every_message_by_field(api):
    shape = api.post("/api/function-responses/", {"function_responses": [{}]}, format="json")
    assert error_of(shape)[:2] == (400, "invalid_request")
    assert shape.json()["errors"]["function_responses"]["0"]["id"] == ["This field is required."]
    question = pending(start())[0]
    answer = api.post(
        f"/api/interrupts/{question.id}/decisions/",
        {"response": {"approved": "yes"}},
        format="json",
    )
    assert error_of(answer) == (400, "invalid_response", "approved")
    assert "errors" not in answer.json()


def test_a_made_up_forwarded_for_does_not_dodge_the_token_throttle(operator, settings):
    guess = {"username": operator.username, "password": "wrong"}
    for attempt in range(10):
        forged = {"HTTP_X_FORWARDED_FOR": f"203.0.113.{attempt}"}
        assert APIClient().post("/api/token/", guess, format="json", **forged).status_code == 400
    forged = {"HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    refused = APIClient().post("/api/token/", guess, format="json", **forged)
    assert error_of(refused)[:2] == (429, "throttled")


def test_behind_a_configured_proxy_the_forwarded_client_address_is_throttled(operator, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    guess = {"username": operator.username, "password": "wrong"}

    def post(client_address: str) -> int:
        # The proxy appends the address it saw; whatever the client wrote comes before it.
        forwarded = {"HTTP_X_FORWARDED_FOR": f"10.9.9.9, {client_address}"}
        return APIClient().post("/api/token/", guess, format="json", **forwarded).status_code

    assert [post("203.0.113.1") for _ in range(10)] == [400] * 10
    assert post("203.0.113.1") == 429
    assert post("203.0.113.2") == 400, "another client behind the same proxy has its own limit"
