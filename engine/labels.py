"""Kubernetes label key/value and DNS-1123 name validation.

Mirrors k8s.io/apimachinery/pkg/util/validation (IsQualifiedName, IsValidLabelValue,
IsDNS1123Label, IsDNS1123Subdomain). Each function returns a list of human-readable problems;
an empty list means the input is valid. Messages follow the upstream wording where it reads
well, so an operator who knows kubectl's errors recognises them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.errors import join_path

LABEL_NAME_MAX = 63
LABEL_VALUE_MAX = 63
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253

# Explicit ASCII classes: Python's \w and \d would also accept non-ASCII letters and digits.
_QUALIFIED_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE_RE = _QUALIFIED_NAME_RE
_DNS1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)

NOT_A_STRING = "must be a string"
EMPTY = "must be non-empty"

_NAME_PART_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')"
)
_VALUE_MSG = (
    "must be empty or consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyValue', 'my_value' or '12345')"
)
_DNS1123_LABEL_MSG = (
    "must be a lowercase RFC 1123 label: lower case alphanumeric characters or '-', starting "
    "and ending with an alphanumeric character (e.g. 'my-name' or '123-abc')"
)
_DNS1123_SUBDOMAIN_MSG = (
    "must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', "
    "starting and ending with an alphanumeric character (e.g. 'example.com')"
)


def max_len_error(limit: int) -> str:
    """The upstream wording for a length violation."""
    return f"must be no more than {limit} characters"


def _uppercase_hint(value: str, pattern: re.Pattern[str]) -> str:
    # The most common mistake in a prefix or node name is capital letters: say so explicitly.
    if value != value.lower() and pattern.fullmatch(value.lower()):
        return " (uppercase letters are not allowed)"
    return ""


def dns1123_label_errors(name: Any) -> list[str]:
    """Problems with ``name`` as an RFC 1123 label.

    At most 63 characters matching ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``.
    """
    if not isinstance(name, str):
        return [NOT_A_STRING]
    if not name:
        return [EMPTY]
    errors = []
    if len(name) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(name):
        errors.append(_DNS1123_LABEL_MSG + _uppercase_hint(name, _DNS1123_LABEL_RE))
    return errors


def dns1123_subdomain_errors(name: Any) -> list[str]:
    """Problems with ``name`` as an RFC 1123 subdomain (at most 253 chars, dot-separated labels)."""
    if not isinstance(name, str):
        return [NOT_A_STRING]
    if not name:
        return [EMPTY]
    errors = []
    if len(name) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(name):
        errors.append(_DNS1123_SUBDOMAIN_MSG + _uppercase_hint(name, _DNS1123_SUBDOMAIN_RE))
    return errors


def label_key_errors(key: Any) -> list[str]:
    """Problems with ``key`` as a label key: ``[prefix/]name`` (IsQualifiedName).

    The optional prefix is a lowercase DNS-1123 subdomain of at most 253 characters; the name
    is 1-63 characters of ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?``.
    """
    if not isinstance(key, str):
        return [NOT_A_STRING]
    if not key:
        return [EMPTY]
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "must contain at most one '/': a label key is an optional DNS subdomain prefix "
            "and '/' followed by a name (e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append(f"prefix part {EMPTY}")
        else:
            errors.extend(f"prefix part {msg}" for msg in dns1123_subdomain_errors(prefix))
    else:
        name = parts[0]
    if not name:
        errors.append(f"name part {EMPTY}")
        return errors
    if len(name) > LABEL_NAME_MAX:
        errors.append(f"name part {max_len_error(LABEL_NAME_MAX)}")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append(f"name part {_NAME_PART_MSG}")
    return errors


def label_value_errors(value: Any) -> list[str]:
    """Problems with ``value`` as a label value: empty, or at most 63 chars of the name alphabet."""
    if not isinstance(value, str):
        return [NOT_A_STRING]
    if not value:
        return []
    errors = []
    if len(value) > LABEL_VALUE_MAX:
        errors.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(_VALUE_MSG)
    return errors


def label_map_errors(labels: Any, *, path: str = "") -> list[tuple[str, str]]:
    """Problems with a ``{key: value}`` label map, as ``(field path, message)`` pairs.

    Entries are addressed as ``path[key]``; a map that is not a mapping is reported at ``path``.
    """
    if not isinstance(labels, Mapping):
        return [(path, "must be an object of label key: value")]
    errors: list[tuple[str, str]] = []
    for key, value in labels.items():
        entry = join_path(path, f"[{key}]")
        errors.extend((entry, f"invalid label key: {msg}") for msg in label_key_errors(key))
        errors.extend((entry, f"invalid label value: {msg}") for msg in label_value_errors(value))
    return errors


_RESOURCE_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
RESOURCE_NAME_PART_MAX = 63


def resource_name_errors(name: Any) -> list[str]:
    """Problems with ``name`` as an extended-resource name, as the API server judges one.

    A qualified name ``<domain>/<name>`` whose domain is not ``kubernetes.io`` (nor a subdomain
    of it: ``*.kubernetes.io/`` is reserved too), not starting with ``requests.``; the domain a
    DNS subdomain, the name 1-63 characters of ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?``.
    """
    if not isinstance(name, str) or not name:
        return ["must be a non-empty string such as example.com/license"]
    errors: list[str] = []
    if name.startswith("requests."):
        errors.append("must not start with 'requests.' (that is a quota name)")
    prefix, slash, part = name.partition("/")
    if not slash:
        return [
            *errors,
            "must be a fully qualified name <domain>/<name> (e.g. example.com/license): an "
            "extended resource outside kubernetes.io needs a domain",
        ]
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        errors.append("must not be in the kubernetes.io domain (reserved for Kubernetes)")
    errors.extend(f"domain {msg}" for msg in dns1123_subdomain_errors(prefix))
    if not part:
        errors.append("name part must not be empty")
    elif len(part) > RESOURCE_NAME_PART_MAX:
        errors.append(f"name part must be at most {RESOURCE_NAME_PART_MAX} characters")
    elif "/" in part:
        errors.append("must contain at most one '/'")
    elif not _RESOURCE_NAME_PART.fullmatch(part):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and start and "
            "end with an alphanumeric character"
        )
    return errors
