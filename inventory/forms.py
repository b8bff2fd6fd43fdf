"""Admin forms for clusters: the service validator decides, its messages land on the fields."""

from __future__ import annotations

from typing import Any

from django import forms

from core.errors import ContentError
from inventory.credentials import available_names
from inventory.models import Cluster
from inventory.services import CLUSTER_FIELDS, clean_cluster


def add_content_errors(form: forms.BaseForm, error: ContentError) -> None:
    """Put each ``path: messages`` of a ContentError next to the form field it is about.

    A nested path (``labels.foo``, ``values[0]``) goes to its top-level field, with the rest of
    the path kept in the message; paths that name no field become non-field errors.
    """
    for path, messages in error.errors.items():
        field = path.split(".", 1)[0].split("[", 1)[0]
        for message in messages:
            if field in form.fields:
                if field in form.errors:
                    # The field's own validation already said what is wrong with it.
                    continue
                text = message if path == field else f"{path}: {message}"
                form.add_error(field, text)
            else:
                form.add_error(None, f"{path}: {message}" if path else message)


KUBECONFIG_HELP = (
    "The name of a kubeconfig file (or of a token/CA directory) in the portal's KUBECONFIG_DIR, "
    "which the operator provisions; not a path. Leave empty with in-cluster credentials."
)


class NamespaceListField(forms.Field):
    """A list of namespace names, edited as one comma-separated line."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return value

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, list):
            return [str(item).strip() for item in value]
        text = value if isinstance(value, str) else ""
        return [part.strip() for part in text.split(",") if part.strip()]


class ClusterForm(forms.ModelForm):
    admission_excluded_namespaces = NamespaceListField(
        required=False,
        label="Admission excluded namespaces",
        help_text="Comma-separated; the webhook never touches their pods. Default: kube-system.",
    )

    class Meta:
        model = Cluster
        fields = CLUSTER_FIELDS
        labels = {"kubeconfig_path": "Kubeconfig name"}
        help_texts = {"kubeconfig_path": KUBECONFIG_HELP}

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        data = {f: cleaned[f] for f in CLUSTER_FIELDS if f in cleaned}
        try:
            clean_cluster(data)
        except ContentError as exc:
            add_content_errors(self, exc)
        self._check_kubeconfig_exists(cleaned.get("kubeconfig_path") or "")
        return cleaned

    def _check_kubeconfig_exists(self, name: str) -> None:
        """A name that is not in KUBECONFIG_DIR is refused here, with the names that are (the
        API takes a name before its file is provisioned; a person saving a form has a typo)."""
        if not name or "kubeconfig_path" in self.errors:
            return
        names = available_names()
        if names is None or name in names:
            return
        held = ", ".join(names) if names else "nothing yet"
        self.add_error(
            "kubeconfig_path",
            f"No kubeconfig named {name!r} in KUBECONFIG_DIR. It holds: {held}. Pick one of "
            "those, or have the operator provision the file first.",
        )

    def _get_validation_exclusions(self) -> set[str]:
        # The service moves the default flag off the old default cluster in the same
        # transaction, so the "one default" constraint must not reject choosing a new default.
        return {*super()._get_validation_exclusions(), "is_default"}  # type: ignore[misc]
