"""Whether a host or a URL is this machine: a server there is the user's
own (nothing billed, nothing leaves the machine)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """Whether `url`'s host is this machine."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host is not None and is_loopback(host)
