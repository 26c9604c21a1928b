"""The stages that carry out a turn's decision, built around one decider as a call builds
them (``CallContext``): the router and the responder of a test share its conversation."""

from __future__ import annotations

from collections.abc import Callable

from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.deciding.call_lookups import CallLookups
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.deciding.decision import Decision
from bot.pipeline.rehear import Rehearing
from bot.pipeline.stages.responder import Responder
from bot.pipeline.stages.router import Router
from bot.pipeline.turn import Turn
from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile
from serve import LLM


def decider_for(
    cache: IntentCache | None = None,
    *,
    knowledge: KnowledgeIndex | None = None,
    profile: BotProfile | None = None,
    offer: str | None = None,
) -> Decider:
    """A call's decider; ``offer``: the honest fallback's words (its offer of a colleague)."""
    profile = profile or load_profile(DEFAULT_PROFILE)
    if offer is not None:
        profile = profile.model_copy(update={"unsure": offer})
    return Decider(CallLookups(cache, knowledge), profile)


def router_for(
    cache: IntentCache,
    *,
    knowledge: KnowledgeIndex | None = None,
    rehearing: Rehearing | None = None,
    offer: str | None = None,
    decider: Decider | None = None,
) -> Router:
    decider = decider or decider_for(cache, knowledge=knowledge, offer=offer)
    return Router(decider, rehearing=rehearing)


def responder_for(
    llm: LLM,
    profile: BotProfile,
    *,
    apology_pcm: bytes = b"",
    knowledge: KnowledgeIndex | None = None,
    ready: Callable[[str], bytes | None] = lambda text: None,
    decider: Decider | None = None,
) -> Responder:
    decider = decider or decider_for(knowledge=knowledge, profile=profile)
    return Responder(llm, profile, apology_pcm=apology_pcm, decider=decider, ready=ready)


async def decided(decider: Decider, words: str) -> tuple[Turn, Decision]:
    """Decide ``words`` and commit them as the router does: the turn (its route, intent and
    answer as the stages would leave them) and its decision."""
    decision = await decider.decide(words, call_id="c")
    turn = Turn(call_id="c", transcript=words, decision=decision)
    turn.route, turn.intent, turn.answer = decision.route, decision.intent, decision.say or ""
    decider.conversation.commit(turn, decision)
    return turn, decision
