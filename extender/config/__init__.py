"""Generated configuration: kube-scheduler's (the extender stanza, the native profile), the
manifests that run it, and the admission webhook's (docs/scheduler-config.md, docs/admission.md).
"""
