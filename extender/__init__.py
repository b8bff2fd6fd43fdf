"""The kube-scheduler facing extender: wire format, snapshot holder, handler, metrics."""
