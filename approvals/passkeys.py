"""Passkeys in the admin: "Approvals > Passkeys" lists, adds and removes the logged-in
person's own passkeys (the WebAuthn registration ceremony, its challenge kept in the
session), and the decision page asks for the challenge its passkey signs. Every change goes
through workflows.services.passkeys; approvals/static/approvals/passkeys.js drives the browser.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.signals import user_logged_in
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from workflows import services
from workflows.admin.base import ReadOnlyAdmin
from workflows.audit.assertions import b64url, from_b64url
from workflows.conf import hitl_settings
from workflows.engine.errors import ResponseValidationError, WorkflowError
from workflows.services import passkeys

from . import display
from .forms import comment_of
from .models import Passkey

SESSION_CHALLENGE = "approvals.passkey_registration"
SESSION_LOGIN_AT = "approvals.login_at"
PASSWORD_REFUSED = "Your password is needed to add a passkey, and this is not it."


@receiver(user_logged_in, dispatch_uid="approvals.passkeys.login_time")
def remember_login_time(sender: Any, request: HttpRequest | None, **kwargs: Any) -> None:
    """When this session signed in: adding a passkey without a password (an account that
    signs in elsewhere, SSO) needs a recent login, not a session alone."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_LOGIN_AT] = time.time()


def _error(code: str, detail: str, status: int, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": code, "detail": detail, **extra}, status=status)


def _json_body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return body if isinstance(body, dict) else {}


@admin.register(Passkey)
class PasskeyAdmin(ReadOnlyAdmin):
    """Your passkeys, and only yours: anyone who may use the admin manages their own. The
    admin's own add, change and delete views are not used: registering is a ceremony
    with the browser, removing a POST of its own, each through workflows.services.passkeys."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("", view(self.passkeys_view), name="approvals_passkey_changelist"),
            path("options/", view(options_view), name="approvals_passkey_options"),
            path("register/", view(register_view), name="approvals_passkey_register"),
            path("<int:passkey_id>/remove/", view(remove_view), name="approvals_passkey_remove"),
        ]

    def passkeys_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Your passkeys",
            "opts": self.model._meta,
            "passkeys": Passkey.objects.filter(user=request.user.pk),
            "needs_password": _signed_in(request).has_usable_password(),
            "host_refusal": passkeys.host_refusal(passkeys.relying_party(request)),
            "media": self.media,
        }
        return TemplateResponse(request, "approvals/passkeys.html", context)

    class Media:
        css = {"all": ["approvals/approvals.css"]}
        js = ["approvals/passkeys.js"]


def _signed_in(request: HttpRequest) -> AbstractBaseUser:
    """The signed-in user of an admin page (the admin site lets no one else in)."""
    user = request.user
    if not user.is_authenticated:
        raise PermissionDenied
    return user


def _attempts_key(user: AbstractBaseUser) -> str:
    return f"approvals.passkey_password_attempts.{user.pk}"


def _identity_refusal(request: HttpRequest, user: AbstractBaseUser) -> JsonResponse | None:
    """Why the person adding a passkey has not shown it is them, or None. A session
    alone must not add a key that signs decisions in its owner's name: their password
    (HITL["PASSKEY_PASSWORD_ATTEMPTS"] wrong ones in HITL["PASSKEY_RECENT_LOGIN_MINUTES"]
    minutes, then none until the window passes), or, for an account without one, a login
    at most that many minutes old."""
    minutes = hitl_settings.PASSKEY_RECENT_LOGIN_MINUTES
    if not user.has_usable_password():
        login_at = request.session.get(SESSION_LOGIN_AT)
        if isinstance(login_at, int | float) and time.time() - login_at <= minutes * 60:
            return None
        detail = f"Sign in again to add a passkey: it needs a login at most {minutes} minutes old."
        login = reverse("admin:login") + "?next=" + reverse("admin:approvals_passkey_changelist")
        return _error("login_required", detail, 403, login_url=login)
    key = _attempts_key(user)
    if (cache.get(key) or 0) >= hitl_settings.PASSKEY_PASSWORD_ATTEMPTS:
        detail = f"Too many wrong passwords: try again in {minutes} minutes."
        return _error("too_many_attempts", detail, 429)
    password = _json_body(request).get("password")
    if isinstance(password, str) and user.check_password(password):
        cache.delete(key)
        return None
    cache.add(key, 0, timeout=minutes * 60)  # the window starts at the first wrong one
    try:
        cache.incr(key)
    except ValueError:  # expired between the two calls: this one starts a window
        cache.set(key, 1, timeout=minutes * 60)
    return _error("password_required", PASSWORD_REFUSED, 403)


@require_POST
def options_view(request: HttpRequest) -> JsonResponse:
    """The registration options, once the person has shown it is them
    (_identity_refusal)."""
    user = _signed_in(request)
    refusal = _identity_refusal(request, user)
    if refusal is not None:
        return refusal
    rp = passkeys.relying_party(request)
    refused = passkeys.host_refusal(rp)
    if refused:
        return _error("host_unsupported", refused, 400)
    options, challenge = passkeys.registration_options(request.user, rp)
    request.session[SESSION_CHALLENGE] = b64url(challenge)
    return JsonResponse(options)


@require_POST
def register_view(request: HttpRequest) -> JsonResponse:
    body = _json_body(request)
    challenge = request.session.pop(SESSION_CHALLENGE, None)  # one registration each
    if challenge is None:
        return _error("no_challenge", "Start again: this page asked for no passkey.", 400)
    try:
        passkey = passkeys.register(
            request.user,
            body.get("credential"),
            challenge=from_b64url(challenge, "challenge"),
            rp=passkeys.relying_party(request),
            name=str(body.get("name") or ""),
        )
    except passkeys.PasskeyError as exc:
        return _error("invalid_passkey", str(exc), 400)
    messages.success(request, f"Passkey “{passkey.name}” added: it can sign your decisions.")
    return JsonResponse({"id": passkey.pk, "name": passkey.name}, status=201)


@require_POST
def remove_view(request: HttpRequest, passkey_id: int) -> HttpResponse:
    try:
        passkeys.remove(request.user, passkey_id)
    except passkeys.PasskeyError as exc:
        raise Http404(str(exc)) from None
    messages.success(request, "Passkey removed; decisions it signed stay verifiable.")
    return redirect("admin:approvals_passkey_changelist")


def decision_challenge(request: HttpRequest, interrupt: Any, form: Any) -> JsonResponse:
    """What the decision page's passkey signs for the answer its form holds now (the
    options of navigator.credentials.get()), or why it cannot sign: `invalid_response`
    (the page then submits, and shows the form's errors), or a refusal."""
    if not form.is_valid():
        return _error("invalid_response", "The form has errors.", 400)
    try:
        challenge = services.signing_challenge(
            interrupt.pk, form.response(), actor=request.user, comment=comment_of(form)
        )
        options = passkeys.assertion_options(
            request.user, challenge, passkeys.relying_party(request).id
        )
    except ResponseValidationError:
        return _error("invalid_response", "The answer does not fit the question.", 400)
    except passkeys.SignatureRefused as exc:
        url = reverse("admin:approvals_passkey_changelist")
        return _error(exc.code, display.refusal_message(exc), 403, passkeys_url=url)
    except PermissionDenied as exc:
        return _error("permission_denied", display.refusal_message(exc), 403)
    except WorkflowError as exc:
        return _error(exc.code, display.refusal_message(exc), 409)
    return JsonResponse(options)
