"""Calls the profile's ``[[lookups]]`` over HTTP and turns each answer into words.

Only a lookup's own ``url`` is ever requested (redirects are not followed), with values
checked against the lookup's parameters first. The spoken answer is the lookup's
``answer`` template filled from the returned JSON object's fields and nothing else; a
timeout, an error status or an answer without those fields is ``failed``, an empty one
``not_found``: the caller always hears something.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx

from bot.callflow import LookupConfig, LookupParam, placeholders

log = logging.getLogger(__name__)

#: A returned field longer than this is not spoken (it is not a value a caller wants read).
MAX_FIELD_CHARS = 120
_SPEAKABLE = re.compile(r"^[\w .,:;'()/&+-]*$")


class BadLookupInput(ValueError):
    """A value that does not fit the lookup's parameter: the request is not made."""


@dataclass(frozen=True)
class LookupOutcome:
    """What a lookup gave: ``text`` to say, and how it went (for the call log)."""

    kind: Literal["found", "not_found", "failed", "bad_input"]
    text: str
    #: The HTTP status, "timeout", or the reason (never the values sent or returned).
    detail: str
    elapsed_ms: float


def check_value(name: str, param: LookupParam, value: str) -> str:
    """``value`` as the parameter's type allows it, or BadLookupInput."""
    value = value.strip()
    if not param.min_length <= len(value) <= param.max_length:
        raise BadLookupInput(
            f"{name}: length {len(value)} outside {param.min_length}-{param.max_length}"
        )
    if param.type == "digits" and not value.isdigit():
        raise BadLookupInput(f"{name}: not digits")
    if param.type == "integer" and not re.fullmatch(r"-?\d+", value):
        raise BadLookupInput(f"{name}: not an integer")
    if param.type == "string" and any(ord(c) < 32 for c in value):
        raise BadLookupInput(f"{name}: control characters")
    return value


class Webhooks:
    """The node's lookups, sharing one HTTP client (connection reuse across calls)."""

    def __init__(
        self,
        lookups: Sequence[LookupConfig],
        secrets: Mapping[str, str],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._lookups = {lk.name: lk for lk in lookups}
        missing = sorted(
            {lk.auth_secret for lk in lookups if lk.auth_secret and lk.auth_secret not in secrets}
        )
        if missing:
            raise ValueError(
                "lookups need secrets not set in SWITCHBOARD_LOOKUP_SECRETS: " + ", ".join(missing)
            )
        self._secrets = dict(secrets)
        self._client = httpx.AsyncClient(follow_redirects=False, transport=transport)

    def config(self, name: str) -> LookupConfig:
        return self._lookups[name]

    async def close(self) -> None:
        await self._client.aclose()

    def request(self, name: str, values: Mapping[str, str]) -> httpx.Request:
        """The request for lookup ``name`` with ``values``; BadLookupInput when they do not fit."""
        cfg = self._lookups[name]
        unknown = set(values) - set(cfg.params)
        if unknown:
            raise BadLookupInput(f"unknown parameters {sorted(unknown)}")
        checked = {}
        for pname, param in cfg.params.items():
            if pname not in values:
                raise BadLookupInput(f"{pname}: missing")
            checked[pname] = check_value(pname, param, values[pname])
        in_url = placeholders(cfg.url)
        url = cfg.url.format(**{k: quote(checked[k], safe="") for k in in_url})
        rest = {k: v for k, v in checked.items() if k not in in_url}
        headers = {"Accept": "application/json"}
        if cfg.auth_header is not None and cfg.auth_secret is not None:
            headers[cfg.auth_header] = cfg.auth_prefix + self._secrets[cfg.auth_secret]
        if cfg.method == "GET":
            return self._client.build_request("GET", url, params=rest, headers=headers)
        return self._client.build_request("POST", url, json=rest, headers=headers)

    async def run(self, name: str, values: Mapping[str, str]) -> LookupOutcome:
        """Call lookup ``name``; always an outcome with something to say, within its timeout."""
        cfg = self._lookups[name]
        started = time.monotonic()

        def outcome(
            kind: Literal["found", "not_found", "failed", "bad_input"], text: str, detail: str
        ) -> LookupOutcome:
            elapsed = round((time.monotonic() - started) * 1000.0, 1)
            log.info("lookup %s: %s (%s) in %.0f ms", name, kind, detail, elapsed)
            return LookupOutcome(kind, text, detail, elapsed)

        try:
            request = self.request(name, values)
        except BadLookupInput as exc:
            return outcome("bad_input", cfg.failed, str(exc).split(":", 1)[0])
        try:
            response = await asyncio.wait_for(self._client.send(request), cfg.timeout_s)
        except TimeoutError:
            return outcome("failed", cfg.failed, "timeout")
        except httpx.HTTPError as exc:
            return outcome("failed", cfg.failed, type(exc).__name__)
        if response.status_code == 404:
            return outcome("not_found", cfg.not_found, "404")
        if response.status_code >= 300:
            return outcome("failed", cfg.failed, str(response.status_code))
        try:
            data: Any = response.json()
        except ValueError:
            return outcome("failed", cfg.failed, "not json")
        if isinstance(data, list):
            data = data[0] if data else None
        if data is None or data == {}:
            return outcome("not_found", cfg.not_found, "empty")
        if not isinstance(data, dict):
            return outcome("failed", cfg.failed, "not an object")
        text = render(cfg.answer, data)
        if text is None:
            return outcome("failed", cfg.failed, "fields missing")
        return outcome("found", text, str(response.status_code))


def render(template: str, fields: Mapping[str, Any]) -> str | None:
    """``template`` filled from ``fields``; None when a field is missing or not speakable."""
    values = {}
    for name in placeholders(template):
        value = fields.get(name)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return None
        text = str(value).strip()
        if not text or len(text) > MAX_FIELD_CHARS or not _SPEAKABLE.match(text):
            return None
        values[name] = text
    return template.format(**values)
