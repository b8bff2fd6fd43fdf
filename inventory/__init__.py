"""Clusters and node inventory: models, Kubernetes client, sync and import services."""
