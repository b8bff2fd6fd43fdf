"""The verbs, spelled once: kube-scheduler's extender verbs and the own scheduler's.

Every place that names them reads this module: the extender's server (its routes), the generated
scheduler configuration, the metrics (which label values are known), the decision log's admin
filter and API filter, and the reserved cluster names (a cluster named like a verb would make
``/extender/<verb>`` ambiguous; the database refuses those names too).
"""

from __future__ import annotations

FILTER = "filter"
PRIORITIZE = "prioritize"
PREEMPT = "preempt"
BIND = "bind"
# The own scheduler's attempts, as the decision log records them.
SCHEDULE = "schedule"

# kube-scheduler's extender verbs, in the order its configuration lists them
# (``/extender/<cluster>/<verb>``).
EXTENDER_VERBS = (FILTER, PRIORITIZE, PREEMPT, BIND)
# What a generated scheduler configuration uses unless asked for more (bind is opt-in).
DEFAULT_EXTENDER_VERBS = (FILTER, PRIORITIZE, PREEMPT)
# The verbs of the decision log's rows: the extender's and the own scheduler's.
RECORDED_VERBS = (*EXTENDER_VERBS, SCHEDULE)
# The verbs that judge a pod against candidate nodes and can leave it with none.
NODE_CHOOSING_VERBS = (FILTER, SCHEDULE)
# Cluster names that would collide with a verb in the extender's URLs.
RESERVED_CLUSTER_NAMES = frozenset(EXTENDER_VERBS)
