"""Operators' REST config API and web console (not built yet)."""
