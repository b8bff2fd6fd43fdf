"""A process of the ledger race test (``tests/resources/test_ledger_race.py``): a binder or the
pod watcher, on its own database connection, driven over stdin one trial at a time.

Run as ``python -m tests.resources.ledger_race binder|watcher CLUSTER_ID NODE``; each line
``go TRIAL PODS DEADLINE`` starts a trial (``PODS``: the comma-separated pod names this binder
tries), and the process answers one JSON line when the deadline has passed:

- a binder reserves each of its pods on ``NODE`` through the ledger, trying again those
  refused, until the deadline; it answers the pods it reserved (each a Binding made);
- the watcher plays the pod inventory catching up: every reservation it finds, it writes the
  pod as bound to its node (``pods_apply``, which confirms the reservation), one pod per
  write; it answers how many it confirmed.
"""

from __future__ import annotations

import os
import sys
import time

import orjson


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.db import connection

    from inventory.models import Cluster
    from inventory.pod_records import pod_record
    from inventory.pod_services import pods_apply
    from resources.ledger import InsufficientCapacity, PodRef, reserve
    from resources.models import Reservation
    from tests.resources.support import LICENSE, pod_object

    role, cluster_id, node = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cluster = Cluster.objects.get(pk=cluster_id)
    print(orjson.dumps({"ready": role}).decode(), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "go":
            break
        pods = [p for p in words[2].split(",") if p]
        deadline = float(words[3])
        if role == "binder":
            reserved: list[str] = []
            waiting = list(pods)
            while time.time() < deadline and waiting:
                for pod in list(waiting):
                    ref = PodRef("ml", pod, f"uid-{pod}", {LICENSE: 1})
                    try:
                        reserve(cluster, ref, node)
                    except InsufficientCapacity:
                        continue
                    reserved.append(pod)
                    waiting.remove(pod)
            while time.time() < deadline:
                time.sleep(0.01)
            print(orjson.dumps({"reserved": reserved}).decode(), flush=True)
        else:
            confirmed = 0
            while time.time() < deadline:
                held = list(
                    Reservation.objects.filter(cluster=cluster).values_list("pod_name", "node")
                )
                for pod, at in held:
                    record = pod_record(pod_object(pod, node=at))
                    assert record is not None
                    pods_apply(cluster=cluster, records=[record])
                    confirmed += 1
                if not held:
                    time.sleep(0.0005)
            print(orjson.dumps({"confirmed": confirmed}).decode(), flush=True)
    connection.close()


if __name__ == "__main__":
    main()
