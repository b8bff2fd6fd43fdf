"""A save in the admin (or a console action) held for approvals: the change is stored as a
proposal, and the person is told so and taken to it.

The admin's save paths (the policy and assignment forms, the YAML editor, list actions,
rollbacks) call the policies' services; the gate raises ``ChangeHeld`` out of their transaction.
Catching it here, once, keeps those paths unchanged. The API answers 202 instead
(``core.api.errors``), before this runs.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.errors import ChangeHeld


class HeldChangeRedirect:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not isinstance(exc, ChangeHeld):
            return None
        held = exc.hold()
        messages.warning(request, held.message)
        return HttpResponseRedirect(held.admin_path)
