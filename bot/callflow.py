"""The profile's call-flow sections: keypad menus, number collectors and business lookups.

Each is a list of named entries in the profile (``[[menus]]``, ``[[collectors]]``,
``[[lookups]]``); ``bot.profile.BotProfile`` checks that the names they use of each other
(and of intents and knowledge topics) exist. docs/call-flows.md shows how to write them.
"""

from __future__ import annotations

import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The keys of a telephone keypad (RFC 4733 events 0-15 as the telephony reports them).
KEYS = "0123456789*#ABCD"

Name = str
_NAME = r"^[a-z0-9_]+$"


def placeholders(template: str) -> set[str]:
    """The ``{field}`` names a ``str.format`` template uses; ValueError when malformed."""
    names = set()
    for _, field, spec, conversion in string.Formatter().parse(template):
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            raise ValueError(f"template {template!r}: use plain {{name}} fields only")
        names.add(field)
    return names


class MenuOption(BaseModel):
    """What one key of a menu does: exactly one of its targets (``say`` may go with any)."""

    model_config = ConfigDict(extra="forbid")
    key: str = Field(pattern=r"^[0-9*#ABCD]$")
    #: Spoken first (or alone).
    say: str | None = Field(None, min_length=1)
    #: An intent's answer and action (its ``transfer`` or ``hangup``), as if it were asked.
    intent: str | None = None
    #: A knowledge entry's answer, spoken as written.
    knowledge: str | None = None
    #: Transfer the caller here (as its ``[[transfer_targets]]`` entry says), after ``say``.
    transfer_to: str | None = Field(None, pattern=r"^(sips?|tel):[^\s<>]+$")
    #: Start this collector (``[[collectors]]``).
    collect: str | None = None
    #: Go to this menu and say its prompt.
    menu: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> MenuOption:
        targets = [self.intent, self.knowledge, self.transfer_to, self.collect, self.menu]
        count = sum(t is not None for t in targets)
        if count > 1:
            raise ValueError(
                f"menu key {self.key!r}: one of intent, knowledge, transfer_to, collect, menu"
            )
        if count == 0 and self.say is None:
            raise ValueError(f"menu key {self.key!r} does nothing: give it say or a target")
        return self


class TransferTarget(BaseModel):
    """Where the bot may put a caller through, and how (``[[transfer_targets]]``).

    - ``refer``: a SIP REFER to the caller's side (blind transfer; the bot's leg ends).
    - ``bridge``: the bot calls the target itself and joins the two calls (for a far end
      that does not take REFER); the bot's leg stays up, its media off.
    - ``warm``: as ``bridge``, the agent first hearing a spoken summary of the call
      (``handoff_summary``) while the caller hears ``transfer_hold``.
    """

    model_config = ConfigDict(extra="forbid")
    uri: str = Field(pattern=r"^(sips?|tel):[^\s<>]+$")
    mode: Literal["refer", "bridge", "warm"] = "refer"
    #: ``refer`` only: bridge instead when the caller's side refuses the REFER (or it
    #: fails while the call is still up).
    bridge_on_refer_failure: bool = False

    @model_validator(mode="after")
    def _fallback_is_for_refer(self) -> TransferTarget:
        if self.bridge_on_refer_failure and self.mode != "refer":
            raise ValueError(f"transfer target {self.uri!r}: bridge_on_refer_failure is for refer")
        return self


class MenuConfig(BaseModel):
    """A keypad menu: "press 1 for orders, 2 for returns, 0 for a person".

    The first menu of the profile is the main one: its keys work from the start of the
    call whenever no number is being collected; after an option has been carried out the
    caller is back in it.
    """

    model_config = ConfigDict(extra="forbid")
    name: Name = Field(min_length=1, max_length=64, pattern=_NAME)
    #: What the keys do, said on entering the menu and after a key it does not know.
    prompt: str = Field(min_length=1)
    #: Said after the greeting (main menu only) so the caller knows the keys exist.
    announce: bool = False
    #: Said before the prompt is repeated when a key that is not an option is pressed.
    invalid: str = Field("Sorry, that key is not an option.", min_length=1)
    options: list[MenuOption] = Field(min_length=1)

    @model_validator(mode="after")
    def _keys_are_distinct(self) -> MenuConfig:
        keys = [o.key for o in self.options]
        if len(keys) != len(set(keys)):
            raise ValueError(f"menu {self.name!r} uses a key twice")
        return self

    def option(self, key: str) -> MenuOption | None:
        return next((o for o in self.options if o.key == key), None)


class CollectorConfig(BaseModel):
    """A number the caller keys in or says: an order number, an account, a date of birth."""

    model_config = ConfigDict(extra="forbid")
    name: Name = Field(min_length=1, max_length=64, pattern=_NAME)
    #: Asks for the number.
    prompt: str = Field(min_length=1)
    #: Digits needed. ``min_length == max_length``: complete at the last digit; otherwise
    #: complete on ``terminator`` (or the timeout) once ``min_length`` are in.
    min_length: int = Field(1, ge=1, le=32)
    max_length: int = Field(16, ge=1, le=32)
    #: The key that ends the number early ("#"); never part of the value.
    terminator: str | None = Field("#", pattern=r"^[*#]$")
    #: Seconds without a key (after the prompt has played) before the collector decides:
    #: a long enough number is taken; otherwise ``reprompt`` and ask again.
    timeout_s: float = Field(6.0, gt=0.5, le=60.0)
    #: Attempts (the prompt, then each re-prompt) before ``give_up``.
    attempts: int = Field(3, ge=1, le=10)
    reprompt: str = Field("Sorry, I did not get that.", min_length=1)
    give_up: str = Field("Sorry, I could not get the number. How else can I help?", min_length=1)
    #: A PIN, a card number, a date of birth: never written in clear (logs, call log, the
    #: model's history); never read back.
    sensitive: bool = False
    #: Said once the number is in, with ``{value}`` read digit by digit (not for a sensitive
    #: one). Unset: nothing, or the lookup's preamble straight away.
    confirm: str | None = Field(None, min_length=1)
    #: Run this lookup (``[[lookups]]``) with the number as its ``param``.
    lookup: Name | None = None
    #: The lookup parameter that gets the number (default: the collector's name).
    param: Name | None = None
    #: Start collecting right after one of these intents has been answered by voice.
    after_intents: list[Name] = []

    @model_validator(mode="after")
    def _lengths(self) -> CollectorConfig:
        if self.min_length > self.max_length:
            raise ValueError(f"collector {self.name!r}: min_length above max_length")
        if self.confirm is not None:
            names = placeholders(self.confirm)
            if names - {"value"}:
                raise ValueError(f"collector {self.name!r}: confirm may use {{value}} only")
            if self.sensitive and names:
                raise ValueError(f"collector {self.name!r}: a sensitive value is not read back")
        return self

    @property
    def lookup_param(self) -> str:
        return self.param or self.name


class LookupParam(BaseModel):
    """A value a lookup sends: its type and bounds, checked before any request."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["digits", "integer", "string"] = "string"
    min_length: int = Field(1, ge=0, le=256)
    max_length: int = Field(64, ge=1, le=256)


class LookupConfig(BaseModel):
    """A business lookup: an HTTP webhook of the operator's, called with collected values.

    Only ``url`` is ever called: its ``{param}`` fields are filled with the values
    (URL-encoded), the rest go in the query (GET) or the JSON body (POST). The answer is
    ``answer`` filled from the JSON object returned, nothing else.
    """

    model_config = ConfigDict(extra="forbid")
    name: Name = Field(min_length=1, max_length=64, pattern=_NAME)
    url: str = Field(pattern=r"^https?://[^\s{}]+(\{[a-z0-9_]+\}[^\s{}]*)*$")
    method: Literal["GET", "POST"] = "GET"
    params: dict[Name, LookupParam] = Field(min_length=1)
    timeout_s: float = Field(3.0, gt=0.0, le=30.0)
    #: A header carrying a secret (``Authorization``), its value ``auth_prefix`` plus the
    #: node setting ``SWITCHBOARD_LOOKUP_SECRETS``'s entry ``auth_secret``.
    auth_header: str | None = Field(None, pattern=r"^[A-Za-z0-9-]+$")
    auth_secret: Name | None = None
    auth_prefix: str = "Bearer "
    #: What callers ask that this lookup answers ("parcel left", "order status"): a request
    #: no intent answered that holds every word of one of these is not given to the
    #: language model; the collector feeding this lookup asks for the number instead.
    purpose: list[str] = []
    #: Said as soon as the lookup starts, while it runs.
    preamble: str = Field("Let me look that up for you.", min_length=1)
    #: The result, from the fields of the JSON object returned (``{status}``).
    answer: str = Field(min_length=1)
    #: Said when the service has nothing (404, ``null``, an empty object or list).
    not_found: str = Field("Sorry, I could not find anything for that.", min_length=1)
    #: Said on a timeout, an error status or an answer that is not what ``answer`` needs.
    failed: str = Field(
        "Sorry, I cannot look that up right now. Please try again later.", min_length=1
    )

    @model_validator(mode="after")
    def _consistent(self) -> LookupConfig:
        in_url = placeholders(self.url)
        if in_url - set(self.params):
            raise ValueError(f"lookup {self.name!r}: url uses a field that is not a param")
        placeholders(self.answer)  # malformed templates fail here, at load
        if (self.auth_header is None) != (self.auth_secret is None):
            raise ValueError(f"lookup {self.name!r}: auth_header and auth_secret go together")
        for name, param in self.params.items():
            if param.min_length > param.max_length:
                raise ValueError(f"lookup {self.name!r}: param {name!r} min above max")
        return self


class CallLimits(BaseModel):
    """How a call ends well: a caller gone quiet, and a call that goes on too long.

    Quiet means neither party: the caller neither speaking nor keying, the bot silent.
    """

    model_config = ConfigDict(extra="forbid")
    #: Quiet this long (s) -> ``silence_prompt``; 0: never.
    silence_reprompt_s: float = Field(0.0, ge=0.0, le=600.0)
    silence_prompt: str = Field("Are you still there?", min_length=1)
    #: Quiet this long (s) after ``silence_prompt`` -> ``goodbye`` and the bot hangs up
    #: (end reason ``silence``); 0: never.
    silence_hangup_s: float = Field(0.0, ge=0.0, le=600.0)
    goodbye: str = Field("I will end the call now. Goodbye.", min_length=1)
    #: The longest call (s from the answer; 0: no limit): ``max_call_warning`` is said
    #: ``max_call_warning_s`` before the end, ``max_call_goodbye`` at the end, then the bot
    #: hangs up (end reason ``max_duration``).
    max_call_s: float = Field(0.0, ge=0.0, le=86400.0)
    max_call_warning_s: float = Field(60.0, ge=0.0)
    max_call_warning: str = Field(
        "We are nearly out of time for this call, so please tell me what you still need.",
        min_length=1,
    )
    max_call_goodbye: str = Field(
        "I am sorry, we are out of time for this call. Please call again. Goodbye.",
        min_length=1,
    )

    @model_validator(mode="after")
    def _consistent(self) -> CallLimits:
        if self.silence_hangup_s and not self.silence_reprompt_s:
            raise ValueError("call_limits: silence_hangup_s needs silence_reprompt_s")
        if self.max_call_s and self.max_call_warning_s >= self.max_call_s:
            raise ValueError("call_limits: max_call_warning_s must be below max_call_s")
        return self

    def phrases(self) -> list[str]:
        """What the limits may say, for synthesis at start."""
        out = []
        if self.silence_reprompt_s:
            out.append(self.silence_prompt)
        if self.silence_hangup_s:
            out.append(self.goodbye)
        if self.max_call_s:
            out += [self.max_call_warning, self.max_call_goodbye]
        return out
