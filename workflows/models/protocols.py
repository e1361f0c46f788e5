"""Tables of the agent protocols (DESIGN 4.5)."""

from django.db import models


class McpRequestState(models.Model):
    """A `requestState` the MCP adapter took on a retried call: each one answers once. The
    row is written in the answer's transaction (a refused answer leaves the state unused);
    a second use meets the primary key, on every process and worker alike."""

    nonce = models.CharField(primary_key=True, max_length=64)
    expires_at = models.DateTimeField(
        db_index=True, help_text="after this the state is refused anyway"
    )

    class Meta:
        verbose_name = "MCP request state"

    def __str__(self) -> str:
        return self.nonce
