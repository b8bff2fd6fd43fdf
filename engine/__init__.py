"""Pure-Python policy engine primitives: labels, selectors, quantities, globs, label assignments.

Nothing in this package may import Django (or anything outside the standard library): the
extender's hot path and the tests use it without a configured Django project.
"""
