"""``manage.py create_api_token USER --role ROLE``: an API token for automation.

Only the key goes to stdout, so ``TOKEN=$(manage.py create_api_token ci --role editor)`` works.
The key is shown this once: the portal keeps only its digest (core/tokens.py). The token is
limited to ``--role`` even when the user holds more (an editor's viewer token only reads).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Field
from django.utils import timezone

from core import tokens
from core.models import ApiToken
from core.roles import ROLES, sync_roles


class Command(BaseCommand):
    help = (
        "Create (or reuse) USER, put it in the role's group and print a new API token (shown "
        "once; only its digest is stored). --rotate revokes the user's other tokens."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        # Validated in handle() so an unknown role gets a message naming the valid ones.
        parser.add_argument("--role", required=True, help=f"One of: {', '.join(ROLES)}.")
        parser.add_argument(
            "--rotate", action="store_true", help="Revoke the user's existing tokens."
        )
        parser.add_argument(
            "--expires-days", type=int, default=0, help="Expire the token after N days (0: never)."
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> str:
        role = options["role"]
        if role not in ROLES:
            raise CommandError(f"Unknown role {role!r}: use one of {', '.join(ROLES)}.")
        username = options["username"].strip()
        user_model = get_user_model()
        try:
            username_field = user_model._meta.get_field(user_model.USERNAME_FIELD)
            cast("Field[Any, Any]", username_field).run_validators(username)
        except ValidationError as exc:
            raise CommandError(
                f"Invalid user name {username!r}: {' '.join(exc.messages)}"
            ) from None
        if not username:
            raise CommandError("A user name is required.")
        group = Group.objects.filter(name=role).first()
        if group is None:
            # The roles migration creates the groups; recreate them if someone deleted one.
            sync_roles(apps)
            group = Group.objects.get(name=role)
        user, created = user_model.objects.get_or_create(
            **{user_model.USERNAME_FIELD: username}, defaults={"is_staff": True}
        )
        if created:
            # Token-only account: no password login until an administrator sets one.
            user.set_unusable_password()
            user.save(update_fields=["password"])
        user.groups.add(group)
        if options["rotate"]:
            ApiToken.objects.filter(user=user).delete()
        days = options["expires_days"]
        if days < 0:
            raise CommandError("--expires-days must be 0 (never) or more.")
        expires = timezone.now() + timedelta(days=days) if days else None
        # The token is limited to the role asked for, whatever else the user holds.
        _, key = tokens.issue(user, role=role, name="create_api_token", expires_at=expires)
        if created:
            self.stderr.write(f"Created user {username!r} with role {role}.")
        return key
