"""The bot's configuration: settings, intents and knowledge entries, versioned in the database.

Every change is validated as a whole profile before it is written (422 naming the field and
the reason), written as a new version with its audit entry, and picked up by every node on
its next call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, HTTPException, Path, Request, status
from pydantic import BaseModel, Field, computed_field, field_validator
from sqlalchemy import func, select

from admin.api.pagination import Page, PageDep
from admin.audit import record
from admin.db import aware
from admin.deps import Editor, SessionDep, Viewer
from admin.errors import error_responses
from admin.node_port import (
    MatchingInUse,
    NodePort,
    SuggestionsRead,
    TryResult,
)
from bot.answers.small_talk import SmallTalkReplies
from bot.callflow import CallLimits, TransferTarget
from bot.config import nodes as node_config
from bot.config import store as config_store
from bot.config.models import ConfigVersion
from bot.config.store import ConfigConflict, ConfigRejected, Versioned
from bot.intents.topic import topic_of, topic_of_entry
from bot.profile import (
    MAX_TOPIC_CHARS,
    BotProfile,
    EndpointingConfig,
    IntentConfig,
    IntentMatchingConfig,
    KnowledgeConfig,
    KnowledgeEntry,
    LlmConfig,
    RecordingConfig,
    spoken_topic,
)

router = APIRouter(prefix="/api/v1/config", tags=["configuration"])

NO_CONFIG = (
    "no configuration in the database yet: start a node once (its profile file seeds it) "
    "or run `switchboard admin import-profile FILE`"
)


#: Transfer targets the settings may list (each one a SIP or tel URI, listed once).
MAX_TRANSFER_TARGETS = 50

IntentName = Annotated[str, Path(max_length=128)]
TopicName = Annotated[str, Path(max_length=128)]


class VersionRead(BaseModel):
    version: int
    created_at: datetime
    created_by: str
    comment: str


class SettingsRead(BaseModel):
    """Everything in the profile but its intents and knowledge entries."""

    config_version: int
    name: str
    greeting: str
    apology: str
    decline: str
    unsure: str
    system_prompt: str
    transfer_failed: str | None
    transfer_timeout_s: float
    transfer_targets: list[TransferTarget]
    fillers: list[str]
    filler_after_ms: int
    filler_every_ms: int
    endpointing: EndpointingConfig
    llm: LlmConfig
    intent_matching: IntentMatchingConfig
    knowledge_matching: KnowledgeConfig
    transfer_hold: str | None
    handoff_summary: str
    small_talk: SmallTalkReplies
    recording: RecordingConfig
    call_limits: CallLimits


class SettingsUpdate(BaseModel):
    """Fields left out keep their value; in a section, so do the fields left out of it."""

    name: str | None = Field(None, min_length=1)
    greeting: str | None = Field(None, min_length=1)
    apology: str | None = Field(None, min_length=1)
    decline: str | None = Field(None, min_length=1)
    unsure: str | None = Field(None, min_length=1)
    system_prompt: str | None = Field(None, min_length=1)
    transfer_failed: str | None = Field(None, min_length=1)
    transfer_timeout_s: float | None = Field(None, gt=0.0, le=300.0)
    transfer_targets: list[TransferTarget] | None = Field(
        None,
        max_length=MAX_TRANSFER_TARGETS,
        description="where a caller may be put through (SIP or tel URIs), and how; "
        "empty: the targets the intents and menus name, each by REFER",
    )
    fillers: list[str] | None = None
    filler_after_ms: int | None = Field(None, ge=0)
    filler_every_ms: int | None = Field(None, ge=0)
    endpointing: dict[str, Any] | None = Field(None, description="fields of EndpointingConfig")
    llm: dict[str, Any] | None = Field(None, description="fields of LlmConfig")
    intent_matching: dict[str, Any] | None = Field(
        None, description="fields of IntentMatchingConfig"
    )
    knowledge_matching: dict[str, Any] | None = Field(None, description="fields of KnowledgeConfig")
    transfer_hold: str | None = Field(None, min_length=1)
    handoff_summary: str | None = Field(None, min_length=1, max_length=300)
    small_talk: dict[str, Any] | None = Field(None, description="fields of SmallTalkReplies")
    recording: dict[str, Any] | None = Field(None, description="fields of RecordingConfig")
    call_limits: dict[str, Any] | None = Field(None, description="fields of CallLimits")


class IntentCreate(IntentConfig):
    """A new intent (the name must be new)."""


class IntentUpdate(BaseModel):
    """Fields left out keep their value."""

    examples: list[str] | None = Field(None, min_length=1)
    negatives: list[str] | None = None
    answer: str | None = Field(None, min_length=1)
    action: Literal["transfer", "hangup"] | None = None
    transfer_to: str | None = None
    confirm: str | None = Field(None, min_length=1, max_length=300)
    #: null: derived from the name and examples again.
    topic: str | None = Field(None, min_length=1, max_length=MAX_TOPIC_CHARS)

    @field_validator("topic")
    @classmethod
    def _topic_is_a_phrase(cls, topic: str | None) -> str | None:
        return spoken_topic(topic)


class IntentRead(IntentConfig):
    config_version: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def topic_in_use(self) -> str:
        """The topic the bot says ("Is this about ...?"): ``topic``, or the one derived
        from the name and examples when it is unset."""
        return topic_of(self)


class KnowledgeCreate(KnowledgeEntry):
    """A new knowledge entry (the topic must be new)."""


class KnowledgeUpdate(BaseModel):
    """Fields left out keep their value."""

    questions: list[str] | None = Field(None, min_length=1)
    answer: str | None = Field(None, min_length=1)
    keywords: list[str] | None = None
    confirm: str | None = Field(None, min_length=1, max_length=300)
    #: null: derived from the id and questions again.
    about: str | None = Field(None, min_length=1, max_length=MAX_TOPIC_CHARS)

    @field_validator("about")
    @classmethod
    def _about_is_a_phrase(cls, about: str | None) -> str | None:
        return spoken_topic(about)


class KnowledgeRead(KnowledgeEntry):
    config_version: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def about_in_use(self) -> str:
        """The topic the bot says ("Is this about ...?"): ``about``, or the one derived
        from the id and questions when it is unset."""
        return topic_of_entry(self)


class TryRequest(BaseModel):
    text: str = Field(min_length=1, max_length=1000)


def _rejected(exc: ConfigRejected) -> HTTPException:
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        detail=[
            {"loc": ["profile", *p.loc], "msg": p.msg, "type": "config_invalid"}
            for p in exc.problems
        ],
    )


async def _current(session: SessionDep) -> Versioned:
    found = await config_store.latest(session)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=NO_CONFIG)
    return found


async def _write(
    session: SessionDep,
    base: Versioned,
    data: dict[str, Any],
    *,
    who: Editor,
    action: str,
    target: str,
    before: Any,
    after: Any,
) -> int:
    try:
        profile = config_store.validate(data)
        return await config_store.save(
            session,
            profile,
            actor=who.actor,
            action=action,
            target=target,
            before=before,
            after=after,
            base=base.version,
            audit=record,
        )
    except ConfigRejected as exc:
        raise _rejected(exc) from None
    except ConfigConflict as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, detail=str(exc)) from None


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Items:
    """One of the profile's lists the API edits an item at a time."""

    field: str  # the profile's list
    key: str  # the field that names an item
    kind: str  # the audit record's action and target prefix


_INTENTS = _Items("intents", "name", "intent")
_KNOWLEDGE = _Items("knowledge", "topic", "knowledge")


async def _edit(
    session: SessionDep,
    cur: Versioned,
    items: _Items,
    key: str,
    *,
    who: Editor,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> int:
    """The next version with ``after`` for the item named ``key``: added when ``before``
    is None, removed when ``after`` is, else changed in its place."""
    data = cur.profile.model_dump()
    listed: list[dict[str, Any]] = data[items.field]
    if before is None:
        assert after is not None  # neither before nor after: nothing to write
        listed.append(after)
        action = "create"
    elif after is None:
        data[items.field] = [i for i in listed if i[items.key] != key]
        action = "delete"
    else:
        data[items.field] = [after if i[items.key] == key else i for i in listed]
        action = "update"
    return await _write(
        session,
        cur,
        data,
        who=who,
        action=f"{items.kind}.{action}",
        target=f"{items.kind}:{key}",
        before=before,
        after=after,
    )


def _page(items: list[T], page: PageDep) -> Page[T]:
    return Page(
        items=items[page.offset : page.offset + page.limit],
        total=len(items),
        limit=page.limit,
        offset=page.offset,
    )


def _settings_read(version: int, profile: BotProfile) -> SettingsRead:
    data = profile.model_dump(exclude={"intents", "knowledge"})
    return SettingsRead(config_version=version, **data)


# -- versions --------------------------------------------------------------------------


@router.get("/versions", response_model=Page[VersionRead], summary="Configuration versions")
async def list_versions(session: SessionDep, _who: Viewer, page: PageDep) -> Page[VersionRead]:
    total = (await session.execute(select(func.count()).select_from(ConfigVersion))).scalar_one()
    rows = await session.execute(
        select(
            ConfigVersion.version,
            ConfigVersion.created_at,
            ConfigVersion.created_by,
            ConfigVersion.comment,
        )
        .order_by(ConfigVersion.version.desc())
        .limit(page.limit)
        .offset(page.offset)
    )
    items = [
        VersionRead(
            version=v,
            created_at=aware(at),
            created_by=by,
            comment=c,
        )
        for v, at, by, c in rows.all()
    ]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)


@router.get(
    "/versions/{version}",
    response_model=BotProfile,
    summary="One version in full",
    responses=error_responses(404),
)
async def get_version(
    version: Annotated[int, Path(ge=1, le=2**31 - 1)], session: SessionDep, _who: Viewer
) -> BotProfile:
    found = await config_store.get_version(session, version)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no version {version}")
    return found.profile


# -- nodes -----------------------------------------------------------------------------


class NodeConfigRead(BaseModel):
    """One node's configuration: the version it runs, and the last one it could not apply."""

    node: str
    #: The version the node runs (the last it applied).
    applied_version: int | None
    applied_at: datetime | None
    #: ``current``: it runs the newest version; ``not_applied``: its check refused a version
    #: (``failed_*``), and it runs the last one it applied; ``behind``: it has not loaded the
    #: newest version yet (it does within its poll interval).
    state: Literal["current", "not_applied", "behind"]
    failed_version: int | None
    failed_reason: str | None
    failed_at: datetime | None


class NodesRead(BaseModel):
    """The newest configuration version, and what each node that reported does with it."""

    config_version: int | None
    nodes: list[NodeConfigRead]


@router.get("/nodes", response_model=NodesRead, summary="Which version each node runs")
async def config_nodes(session: SessionDep, _who: Viewer) -> NodesRead:
    """Each node's version in use, and the last version it refused with the reason (the
    node keeps the version it applied last)."""
    newest = await config_store.latest_version(session)
    nodes = []
    for n in await node_config.node_states(session):
        state: Literal["current", "not_applied", "behind"] = "current"
        if n.failed_version is not None:
            state = "not_applied"
        elif newest is not None and n.applied_version != newest:
            state = "behind"
        nodes.append(
            NodeConfigRead(
                node=n.node,
                applied_version=n.applied_version,
                applied_at=n.applied_at,
                state=state,
                failed_version=n.failed_version,
                failed_reason=n.failed_reason,
                failed_at=n.failed_at,
            )
        )
    return NodesRead(config_version=newest, nodes=nodes)


# -- settings --------------------------------------------------------------------------


@router.get(
    "/settings",
    response_model=SettingsRead,
    summary="The bot's settings",
    responses=error_responses(404),
)
async def get_settings(session: SessionDep, _who: Viewer) -> SettingsRead:
    cur = await _current(session)
    return _settings_read(cur.version, cur.profile)


@router.patch(
    "/settings",
    response_model=SettingsRead,
    summary="Change the bot's settings",
    responses=error_responses(404, 409),
)
async def update_settings(body: SettingsUpdate, session: SessionDep, who: Editor) -> SettingsRead:
    cur = await _current(session)
    changes = body.model_dump(exclude_unset=True)
    data = cur.profile.model_dump()
    before: dict[str, Any] = {}
    for key, value in changes.items():
        before[key] = data[key]
        if isinstance(value, dict) and isinstance(data[key], dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    version = await _write(
        session,
        cur,
        data,
        who=who,
        action="settings.update",
        target="settings",
        before=before,
        after=changes,
    )
    return _settings_read(version, config_store.validate(data))


# -- intents ---------------------------------------------------------------------------


def _find_intent(profile: BotProfile, name: str) -> IntentConfig:
    for intent in profile.intents:
        if intent.name == name:
            return intent
    raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no intent {name!r}")


@router.get(
    "/intents", response_model=Page[IntentRead], summary="Intents", responses=error_responses(404)
)
async def list_intents(session: SessionDep, _who: Viewer, page: PageDep) -> Page[IntentRead]:
    cur = await _current(session)
    return _page(
        [IntentRead(config_version=cur.version, **i.model_dump()) for i in cur.profile.intents],
        page,
    )


@router.get(
    "/intents/{name}",
    response_model=IntentRead,
    summary="One intent",
    responses=error_responses(404),
)
async def get_intent(name: IntentName, session: SessionDep, _who: Viewer) -> IntentRead:
    cur = await _current(session)
    return IntentRead(config_version=cur.version, **_find_intent(cur.profile, name).model_dump())


@router.post(
    "/intents",
    response_model=IntentRead,
    status_code=201,
    summary="Add an intent",
    responses=error_responses(404, 409),
)
async def create_intent(body: IntentCreate, session: SessionDep, who: Editor) -> IntentRead:
    cur = await _current(session)
    if any(i.name == body.name for i in cur.profile.intents):
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"name: intent {body.name!r} exists")
    new = IntentConfig.model_validate(body.model_dump()).model_dump()
    version = await _edit(session, cur, _INTENTS, body.name, who=who, before=None, after=new)
    return IntentRead(config_version=version, **new)


@router.patch(
    "/intents/{name}",
    response_model=IntentRead,
    summary="Change an intent",
    responses=error_responses(404, 409),
)
async def update_intent(
    name: IntentName, body: IntentUpdate, session: SessionDep, who: Editor
) -> IntentRead:
    cur = await _current(session)
    old = _find_intent(cur.profile, name).model_dump()
    new = {**old, **body.model_dump(exclude_unset=True)}
    version = await _edit(session, cur, _INTENTS, name, who=who, before=old, after=new)
    return IntentRead(config_version=version, **new)


@router.delete(
    "/intents/{name}",
    status_code=204,
    summary="Remove an intent",
    responses=error_responses(404, 409),
)
async def delete_intent(name: IntentName, session: SessionDep, who: Editor) -> None:
    cur = await _current(session)
    old = _find_intent(cur.profile, name).model_dump()
    await _edit(session, cur, _INTENTS, name, who=who, before=old, after=None)


# -- knowledge -------------------------------------------------------------------------


def _find_entry(profile: BotProfile, topic: str) -> KnowledgeEntry:
    for entry in profile.knowledge:
        if entry.topic == topic:
            return entry
    raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no knowledge topic {topic!r}")


@router.get(
    "/knowledge",
    response_model=Page[KnowledgeRead],
    summary="Knowledge entries",
    responses=error_responses(404),
)
async def list_knowledge(session: SessionDep, _who: Viewer, page: PageDep) -> Page[KnowledgeRead]:
    cur = await _current(session)
    items = [
        KnowledgeRead(config_version=cur.version, **e.model_dump()) for e in cur.profile.knowledge
    ]
    return _page(items, page)


@router.get(
    "/knowledge/{topic}",
    response_model=KnowledgeRead,
    summary="One knowledge entry",
    responses=error_responses(404),
)
async def get_knowledge(topic: TopicName, session: SessionDep, _who: Viewer) -> KnowledgeRead:
    cur = await _current(session)
    entry = _find_entry(cur.profile, topic)
    return KnowledgeRead(config_version=cur.version, **entry.model_dump())


@router.post(
    "/knowledge",
    response_model=KnowledgeRead,
    status_code=201,
    summary="Add a knowledge entry",
    responses=error_responses(404, 409),
)
async def create_knowledge(
    body: KnowledgeCreate, session: SessionDep, who: Editor
) -> KnowledgeRead:
    cur = await _current(session)
    if any(e.topic == body.topic for e in cur.profile.knowledge):
        raise HTTPException(
            status.HTTP_409_CONFLICT, detail=f"topic: knowledge topic {body.topic!r} exists"
        )
    new = KnowledgeEntry.model_validate(body.model_dump()).model_dump()
    version = await _edit(session, cur, _KNOWLEDGE, body.topic, who=who, before=None, after=new)
    return KnowledgeRead(config_version=version, **new)


@router.patch(
    "/knowledge/{topic}",
    response_model=KnowledgeRead,
    summary="Change an entry",
    responses=error_responses(404, 409),
)
async def update_knowledge(
    topic: TopicName, body: KnowledgeUpdate, session: SessionDep, who: Editor
) -> KnowledgeRead:
    cur = await _current(session)
    old = _find_entry(cur.profile, topic).model_dump()
    new = {**old, **body.model_dump(exclude_unset=True)}
    version = await _edit(session, cur, _KNOWLEDGE, topic, who=who, before=old, after=new)
    return KnowledgeRead(config_version=version, **new)


@router.delete(
    "/knowledge/{topic}",
    status_code=204,
    summary="Remove a knowledge entry",
    responses=error_responses(404, 409),
)
async def delete_knowledge(topic: TopicName, session: SessionDep, who: Editor) -> None:
    cur = await _current(session)
    old = _find_entry(cur.profile, topic).model_dump()
    await _edit(session, cur, _KNOWLEDGE, topic, who=who, before=old, after=None)


# -- try an utterance ------------------------------------------------------------------


@router.get(
    "/matching",
    response_model=MatchingInUse,
    summary="The intents' matching in use",
    responses=error_responses(503),
)
async def matching_in_use(request: Request, _who: Viewer) -> MatchingInUse:
    """The thresholds the running node fitted to the intents, and its warnings about them
    (thin intents, examples nearer to another intent, a raised threshold)."""
    node: NodePort | None = request.app.state.node
    if node is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="the matching in use is a node's: use the API of `switchboard run`",
        )
    return node.matching_report()


@router.post(
    "/try",
    response_model=TryResult,
    summary="What the node would answer",
    responses=error_responses(503),
)
async def try_utterance(body: TryRequest, request: Request, _who: Viewer) -> TryResult:
    """The running node's intent cache and knowledge base on these words (nothing is said)."""
    node: NodePort | None = request.app.state.node
    if node is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="trying an utterance needs the models of a node: use the API of "
            "`switchboard run`",
        )
    return await node.try_utterance(body.text)


@router.post(
    "/intents/{name}/suggestions",
    response_model=SuggestionsRead,
    summary="Examples the node's model suggests for an intent",
    responses=error_responses(404, 503),
)
async def suggest_intent_examples(
    name: IntentName, request: Request, session: SessionDep, _who: Editor
) -> SuggestionsRead:
    """Paraphrases of the intent written by the node's language model, each checked by its
    matcher against the other intents, the negatives and the background lines; the ones the
    matcher gives to this intent uncontested are offered, with their score and whether the
    intent answers them already. Nothing is added: an editor accepts a line with the
    intent's PATCH (a new version, audited). 503 with the reason when the node cannot write
    them (no node, no language model or intents, another suggestion under way)."""
    _find_intent((await _current(session)).profile, name)
    node: NodePort | None = request.app.state.node
    if node is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="suggesting examples needs the models of a node: use the API of "
            "`switchboard run`",
        )
    return await node.suggest_examples(name)  # NodeUnavailable: a 503 with its reason
