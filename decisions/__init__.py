"""The decision log: one record per extender call and per own-scheduler attempt
(docs/architecture.md, "The decision log" and "The decision log's write path").

Both binders build a ``records.CallRecord`` and hand it to ``log.submit``, which never blocks:
the record goes to the writer (``writer``; in a child process over ``channel``, or a thread),
which stores batches through ``store`` — compact rows (``dimensions``, ``codec``; on PostgreSQL in
a table partitioned by day, ``partitions``, filled with ``COPY``) and the hourly ``rollups``.
``queries`` reads them back (a decision's nodes and reasons, "why not node Y", search by pod or
node, estimated counts) for the ``admin``, the ``api`` and the console; ``retention`` (the hourly
task in ``tasks``) drops the days past retention.

The app's label is ``extender`` (``apps``): the tables and migrations keep the name they were
created under.
"""
