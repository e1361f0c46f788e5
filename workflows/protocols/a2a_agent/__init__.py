"""A2A 1.0 (DESIGN 4.5): the project as an A2A agent, on the `a2a-sdk` package. A task is
an invocation, its context the session; its questions are ADK's long-running function
calls, answered by function_response parts through `workflows.services`.

(Named `a2a_agent`, not `a2a`, so that it never stands in for the `a2a` package.)"""
