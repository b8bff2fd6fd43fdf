"""A list of integers: ``integer[]`` on PostgreSQL (GIN-indexable), JSON text elsewhere."""

from __future__ import annotations

import json
from typing import Any

from django.db import models


class IdArrayField(models.Field):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Node ids, reason runs, scores: a flat list of ints, never null (empty list instead)."""

    description = "A list of integers"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("default", list)
        kwargs.setdefault("blank", True)
        super().__init__(*args, **kwargs)

    def db_type(self, connection: Any) -> str:
        return "integer[]" if connection.vendor == "postgresql" else "text"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> list[int]:
        return self.to_python(value)

    def to_python(self, value: Any) -> list[int]:
        if value is None or value == "":
            return []
        if isinstance(value, str):
            return [int(v) for v in json.loads(value)]
        return [int(v) for v in value]

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        ints = [int(v) for v in (value or ())]
        if connection.vendor == "postgresql":
            return ints
        return json.dumps(ints, separators=(",", ":"))
