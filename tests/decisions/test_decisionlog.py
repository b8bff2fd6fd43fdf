"""The decision log's storage and reads: every rejected node recoverable with its why, node sets
encoded compactly, rollups, retention by day, one search box, estimated counts, pages that use
their indexes (EXPLAIN, PostgreSQL) and make a bounded number of queries."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from decisions import codec, partitions, queries, rollups, store
from decisions.admin import DecisionAdmin
from decisions.models import Decision, DecisionNode, DecisionRollup
from decisions.records import CallRecord
from decisions.retention import decisions_purge
from tests.factories import load_nodes, make_cluster, make_policy, node_object

pytestmark = pytest.mark.django_db


def call(**fields) -> CallRecord:
    values = {
        "verb": "filter",
        "cluster": "c1",
        "mode": "names",
        "pod_namespace": "ml",
        "pod_name": "trainer-0",
        "pod_uid": "uid-0",
        "nodes_in": 3,
        "nodes_out": 1,
        "duration_seconds": 0.001,
        "snapshot_revision": 1,
    }
    values.update(fields)
    return CallRecord(**values)


def write(*calls: CallRecord, at: datetime | None = None) -> list[Decision]:
    moment = (at or timezone.now()).timestamp()
    assert store.write_batch([(moment, c) for c in calls]) == len(calls)
    return list(Decision.objects.order_by("-id")[: len(calls)])[::-1]


# --- encodings -----------------------------------------------------------------------------


def test_reason_runs_and_ranges_round_trip() -> None:
    pairs = [(5, 1), (9, 2), (7, 1), (3, 2), (4, 3)]
    nodes, runs = codec.group_by_reason(pairs)
    assert runs == [1, 2, 2, 2, 3, 1]
    assert sorted(codec.ungroup(nodes, runs)) == sorted(pairs)
    ids = [10, 11, 12, 13, 40, 41, 7]
    assert codec.to_ranges(ids) == [7, 8, 10, 14, 40, 42]
    assert codec.from_ranges(codec.to_ranges(ids)) == sorted(ids)
    assert codec.wire_reasons('p/r (node has "A10G"); q/s (no label)') == ["p/r", "q/s"]


@given(st.lists(st.integers(min_value=-(2**40), max_value=2**40), max_size=80))
@settings(max_examples=300, deadline=None)
def test_packing_round_trips_any_ints(values: list[int]) -> None:
    packed = codec.pack(values)
    assert codec.unpack(packed) == values
    assert codec.unpack(packed[:-1]) == values[:-1]  # a value cut short is dropped, not misread


def test_48_rejected_of_500_candidates_pack_into_about_a_byte_each() -> None:
    ids = sorted(1000 + (7 + k * 10) % 500 for k in range(48))
    assert len(codec.pack(ids)) <= 2 + 48  # the first id takes 2 bytes, every step 1
    assert len(codec.pack(codec.to_ranges(range(4800, 5300)))) <= 4


@pytest.mark.skipif(connection.vendor != "postgresql", reason="decision_node_ids is PostgreSQL's")
@given(st.lists(st.integers(min_value=1, max_value=2**40), max_size=60))
@settings(max_examples=100, deadline=None)
def test_postgresql_reads_packed_ids_as_python_does(values: list[int]) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT decision_node_ids(%s::bytea)", [codec.pack(values)])
        (ids,) = cursor.fetchone()
    assert ids == values


def _stored(decision: Decision, column: str = "candidates") -> bytes:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM extender_decision WHERE id = %s", [decision.pk])
        (value,) = cursor.fetchone()
    return bytes(value or b"")


def test_candidates_in_scheduler_order_become_a_few_ranges() -> None:
    names = [f"node-{i:04d}" for i in range(500)]
    (row,) = write(call(nodes_in=500, nodes_out=500, candidates=names))
    assert len(_stored(row)) <= 4  # one range
    assert len(row.candidates) == 500
    window = names[250:] + [f"node-{i:04d}" for i in range(500, 750)]
    (row,) = write(call(nodes_in=500, nodes_out=500, candidates=window))
    assert len(_stored(row)) <= 4
    assert row.candidates == sorted(row.candidates)
    assert queries.decode(row).candidates == sorted(window)


def test_candidates_in_any_order_are_stored_small_and_read_back() -> None:
    names = [f"node-{i:04d}" for i in range(5000)]
    write(call(nodes_in=5000, nodes_out=5000, candidates=names))  # ids in this order
    rng = random.Random(5)
    picked = rng.sample(names, 500)
    (row,) = write(call(nodes_in=500, nodes_out=500, candidates=picked))
    assert len(_stored(row)) <= 320  # Rice-coded gaps, ~4.8 bits an id (ranges: ~900 B)
    assert queries.decode(row).candidates == sorted(picked)
    most = [n for i, n in enumerate(names[1000:1560]) if i % 10]
    (row,) = write(call(nodes_in=504, nodes_out=504, candidates=most))
    assert len(_stored(row)) <= 80  # a bitmap (ranges: ~100 B)
    assert queries.decode(row).candidates == sorted(most)
    (row,) = write(call(nodes_in=0, nodes_out=0, candidates=[]))
    assert _stored(row) == b""
    assert row.candidates == []


def test_raw_candidates_group_and_decode_without_the_field() -> None:
    from django.db.models import Count

    names = [f"node-{i:04d}" for i in range(50)]
    write(call(candidates=names))
    sets = [names[::3], names[::3], names[1::7]]
    rows = write(*(call(candidates=s) for s in sets))
    raw = Decision.objects.filter(pk__in=[r.pk for r in rows]).values(raw=queries.raw_candidates())
    grouped = sorted(
        (codec.candidate_ids(row["raw"]), row["calls"])
        for row in raw.annotate(calls=Count("id")).order_by()
    )
    assert grouped == sorted([(rows[0].candidates, 2), (rows[2].candidates, 1)])
    assert all(isinstance(row["raw"], bytes | memoryview) for row in raw)


def test_candidates_stored_as_ranges_before_still_read() -> None:
    (row,) = write(call(candidates=[f"node-{i}" for i in range(3)]))
    ids = row.candidates
    legacy = codec.pack(codec.to_ranges([ids[0], ids[2]]))  # as rows were written before
    Decision.objects.filter(pk=row.pk).update(candidates=legacy)
    again = Decision.objects.get(pk=row.pk)
    assert again.candidates == [ids[0], ids[2]]
    assert queries.decode(again).candidates == ["node-0", "node-2"]


# --- why not node Y --------------------------------------------------------------------------


def test_every_one_of_5000_rejected_nodes_answers_why_not() -> None:
    reasons = ["gpu-only/needs an A100", "zones/only zone a", "avoid-spot/no spot"]
    rejected = [(f"node-{i:05d}", reasons[i % 3]) for i in range(5000)]
    (row,) = write(
        call(
            nodes_in=5001,
            nodes_out=1,
            rejected=rejected,
            dry_run_rejected=[("node-00001", "spread/x (zone b)")],
            policy_versions={"gpu-only": 2, "zones": 1, "avoid-spot": 4},
        )
    )
    assert row.rejected_count == 5000
    assert len(row.rejected_nodes) == 5000
    assert len(row.rejected_reasons) == 6  # three (reason, run) pairs, not 5,000 reasons
    whys = {w.node: w for w in queries.why_not_all(row)}
    for name, reason in rejected:
        assert whys[name].reason == reason
        assert whys[name].detail.startswith(reason)
    assert whys["node-00001"].dry_run == "spread/x"
    for name, reason in rejected[::997]:
        assert queries.why_not(row, name).reason == reason
    assert queries.why_not(row, "node-99999").reason == ""


def test_why_not_is_re_derived_from_the_recorded_policy_version() -> None:
    cluster = make_cluster("c1")
    load_nodes(
        cluster, [node_object("a100-1", {"gpu": "A100"}), node_object("t4-1", {"gpu": "T4"})]
    )
    policy = make_policy(
        "gpu-only",
        filter_rules=[{"kind": "label", "key": "gpu", "operator": "In", "values": ["A100"]}],
    )
    label = queries.Explainer("c1", {"gpu-only": policy.version})._policy_checks("gpu-only")
    (rule,) = label
    (row,) = write(
        call(
            rejected=[("t4-1", f"gpu-only/{rule}")],
            policy_versions={"gpu-only": policy.version},
        )
    )
    why = queries.why_not(row, "t4-1")
    assert why.reason == f"gpu-only/{rule}"
    assert "T4" in why.detail
    assert f"gpu-only v{policy.version}" in why.detail


# --- rollups and the dry-run answer ----------------------------------------------------------


def test_rollups_count_calls_rules_and_calls_a_dry_run_policy_would_strand() -> None:
    now = timezone.now()
    write(
        # Enforced rejects 1 of 3; the dry-run policy would reject both of the others: stranded.
        call(
            pod_name="stranded",
            nodes_in=3,
            nodes_out=2,
            rejected=[("n1", "zones/only a")],
            dry_run_rejected=[("n2", "spot/no spot (spot=true)"), ("n3", "spot/no spot (x)")],
        ),
        # The dry-run policy would reject one of two passing nodes: not stranded.
        call(
            pod_name="fine",
            nodes_in=3,
            nodes_out=2,
            rejected=[("n1", "zones/only a")],
            dry_run_rejected=[("n2", "spot/no spot (spot=true)")],
        ),
        call(
            pod_name="refused",
            nodes_in=2,
            nodes_out=0,
            rejected=[("n1", "zones/only a"), ("n2", "zones/only a")],
        ),
        call(verb="prioritize", nodes_in=2, nodes_out=2, top_scores=[("n1", 10)]),
    )
    traffic = rollups.traffic(now)
    assert traffic["totals"] == {
        "calls_hour": 4,
        "calls_day": 4,
        "filters_day": 3,
        "refused_day": 1,
    }
    assert traffic["top_rules"] == [("zones/only a", 4)]
    report = rollups.dry_run("spot", now)
    # One row per rule, whatever each node has.
    assert [(r["reason"], r["day"], r["calls"]) for r in report["rules"]] == [
        ("spot/no spot", 3, 2)
    ]
    assert report["calls"] == 2
    assert report["stranded"]["day"] == 1
    assert report["stranded"]["pods"] == ["ml/stranded"]


def test_the_pages_read_rollups_not_the_decision_table(admin_client: Client) -> None:
    make_policy("spot", mode="dry-run")
    write(call(dry_run_rejected=[("n2", "spot/no spot")], nodes_out=1, rejected=[("n1", "z/a")]))
    for path in ("/admin/", "/admin/dry-run/spot/"):
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(path).status_code == 200
        tables = " ".join(q["sql"] for q in captured.captured_queries)
        assert '"extender_decision"' not in tables
        assert "extender_decision " not in tables
        assert "extender_decisionrollup" in tables


def test_the_dry_run_page_says_whether_a_pod_would_be_left_with_no_node(admin_client) -> None:
    make_policy("spot", mode="dry-run")
    page = admin_client.get("/admin/dry-run/spot/").content.decode()
    assert "No: in the last 24 hours every filter call would still have had a node." in page
    write(call(pod_name="web-1", nodes_out=1, dry_run_rejected=[("n2", "spot/no spot")]))
    page = admin_client.get("/admin/dry-run/spot/").content.decode()
    assert "<strong>Yes: 1</strong> filter call in 24 h" in page
    assert "ml/web-1" in page


# --- retention -------------------------------------------------------------------------------


def test_retention_removes_whole_days_and_keeps_the_rest() -> None:
    now = datetime.now(UTC)
    for days in (10, 9, 8, 6, 0):
        write(call(pod_name=f"d{days}"), at=now - timedelta(days=days))
    removed = decisions_purge(older_than_days=7)
    assert removed == 3
    assert sorted(Decision.objects.values_list("pod_name", flat=True)) == ["d0", "d6"]
    assert not DecisionRollup.objects.filter(hour__lt=now - timedelta(days=8)).exists()
    assert DecisionRollup.objects.filter(hour__lt=now - timedelta(days=5)).exists()


@pytest.mark.skipif(
    not partitions.is_partitioned(), reason="partitions are PostgreSQL's: set DATABASE_URL"
)
def test_retention_drops_partitions_on_postgresql() -> None:
    now = datetime.now(UTC)
    for days in (9, 8, 1, 0):
        write(call(pod_name=f"d{days}"), at=now - timedelta(days=days))
    names = partitions.existing()
    old = {n for n, day in names.items() if day <= (now - timedelta(days=8)).date()}
    assert len(old) == 2
    removed, dropped = partitions.drop_before(now - timedelta(days=7))
    assert set(dropped) == old
    assert removed == 2
    assert not set(partitions.existing()) & old
    assert sorted(Decision.objects.values_list("pod_name", flat=True)) == ["d0", "d1"]
    # Partitions are created ahead, and again when a late row needs one.
    assert (
        partitions.partition_name((now + timedelta(days=2)).date()) in partitions.ensure_ahead(2)
        or partitions.partition_name((now + timedelta(days=2)).date()) in partitions.existing()
    )
    write(call(pod_name="late"), at=now - timedelta(days=9))
    assert Decision.objects.filter(pod_name="late").exists()


# --- search, list, counts --------------------------------------------------------------------


def test_one_search_box_takes_a_pod_or_a_node(admin_client: Client) -> None:
    write(
        call(pod_name="web-7f9c-abcde", rejected=[("gpu-node-1", "z/a")]),
        call(pod_name="batch-1", top_scores=[("cpu-node-1", 10)], verb="prioritize"),
        call(pod_name="web-other", pod_namespace="shop"),
    )

    def listed(query: str) -> str:
        page = admin_client.get(f"/admin/extender/decision/?q={query}")
        assert page.status_code == 200
        return page.content.decode()

    body = listed("gpu-node-1")
    assert "ml/web-7f9c-abcde" in body
    assert "batch-1" not in body
    body = listed("cpu-node-1")
    assert "ml/batch-1" in body
    assert "web-7f9c" not in body
    body = listed("web-")
    assert "ml/web-7f9c-abcde" in body
    assert "shop/web-other" in body
    assert "batch-1" not in body
    body = listed("shop/web")
    assert "shop/web-other" in body
    assert "ml/web-7f9c" not in body
    assert DecisionNode.objects.filter(name="gpu-node-1").exists()


def test_counts_are_capped_not_counted(monkeypatch: pytest.MonkeyPatch, admin_client) -> None:
    monkeypatch.setattr(queries, "COUNT_CAP", 5)
    write(*(call(pod_name=f"p{i}") for i in range(12)))
    assert queries.capped_count(Decision.objects.filter(pod_name__startswith="p"), 5) == 6
    assert queries.capped_count(Decision.objects.filter(pod_name="p3"), 5) == 1


def test_the_list_and_decision_pages_make_a_bounded_number_of_queries(
    admin_client: Client, django_assert_max_num_queries
) -> None:
    write(call(rejected=[(f"n{i}", "z/a") for i in range(3)]))
    with django_assert_max_num_queries(40) as small:
        admin_client.get("/admin/extender/decision/")
    row = Decision.objects.get()
    with django_assert_max_num_queries(40) as small_page:
        admin_client.get(f"/admin/extender/decision/{row.pk}/change/")
    write(
        *(
            call(pod_name=f"p{i}", rejected=[(f"n{j}", f"z/r{j % 7}") for j in range(300)])
            for i in range(150)
        )
    )
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert admin_client.get("/admin/extender/decision/").status_code == 200
    big = Decision.objects.order_by("-id").first()
    with django_assert_max_num_queries(len(small_page.captured_queries)):
        page = admin_client.get(f"/admin/extender/decision/{big.pk}/change/")
    assert page.content.decode().count("<td>n299</td>") == 1
    with django_assert_max_num_queries(12):
        response = admin_client.get("/api/v1/decisions/?limit=100")
    assert len(response.json()["results"]) == 100
    assert len(response.json()["results"][0]["rejected"]) == 300


def test_the_list_page_reads_no_node_set(admin_client: Client) -> None:
    write(call(candidates=[f"n{i}" for i in range(0, 900, 3)], rejected=[("n3", "z/a")]))
    with CaptureQueriesContext(connection) as captured:
        page = admin_client.get("/admin/extender/decision/")
    assert page.status_code == 200
    assert "trainer-0" in page.content.decode()
    rows = [q["sql"] for q in captured if 'FROM "extender_decision"' in q["sql"]]
    assert rows, "the list reads the decisions"
    for column in DecisionAdmin.NODE_SETS:
        assert not any(f'"extender_decision"."{column}"' in sql for sql in rows), column
    # The decision's own page reads them all.
    row = Decision.objects.get()
    with CaptureQueriesContext(connection) as captured:
        admin_client.get(f"/admin/extender/decision/{row.pk}/change/")
    assert any('"extender_decision"."candidates"' in q["sql"] for q in captured)


# --- EXPLAIN (PostgreSQL) --------------------------------------------------------------------

needs_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="EXPLAIN plans are PostgreSQL's: set DATABASE_URL"
)


def _plans_of(client: Client, path: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    plans = []
    with connection.cursor() as cursor:
        # With sequential scans priced out, a plan that still has one has no index to use.
        cursor.execute("SET LOCAL enable_seqscan = off")
        for query in captured.captured_queries:
            sql = query["sql"]
            if "extender_decision" not in sql or not sql.lstrip().upper().startswith("SELECT"):
                continue
            if "extender_decisionnode" in sql and 'extender_decision".' not in sql.replace(
                "extender_decisionnode", ""
            ):
                continue
            cursor.execute("EXPLAIN " + sql)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
        cursor.execute("SET LOCAL enable_seqscan = on")
    return plans


@needs_postgresql
@pytest.mark.parametrize(
    "path",
    [
        "/admin/extender/decision/",
        "/admin/extender/decision/?q=node-7",
        "/admin/extender/decision/?q=web-",
        "/admin/extender/decision/?node=node-7&cluster=c1",
        "/admin/extender/decision/?outcome=no-nodes",
        "/api/v1/decisions/?pod=web-3",
        "/api/v1/decisions/?node=node-7",
    ],
)
def test_pages_use_their_indexes(admin_client: Client, path: str) -> None:
    write(
        *(
            call(
                pod_name=f"web-{i}",
                rejected=[(f"node-{j}", "z/a") for j in range(i % 10)],
                nodes_out=0 if i % 5 == 0 else 1,
            )
            for i in range(200)
        )
    )
    plans = _plans_of(admin_client, path)
    assert plans, "the page read no decision"
    for plan in plans:
        assert "Seq Scan on extender_decision_p" not in plan, plan
        assert "Seq Scan on extender_decision " not in plan, plan


@needs_postgresql
@pytest.mark.parametrize(
    "path", ["/admin/extender/decision/?q=node-7", "/api/v1/decisions/?node=node-7"]
)
def test_node_search_goes_through_the_gin_index_of_packed_node_sets(
    admin_client: Client, path: str
) -> None:
    write(*(call(pod_name=f"web-{i}", rejected=[(f"node-{i % 10}", "z/a")]) for i in range(200)))
    plans = [plan for plan in _plans_of(admin_client, path) if "decision_node_ids" in plan]
    assert plans, "no query looked for the node"
    for plan in plans:
        # A scan of the primary key filtering every row would also avoid "Seq Scan": the node
        # must be the condition of a scan of the partition's GIN index.
        assert "Bitmap Index Scan on extender_decision_p" in plan, plan
        conditions = [line for line in plan.splitlines() if "Index Cond:" in line]
        assert any("decision_node_ids" in line for line in conditions), plan


@needs_postgresql
def test_the_decision_page_uses_the_primary_key(admin_client: Client) -> None:
    (row,) = write(call(rejected=[("node-1", "z/a")]))
    for plan in _plans_of(admin_client, f"/admin/extender/decision/{row.pk}/change/"):
        assert "Seq Scan on extender_decision_p" not in plan, plan
