"""Request bodies judged before anything reads them, and sessions that end when idle.

**Bodies** (docs/threat-model.md, "Uploads").

Django parses a form body the first time ``request.POST`` is touched — and
``CsrfViewMiddleware`` touches it for every unsafe request that has no CSRF header, before it
knows the token is wrong. A multipart body larger than ``FILE_UPLOAD_MAX_MEMORY_SIZE`` is then
spooled to a file, held open while the rest arrives. So, before CSRF (this middleware is listed
ahead of it) and by the declared ``Content-Length`` alone:

* a body over its view's limit is a 413 (``MAX_DOCUMENT_BYTES``; views marked with
  :func:`allows_large_body`, the NodeList imports, ``MAX_NODE_LIST_BYTES``);
* a request that is neither logged in nor carries credentials (an API token, which the API
  checks before it parses) may send at most ``FILE_UPLOAD_MAX_MEMORY_SIZE`` bytes, which are
  parsed in memory: nothing anonymous is ever spooled to disk (413 otherwise).

What is spooled lands in ``FILE_UPLOAD_TEMP_DIR``, a directory of the portal's own, never the
system's temporary directory.

**Idle sessions** (docs/security.md). A session lives ``SESSION_COOKIE_AGE`` (the idle timeout)
from its last save; :class:`SessionIdleTimeout` saves a session in use again once a minute at
most, so an active user stays logged in, an idle one is out after the timeout, and a page view
does not cost a session write every time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from core import limits

LARGE_BODY_ATTRIBUTE = "portal_allows_large_body"


def allows_large_body(view: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a view (wrap it) as taking a NodeList-sized body (``MAX_NODE_LIST_BYTES``)."""

    def marked(*args: Any, **kwargs: Any) -> Any:
        return view(*args, **kwargs)

    marked.__dict__.update(getattr(view, "__dict__", {}))
    marked.__name__ = getattr(view, "__name__", "view")
    marked.__doc__ = view.__doc__
    setattr(marked, LARGE_BODY_ATTRIBUTE, True)
    return marked


class RequestBodyGuard:
    """413 for bodies over their limit or anonymous ones that would be spooled; before parsing."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if not (declared.isascii() and declared.isdigit()):
            return JsonResponse({"detail": f"Invalid Content-Length {declared!r}."}, status=400)
        length = int(declared)
        if getattr(view, LARGE_BODY_ATTRIBUTE, False):
            limit, name = limits.MAX_NODE_LIST_BYTES, "MAX_NODE_LIST_BYTES"
        else:
            limit, name = limits.MAX_DOCUMENT_BYTES, "MAX_DOCUMENT_BYTES"
        if length > limit:
            return JsonResponse(
                {"detail": f"The request body is larger than {limit} bytes.", "limit": name},
                status=413,
            )
        user = getattr(request, "user", None)
        # A token-bearing API request is authenticated by its view before any parsing.
        anonymous = "HTTP_AUTHORIZATION" not in request.META and (
            user is None or not user.is_authenticated
        )
        in_memory = settings.FILE_UPLOAD_MAX_MEMORY_SIZE
        if anonymous and length > in_memory:
            # Larger bodies are spooled to disk when parsed: nobody anonymous gets to do that.
            return JsonResponse(
                {
                    "detail": f"Requests that are not logged in are limited to {in_memory} "
                    "bytes; log in to upload.",
                    "limit": "FILE_UPLOAD_MAX_MEMORY_SIZE",
                },
                status=413,
            )
        return None


RENEWED_AT = "_portal_renewed_at"
RENEW_AFTER_SECONDS = 60


def stamp_login(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """``user_logged_in``: a new session starts its idle clock (login saves it anyway)."""
    request.session[RENEWED_AT] = int(time.time())


class SessionIdleTimeout:
    """Renews (saves) a logged-in session that was used, at most once a minute."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        session = getattr(request, "session", None)
        # Only sessions the request used (a logged-in page); a token request has none.
        if session is None or not session.accessed or not session.session_key:
            return response
        renewed = session.get(RENEWED_AT)
        now = int(time.time())
        if not isinstance(renewed, int) or now - renewed >= RENEW_AFTER_SECONDS:
            session[RENEWED_AT] = now  # marks it modified: SessionMiddleware saves it
        return response
