"""Passwords, secrets and roles: what the rest of admin/ checks a request against."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

Role = Literal["viewer", "editor", "admin"]
#: Each role may do what the ones before it may.
ROLES: tuple[Role, ...] = ("viewer", "editor", "admin")

_hasher = PasswordHasher()
#: Verified against when the user name is unknown, so that a wrong name and a wrong
#: password take the same time.
_DUMMY_HASH = _hasher.hash(secrets.token_urlsafe(16))

MIN_PASSWORD_LENGTH = 12
#: A user name: what the login, the API and the CLI all accept: letters, digits and
#: ``_.@-``, at least one of them not a dot. A name is a segment of the console's and the
#: API's paths (``/users/{name}``): ``.`` and ``..`` are not (a browser and most HTTP
#: clients resolve them away), nor is anything that must be escaped (``/ % ? #``, spaces,
#: control characters). The pattern is also the OpenAPI document's (ECMA and Python alike).
USER_NAME_PATTERN = r"^[A-Za-z0-9_.@-]*[A-Za-z0-9_@-][A-Za-z0-9_.@-]*$"
MAX_USER_NAME = 64
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.@-]+")


def user_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a user's name, or None (the message starts ``name: ``)."""
    if not name or len(name) > MAX_USER_NAME:
        return f"name: 1 to {MAX_USER_NAME} characters"
    if _NAME_CHARS.fullmatch(name) is None:
        return "name: only letters, digits and _ . @ - (no spaces, no / % ? # or other signs)"
    if re.fullmatch(USER_NAME_PATTERN, name) is None:
        return "name: not dots alone ('.' and '..' cannot be part of an address)"
    return None


def rank(role: str) -> int:
    """0 viewer, 1 editor, 2 admin."""
    return ROLES.index(role)


def hash_password(password: str) -> str:
    """An argon2id hash of ``password``."""
    return _hasher.hash(password)


def verify_password(stored_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches; ``None`` (no such user) still costs one verification."""
    try:
        return _hasher.verify(stored_hash or _DUMMY_HASH, password) and stored_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def new_secret() -> str:
    """A random URL-safe secret (256 bits): session ids, API tokens, CSRF tokens."""
    return secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    """What is stored of a secret: its SHA-256 (the secret is random, so no salt is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a request is from: a console login (cookie) or an API token."""

    user_name: str
    role: Role
    via: Literal["session", "token"]
    #: The session's CSRF token (``via == "session"``).
    csrf_token: str | None = None
    token_name: str | None = None

    @property
    def actor(self) -> str:
        """How the audit log names them."""
        if self.via == "token":
            return f"token:{self.token_name} ({self.user_name})"
        return f"user:{self.user_name}"

    def may(self, role: Role) -> bool:
        """Whether they hold ``role`` or a higher one."""
        return rank(self.role) >= rank(role)
