"""Registering the node with a PBX or a provider, as a SIP client (RFC 3261 section 10).

A provider that only sends calls to registered users needs the node to REGISTER: the node's
address of record (``sip:<user>@<domain>``) is bound to the SIP front's address, with digest
credentials, renewed before it expires.

Which process registers: the SIP front. The binding must name the address the provider sends
INVITEs to, and that is the front's (the workers' pjsua endpoints listen on ephemeral
loopback ports behind it, one per process: registering from one of them would bind a
contact the provider cannot reach, and from each of them several contacts). The REGISTERs
leave from the front's own socket, so that a NAT or firewall in between keeps the binding's
path open for the INVITEs, and the registrar's responses come back to the front, which hands
those of the registration's Call-ID here (``SipFront.registration``).

- ``registrars``: tried in order. A registrar that does not answer within ``timeout_s``, or
  answers with an error (5xx, 403, a second 401), is left for the next one (failover); after
  every one has failed, the first is tried again after ``retry_s``.
- A 401/407 challenge is answered once with the credentials (MD5 digest, ``qop=auth``).
- The binding is renewed before it expires: at half of a short expiry, 30 s before a long
  one (``refresh_after``), with the registrar that granted it.
- On stop, the binding is removed (``Expires: 0``), bounded by ``timeout_s``.

The state is logged when it changes (``SIP registration: registered with ...``,
``... failed ...: failing over to ...``) and counted in ``SipServer.stats()``:
``register_ok``, ``register_failed``, ``register_failovers``, ``register_auth_refused`` and
the gauge ``registered`` (1 while a binding is held).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from telephony.peers import digest_response
from telephony.sipmsg import SipScan

log = logging.getLogger(__name__)

Addr = tuple[Any, ...]
T1_S = 0.5
T2_S = 4.0
REGISTER_KEYS = (
    "register_sent",
    "register_ok",
    "register_failed",
    "register_failovers",
    "register_auth_refused",
    "registered",
)
_PARAM = re.compile(r'([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]+))')
_EXPIRES_PARAM = re.compile(rb";\s*expires\s*=\s*(\d+)", re.I)
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$")


class RegistrationSettings(BaseModel):
    """Where and as whom the node registers (``SWITCHBOARD_SIP__REGISTRATION__<FIELD>``).

    No registrar (the default): the node registers nowhere.
    """

    model_config = ConfigDict(extra="forbid")

    #: Registrars as ``host[:port]`` (5060 by default), in order of preference; the next
    #: one is used when one fails (JSON list or comma-separated).
    registrars: Annotated[tuple[str, ...], NoDecode] = ()
    #: The user part of the address of record (``sip:<user>@<domain>``).
    user: str | None = Field(None, min_length=1, max_length=128, pattern=r"^[^\s@:<>;]+$")
    #: The domain of the address of record and of the Request-URI; default: the first
    #: registrar's host.
    domain: str | None = Field(None, min_length=1, max_length=253)
    #: The digest user name, when not ``user``.
    auth_user: str | None = Field(None, min_length=1, max_length=128)
    #: The digest password; unset: a challenge fails the registration. Never logged.
    password: SecretStr | None = None
    #: Expiry asked for (the registrar may grant less).
    expires_s: int = Field(300, ge=1, le=86_400)
    #: A REGISTER with no final answer this long fails (retransmitted meanwhile).
    timeout_s: float = Field(4.0, gt=0.0, le=32.0)
    #: After every registrar has failed: the wait before the first is tried again.
    retry_s: float = Field(30.0, gt=0.0, le=3600.0)

    @field_validator("registrars", mode="before")
    @classmethod
    def _host_ports(cls, value: object) -> object:
        if isinstance(value, str) and value.lstrip().startswith("["):
            value = json.loads(value)
        elif isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple):
            return value
        out = tuple(str(v).strip() for v in value)
        for item in out:
            m = _HOST_PORT.match(item)
            if m is None or (m.group(2) is not None and not 0 < int(m.group(2)) < 65536):
                raise ValueError(f"registrar {item!r} is not host[:port]")
        return out

    @model_validator(mode="after")
    def _user_with_registrars(self) -> RegistrationSettings:
        if self.registrars and self.user is None:
            raise ValueError("registrars are set but user is not: register as whom?")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.registrars)


def split_host_port(item: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port); 5060 when no port is given."""
    m = _HOST_PORT.match(item)
    if m is None:
        raise ValueError(f"registrar {item!r} is not host[:port]")
    return m.group(1).strip("[]"), int(m.group(2) or 5060)


def refresh_after(granted_s: int) -> float:
    """When to renew a binding granted for ``granted_s``: at half of a short one (under
    a minute), 30 s before a longer one's end."""
    return granted_s / 2 if granted_s < 60 else granted_s - 30.0


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    msg: SipScan


@dataclass(frozen=True)
class Outcome:
    ok: bool
    why: str
    granted_s: int = 0


class Registration:
    """The node's registration with its registrars; see the module docstring."""

    def __init__(
        self,
        settings: RegistrationSettings,
        *,
        send: Callable[[bytes, Addr], None],
        contact: tuple[str, int],
        user_agent: str = "",
        family: int = socket.AF_INET,
    ) -> None:
        self.settings = settings
        self._send = send
        self.contact_host, self.contact_port = contact
        self.user_agent = user_agent
        self.family = family
        self.registrars = [split_host_port(r) for r in settings.registrars]
        self.domain = settings.domain or self.registrars[0][0]
        self.aor = f"sip:{settings.user}@{self.domain}"
        self.call_id = f"{secrets.token_hex(12)}@{self.contact_host}"
        self.tag = secrets.token_hex(6)
        self.cseq = 0
        self.counters = dict.fromkeys(REGISTER_KEYS, 0)
        #: The registrar holding the binding, as configured (``host:port``), or None.
        self.registrar: str | None = None
        self.expires_at = 0.0
        self._waiting: dict[int, asyncio.Future[Response]] = {}
        self._task: asyncio.Task[None] | None = None

    # -- the front's side -----------------------------------------------------------

    def response(self, msg: SipScan) -> bool:
        """A response the front received: True when it is this registration's."""
        if msg.call_id != self.call_id:
            return False
        cseq = msg.cseq
        parts = msg.start_line.split(None, 2)
        waiting = self._waiting.get(cseq[0]) if cseq is not None else None
        if waiting is not None and not waiting.done() and len(parts) >= 2 and parts[1].isdigit():
            status = int(parts[1])
            if status >= 200:
                reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
                waiting.set_result(Response(status, reason, msg))
        return True

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="sip-registration"
            )

    async def stop(self) -> None:
        """Stop renewing and remove the binding (bounded by ``timeout_s``)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.registrar is not None:
            held = self.registrar
            outcome = await self._register(split_host_port(held), expires=0)
            self._set_unregistered()
            log.info("SIP registration: removed from %s (%s)", held, outcome.why)

    @property
    def registered(self) -> bool:
        return self.registrar is not None and time.monotonic() < self.expires_at

    def _set_unregistered(self) -> None:
        self.registrar = None
        self.counters["registered"] = 0

    async def _run(self) -> None:
        n = len(self.registrars)
        index, failed_in_row = 0, 0
        while True:
            host, port = self.registrars[index]
            name = self.settings.registrars[index]
            outcome = await self._register((host, port), expires=self.settings.expires_s)
            if outcome.ok:
                if self.registrar != name:
                    log.info(
                        "SIP registration: registered %s with %s for %d s",
                        self.aor,
                        name,
                        outcome.granted_s,
                    )
                self.registrar = name
                self.counters["registered"] = 1
                self.expires_at = time.monotonic() + outcome.granted_s
                failed_in_row = 0
                await asyncio.sleep(refresh_after(outcome.granted_s))
                continue
            self._set_unregistered()
            failed_in_row += 1
            if failed_in_row < n:
                index = (index + 1) % n
                self.counters["register_failovers"] += 1
                log.warning(
                    "SIP registration with %s failed (%s): failing over to %s",
                    name,
                    outcome.why,
                    self.settings.registrars[index],
                )
                continue
            log.error(
                "SIP registration with %s failed (%s); no registrar left: trying %s again "
                "in %.0f s",
                name,
                outcome.why,
                self.settings.registrars[0],
                self.settings.retry_s,
            )
            await asyncio.sleep(self.settings.retry_s)
            index, failed_in_row = 0, 0

    # -- one registration -----------------------------------------------------------

    async def _register(self, registrar: tuple[str, int], *, expires: int) -> Outcome:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                registrar[0], registrar[1], family=self.family, type=socket.SOCK_DGRAM
            )
        except OSError as exc:
            return self._failed(f"cannot resolve {registrar[0]}: {exc}")
        dest = infos[0][4]
        response = await self._transact(dest, expires, authorization=None)
        if response is None:
            return self._failed(f"no answer in {self.settings.timeout_s:g} s")
        if response.status in (401, 407):
            challenge = response.msg.get(
                "www-authenticate" if response.status == 401 else "proxy-authenticate"
            )
            if challenge is None or self.settings.password is None:
                return self._failed(f"{response.status} {response.reason}, no credentials")
            header = self._authorization(challenge.value.decode("latin-1"))
            if header is None:
                return self._failed(f"{response.status} with a challenge this client cannot answer")
            name = "Authorization" if response.status == 401 else "Proxy-Authorization"
            response = await self._transact(dest, expires, authorization=(name, header))
            if response is None:
                return self._failed(f"no answer in {self.settings.timeout_s:g} s")
            if response.status in (401, 407, 403):
                self.counters["register_auth_refused"] += 1
                return self._failed(
                    f"credentials refused ({response.status} {response.reason}): check "
                    "SWITCHBOARD_SIP__REGISTRATION__USER, __AUTH_USER and __PASSWORD"
                )
        if not 200 <= response.status < 300:
            return self._failed(f"{response.status} {response.reason}")
        self.counters["register_ok"] += 1
        return Outcome(True, f"{response.status} {response.reason}", self._granted(response.msg))

    def _failed(self, why: str) -> Outcome:
        self.counters["register_failed"] += 1
        return Outcome(False, why)

    def _granted(self, msg: SipScan) -> int:
        """The expiry the registrar granted: our contact's ``expires``, else ``Expires``."""
        ours = f"{self.contact_host}:{self.contact_port}".encode()
        for header in msg.all("contact"):
            if ours in header.value:
                m = _EXPIRES_PARAM.search(header.value)
                if m is not None:
                    return int(m.group(1))
        expires = msg.get("expires")
        if expires is not None and expires.value.strip().isdigit():
            return int(expires.value.strip())
        return self.settings.expires_s

    async def _transact(
        self, dest: Addr, expires: int, *, authorization: tuple[str, str] | None
    ) -> Response | None:
        """Send one REGISTER, retransmitted (RFC 3261 timer E), until a final response."""
        self.cseq += 1
        cseq = self.cseq
        data = self._request(cseq, expires, authorization)
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiting[cseq] = future
        deadline = time.monotonic() + self.settings.timeout_s
        interval = T1_S
        try:
            while True:
                self._send(data, dest)
                self.counters["register_sent"] += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(asyncio.shield(future), min(interval, left))
                interval = min(interval * 2, T2_S)
        finally:
            self._waiting.pop(cseq, None)

    def _request(self, cseq: int, expires: int, authorization: tuple[str, str] | None) -> bytes:
        host = self.contact_host if ":" not in self.contact_host else f"[{self.contact_host}]"
        sent_by = f"{host}:{self.contact_port}"
        lines = [
            f"REGISTER sip:{self.domain} SIP/2.0",
            f"Via: SIP/2.0/UDP {sent_by};rport;branch=z9hG4bK{secrets.token_hex(8)}",
            "Max-Forwards: 70",
            f"From: <{self.aor}>;tag={self.tag}",
            f"To: <{self.aor}>",
            f"Call-ID: {self.call_id}",
            f"CSeq: {cseq} REGISTER",
            f"Contact: <sip:{self.settings.user}@{sent_by}>",
            f"Expires: {expires}",
        ]
        if self.user_agent:  # none by default: a scanner learns nothing from it
            lines.append(f"User-Agent: {self.user_agent}")
        if authorization is not None:
            lines.append(f"{authorization[0]}: {authorization[1]}")
        lines.append("Content-Length: 0")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def _authorization(self, challenge: str) -> str | None:
        """The Authorization value answering a digest ``challenge`` (MD5, ``qop=auth``)."""
        scheme, _, rest = challenge.strip().partition(" ")
        if scheme.lower() != "digest":
            return None
        params = {m.group(1).lower(): m.group(2) or m.group(3) or "" for m in _PARAM.finditer(rest)}
        if params.get("algorithm", "MD5").upper() != "MD5" or "nonce" not in params:
            return None
        qops = [q.strip() for q in params.get("qop", "").split(",") if q.strip()]
        if qops and "auth" not in qops:
            return None
        assert self.settings.password is not None
        user = self.settings.auth_user or self.settings.user or ""
        uri = f"sip:{self.domain}"
        realm, nonce = params.get("realm", ""), params["nonce"]
        cnonce = secrets.token_hex(8)
        response = digest_response(
            user,
            realm,
            self.settings.password.get_secret_value(),
            method="REGISTER",
            uri=uri,
            nonce=nonce,
            qop="auth" if qops else None,
            nc="00000001",
            cnonce=cnonce,
        )
        parts = [
            f'username="{user}"',
            f'realm="{realm}"',
            f'nonce="{nonce}"',
            f'uri="{uri}"',
            f'response="{response}"',
            "algorithm=MD5",
        ]
        if "opaque" in params:
            parts.append(f'opaque="{params["opaque"]}"')
        if qops:
            parts += ["qop=auth", "nc=00000001", f'cnonce="{cnonce}"']
        return "Digest " + ", ".join(parts)
