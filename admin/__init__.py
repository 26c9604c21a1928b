"""Operators' REST API, web console and metrics (docs/admin.md)."""
