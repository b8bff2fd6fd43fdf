"""A slow stand-in for the decision log's store, for the writer process's tests
(``manage.py decision_writer --store tests.decisions.fake_decision_store``).

Each stored record is one JSON line in ``$FAKE_STORE_FILE`` (cluster, pod name, number of
rejected nodes, candidates, labels, requests); each batch takes ``$FAKE_STORE_SECONDS``; the
per-hour counts go to ``$FAKE_STORE_FILE.counts``.
"""

from __future__ import annotations

import os
import time

import orjson

from decisions.records import CallRecord


def write_batch(batch: list[tuple[float, CallRecord]]) -> int:
    time.sleep(float(os.environ.get("FAKE_STORE_SECONDS", "0")))
    lines = [
        orjson.dumps(
            {
                "cluster": call.cluster,
                "pod": call.pod_name,
                "rejected": len(call.rejected),
                "candidates": call.candidates,
                "labels": call.pod_labels,
                "requests": call.pod_requests,
            }
        )
        + b"\n"
        for _, call in batch
    ]
    with open(os.environ["FAKE_STORE_FILE"], "ab") as out:
        out.write(b"".join(lines))
    return len(batch)


def write_counts(rows: list[tuple[int, str, int, int, int, int]]) -> None:
    with open(os.environ["FAKE_STORE_FILE"] + ".counts", "ab") as out:
        out.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))
