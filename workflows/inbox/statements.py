"""The inbox's SQL, as named constants: the text a search reads and the PostgreSQL indexes
that serve it (installed by migration 0010), and the one statement of the inbox counts.

Kept free of the models so that the migration can import it."""

# The text the inbox searches: the question, the workflow's name and the payload, in one
# string. The trigram index below is on this very expression (upper-cased, as Django's
# `icontains` compares), so a search `LIKE '%...%'` reads the index, not the table.
SEARCH_TEXT = {
    "postgresql": "({message} || ' ' || {workflow} || ' ' || coalesce(({payload})::text, ''))",
    "sqlite": "({message} || ' ' || {workflow} || ' ' || coalesce({payload}, ''))",
}
_SEARCHED = SEARCH_TEXT["postgresql"].format(
    message="message", workflow="workflow_name", payload="payload"
)

# PostgreSQL only. pg_trgm is a trusted extension (PostgreSQL 13+): the database's owner
# may create it. The indexes are partial: the inbox reads pending questions only.
CREATE_TRIGRAM_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
CREATE_SEARCH_INDEX = (
    "CREATE INDEX IF NOT EXISTS hitl_interrupt_search ON workflows_interrupt "
    f"USING gin ((upper({_SEARCHED})) gin_trgm_ops) WHERE status = 'pending'"
)
# `assignees ?| array[...]` (workflows.expressions.HasAnyElement): the views "mine" and
# "groups" when few questions are assigned to the reader.
CREATE_ASSIGNEES_INDEX = (
    "CREATE INDEX IF NOT EXISTS hitl_interrupt_assignees ON workflows_interrupt "
    "USING gin (assignees) WHERE status = 'pending'"
)
DROP_SEARCH_INDEX = "DROP INDEX IF EXISTS hitl_interrupt_search"
DROP_ASSIGNEES_INDEX = "DROP INDEX IF EXISTS hitl_interrupt_assignees"

# Counts of several querysets in one round trip, each stopped after a number of rows:
# `SELECT (SELECT COUNT(*) FROM (<query> LIMIT n) AS counted), ...`.
COUNTS = "SELECT {columns}"
COUNT_OF = "(SELECT COUNT(*) FROM ({query}) AS counted)"
