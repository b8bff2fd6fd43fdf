"""Scheduling Policy Portal: project package (settings, URLs, Celery app, WSGI entry)."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
