"""Policies, label assignments, versions; services are the only writers."""
