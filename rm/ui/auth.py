"""The cluster's auth token, as Ray finds it for ``RAY_AUTH_MODE=token``.

Ray reads ``RAY_AUTH_TOKEN``, else the file named by ``RAY_AUTH_TOKEN_PATH``, else
``~/.ray/auth_token`` (what ``ray get-auth-token --generate`` writes).  The UI needs
it only when bound to an address other than loopback.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from rayrm.rm.core.errors import InputError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cluster_token() -> str | None:
    """The token (module docstring), or None when there is none."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    for candidate in ([Path(path)] if path else []) + [Path.home() / ".ray" / "auth_token"]:
        try:
            token = candidate.read_text().strip()
        except OSError:
            continue
        if token:
            return token
    return None


def token_for(host: str) -> str | None:
    """None on loopback; elsewhere the cluster's token, which must exist."""
    if is_loopback(host):
        return None
    token = cluster_token()
    if token is None:
        raise InputError(f"--ui-host {host} is not loopback, so the UI needs the cluster's auth token: "
                         "set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, or run `ray get-auth-token --generate`")
    return token
