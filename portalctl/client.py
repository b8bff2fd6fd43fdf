"""The portal's REST API over the standard library's urllib (docs/portalctl.md, "Online
commands"). The token comes from ``PORTAL_TOKEN``; every call sends ``Authorization: Token``."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TOKEN_VARIABLE = "PORTAL_TOKEN"
TIMEOUT_SECONDS = 60


class ApiError(Exception):
    """A call that did not succeed: ``status`` (0: no answer) and the API's error body."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        self.status = status
        self.body = body
        super().__init__(message)


class Client:
    def __init__(self, url: str, token: str | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ApiError(0, f"--url must be an http:// or https:// address, got {url!r}.")
        self.base = url.rstrip("/") + "/api/v1/"
        self.token = token if token is not None else os.environ.get(TOKEN_VARIABLE, "")
        if not self.token:
            raise ApiError(0, f"Set {TOKEN_VARIABLE} to an API token of the portal.")

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        accept: str = "application/json",
    ) -> tuple[str, bytes]:
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        headers = {"Authorization": f"Token {self.token}", "Accept": accept}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                return response.headers.get("Content-Type", ""), response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = raw.decode("utf-8", "replace")
            raise ApiError(exc.code, f"{method} {url}: HTTP {exc.code}", parsed) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, f"{method} {url}: {reason}") from None

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        _, raw = self._call(method, path, **kwargs)
        return json.loads(raw)

    def export_yaml(self, *, clusters: bool) -> str:
        query = {"format": "yaml"}
        if clusters:
            query["clusters"] = "true"
        _, raw = self._call("GET", "export/", query=query, accept="application/yaml")
        return raw.decode("utf-8")

    def export(self, *, clusters: bool = False) -> dict[str, Any]:
        query = {"format": "json"}
        if clusters:
            query["clusters"] = "true"
        result: dict[str, Any] = self.json("GET", "export/", query=query)
        return result

    def apply(
        self, document: dict[str, Any], *, dry_run: bool, prune: bool = False, force: bool = False
    ) -> dict[str, Any]:
        query = {
            key: "true"
            for key, on in (("dry_run", dry_run), ("prune", prune), ("force", force))
            if on
        }
        result: dict[str, Any] = self.json("POST", "apply/", query=query, body=document)
        return result

    def simulate(self, pod: Any, cluster: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"pod": pod}
        if cluster:
            body["cluster"] = cluster
        result: dict[str, Any] = self.json("POST", "simulate/", body=body)
        return result

    def outcomes(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.json("GET", "expectation-outcomes/")["outcomes"]
        return result

    def pages(self, path: str) -> list[dict[str, Any]]:
        """Every item of a paginated list."""
        items: list[dict[str, Any]] = []
        url: str | None = path
        while url:
            page = self.json("GET", url)
            if isinstance(page, list):
                return page
            items.extend(page.get("results", []))
            following = page.get("next")
            url = _api_path(following) if following else None
        return items


def _api_path(url: str) -> str:
    """The part of an absolute API address after ``/api/v1/`` (the next page's link)."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path.split("/api/v1/", 1)[-1]
    return f"{path}?{parts.query}" if parts.query else path
