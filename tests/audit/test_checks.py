"""System checks of the audit set-up: a signing key that is not Ed25519 PEM is an error,
checkpoints asked for without a key a warning, and pgtrigger must be installed on
PostgreSQL."""

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.apps import apps
from django.conf import settings as django_settings
from django.core.checks import run_checks
from django.db import connections

from workflows import checks


def hitl(**values):
    return {**django_settings.HITL, **values}


def ids(messages) -> list[str]:
    return [m.id for m in messages if m.id.startswith("workflows.") and m.id != "workflows.E002"]


def rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def test_a_valid_key_passes(settings, signing_key):
    assert checks.check_audit_signing_key() == []


@pytest.mark.parametrize("pem", ["not a key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END"])
def test_a_key_that_is_not_pem_is_an_error(settings, pem):
    settings.HITL = hitl(AUDIT_SIGNING_KEY=pem)
    (error,) = checks.check_audit_signing_key()
    assert error.id == "workflows.E005"
    assert "not an unencrypted PEM private key" in error.msg
    assert "workflows.E005" in ids(run_checks())


def test_a_key_of_another_kind_is_an_error(settings):
    settings.HITL = hitl(AUDIT_SIGNING_KEY=rsa_pem())
    (error,) = checks.check_audit_signing_key()
    assert error.id == "workflows.E005" and "not an Ed25519 key" in error.msg


def test_checkpoints_without_a_key_warn(settings, tmp_path):
    settings.HITL = hitl(AUDIT_CHECKPOINT_PATH=str(tmp_path / "checkpoint.json"))
    (warning,) = checks.check_audit_signing_key()
    assert warning.id == "workflows.W002"
    assert "AUDIT_SIGNING_KEY" in warning.msg and warning.hint


def test_no_key_and_no_checkpoints_is_fine(settings):
    assert checks.check_audit_signing_key() == []


def test_pgtrigger_is_required_on_postgresql(monkeypatch):
    assert checks.check_append_only_trigger() == []
    monkeypatch.setattr(apps, "is_installed", lambda name: name != "pgtrigger")
    expected = ["workflows.E006"] if connections["default"].vendor == "postgresql" else []
    assert ids(checks.check_append_only_trigger()) == expected
    monkeypatch.setattr(connections["default"], "vendor", "postgresql")
    (error,) = checks.check_append_only_trigger()
    assert error.id == "workflows.E006" and '"pgtrigger"' in error.hint
