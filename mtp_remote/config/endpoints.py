"""Endpoints someone else serves: a name and a base URL, as ``watch URL...`` and ``diagnose --attach NAME=URL``
take them on the command line. Checked once, here: the URL is ``http``/``https`` with a host, no credentials in it
(a key travels as a Bearer token from an environment variable, never in a URL that logs and reports show), no
query or fragment; the name passes the project's name check (:func:`mtp_remote.config.validation.check_name`: it
becomes a metric label, a profile name and a file name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .validation import check_name

SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Endpoint:
    """A serving endpoint: ``name`` (a checked name) and ``url`` (its base URL, no trailing slash)."""

    name: str
    url: str


def check_url(url: str, what: str = "URL") -> str:
    """``url`` without a trailing slash if it is an ``http(s)://host[:port][/path]`` base URL; raises ValueError
    naming ``what`` and the allowed form otherwise."""
    if not isinstance(url, str) or any(c in url for c in "\0\r\n\t "):
        raise ValueError(f"{what} {url!r}: no spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{what} {url!r}: {e}") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"{what} {url!r}: the scheme must be one of {', '.join(SCHEMES)} (e.g. "
                         f"http://127.0.0.1:30000)")
    if not parts.hostname:
        raise ValueError(f"{what} {url!r}: no host (e.g. http://127.0.0.1:30000)")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{what} {url!r}: no credentials in the URL; pass an API key through --api-key-env")
    if parts.query or parts.fragment:
        raise ValueError(f"{what} {url!r}: a base URL has no query or fragment")
    if port == 0:
        raise ValueError(f"{what} {url!r}: port 0")
    return url.rstrip("/")


def default_name(url: str) -> str:
    """A name for an endpoint given without one: its host and port, with characters a name refuses as ``-``
    (``http://10.0.0.5:30000`` -> ``10.0.0.5-30000``)."""
    parts = urlsplit(url)
    raw = parts.hostname + (f"-{parts.port}" if parts.port else "")
    name = re.sub(r"[^A-Za-z0-9._-]", "-", raw).strip("-.")[:64].replace("..", ".")
    return name or "endpoint"


def parse_endpoint(spec: str, *, need_name: bool = False) -> Endpoint:
    """``NAME=URL`` or (unless ``need_name``) ``URL`` -> :class:`Endpoint`. Raises ValueError naming what is
    wrong: a bad URL (:func:`check_url`), a bad name (:func:`check_name`), or a missing name."""
    name, sep, url = spec.partition("=")
    if not sep or "://" in name:  # a URL alone (its query may hold '=': refused by check_url then)
        if need_name:
            raise ValueError(f"{spec!r}: give NAME=URL (e.g. baseline=http://127.0.0.1:30000)")
        url = check_url(spec)
        return Endpoint(default_name(url), url)
    return Endpoint(check_name(name, "endpoint name"), check_url(url))


def parse_endpoints(specs: list[str] | tuple[str, ...], *, need_name: bool = False) -> list[Endpoint]:
    """:func:`parse_endpoint` for each; names must be unique (ValueError naming the duplicate)."""
    out = [parse_endpoint(s, need_name=need_name) for s in specs]
    seen: set[str] = set()
    for e in out:
        if e.name in seen:
            raise ValueError(f"endpoint name {e.name!r} is given twice; name them NAME=URL")
        seen.add(e.name)
    return out
