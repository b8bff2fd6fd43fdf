"""Helpers for the admin UI tests: URLs, small node objects, and posting admin forms the way a
browser would."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.utils import quote
from django.forms import CheckboxInput
from django.test import Client
from django.urls import reverse


def admin_url(model: Any, view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def change_url(obj: Any) -> str:
    # DRF's token admin addresses a token by its user's id.
    key = obj.user_id if obj._meta.model_name == "tokenproxy" else obj.pk
    return admin_url(type(obj), "change", quote(key))


def run_action(
    client: Client, model: Any, action: str, objs: list[Any], *, confirm: bool = False
) -> Any:
    """Post an admin action; ``confirm`` answers its confirmation step ("Yes, I'm sure")."""
    data = {"action": action, "_selected_action": [o.pk for o in objs]}
    if confirm:
        data["post"] = "yes"
    return client.post(admin_url(model, "changelist"), data, follow=True)


def node_object(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    cpu: str = "4",
    memory: str = "16Gi",
) -> dict[str, Any]:
    """A small v1 Node object, enough for the inventory to parse every field it shows."""
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {
            "unschedulable": unschedulable,
            "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
            ],
            "capacity": resources,
            "allocatable": resources,
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "nodeInfo": {"kubeletVersion": "v1.30.2", "architecture": "amd64"},
        },
    }


def form_data(response: Any) -> dict[str, Any]:
    """The POST a browser would send for an admin add/change page as rendered (unchanged)."""
    data: dict[str, Any] = {}
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        for name in management.fields:
            data[management.add_prefix(name)] = management[name].value()
        forms.extend(formset.forms)
    for form in forms:
        for name, field in form.fields.items():
            value = form[name].value()
            key = form.add_prefix(name)
            if isinstance(field.widget, CheckboxInput):
                if value:
                    data[key] = "on"
            elif value is not None:
                data[key] = value
    return data


def set_rows(data: dict[str, Any], prefix: str, rows: list[dict[str, Any]], start: int = 0) -> None:
    """Fill inline rows ``prefix-<i>-field`` from ``start`` and fix the management form."""
    for offset, row in enumerate(rows):
        i = start + offset
        defaults = {"position": str(i), "enabled": "on", "values": "[]"}
        for field, value in {**defaults, **row}.items():
            key = f"{prefix}-{i}-{field}"
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
    total = max(int(data[f"{prefix}-TOTAL_FORMS"]), start + len(rows))
    data[f"{prefix}-TOTAL_FORMS"] = str(total)
