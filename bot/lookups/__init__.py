"""Business lookups: the operator's HTTP webhooks, called with values the caller gave."""

from bot.lookups.webhook import BadLookupInput, LookupOutcome, Webhooks

__all__ = ["BadLookupInput", "LookupOutcome", "Webhooks"]
