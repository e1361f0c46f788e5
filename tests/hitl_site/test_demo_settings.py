"""The demo project's settings show what the app can do: receipts signed with a key made on
first run, e-mail notifications printed where the demo runs. Run in processes of their own,
with the demo's settings (the other demo tests run in the tests' project)."""

import os
import stat
import subprocess
import sys
from email import message_from_string
from email.policy import default
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("DATABASE_URL", "CELERY_BROKER_URL", "HITL_AUDIT_SIGNING_KEY", "EMAIL_BACKEND")

SHOW_SETTINGS = """
from django.conf import settings
from workflows.conf import hitl_settings
print(hitl_settings.EMAIL_NOTIFICATIONS, settings.EMAIL_BACKEND, hitl_settings.EMAIL_BASE_URL)
print(hitl_settings.AUDIT_SIGNING_KEY, end="")
"""
# A question opens for an editor with an address: the demo mails it (to the console).
ASK_AN_EDITOR = """
from django.contrib.auth.models import Group, Permission, User
from workflows import services
editor = User.objects.create(username="edith", email="edith@example.com", is_staff=True)
editor.groups.add(Group.objects.create(name="editors"))
editor.user_permissions.add(Permission.objects.get(codename="answer_interrupt"))
services.start("document_drafting", {"title": "Handbook"}, user=editor)
"""


def demo_signing_key(path: Path) -> str:
    # Imported here, not when the module is collected: importing the demo makes its Celery
    # app current (the conftest's fixture imports it and puts the tests' app back).
    from hitl_site.signing_key import demo_signing_key as key_at

    return key_at(path)


def test_the_demo_runs_every_periodic_job():
    from hitl_site import settings as demo_settings
    from workflows.schedule import beat_schedule

    assert beat_schedule() == demo_settings.CELERY_BEAT_SCHEDULE


def demo(tmp_path: Path, *command: str) -> str:
    env = {name: value for name, value in os.environ.items() if name not in SERVICES}
    env.update(
        DJANGO_SETTINGS_MODULE="hitl_site.settings",
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        AUDIT_SIGNING_KEY_FILE=str(tmp_path / "audit-signing.pem"),
        LOG_LEVEL="WARNING",
        DJANGO_LOG_LEVEL="WARNING",
        PORT="8123",
    )
    done = subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_demo_signs_receipts_with_a_key_made_on_first_run_and_mails_to_the_console(
    tmp_path: Path,
) -> None:
    shown = demo(tmp_path, "shell", "-v", "0", "-c", SHOW_SETTINGS)
    console = "django.core.mail.backends.console.EmailBackend"
    assert shown.startswith(f"True {console} http://localhost:8123\n")
    made = (tmp_path / "audit-signing.pem").read_text()
    assert shown.endswith(made) and "PRIVATE KEY" in made
    again = demo(tmp_path, "shell", "-v", "0", "-c", SHOW_SETTINGS)
    assert again == shown  # the key is kept, not made again
    demo(tmp_path, "migrate", "-v", "0")
    mailed = demo(tmp_path, "shell", "-v", "0", "-c", ASK_AN_EDITOR)
    message = message_from_string(mailed, policy=default)  # the console backend's print
    assert message["To"] == "edith@example.com"
    assert message["Subject"].strip() == "Decision needed: Review version 1 of “Handbook”"
    assert "http://localhost:8123/" in message.get_content()


def test_the_demo_key_is_made_once_readable_only_by_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "audit-signing.pem"
    first = demo_signing_key(path)
    assert isinstance(load_pem_private_key(first.encode(), None), Ed25519PrivateKey)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert demo_signing_key(path) == first
    assert [p.name for p in tmp_path.iterdir()] == ["audit-signing.pem"]  # no draft left


def test_two_processes_making_the_key_at_once_agree_on_one(tmp_path: Path) -> None:
    """Both find no key and write their own: the one linked first is the one both read."""
    path = tmp_path / "audit-signing.pem"
    real_link = os.link
    other: list[str] = []

    with pytest.MonkeyPatch.context() as patch:

        def link_after_the_other(source: str, target: Path) -> None:
            patch.setattr(os, "link", real_link)
            other.append(demo_signing_key(target))  # the other process gets there first
            real_link(source, target)

        patch.setattr(os, "link", link_after_the_other)
        ours = demo_signing_key(path)
    assert ours == other[0] == path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["audit-signing.pem"]
