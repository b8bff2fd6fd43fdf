"""The verbs are spelled once (core.verbs): the server's routes, the generated configuration, the
metrics, the decision log's admin and API filters and the reserved cluster names all read them."""

from __future__ import annotations

from core import verbs
from decisions.admin import VerbFilter
from decisions.api import DecisionFilterSet
from extender import metrics
from extender.config import scheduler_config
from extender.verbs import VERBS
from inventory.models import RESERVED_CLUSTER_NAMES


def test_the_server_has_one_handler_per_extender_verb_in_the_registrys_order() -> None:
    assert tuple(VERBS) == verbs.EXTENDER_VERBS == ("filter", "prioritize", "preempt", "bind")


def test_the_configuration_and_the_metrics_know_the_same_verbs() -> None:
    assert scheduler_config.VERBS == verbs.EXTENDER_VERBS
    assert scheduler_config.DEFAULT_VERBS == verbs.DEFAULT_EXTENDER_VERBS
    assert set(verbs.DEFAULT_EXTENDER_VERBS) < set(verbs.EXTENDER_VERBS)
    assert frozenset(verbs.EXTENDER_VERBS) == metrics.KNOWN_VERBS


def test_the_decision_logs_filters_offer_every_recorded_verb() -> None:
    assert tuple(VerbFilter.values) == verbs.RECORDED_VERBS
    choices = DecisionFilterSet.base_filters["verb"].extra["choices"]
    assert tuple(value for value, _ in choices) == verbs.RECORDED_VERBS
    assert verbs.RECORDED_VERBS[-1] == verbs.SCHEDULE


def test_cluster_names_that_are_verbs_are_reserved() -> None:
    # The database constraint on inventory_cluster is built from RESERVED_CLUSTER_NAMES.
    assert RESERVED_CLUSTER_NAMES == verbs.RESERVED_CLUSTER_NAMES
