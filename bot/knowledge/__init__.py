"""The operator's knowledge base: facts retrieved for a caller's question, so that the LLM
answers from what the operator wrote instead of inventing it."""

from bot.knowledge.index import KnowledgeIndex, Retrieved

__all__ = ["KnowledgeIndex", "Retrieved"]
