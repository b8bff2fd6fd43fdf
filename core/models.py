"""Portal-wide records: the snapshot revision counter and the audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.roles import ROLE_VIEWER, ROLES


class Revision(models.Model):
    """A named counter that every write bumps in its own transaction.

    Extender processes compare the ``snapshot`` revision with the one their in-memory snapshot was
    built from, so one indexed read tells them whether anything changed.
    """

    name = models.CharField(max_length=64, primary_key=True)
    value = models.BigIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(value__gte=0), name="revision_value_gte_0")
        ]

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class AuditAction(models.TextChoices):
    CREATE = "create", "create"
    UPDATE = "update", "update"
    DELETE = "delete", "delete"
    ENABLE = "enable", "enable"
    DISABLE = "disable", "disable"
    MODE = "mode", "mode change"
    ROLLBACK = "rollback", "rollback"
    APPLY = "apply", "apply"
    IMPORT = "import", "import"
    SYNC = "sync", "sync"
    PUSH_LABELS = "push_labels", "push labels"
    EVICT = "evict", "evict pods"
    REQUEUE = "requeue", "requeue Pending pods"


class AuditEntry(models.Model):
    """One write of any object: who, when, what, and the state before and after."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept as text so the entry still says who it was after the user is deleted.
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=20, choices=AuditAction.choices)
    object_type = models.CharField(max_length=40)
    object_name = models.CharField(max_length=253)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"
        indexes = [models.Index(fields=["object_type", "object_name"], name="audit_object_idx")]

    def __str__(self) -> str:
        return f"{self.actor_name or 'system'} {self.action} {self.object_type} {self.object_name}"


class ApiToken(models.Model):
    """An API token, kept only as the SHA-256 digest of its key (docs/security.md).

    The key is shown once, when it is issued (``manage.py create_api_token``). ``prefix`` — the
    key's first characters — finds the row; the digest proves the rest. A database dump holds
    no usable key. ``role`` bounds what the token may do, whatever its user holds: a request
    with it needs the permission both from the user and from the role's group.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    role = models.CharField(max_length=10, choices=[(r, r) for r in ROLES], default=ROLE_VIEWER)
    prefix = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"
        constraints = [
            models.CheckConstraint(condition=models.Q(role__in=ROLES), name="api_token_role_valid")
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
