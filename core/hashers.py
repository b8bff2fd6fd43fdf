"""The portal's password hasher: Argon2id at OWASP's recommended cost.

Django's ``Argon2PasswordHasher`` is Argon2id, but its defaults (``memory_cost=102400`` KiB,
``time_cost=2``, ``parallelism=8``) trade CPU for memory differently from what OWASP's password
storage cheat sheet recommends as the baseline (m=19 MiB, t=2, p=1). This subclass uses that
baseline: a hash costs a few tens of milliseconds of one core instead of the ~0.25 s of
PBKDF2-SHA256 at Django 5.2's 1,000,000 iterations, while being memory-hard, so a login stays
fast on a loaded machine without weakening what an attacker with a stolen table must spend.

Passwords stored under the earlier default (PBKDF2) keep verifying: ``settings.PASSWORD_HASHERS``
lists the PBKDF2 hashers after this one, and Django re-hashes a password with the first hasher
of the list at the user's next successful login. Changing a parameter here does the same: a hash
whose parameters differ reports ``must_update`` and is upgraded at the next login.
"""

from __future__ import annotations

from django.contrib.auth.hashers import Argon2PasswordHasher


class PortalArgon2idHasher(Argon2PasswordHasher):
    """Argon2id, m=19 MiB, t=2, p=1 (OWASP's baseline). Stored hashes name ``argon2``."""

    time_cost = 2
    memory_cost = 19 * 1024  # KiB
    parallelism = 1
