"""The staff inbox in Django admin: pending approvals, decision pages with forms built from
each interrupt's response_schema, and signed e-mail links. It writes only through
workflows.services."""
