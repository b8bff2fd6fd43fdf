"""The ``portalctl`` command (docs/portalctl.md).

Exit codes: 0 success (every expectation passes; ``diff``: nothing would change), 1 a failure
(an expectation fails; ``diff``: changes; an API call refused or unreachable), 2 bad input
(a malformed document, with file, line and field; a 400 from the API; a wrong option).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from portalctl import report
from portalctl.client import ApiError, Client
from portalctl.documents import BadInput, Problem, load_repository, read_yaml
from portalctl.offline import run_expectations

OK = 0
FAILED = 1
BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portalctl",
        description="Test scheduling policies offline; export, diff and apply them through "
        "the portal's API (token in PORTAL_TOKEN).",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    test = commands.add_parser("test", help="judge every expectation of a folder offline")
    test.add_argument("dir", type=Path)
    test.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    test.add_argument("--json", metavar="FILE", help="write the results as JSON here")
    test.add_argument("--quiet", "-q", action="store_true", help="print only failures")

    def online(name: str, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--url", required=True, help="the portal, e.g. https://portal.example")
        return sub

    export = online("export", "print the portal's PolicySet (YAML) to standard output")
    export.add_argument("--cluster", help="only objects of this cluster and those of every cluster")
    export.add_argument("--clusters", action="store_true", help="include the clusters' settings")
    export.add_argument(
        "--nodes",
        metavar="DIR",
        type=Path,
        help="also write each cluster's nodes to DIR/nodes/<cluster>/nodes.yaml",
    )

    for name, text in (
        ("diff", "show what applying the folder would change (exit 1 when anything would)"),
        ("apply", "apply the folder's PolicySets in one transaction"),
    ):
        sub = online(name, text)
        sub.add_argument("dir", type=Path)
        sub.add_argument(
            "--prune", action="store_true", help="delete objects the folder does not name"
        )
        if name == "apply":
            sub.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")
            sub.add_argument(
                "--force", action="store_true", help="apply even if passing expectations break"
            )

    explain = online("explain", "every node's verdict for a pod (the simulate API)")
    explain.add_argument("pod", type=Path, help="a v1 Pod as YAML")
    explain.add_argument("--cluster", help="default: the portal's default cluster")
    explain.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    return parser


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: 2 for usage errors, 0 for --help
        return int(exc.code or 0)
    try:
        command = globals()[f"_cmd_{args.command}"]
        code: int = command(args, out, err)
        return code
    except BadInput as exc:
        for problem in exc.problems:
            print(problem, file=err)
        return BAD_INPUT
    except ApiError as exc:
        print(f"portalctl: {exc}", file=err)
        if exc.body is not None:
            print(_api_errors(exc.body), file=err)
        return BAD_INPUT if exc.status == 400 else FAILED


def _api_errors(body: Any) -> str:
    """The API's error body, one message a line."""
    if isinstance(body, dict):
        nested = body.get("errors")
        errors: dict[str, Any] = nested if isinstance(nested, dict) else body
        lines = []
        for key, value in errors.items():
            messages = value if isinstance(value, list) else [value]
            for message in messages:
                text = message if isinstance(message, str) else json.dumps(message)
                lines.append(f"  {key}: {text}")
        return "\n".join(lines)
    return f"  {body}"


# --- offline -------------------------------------------------------------------------------


def _cmd_test(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    repo = load_repository(args.dir)
    results = run_expectations(repo)
    report.write_outputs(results, junit_path=args.junit, json_path=args.json)
    if not results:
        print('no expectations found (see docs/portalctl.md, "Repository layout")', file=err)
    print(report.table(results, only_failures=args.quiet), file=out)
    return OK if all(r.ok for r in results) else FAILED


# --- online --------------------------------------------------------------------------------


def _cmd_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    client = Client(args.url)
    if args.cluster is None:
        out.write(client.export_yaml(clusters=args.clusters))
    else:
        document = client.export(clusters=args.clusters)
        out.write(_dump(only_cluster(document, args.cluster)))
    if args.nodes is not None:
        for cluster in client.pages("clusters/"):
            name = cluster["name"]
            if args.cluster is not None and name != args.cluster:
                continue
            folder = args.nodes / "nodes" / name
            folder.mkdir(parents=True, exist_ok=True)
            nodes = [node_object(n) for n in client.pages(f"clusters/{name}/nodes/")]
            (folder / "nodes.yaml").write_text(
                _dump({"apiVersion": "v1", "kind": "NodeList", "items": nodes}), encoding="utf-8"
            )
            print(f"wrote {len(nodes)} nodes to {folder / 'nodes.yaml'}", file=err)
    return OK


def only_cluster(document: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The objects that apply in ``cluster``: its own and those of every cluster."""
    kept = dict(document)
    for key in ("policies", "labelAssignments", "expectations"):
        if key in kept:
            kept[key] = [e for e in kept[key] if e.get("cluster") in (None, cluster)]
    if "clusters" in kept:
        kept["clusters"] = [c for c in kept["clusters"] if c.get("name") == cluster]
    return kept


def node_object(node: dict[str, Any]) -> dict[str, Any]:
    """A node of ``GET /clusters/{name}/nodes/`` as the v1 Node a repository holds (what
    the engine reads: name, labels, allocatable, conditions)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node["name"], "labels": node.get("labels") or {}},
        "status": {
            "allocatable": node.get("allocatable") or {},
            "conditions": node.get("conditions") or [],
        },
    }


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _plan(args: argparse.Namespace, *, dry_run: bool, force: bool = False) -> dict[str, Any]:
    repo = load_repository(args.dir)  # bad input is named with file and line before any call
    client = Client(args.url)
    return client.apply(repo.policy_set(), dry_run=dry_run, prune=args.prune, force=force)


def _print_plan(plan: dict[str, Any], out: TextIO) -> bool:
    """The plan in words; True when it changes anything."""
    changes = False
    for key, sign in (("created", "+"), ("changed", "~"), ("deleted", "-")):
        for entry in plan.get(key, []):
            changes = True
            print(f"{sign} {entry['kind']} {entry['name']}", file=out)
            for change in entry.get("diff", []):
                print(
                    f"    {change['path']}: {json.dumps(change['old'])} -> "
                    f"{json.dumps(change['new'])}",
                    file=out,
                )
    for warning in plan.get("warnings", []):
        print(f"! warning: {warning.get('name')}: {warning.get('message')}", file=out)
    for broken in plan.get("broken_expectations", []):
        print(
            f"! would break expectation {broken['name']} in {broken['cluster']}: "
            f"{broken['message']}",
            file=out,
        )
    unchanged = len(plan.get("unchanged", []))
    verb = "would change" if plan.get("dry_run") else "changed"
    if changes:
        print(f"({unchanged} unchanged)", file=out)
    else:
        print(
            f"nothing {verb.split()[-1]}d" if False else f"no changes ({unchanged} unchanged)",
            file=out,
        )
    return changes


def _cmd_diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    changes = _print_plan(_plan(args, dry_run=True), out)
    return FAILED if changes else OK


def _cmd_apply(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        plan = _plan(args, dry_run=args.dry_run, force=args.force)
    except ApiError as exc:
        if exc.status == 409 and isinstance(exc.body, dict):
            print(
                "refused: the change breaks expectations that pass now (--force applies "
                "it anyway); nothing was written",
                file=err,
            )
            for broken in exc.body.get("broken_expectations", []):
                print(
                    f"  {broken.get('name')} in {broken.get('cluster')}: {broken.get('message')}",
                    file=err,
                )
            return FAILED
        raise
    if "proposal" in plan:  # 202: held for approvals (the portal's change control)
        print(f"held: {plan.get('detail')} Nothing was written.", file=err)
        print(f"  review it at {plan['proposal']}", file=err)
        return FAILED
    _print_plan(plan, out)
    return OK


def _cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    documents = read_yaml(args.pod, str(args.pod))
    if len(documents) != 1:
        raise BadInput([Problem(str(args.pod), 0, 0, "", "Must hold exactly one v1 Pod.")])
    client = Client(args.url)
    result = client.simulate(documents[0].data, args.cluster)
    if args.json:
        print(json.dumps(result, indent=2), file=out)
        return OK
    pod = result["pod"]
    active = ", ".join(f"{p['name']} ({p['mode']})" for p in result["policies"]) or "none"
    print(f"pod {pod['namespace']}/{pod['name']} in cluster {result['cluster']}", file=out)
    print(f"policies: {active}", file=out)
    summary = result["summary"]
    print(
        f"nodes: {summary['passed']} pass, {summary['rejected']} rejected of {summary['nodes']}"
        f" ({summary['dry_run_would_reject']} more with dry-run policies)",
        file=out,
    )
    for node in result["nodes"]:
        if node["passed"]:
            print(f"  PASS {node['name']}  score {node['score']}", file=out)
        else:
            print(f"  FAIL {node['name']}  {node['wire_reason']}", file=out)
            for reason in node["reasons"][1:]:
                print(f"         also: {reason['message']}", file=out)
    return OK
