"""The admission webhook: ``POST /admission/<cluster>/mutate`` on the extender's own server.

kube-apiserver sends an ``admission.k8s.io/v1`` AdmissionReview for each new pod; the answer,
from the snapshot in memory with no database access, allows it and carries a JSON Patch that
writes the policies' compilable rules into the pod's node affinity (docs/admission.md).
``review`` decodes and encodes the wire format, ``handler`` serves it, ``metrics`` counts it;
what the patch is comes from the engine (``engine.admission``).
"""
