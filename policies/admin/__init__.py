"""Admin for policies (with inline rules), label assignments and policy versions.

Every write goes through ``policies.services``, like the REST API's.
"""

from policies.admin import assignment, expectation, policy, version

__all__ = ["assignment", "expectation", "policy", "version"]
