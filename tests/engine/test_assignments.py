"""Effective labels: observed labels overlaid by matching label assignments."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from engine.assignments import (
    AssignmentSpec,
    NodeSelector,
    assigned_labels,
    effective_labels,
    labels_errors,
    node_selector_from_dict,
)
from engine.errors import EngineValidationError
from engine.selectors import Requirement

REPO_ROOT = Path(__file__).resolve().parents[2]

OBSERVED = {"zone": "eu-1a", "gpu.gen": "4", "spot": "true"}


@pytest.mark.parametrize(
    ("selector", "name", "expected"),
    [
        pytest.param({}, "any-node", True, id="empty-matches-every-node"),
        pytest.param(None, "any-node", True, id="none-matches-every-node"),
        pytest.param({"node_names": ["gpu-*"]}, "gpu-1", True, id="glob-match"),
        pytest.param({"node_names": ["gpu-*"]}, "cpu-1", False, id="glob-miss"),
        pytest.param({"node_names": ["a-*", "gpu-?"]}, "gpu-1", True, id="any-glob"),
        pytest.param(
            {"match_expressions": [{"key": "zone", "operator": "In", "values": ["eu-1a"]}]},
            "n1",
            True,
            id="expression-on-observed",
        ),
        pytest.param(
            {"match_expressions": [{"key": "gpu.gen", "operator": "Gt", "values": ["3"]}]},
            "n1",
            True,
            id="gt-allowed-for-nodes",
        ),
        pytest.param(
            {
                "node_names": ["gpu-*"],
                "match_expressions": [{"key": "spot", "operator": "DoesNotExist"}],
            },
            "gpu-1",
            False,
            id="anded-expression-fails",
        ),
        pytest.param(
            {
                "node_names": ["cpu-*"],
                "match_expressions": [{"key": "spot", "operator": "Exists"}],
            },
            "gpu-1",
            False,
            id="anded-name-fails",
        ),
    ],
)
def test_node_selector_matches(selector: object, name: str, expected: bool) -> None:
    assert node_selector_from_dict(selector).matches(name, OBSERVED) is expected


@pytest.mark.parametrize(
    ("selector", "fields"),
    [
        pytest.param(
            {"match_expressions": [{"key": "gpu", "operator": "In", "values": []}]},
            ["node_selector.match_expressions[0].values"],
            id="in-without-values",
        ),
        pytest.param(
            {"node_names": ["ok-*", "bad-["]},
            ["node_selector.node_names[1]"],
            id="unclosed-glob",
        ),
        pytest.param({"node_names": "gpu-*"}, ["node_selector.node_names"], id="names-a-string"),
        pytest.param(
            {"match_expressions": {"key": "x"}},
            ["node_selector.match_expressions"],
            id="expressions-not-a-list",
        ),
        pytest.param({"nodeNames": ["a"]}, ["node_selector.nodeNames"], id="unknown-field"),
        pytest.param(["gpu-*"], ["node_selector"], id="not-an-object"),
    ],
)
def test_node_selector_errors(selector: object, fields: list[str]) -> None:
    with pytest.raises(EngineValidationError) as excinfo:
        node_selector_from_dict(selector, path="node_selector")
    assert [field for field, _ in excinfo.value.errors] == fields


def test_node_selector_survives_pickle() -> None:
    selector = node_selector_from_dict(
        {"node_names": ["gpu-*"], "match_expressions": [{"key": "spot", "operator": "Exists"}]}
    )
    clone = pickle.loads(pickle.dumps(selector))
    assert clone == selector
    assert clone.matches("gpu-1", {"spot": "true"})
    assert not clone.matches("cpu-1", {"spot": "true"})


def test_node_selector_is_empty() -> None:
    assert NodeSelector().is_empty
    assert not NodeSelector(("a*",)).is_empty


def _spec(
    name: str, priority: int, labels: dict[str, str], selector: NodeSelector | None = None
) -> AssignmentSpec:
    return AssignmentSpec(name, priority, selector or NodeSelector(), tuple(labels.items()))


GPU_NODES = NodeSelector(("gpu-*",))


@pytest.mark.parametrize(
    ("assignments", "node", "expected_assigned"),
    [
        pytest.param([], "gpu-1", {}, id="no-assignments"),
        pytest.param([_spec("a", 0, {"team": "ml"})], "gpu-1", {"team": "ml"}, id="one"),
        pytest.param(
            [_spec("a", 0, {"team": "ml"}, GPU_NODES)], "cpu-1", {}, id="selector-excludes"
        ),
        pytest.param(
            [_spec("high", 10, {"team": "ml"}), _spec("low", 1, {"team": "web"})],
            "n",
            {"team": "ml"},
            id="higher-priority-wins",
        ),
        pytest.param(
            [_spec("low", 1, {"team": "web"}), _spec("high", 10, {"team": "ml"})],
            "n",
            {"team": "ml"},
            id="input-order-irrelevant",
        ),
        pytest.param(
            [_spec("b", 5, {"team": "b"}), _spec("a", 5, {"team": "a"})],
            "n",
            {"team": "b"},
            id="tie-last-name-wins",
        ),
        pytest.param(
            [_spec("a", 5, {"team": "a"}), _spec("b", 5, {"team": "b"})],
            "n",
            {"team": "b"},
            id="tie-deterministic-both-orders",
        ),
        pytest.param(
            [_spec("a", 1, {"x": "1", "y": "1"}), _spec("b", 2, {"y": "2"})],
            "n",
            {"x": "1", "y": "2"},
            id="keys-merge",
        ),
        pytest.param(
            [_spec("a", -5, {"zone": "overridden"})],
            "n",
            {"zone": "overridden"},
            id="assignment-overrides-observed",
        ),
    ],
)
def test_assigned_and_effective_labels(
    assignments: list[AssignmentSpec], node: str, expected_assigned: dict[str, str]
) -> None:
    assert assigned_labels(node, OBSERVED, assignments) == expected_assigned
    assert effective_labels(node, OBSERVED, assignments) == {**OBSERVED, **expected_assigned}


def test_selectors_see_observed_labels_only() -> None:
    # "b" would match if it saw the label "a" adds; it must not, whatever the priorities.
    adds_team = _spec("a", 1, {"team": "ml"})
    needs_team = _spec("b", 2, {"pool": "ml"}, NodeSelector((), (Requirement("team", "Exists"),)))
    assert effective_labels("n", {}, [adds_team, needs_team]) == {"team": "ml"}


def test_effective_labels_does_not_mutate_observed() -> None:
    observed = {"zone": "a"}
    effective_labels("n", observed, [_spec("a", 0, {"zone": "b"})])
    assert observed == {"zone": "a"}


@pytest.mark.parametrize(
    ("labels", "fields"),
    [
        pytest.param({"team": "ml", "nvidia.com/gpu": ""}, [], id="valid"),
        pytest.param({"bad key": "x"}, ["[bad key]"], id="bad-key"),
        pytest.param({"team": "a" * 64}, ["[team]"], id="bad-value"),
        pytest.param("team=ml", [""], id="not-a-mapping"),
    ],
)
def test_labels_errors(labels: object, fields: list[str]) -> None:
    assert [field for field, _ in labels_errors(labels)] == fields


def test_engine_imports_without_django() -> None:
    # Every module of the package, so a new one cannot slip a Django import past this test.
    code = (
        "import importlib, pkgutil, sys; import engine; "
        "[importlib.import_module(m.name) for m in "
        "pkgutil.walk_packages(engine.__path__, 'engine.')]; "
        "assert 'engine.fit' in sys.modules; "
        "assert not any(m == 'django' or m.startswith('django.') for m in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
