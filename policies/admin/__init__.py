"""Admin for policies (with inline rules), label assignments and policy versions.

Every write goes through ``policies.services``, like the REST API's.
"""

from policies.admin import assignment, policy, version

__all__ = ["assignment", "policy", "version"]
