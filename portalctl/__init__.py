"""portalctl: test policies offline in CI, and export, diff and apply them through the API.

Offline work uses only the engine (the standard library) and PyYAML; online work uses the
REST API with a token (docs/portalctl.md).
"""
