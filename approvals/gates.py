"""The decision on an approval gate's question, as a person reads it: the proposed action's
args as a form prefilled with the proposal (when the gate allows edits), a reason, and
whether to remember the approval; Approve (with the edits, if any) or Reject.

`GateForm.response()` is the gate's answer: `{"decision": "approve" | "edit" | "reject",
"args", "reason", "remember", "pins", "ttl_seconds", "uses_left"}`; services.decide
validates it against the gate's response schema and the grant rule.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils.text import Truncator

from workflows.engine.questions import is_gate_question
from workflows.engine.status import InterruptStatus
from workflows.models import Decision, Interrupt
from workflows.policy import grant_policy

from .forms import SchemaForm, form_for

APPROVE, REJECT, EDIT = "approve", "reject", "edit"
SCOPE_LABELS = {
    "invocation": "for the rest of this run",
    "session": "for this session (its other runs too)",
    "always": "always (needs the permission to grant standing approvals)",
}
ARGS_PREFIX = "args"
REASON_NEEDED = "Say why you reject: the reason goes back to who proposed the action."


def is_gate(interrupt: Interrupt) -> bool:
    payload = interrupt.payload
    return (
        is_gate_question(interrupt.pk)
        and isinstance(payload, dict)
        and "args" in payload
        and "decision" in ((interrupt.response_schema or {}).get("properties") or {})
    )


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


class GateForm(forms.Form):
    """Approve or Reject (the submit button's `decision`) a proposed action; with edits
    allowed, its args are fields prefilled with the proposal, and an approval whose args
    differ from the proposal is an edit."""

    reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why; needed to reject: the reason goes back to who proposed the action.",
    )
    decision = forms.ChoiceField(
        choices=[(APPROVE, "Approve"), (REJECT, "Reject")], widget=forms.HiddenInput
    )

    def __init__(self, interrupt: Interrupt, data: Any = None, *, user: Any) -> None:
        super().__init__(data)
        schema = interrupt.response_schema or {}
        properties = schema.get("properties") or {}
        self.proposal = (interrupt.payload or {}).get("args")
        self.allow_edit = EDIT in (properties.get("decision") or {}).get("enum", [])
        self.args_form: SchemaForm | None = None
        if self.allow_edit:
            self.args_form = SchemaForm(properties.get("args") or {}, data, prefix=ARGS_PREFIX)
            self._prefill(self.args_form)
        # Only the scopes this approver may remember (the grant rule says who may "always").
        policy = grant_policy()
        offered = (properties.get("remember") or {}).get("enum") or []
        scopes = [s for s in offered if not policy.refusal_to_grant(user, s)]
        if offered:
            # Kept even when none is this approver's (hidden, "no" its only choice): a scope
            # posted anyway is refused, never silently dropped from an approval.
            self.fields["remember"] = forms.ChoiceField(
                required=False,
                label="Remember this approval",
                choices=[("", "no, ask next time"), *((s, SCOPE_LABELS.get(s, s)) for s in scopes)],
                widget=forms.Select if scopes else forms.HiddenInput,
            )
        if scopes:
            self.fields["pins"] = forms.CharField(
                required=False,
                label="Only for args like",
                widget=forms.Textarea(attrs={"rows": 2}),
                help_text='A JSON Schema later args must satisfy, e.g. {"properties": '
                '{"amount": {"maximum": 100}}}; empty: any args.',
            )
            self.fields["ttl_seconds"] = forms.IntegerField(
                required=False, min_value=1, label="For (seconds)", help_text="Empty: no expiry."
            )
            self.fields["uses_left"] = forms.IntegerField(
                required=False, min_value=1, label="At most (uses)", help_text="Empty: no limit."
            )

    def _prefill(self, args_form: SchemaForm) -> None:
        for name, path in args_form.paths.items():
            value = _at(self.proposal, path) if args_form.is_object else self.proposal
            field = args_form.fields[name]
            if isinstance(field, forms.TypedChoiceField | forms.TypedMultipleChoiceField):
                value = json.dumps(value) if value is not None else None
            args_form.initial[name] = value
        if not args_form.is_object:
            args_form.initial[next(iter(args_form.fields))] = self.proposal

    @property
    def proposal_json(self) -> str:
        return json.dumps(self.proposal)

    @property
    def media(self) -> forms.Media:
        media = forms.Media(js=["approvals/gate.js"]) + super().media
        return media + self.args_form.media if self.args_form is not None else media

    def clean_pins(self) -> Any:
        text = self.cleaned_data.get("pins") or ""
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("decision") == REJECT and not (data.get("reason") or "").strip():
            # The reason is what the proposer revises by: a rejection without one is a
            # dead end, and an empty box most often a slip of the wrong button.
            self.add_error("reason", REASON_NEEDED)
        return data

    def is_valid(self) -> bool:
        valid = super().is_valid()
        if self.cleaned_data.get("decision") == REJECT or self.args_form is None:
            return valid
        return self.args_form.is_valid() and valid

    @property
    def comment(self) -> str:
        return self.cleaned_data.get("reason") or ""

    def response(self) -> dict[str, Any]:
        data = self.cleaned_data
        answer: dict[str, Any] = {"decision": data["decision"]}
        if data.get("reason"):
            answer["reason"] = data["reason"]
        if data["decision"] == REJECT:
            return answer
        if self.args_form is not None:
            args = self.args_form.response()
            if args != self.proposal:
                answer.update(decision=EDIT, args=args)
        if data.get("remember"):
            answer["remember"] = data["remember"]
            for name in ("pins", "ttl_seconds", "uses_left"):
                if data.get(name) not in (None, ""):
                    answer[name] = data[name]
        return answer

    def add_validation_error(self, error: Any) -> None:
        """Show a schema error on the field it names: an arg's on the args form."""
        field = error.field or ""
        if field.startswith("args.") and self.args_form is not None:
            moved = type(error)(error.interrupt_id, field[len("args.") :], error.message)
            self.args_form.add_validation_error(moved)
        elif field == "args" and self.args_form is not None:
            self.args_form.add_error(None, error.message)
        elif field in self.fields:
            self.add_error(field, error.message)
        else:
            self.add_error(None, f"{field}: {error.message}")


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix or "args": value}
    flat: dict[str, Any] = {}
    for key, item in value.items():
        flat.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 25, as typed, though the form's number field reads 25.0
    return value if isinstance(value, str) else json.dumps(value)


def edited_args(proposal: Any, args: Any) -> str:
    """What an edit changed, as a person reads it: `amount 50 (proposed 70)`."""
    before, after = _flat(proposal), _flat(args)
    changed = [
        f"{name} {_shown(after.get(name))} (proposed {_shown(before.get(name))})"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]
    return ", ".join(changed)


def decision_form(interrupt: Interrupt, user: Any, data: Any = None) -> forms.Form:
    """The decision form of an interrupt for `user`: an approval gate's own, else the one
    its response schema describes."""
    if is_gate(interrupt):
        return GateForm(interrupt, data, user=user)
    return form_for(interrupt.response_schema, data)


def outcome_message(decision: Decision) -> str:
    """What the decision page says once `decision` is recorded."""
    interrupt = decision.interrupt
    response = decision.response
    if isinstance(response, dict) and response.get("decision") == EDIT:
        # The question's message names the proposal; the approval is of the edit.
        changes = edited_args((interrupt.payload or {}).get("args"), response.get("args"))
        return f"Decision recorded; approved with your changes: {changes}."
    if interrupt.status == InterruptStatus.RESOLVED:
        return f"Decision recorded; “{Truncator(interrupt.message).chars(60)}” is answered."
    remaining = interrupt.quorum - interrupt.decisions.count()
    return f"Decision recorded; waiting for {remaining} more approval(s)."
