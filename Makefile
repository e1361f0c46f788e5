VENV ?= .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000
# The demo settings read it: the e-mailed links point to http://localhost:$(PORT)/.
export PORT

.PHONY: venv demo test lint format screenshots bench bench-compare bench-profile clean

venv: $(STAMP)

$(STAMP): requirements/base.txt requirements/dev.txt pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -r requirements/dev.txt -e .
	touch $(STAMP)

demo: venv
	$(PYTHON) manage.py migrate
	$(PYTHON) manage.py seed_demo
	@echo "Open http://localhost:$(PORT)/ (the inbox; the admin: http://localhost:$(PORT)/admin/). Passkeys need the name localhost, not 127.0.0.1."
	@echo "Deadlines and recovery: manage.py hitl_periodic runs beside the server (no beat here)"
	@token=$$($(PYTHON) manage.py drf_create_token admin | awk '{print $$3}'); \
	echo "Agents (docs/agents.md), with admin's API token $$token:"; \
	echo "  MCP: claude mcp add --transport http hitl http://localhost:$(PORT)/mcp/ --header \"Authorization: Bearer $$token\""; \
	echo "       or the mcp SDK: $(PYTHON) docs/mcp_client.py http://localhost:$(PORT)/mcp/ $$token"; \
	echo "  A2A: card http://localhost:$(PORT)/.well-known/agent-card.json; JSON-RPC and HTTP+JSON at http://localhost:$(PORT)/a2a/"; \
	echo "       $(PYTHON) docs/examples/a2a_sdk_client.py --url http://localhost:$(PORT) --token $$token"; \
	echo "  AG-UI: an example chat at http://localhost:$(PORT)/chat/ (as admin); POST http://localhost:$(PORT)/api/agui/<workflow>/"
	@echo "Served under ASGI (uvicorn): live streams hold no thread (docs/deployment.md)"
	$(PYTHON) manage.py hitl_periodic & periodic=$$!; \
	trap 'kill $$periodic 2>/dev/null' EXIT; \
	$(PYTHON) -m uvicorn hitl_site.asgi:application --host localhost --port $(PORT)

test: venv
	$(PYTHON) manage.py makemigrations --check --dry-run
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy
	$(PYTHON) -m pytest

lint: venv
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy

format: venv
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

# The pictures in docs/img (inbox, decision page, monitor, workflow graph), taken from the
# demo project on a throwaway database, with their size and layout in docs/img/screenshots.json
# (tests/hitl_site/test_screenshots.py compares a fresh run with it); needs Chromium.
screenshots: venv
	$(PYTHON) docs/screenshots.py

# The engine alone, and the inbox on a large table (PostgreSQL); bench/README.md.
bench: venv
	$(PYTHON) bench/engine_overhead.py
	$(PYTHON) bench/inbox_list.py

# This project beside LangGraph and Google ADK (benchmark-only dependencies, in a virtualenv
# of their own), then the scale runs; rewrites the tables of docs/performance.md and its plots.
BENCH_VENV ?= .venv-bench
bench-compare:
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q -r bench/compare/requirements.txt -e .
	$(BENCH_VENV)/bin/python -m bench.compare.run --write-docs
	$(BENCH_VENV)/bin/python -m bench.compare.scale --write-docs

# Where this project's time goes on SQLite and PostgreSQL: cProfile, the store's share,
# the SQL of a node transition and of a resume (needs only the project's virtualenv).
bench-profile: venv
	$(PYTHON) -m bench.compare.profile

# Also resets the demo: its SQLite database goes (the next `make demo` seeds a fresh one).
clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
	rm -f db.sqlite3 db.sqlite3-wal db.sqlite3-shm
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
