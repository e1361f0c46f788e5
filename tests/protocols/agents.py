"""Workflows of the protocol tests (registered in the test process on import, and in the
uvicorn processes through tests/protocols/server_settings.py)."""
