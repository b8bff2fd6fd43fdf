"""Roles are Django groups: viewer reads everything, editor writes configuration, admin all.

Acting on a cluster's workloads is not configuration: evicting pods (``inventory.evict_pod``)
belongs to admins and to the ``evictor`` group, which grants that one permission and nothing
else; an editor (or a viewer) evicts only once also made an evictor. ``evictor`` is a grant
added to a role, not a role of its own (API tokens carry roles only; eviction is a console
action). docs/operations.md, "Evictions".

The same function runs from a data migration (so the groups exist right after ``migrate``) and
after every later ``migrate`` (so models added later are covered too); it only adds.
"""

from __future__ import annotations

from typing import Any

ROLE_VIEWER = "viewer"
ROLE_EDITOR = "editor"
ROLE_ADMIN = "admin"
ROLES = (ROLE_VIEWER, ROLE_EDITOR, ROLE_ADMIN)

PORTAL_APPS = ("portal", "inventory", "policies", "changes", "extender", "resources")
# What an editor may write: configuration, not history (versions, audit, decisions).
EDITOR_MODELS = {
    "inventory": {"cluster", "node"},
    "policies": {"labelassignment", "policy", "filterrule", "weightrule", "expectation"},
    "resources": {"managedresource"},
    # Approving, rejecting and rebasing proposals; applying one without approvals, and the
    # approval rules, are the administrators'.
    "changes": {"approval"},
}
# Single permissions an editor holds on models it does not otherwise write (none now: evicting
# pods acts on the cluster, not on what the portal stores, and is the evictor's grant).
EDITOR_PERMISSIONS: set[tuple[str, str]] = set()
# Groups that grant one action on top of a role: (app_label, codename) each holds.
GRANT_EVICTOR = "evictor"
GRANTS = {GRANT_EVICTOR: {("inventory", "evict_pod")}}
ADMIN_EXTRA_APPS = ("auth", "authtoken")
# Models only administrators see at all (whose tokens exist is not for viewers).
ADMIN_ONLY_MODELS = {("portal", "apitoken")}


def role_permission_codenames(apps: Any) -> dict[str, set[tuple[str, str]]]:
    """(app_label, codename) pairs per role and grant, for the models currently installed."""
    perms: dict[str, set[tuple[str, str]]] = {role: set() for role in ROLES}
    perms.update({grant: set() for grant in GRANTS})
    permission_model = apps.get_model("auth", "Permission")
    rows = permission_model.objects.filter(
        content_type__app_label__in=PORTAL_APPS + ADMIN_EXTRA_APPS
    ).values_list("content_type__app_label", "content_type__model", "codename")
    for app_label, model, codename in rows:
        pair = (app_label, codename)
        if app_label in ADMIN_EXTRA_APPS or (app_label, model) in ADMIN_ONLY_MODELS:
            perms[ROLE_ADMIN].add(pair)
            continue
        perms[ROLE_ADMIN].add(pair)
        if codename.startswith("view_"):
            perms[ROLE_VIEWER].add(pair)
            perms[ROLE_EDITOR].add(pair)
        elif model in EDITOR_MODELS.get(app_label, ()) or pair in EDITOR_PERMISSIONS:
            perms[ROLE_EDITOR].add(pair)
        for grant, pairs in GRANTS.items():
            if pair in pairs:
                perms[grant].add(pair)
    return perms


def sync_roles(apps: Any) -> None:
    """Create the role and grant groups and give each its permissions (idempotent, additive)."""
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for role, pairs in role_permission_codenames(apps).items():
        group, _ = group_model.objects.get_or_create(name=role)
        wanted = [
            p.pk
            for p in permission_model.objects.filter(
                content_type__app_label__in=PORTAL_APPS + ADMIN_EXTRA_APPS
            ).select_related("content_type")
            if (p.content_type.app_label, p.codename) in pairs
        ]
        group.permissions.add(*wanted)


def sync_roles_after_migrate(sender: Any, **kwargs: Any) -> None:
    from django.apps import apps as global_apps

    sync_roles(kwargs.get("apps") or global_apps)
