"""Who may call: peers (trunks, PBXs) by source network and/or SIP digest credentials.

With no peer configured, anyone may call (the node's behaviour before peers existed). With
peers, a new INVITE is let through only from a peer: one whose networks hold the source
address and that has no credentials, or one whose credentials the INVITE's ``Authorization``
proves (digest, RFC 3261 22.4 with RFC 2617's MD5 and ``qop=auth``; the source must also be
in its networks if it names any). A caller with credentials and no ``Authorization`` yet is
challenged (401); everyone else gets the same 403, whatever number or user it tried, so
that a scanner learns nothing about which exist.

Nonces carry their own time and an HMAC of it and the source address (a secret made at
start): no table of nonces to fill, and one stolen from another address is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from telephony.sipcheck import Rejection
from telephony.sipmsg import SipScan

NONCE_TTL_S = 300.0
FORBIDDEN = Rejection(403, "Forbidden")
_PARAM = re.compile(r'([A-Za-z-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class Peer(BaseModel):
    """A trunk or PBX allowed to call in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    #: Source networks its calls come from (e.g. ``203.0.113.0/24``); empty: anywhere, if
    #: it authenticates.
    networks: tuple[IPv4Network | IPv6Network, ...] = ()
    #: Digest credentials it must prove; unset: the networks alone admit it.
    username: str | None = Field(None, min_length=1, max_length=128)
    password: SecretStr | None = None

    @model_validator(mode="after")
    def _something_to_check(self) -> Peer:
        if (self.username is None) != (self.password is None):
            raise ValueError(f"peer {self.name!r}: give both username and password, or neither")
        if not self.networks and self.username is None:
            raise ValueError(f"peer {self.name!r}: give networks, credentials, or both")
        return self


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the front does with a new INVITE: let it on (``answer`` None) or answer it."""

    answer: Rejection | None
    peer: str = ""  # the peer let on
    failed: bool = False  # counts as a failed authentication of its source


class CallerGate:
    """Checks a new INVITE against the configured peers; see the module docstring."""

    def __init__(self, peers: tuple[Peer, ...], realm: str) -> None:
        self.peers = peers
        self.realm = realm
        self._secret = secrets.token_bytes(32)
        self._by_user = {p.username: p for p in peers if p.username is not None}
        self._roaming = any(p.username is not None and not p.networks for p in peers)

    @property
    def open(self) -> bool:
        """No peer configured: anyone may call."""
        return not self.peers

    def check(self, msg: SipScan, source: str, now: float) -> Verdict:
        if not self.peers:
            return Verdict(None)
        try:
            addr = ipaddress.ip_address(source)
        except ValueError:
            return Verdict(FORBIDDEN, failed=True)
        auth = msg.get("authorization")
        if auth is not None:
            return self._authenticate(auth.value.decode("latin-1"), msg.method, addr, source, now)
        in_networks = [p for p in self.peers if any(addr in net for net in p.networks)]
        for peer in in_networks:
            if peer.username is None:
                return Verdict(None, peer=peer.name)
        if in_networks or self._roaming:
            return Verdict(self._challenge(source, now))
        return Verdict(FORBIDDEN, failed=True)

    def _challenge(self, source: str, now: float) -> Rejection:
        nonce = self._nonce(source, int(now))
        value = f'Digest realm="{self.realm}", nonce="{nonce}", algorithm=MD5, qop="auth"'
        return Rejection(401, "Unauthorized", (("WWW-Authenticate", value),))

    def _nonce(self, source: str, stamp: int) -> str:
        mac = hmac.new(self._secret, f"{stamp}|{source}".encode(), hashlib.sha256)
        return f"{stamp:x}.{mac.hexdigest()[:32]}"

    def _nonce_ok(self, nonce: str, source: str, now: float) -> bool:
        stamp_hex, _, _ = nonce.partition(".")
        try:
            stamp = int(stamp_hex, 16)
        except ValueError:
            return False
        if not 0 <= now - stamp <= NONCE_TTL_S:
            return False
        return hmac.compare_digest(nonce, self._nonce(source, stamp))

    def _authenticate(
        self,
        header: str,
        method: str,
        addr: ipaddress.IPv4Address | ipaddress.IPv6Address,
        source: str,
        now: float,
    ) -> Verdict:
        scheme, _, rest = header.strip().partition(" ")
        if scheme.lower() != "digest":
            return Verdict(FORBIDDEN, failed=True)
        params = {m.group(1).lower(): m.group(2) or m.group(3) or "" for m in _PARAM.finditer(rest)}
        peer = self._by_user.get(params.get("username", ""))
        if params.get("realm") != self.realm:
            return Verdict(FORBIDDEN, failed=True)
        if not self._nonce_ok(params.get("nonce", ""), source, now):
            # Stale or not ours: a fresh challenge, whoever the user (the caller may just
            # have waited; and the answer must not tell which users exist).
            return Verdict(self._challenge(source, now))
        if peer is None or peer.password is None:
            return Verdict(FORBIDDEN, failed=True)
        if peer.networks and not any(addr in net for net in peer.networks):
            return Verdict(FORBIDDEN, failed=True)
        expected = digest_response(
            peer.username or "",
            self.realm,
            peer.password.get_secret_value(),
            method=method,
            uri=params.get("uri", ""),
            nonce=params.get("nonce", ""),
            qop=params.get("qop"),
            nc=params.get("nc", ""),
            cnonce=params.get("cnonce", ""),
        )
        if not hmac.compare_digest(expected, params.get("response", "").lower()):
            return Verdict(FORBIDDEN, failed=True)
        return Verdict(None, peer=peer.name)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def digest_response(
    username: str,
    realm: str,
    password: str,
    *,
    method: str,
    uri: str,
    nonce: str,
    qop: str | None = None,
    nc: str = "",
    cnonce: str = "",
) -> str:
    """The digest ``response`` a client with these credentials sends (RFC 2617, MD5)."""
    ha1 = _md5(f"{username}:{realm}:{password}")
    ha2 = _md5(f"{method}:{uri}")
    if qop:
        return _md5(f"{ha1}:{nonce}:{nc}:{cnonce}:{qop}:{ha2}")
    return _md5(f"{ha1}:{nonce}:{ha2}")
