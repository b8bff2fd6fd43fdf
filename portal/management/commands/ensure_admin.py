"""``manage.py ensure_admin``: make sure the ``admin`` superuser exists.

A new account gets a random password, printed once; ``PORTAL_ADMIN_PASSWORD`` sets a chosen one
(and resets an existing account's password). ``PORTAL_ADMIN_PASSWORD_FILE`` names a file holding
it instead (a mounted Secret; the image's entrypoint runs this command when either is set), and
``PORTAL_ADMIN_USERNAME`` the account (default ``admin``). An existing account is otherwise left
alone.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from core.roles import ROLE_ADMIN

PASSWORD_ENV = "PORTAL_ADMIN_PASSWORD"
PASSWORD_FILE_ENV = "PORTAL_ADMIN_PASSWORD_FILE"
USERNAME_ENV = "PORTAL_ADMIN_USERNAME"


def chosen_password() -> str:
    """The password given by the environment or the file it names; empty when none is."""
    path = os.environ.get(PASSWORD_FILE_ENV, "").strip()
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                password = handle.read().strip()
        except OSError as exc:
            raise CommandError(f"{PASSWORD_FILE_ENV}: cannot read {path}: {exc.strerror}") from exc
        if not password:
            raise CommandError(f"{PASSWORD_FILE_ENV}: {path} is empty")
        return password
    return os.environ.get(PASSWORD_ENV, "")


class Command(BaseCommand):
    help = (
        "Create the admin superuser if missing and print its password once "
        f"(random, or {PASSWORD_ENV} when set)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default=os.environ.get(USERNAME_ENV) or "admin")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        chosen = chosen_password()
        user_model = get_user_model()
        user = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
        if user is None:
            password = chosen or secrets.token_urlsafe(12)
            user = user_model.objects.create_superuser(
                **{user_model.USERNAME_FIELD: username}, email="", password=password
            )
            self._join_admin_role(user)
            shown = (
                "the chosen password" if chosen else f"password {password} (shown only this once)"
            )
            self.stdout.write(f"Created superuser {username!r} with {shown}.")
            return
        if chosen:
            user.set_password(chosen)
            user.save(update_fields=["password"])
            self.stdout.write(f"Superuser {username!r} exists; password set to the chosen one.")
            return
        self.stdout.write(
            f"Superuser {username!r} exists; password unchanged (set {PASSWORD_ENV} to reset it)."
        )

    def _join_admin_role(self, user: Any) -> None:
        group = Group.objects.filter(name=ROLE_ADMIN).first()
        if group is not None:
            user.groups.add(group)
