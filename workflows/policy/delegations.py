"""Who may delegate whose work, see delegations and end one (out of office, DESIGN 4.3)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from ..models import Delegation
from .persons import holds, person_refusal

ADD_DELEGATION_PERMISSION = "workflows.add_delegation"
CHANGE_DELEGATION_PERMISSION = "workflows.change_delegation"
VIEW_DELEGATION_PERMISSION = "workflows.view_delegation"


class DelegationPolicy:
    """Who may delegate whose work, and end a delegation (out of office, DESIGN 4.3).

    A person may delegate their own work; staff with `workflows.add_delegation` may
    delegate anyone's. A delegation may be ended by its delegator, by whoever made it, and
    by holders of `workflows.change_delegation`. The system (None) may do both."""

    def refusal_to_delegate(self, user: Any, delegator: Any) -> str:
        """Why `user` may not delegate `delegator`'s work ("" when they may)."""
        if user is None:
            return ""
        refused = person_refusal(user)
        if refused or delegator.pk == user.pk:
            return refused
        if user.is_staff and holds(user, ADD_DELEGATION_PERMISSION):
            return ""
        return (
            f"{user.get_username()} may delegate only their own work: delegating "
            f"{delegator.get_username()}'s takes staff status and the permission "
            f"{ADD_DELEGATION_PERMISSION}"
        )

    def refusal_to_end(self, user: Any, delegation: Delegation) -> str:
        """Why `user` may not end `delegation` ("" when they may)."""
        if user is None:
            return ""
        refused = person_refusal(user)
        if refused or user.pk in (delegation.delegator_id, delegation.created_by_id):
            return refused
        if holds(user, CHANGE_DELEGATION_PERMISSION):
            return ""
        return (
            f"{user.get_username()} neither gave nor made delegation {delegation.pk} and "
            f"lacks the permission {CHANGE_DELEGATION_PERMISSION} to end it"
        )

    def visible(self, user: Any, queryset: QuerySet[Delegation]) -> QuerySet[Delegation]:
        """`queryset` narrowed to the delegations `user` sees: all with a delegation model
        permission, else those they gave, received or made."""
        if person_refusal(user):
            return queryset.none()
        permissions = (
            VIEW_DELEGATION_PERMISSION,
            ADD_DELEGATION_PERMISSION,
            CHANGE_DELEGATION_PERMISSION,
        )
        if any(holds(user, permission) for permission in permissions):
            return queryset
        return queryset.filter(Q(delegator=user.pk) | Q(delegate=user.pk) | Q(created_by=user.pk))


def delegation_policy() -> DelegationPolicy:
    return DelegationPolicy()
