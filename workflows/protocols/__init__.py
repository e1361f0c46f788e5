"""The question envelope and the protocol adapters (DESIGN 4.5): every channel that shows a
question to an agent or a chat UI renders it from `envelope(interrupt, user)` and answers it
through `workflows.services`; no adapter has a rule of its own."""

from .envelope import envelope

__all__ = ["envelope"]
