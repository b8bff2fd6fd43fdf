"""The decision log's storage and reads (docs/architecture.md, "The decision log").

``store`` turns extender calls into compact rows (one per call, on PostgreSQL in a table
partitioned by day and filled with ``COPY``) and keeps the hourly rollups; ``queries`` reads them
back (a decision's nodes and reasons, "why not node Y", search by pod or node, estimated counts);
``rollups`` answers the dashboard and the dry-run report; ``partitions`` creates and drops the
daily partitions (retention).
"""
