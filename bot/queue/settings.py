"""The call queue's settings (``SWITCHBOARD_QUEUE__*``), composed by the node's settings."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class QueueSettings(BaseModel):
    """How many conversations a node holds, and what a caller beyond them hears.

    ``max_active`` unset: no queue, every call the SIP front admits talks to the bot at once
    (beyond ``SWITCHBOARD_SIP__MAX_CALLS`` the front answers 503). Set, a caller beyond
    ``max_active`` conversations is answered and waits in line, up to ``max_waiting`` of
    them; each queued caller holds a SIP slot, so ``SIP__MAX_CALLS`` must be at least
    ``max_active + max_waiting``.
    """

    model_config = ConfigDict(extra="forbid")

    #: Conversations with the bot at once; unset: no call queue.
    max_active: int | None = Field(None, ge=1, le=10_000)
    #: Hold fewer conversations than ``max_active`` while the node's model work waits for
    #: the CPU (``bot.queue.limit``): a node that takes more calls than it can answer at
    #: the turn gap answers none of them well; the callers over the limit wait in line.
    #: False: always ``max_active``.
    adaptive: bool = True
    #: The fewest conversations the adaptive limit keeps.
    min_active: int = Field(2, ge=1, le=10_000)
    #: The average wait for a model worker (of a turn's or a pause's work) over one
    #: reading at or above which the node is behind: the limit falls by a quarter. A tenth
    #: of that work dropped over its budget (a pause's, 300 ms) counts as behind too.
    busy_wait_ms: float = Field(150.0, gt=0.0, le=10_000.0)
    #: How often the limit is read and moved.
    limit_interval_s: float = Field(2.0, ge=0.1, le=60.0)
    #: A rise of the limit waits until every conversation held has had its first turn (a
    #: conversation shows its load only once its caller speaks), or this long after the
    #: last rise when one has not (a caller who says nothing).
    limit_settle_s: float = Field(8.0, ge=0.0, le=600.0)
    #: Callers waiting in line at most; one more hears ``full`` and is hung up.
    max_waiting: int = Field(10, ge=0, le=10_000)
    #: The longest a caller waits before ``timeout`` (or the overflow transfer).
    max_wait_s: float = Field(120.0, gt=0.0, le=3600.0)
    #: How often a waiting caller hears ``update`` (their position now).
    update_every_s: float = Field(30.0, gt=0.0, le=600.0)
    #: Where a caller who waited ``max_wait_s``, who finds the line full, or who is still
    #: in line when the node stops is transferred (a SIP URI); unset: the ``timeout``
    #: apology (``full`` for a full line) and a hang-up. Like every transfer target it must
    #: be in ``SWITCHBOARD_SIP__TRANSFER_TARGETS`` when that list is set; its mode (refer,
    #: bridge) is the profile's ``[[transfer_targets]]`` entry for it, else a REFER.
    overflow_target: str | None = Field(None, pattern=r"^(sips?|tel):[^\s<>]+$")
    #: What a caller hears; ``{position}`` is their place in line (1: next).
    welcome: str = (
        "All our agents are busy right now. Please stay on the line. "
        "You are number {position} in line."
    )
    update: str = "Thank you for waiting. You are number {position} in line."
    timeout: str = (
        "We are sorry, nobody can take your call right now. Please call again later. Goodbye."
    )
    full: str = "We are sorry, all our lines are busy. Please call again later. Goodbye."
    overflow: str = "Please hold while we transfer your call."
    #: Loudness of the hold tones (dB below full scale).
    hold_level_db: float = Field(-22.0, ge=-60.0, le=-6.0)

    @field_validator("welcome", "update")
    @classmethod
    def _position_only(cls, text: str) -> str:
        try:
            text.format(position=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"may use only {{position}} as a placeholder ({exc})") from None
        return text

    @property
    def enabled(self) -> bool:
        return self.max_active is not None

    def capacity_problem(self, sip_max_calls: int) -> str | None:
        """Why ``sip_max_calls`` cannot carry this queue, or None when it can."""
        if self.max_active is None:
            return None
        need = self.max_active + self.max_waiting
        if sip_max_calls < need:
            return (
                f"SWITCHBOARD_SIP__MAX_CALLS ({sip_max_calls}) is below "
                f"SWITCHBOARD_QUEUE__MAX_ACTIVE + MAX_WAITING ({need}): a queued caller "
                f"holds a SIP slot; raise SIP__MAX_CALLS to {need} or lower the queue's"
            )
        return None
