"""Answers a caller can trust: what a generated answer may say before it is spoken."""
