"""What the admission webhook writes into a new pod: the JSON Patch, decided without I/O.

A pod CREATE that the cluster's policies select gets (docs/admission.md):

- every enforce policy's filter rules that compile to node affinity ANDed into
  ``requiredDuringSchedulingIgnoredDuringExecution``: appended to each of the pod's own
  ``nodeSelectorTerms`` (terms are ORed, so each must carry them), or one new term when it has
  none. A term that is empty matches no node in Kubernetes and is left so;
- the weight rules that compile as ``preferredDuringSchedulingIgnoredDuringExecution`` terms,
  with the rule's own weight (validation keeps weights within -100..100, and node affinity's
  1..100 takes the positive ones unchanged);
- the annotation ``policy-portal.io/placement``: the policies applied with their versions, the
  rules left to the extender, and what dry-run policies (and ``annotate`` mode) would write.

Everything already present is left alone and only what is missing is added, so a second review
of the patched pod (``reinvocationPolicy: IfNeeded``) yields an empty patch. Bound pods
(``spec.nodeName``) and pods of excluded namespaces are never touched. Nothing a pod's author
writes opts it out: the opt-out is a label on the *namespace* (the generated configuration's
``namespaceSelector``), a mirror pod is left alone only when a kubelet (a ``system:node:``
user) creates it, and a DaemonSet's pod only when the DaemonSet controller does — a pod that
merely claims the annotation or the owner is treated like any other (docs/admission.md).

A patch is bounded: building it stops with ``PatchTooLarge`` past ``max_ops`` operations, so a
pod with thousands of node selector terms costs the webhook a bounded amount of work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from engine.affinity import NodeRequirement
from engine.placement import PolicyPlacement, place_policy
from engine.policy import CompiledPolicy

OFF = "off"
ANNOTATE = "annotate"
MUTATE = "mutate"

ANNOTATION = "policy-portal.io/placement"
# A namespace labelled so is left out by the generated configuration's namespaceSelector (pod
# authors cannot label namespaces; the same label on a pod does nothing).
OPT_OUT_LABEL = "policy-portal.io/admission"
OPT_OUT_VALUE = "skip"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# An annotation value longer than this is cut (with the count of what was left out).
MAX_ANNOTATION_CHARS = 4096

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
EXPRESSIONS = "matchExpressions"
FIELDS = "matchFields"

# Why a pod is passed through untouched (the metrics' ``reason`` label).
SKIP_BOUND = "bound"
SKIP_MIRROR = "mirror"
SKIP_DAEMONSET = "daemonset"
SKIP_NAMESPACE = "excluded_namespace"
SKIP_NO_POLICY = "no_policy"
SKIP_UNCHANGED = "unchanged"


# Who creates mirror pods (kubelets: ``system:node:<name>`` in the group ``system:nodes``) and
# DaemonSet pods (the controller's own ServiceAccount, or kube-controller-manager's identity
# when it does not use one per controller).
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
DAEMONSET_CONTROLLERS = frozenset(
    {"system:serviceaccount:kube-system:daemon-set-controller", "system:kube-controller-manager"}
)


class PodShapeError(ValueError):
    """The pod's own node affinity is not shaped as the API's types say (it cannot be
    patched); the webhook answers 400."""


class PatchTooLarge(ValueError):
    """The patch would take more than ``max_ops`` operations (the pod is refused)."""


@dataclass(frozen=True, slots=True)
class AdmissionPlan:
    """What the policies that select a pod add to it, built once per set of policies."""

    placements: tuple[PolicyPlacement, ...]
    # matchExpressions and matchFields entries ANDed into every required term (dicts as the
    # API spells them, without duplicates).
    expressions: tuple[dict[str, Any], ...]
    fields: tuple[dict[str, Any], ...]
    preferred: tuple[dict[str, Any], ...]
    # The annotation's value in each mode ('' when no policy selects the pod).
    annotation_mutate: str
    annotation_annotate: str

    @property
    def selects(self) -> bool:
        return bool(self.placements)

    def annotation(self, mode: str) -> str:
        return self.annotation_mutate if mode == MUTATE else self.annotation_annotate


def _unique(items: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    out: list[dict[str, Any]] = []
    for item in items:
        if item not in out:
            out.append(item)
    return tuple(out)


def _names(placements: Sequence[PolicyPlacement]) -> str:
    return ", ".join(f"{p.name}@v{p.version}" for p in placements)


def _rules(placements: Sequence[PolicyPlacement], *, in_affinity: bool) -> str:
    return ", ".join(
        rule.name for p in placements for rule in p.rules if rule.in_affinity is in_affinity
    )


def _annotation(
    enforce: Sequence[PolicyPlacement], dry_run: Sequence[PolicyPlacement], mode: str
) -> str:
    sections = []
    if enforce:
        sections.append(_names(enforce))
        if mode != MUTATE and _rules(enforce, in_affinity=True):
            sections.append(f"would write: {_rules(enforce, in_affinity=True)}")
        if _rules(enforce, in_affinity=False):
            sections.append(f"extender-only: {_rules(enforce, in_affinity=False)}")
    if dry_run:
        sections.append(f"dry-run: {_names(dry_run)}")
        if _rules(dry_run, in_affinity=True):
            sections.append(f"dry-run would write: {_rules(dry_run, in_affinity=True)}")
        if _rules(dry_run, in_affinity=False):
            sections.append(f"dry-run extender-only: {_rules(dry_run, in_affinity=False)}")
    text = "; ".join(sections)
    if len(text) > MAX_ANNOTATION_CHARS:
        cut = text[: MAX_ANNOTATION_CHARS - 40].rsplit(", ", 1)[0]
        text = f"{cut} … ({len(text) - len(cut)} more characters left out)"
    return text


def build_plan(policies: Sequence[CompiledPolicy], unpushed: Set[str]) -> AdmissionPlan:
    """The plan for a pod the ``policies`` select (enforce and dry-run), in name order."""
    placements = tuple(
        place_policy(policy, unpushed) for policy in sorted(policies, key=lambda p: p.name)
    )
    enforce = [p for p in placements if p.enforce]
    dry_run = [p for p in placements if not p.enforce]
    required = [r for p in enforce for r in p.required]
    preferred = [
        {"weight": weight, "preference": _term([requirement])}
        for p in enforce
        for weight, requirement in p.preferred
    ]
    return AdmissionPlan(
        placements=placements,
        expressions=_unique([r.as_dict() for r in required if not r.on_name]),
        fields=_unique([r.as_dict() for r in required if r.on_name]),
        preferred=_unique(preferred),
        annotation_mutate=_annotation(enforce, dry_run, MUTATE),
        annotation_annotate=_annotation(enforce, dry_run, ANNOTATE),
    )


def _term(requirements: Sequence[NodeRequirement]) -> dict[str, Any]:
    term: dict[str, Any] = {}
    expressions = [r.as_dict() for r in requirements if not r.on_name]
    fields = [r.as_dict() for r in requirements if r.on_name]
    if expressions:
        term[EXPRESSIONS] = expressions
    if fields:
        term[FIELDS] = fields
    return term


# --- the pod --------------------------------------------------------------------------------


def _map(value: Any, where: str) -> Mapping[str, Any] | None:
    """``value`` when it is an object, None when absent or null; anything else is refused."""
    if value is None or isinstance(value, Mapping):
        return value
    raise PodShapeError(f"{where} must be an object, got {type(value).__name__}")


def _list(value: Any, where: str) -> list[Any] | None:
    if value is None or isinstance(value, list):
        return value
    raise PodShapeError(f"{where} must be a list, got {type(value).__name__}")


def skip_reason(
    pod: Mapping[str, Any],
    namespace: str,
    excluded: Set[str],
    *,
    username: str = "",
    groups: Sequence[str] = (),
) -> str | None:
    """Why the webhook leaves ``pod`` alone whatever the policies say, or None. ``username``
    and ``groups`` are the requester's (the review's ``userInfo``): only they make a mirror-pod
    annotation or a DaemonSet owner count."""
    metadata = _map(pod.get("metadata"), "metadata") or {}
    spec = _map(pod.get("spec"), "spec") or {}
    if spec.get("nodeName"):
        return SKIP_BOUND
    if namespace in excluded:
        return SKIP_NAMESPACE
    annotations = _map(metadata.get("annotations"), "metadata.annotations") or {}
    if (
        MIRROR_ANNOTATION in annotations
        and username.startswith(NODE_USER_PREFIX)
        and NODES_GROUP in groups
    ):
        return SKIP_MIRROR
    if username in DAEMONSET_CONTROLLERS:
        for owner in _list(metadata.get("ownerReferences"), "metadata.ownerReferences") or ():
            if (
                isinstance(owner, Mapping)
                and owner.get("kind") == "DaemonSet"
                and owner.get("controller") is True
                and str(owner.get("apiVersion", "")).startswith("apps/")
            ):
                return SKIP_DAEMONSET
    return None


def escape(segment: str) -> str:
    """One JSON Pointer reference token (RFC 6901): ``~`` as ``~0``, ``/`` as ``~1``."""
    return segment.replace("~", "~0").replace("/", "~1")


def pointer(*segments: str | int) -> str:
    return "".join(f"/{escape(str(segment))}" for segment in segments)


def _add(ops: list[dict[str, Any]], path: str, value: Any) -> None:
    ops.append({"op": "add", "path": path, "value": value})


def _append_missing(
    ops: list[dict[str, Any]], base: tuple[str | int, ...], existing: Any, wanted: Sequence[Any]
) -> None:
    """Add each of ``wanted`` not already in the list at ``base`` (creating the list)."""
    where = pointer(*base)[1:].replace("/", ".")
    current = _list(existing, where)
    missing = [item for item in wanted if current is None or item not in current]
    if not missing:
        return
    if current is None:
        _add(ops, pointer(*base), missing)
        return
    for item in missing:
        _add(ops, pointer(*base, "-"), item)


def _empty_term(term: Mapping[str, Any]) -> bool:
    return not term.get(EXPRESSIONS) and not term.get(FIELDS)


def _affinity_ops(
    spec: Mapping[str, Any], plan: AdmissionPlan, max_ops: int | None = None
) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    new_term: dict[str, Any] = {}
    if plan.expressions:
        new_term[EXPRESSIONS] = list(plan.expressions)
    if plan.fields:
        new_term[FIELDS] = list(plan.fields)
    wanted: dict[str, Any] = {}
    if new_term:
        wanted[REQUIRED] = {"nodeSelectorTerms": [new_term]}
    if plan.preferred:
        wanted[PREFERRED] = list(plan.preferred)
    if not wanted:
        return ops
    affinity = _map(spec.get("affinity"), "spec.affinity")
    if affinity is None:
        _add(ops, pointer("spec", "affinity"), {"nodeAffinity": wanted})
        return ops
    node_affinity = _map(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    base = ("spec", "affinity", "nodeAffinity")
    if node_affinity is None:
        _add(ops, pointer(*base), wanted)
        return ops
    if new_term:
        required = _map(node_affinity.get(REQUIRED), f"spec.affinity.nodeAffinity.{REQUIRED}")
        terms = None
        if required is not None:
            where = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"
            terms = _list(required.get("nodeSelectorTerms"), where)
        if required is None:
            _add(ops, pointer(*base, REQUIRED), wanted[REQUIRED])
        elif not terms:
            _add(ops, pointer(*base, REQUIRED, "nodeSelectorTerms"), [new_term])
        else:
            for i, raw in enumerate(terms):
                term = _map(raw, f"nodeSelectorTerms[{i}]")
                if term is None or _empty_term(term):
                    continue  # matches no node, and must go on matching none
                at = (*base, REQUIRED, "nodeSelectorTerms", i)
                if plan.expressions:
                    _append_missing(
                        ops, (*at, EXPRESSIONS), term.get(EXPRESSIONS), plan.expressions
                    )
                if plan.fields:
                    _append_missing(ops, (*at, FIELDS), term.get(FIELDS), plan.fields)
                if max_ops is not None and len(ops) > max_ops:
                    raise PatchTooLarge(
                        f"the pod's {len(terms)} node selector terms would take more than "
                        f"{max_ops} patch operations"
                    )
    if plan.preferred:
        _append_missing(ops, (*base, PREFERRED), node_affinity.get(PREFERRED), plan.preferred)
    return ops


def pod_patch(
    pod: Mapping[str, Any], plan: AdmissionPlan, mode: str, *, max_ops: int | None = None
) -> list[dict[str, Any]]:
    """The JSON Patch operations that bring ``pod`` up to ``plan`` in ``mode`` (``annotate``
    writes the annotation only); empty when the pod already has everything. More than
    ``max_ops`` operations raise ``PatchTooLarge`` (building stops there)."""
    spec = _map(pod.get("spec"), "spec")
    metadata = _map(pod.get("metadata"), "metadata")
    ops: list[dict[str, Any]] = []
    if mode == MUTATE and plan.selects:
        if spec is None:
            raise PodShapeError("the pod has no spec")
        ops.extend(_affinity_ops(spec, plan, max_ops))
    value = plan.annotation(mode)
    annotations = _map((metadata or {}).get("annotations"), "metadata.annotations")
    current = annotations.get(ANNOTATION) if annotations is not None else None
    if value and current != value:
        if metadata is None:
            _add(ops, pointer("metadata"), {"annotations": {ANNOTATION: value}})
        elif annotations is None:
            _add(ops, pointer("metadata", "annotations"), {ANNOTATION: value})
        else:
            _add(ops, pointer("metadata", "annotations", ANNOTATION), value)
    elif not value and current is not None:
        # Copied from another pod's manifest, it would claim rules this pod does not carry.
        ops.append({"op": "remove", "path": pointer("metadata", "annotations", ANNOTATION)})
    return ops


def changes_spec(ops: Sequence[Mapping[str, Any]]) -> bool:
    """True when the patch writes node affinity (not only the annotation)."""
    return any(str(op["path"]).startswith("/spec/") for op in ops)
