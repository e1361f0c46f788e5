"""What several decisions on a node's own question (its gate's, or whether an effect
happened) add up to: the approval service asks these before it stores a vote and when it
combines the votes into the question's answer."""

from __future__ import annotations

from typing import Any

from .effects import vote_conflict
from .grants import remembered_by_all
from .questions import is_effect_question, is_gate_question


def vote_problem(interrupt_id: str, earlier: list[Any], vote: Any) -> tuple[str, str] | None:
    """(field, why) when `vote` cannot join the `earlier` votes: on an in-doubt question
    every approver gives the same answer. None when it can."""
    if is_effect_question(interrupt_id):
        conflict = vote_conflict(earlier, vote)
        if conflict is not None:
            return "happened", conflict
    return None


def combined_answer(interrupt_id: str, answer: dict[str, Any], approvals: list[Any]) -> Any:
    """The quorum's `answer` as the node receives it: on a gate's question, a grant only
    when every approving decision asked for one, the narrowest among them."""
    if is_gate_question(interrupt_id):
        return remembered_by_all(answer, approvals)
    return answer
