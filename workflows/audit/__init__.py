"""The tamper-evident audit trail: canonical JSON, hash chains and receipts."""
