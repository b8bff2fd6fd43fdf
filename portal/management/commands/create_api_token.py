"""``manage.py create_api_token USER --role ROLE``: an API token for automation.

Only the key goes to stdout, so ``TOKEN=$(manage.py create_api_token ci --role editor)`` works.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token

from portal.roles import ROLES, sync_roles


class Command(BaseCommand):
    help = (
        "Create (or reuse) USER, put it in the role's group and print its API token. "
        "--rotate replaces an existing token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        # Validated in handle() so an unknown role gets a message naming the valid ones.
        parser.add_argument("--role", required=True, help=f"One of: {', '.join(ROLES)}.")
        parser.add_argument(
            "--rotate", action="store_true", help="Replace the user's existing token."
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> str:
        role = options["role"]
        if role not in ROLES:
            raise CommandError(f"Unknown role {role!r}: use one of {', '.join(ROLES)}.")
        username = options["username"].strip()
        user_model = get_user_model()
        try:
            user_model._meta.get_field(user_model.USERNAME_FIELD).run_validators(username)
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
            Token.objects.filter(user=user).delete()
        token, _ = Token.objects.get_or_create(user=user)
        if created:
            self.stderr.write(f"Created user {username!r} with role {role}.")
        return token.key
