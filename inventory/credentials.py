"""The one checked loader of cluster credentials (docs/operations.md, "Cluster credentials").

A cluster's settings never carry credentials, only where they are: a *name* in the
operator-provisioned directory ``KUBECONFIG_DIR`` (in Kubernetes a mounted Secret), or the
pod's in-cluster service account. A name is one file-name component; what it names is
resolved and must stay inside the directory, be a regular file and small:

* a file is a kubeconfig. Only the chosen context's cluster and user are used; the files they
  refer to (``certificate-authority``, ``client-certificate``, ``client-key``, ``tokenFile``)
  must lie inside the directory too and are read here, once, and handed to the client inline,
  so the client itself opens no path a kubeconfig names;
* a directory is a token/CA pair: ``server`` (an ``https://`` URL), ``token`` and ``ca.crt``.

A kubeconfig user that runs a command — ``exec``, or an ``auth-provider`` (gcp runs
``cmd-path`` or gcloud) — is refused unless ``KUBECONFIG_ALLOWED_COMMANDS`` names the command
(``KUBECONFIG_ALLOWED_AUTH_PROVIDERS`` the provider), so nothing an editor can write makes the
portal run a program. Every refusal that depends on the file system says the same thing, "not
an allowed kubeconfig", whether the file exists or not; the reason goes to the portal's log.

An allowed command's environment is an allowlist too. The variables a kubeconfig's
``exec.env`` sets must be named in ``KUBECONFIG_EXEC_ENV`` (e.g. ``AWS_PROFILE``), and names
that change which code runs or where it reads its settings (``LD_*``, ``PATH``, ``PYTHON*``,
``NODE_OPTIONS``, ``HOME``, proxies, ...) are refused even when listed. From the portal's own
environment the command inherits only ``PATH``, ``HOME``, the locale, ``TZ`` and ``TMPDIR`` and
the names in ``KUBECONFIG_EXEC_ENV`` (IRSA's ``AWS_ROLE_ARN`` and ``AWS_WEB_IDENTITY_TOKEN_FILE``,
say) — never ``SECRET_KEY``, ``DATABASE_URL`` or anything else the portal holds.

``KUBECONFIG_DEFAULT_LOOKUP`` (off unless a local operator turns it on) lets an empty name mean
the process's own ``KUBECONFIG`` / ``~/.kube/config``, as the client would find it, with the
same command checks but with file references left where that operator keeps them.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from kubernetes import client, config
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.exec_provider import ExecProvider

logger = logging.getLogger(__name__)

# One file-name component: no '/', no leading '.' (so never '..' nor a Secret volume's
# '..data'), no ':' (a KUBECONFIG list), nothing a shell or YAML would read specially.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
NAME_HELP = (
    "Must be the name of a kubeconfig (or of a token/CA directory) in KUBECONFIG_DIR: letters, "
    "digits, '.', '-' and '_', starting with a letter or digit; not a path."
)
# Larger than any real kubeconfig or certificate; bounds what a mistaken name makes us read.
MAX_FILE_BYTES = 1024 * 1024
# Names of an exec plugin's environment that would change which code runs, or which files and
# hosts it trusts: refused in a kubeconfig even when KUBECONFIG_EXEC_ENV lists them.
FORBIDDEN_EXEC_ENV = re.compile(
    r"(LD_|DYLD_|PYTHON|PERL|RUBY|NODE_|NPM_|JAVA|_JAVA|JDK_|GCONV|GIT_|BASH_|SSL_|CURL_|"
    r"REQUESTS_|GODEBUG|GOFLAGS|XDG_|KUBE).*|.*_PROXY|PATH|ENV|HOME|SHELL|SHELLOPTS|IFS|"
    r"PS4|TMPDIR|LOCPATH|NLSPATH|HOSTALIASES|RES_OPTIONS|LOCALDOMAIN|MALLOC_.*|"
    r"AWS_CONFIG_FILE|AWS_SHARED_CREDENTIALS_FILE|AWS_CA_BUNDLE|CLOUDSDK_CONFIG",
    re.IGNORECASE,
)
# What an allowed command inherits from the portal's environment besides KUBECONFIG_EXEC_ENV.
EXEC_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
# file key -> the key that carries the same content inline (base64, except the token).
CLUSTER_FILES = {"certificate-authority": "certificate-authority-data"}
USER_FILES = {
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
    "tokenFile": "token",
}
TOKEN_PAIR_FILES = ("server", "token", "ca.crt")


class CredentialsRefused(Exception):
    """The cluster's credential settings are not allowed; the message is safe to show."""


def name_errors(name: str) -> list[str]:
    """Why ``name`` cannot name credentials in KUBECONFIG_DIR (empty when it can).

    Syntax only: it says nothing about what the directory holds."""
    if not name:
        return []
    if not NAME_PATTERN.match(name):
        return [NAME_HELP]
    return []


def not_allowed(name: str) -> CredentialsRefused:
    return CredentialsRefused(
        f"{name!r} is not an allowed kubeconfig: name a file (or a token/CA directory) in "
        "KUBECONFIG_DIR that uses no command the portal does not allow; the portal's log "
        "says which rule refused it"
    )


def configure(
    configuration: client.Configuration, *, name: str, context: str, in_cluster: bool
) -> None:
    """Fill ``configuration`` from a cluster's credential settings, or raise
    CredentialsRefused. The only way the portal loads cluster credentials."""
    if in_cluster:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise CredentialsRefused(f"no in-cluster credentials here: {exc}") from None
        return
    if not name:
        if not settings.KUBECONFIG_DEFAULT_LOOKUP:
            raise CredentialsRefused(
                "no credentials named: set the cluster's kubeconfig to a name in "
                "KUBECONFIG_DIR, or use in-cluster credentials"
            )
        _load_dict(configuration, _default_lookup(context), name="(default lookup)")
        return
    problems = name_errors(name)
    if problems:
        raise CredentialsRefused(f"{name!r}: {problems[0]}")
    try:
        document = _named(name, context)
    except _Refusal as exc:
        logger.warning("kubeconfig %r refused: %s", name, exc)
        raise not_allowed(name) from None
    _load_dict(configuration, document, name=name)


class _Refusal(Exception):
    """Why a named kubeconfig was refused; logged, never shown."""


def _load_dict(configuration: client.Configuration, document: dict, *, name: str) -> None:
    try:
        config.load_kube_config_from_dict(
            document,
            client_configuration=configuration,
            # Never write refreshed credentials anywhere.
            persist_config=False,
        )
    except (ConfigException, ValueError, TypeError, KeyError, AttributeError) as exc:
        logger.warning("kubeconfig %r could not be loaded: %s", name, exc)
        raise CredentialsRefused(
            f"{name!r} is not a usable kubeconfig: {_first_line(exc)}"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# --- names in KUBECONFIG_DIR ----------------------------------------------------------------


def available_names(limit: int = 50) -> list[str] | None:
    """The names KUBECONFIG_DIR holds (files and token/CA directories, hidden entries such as a
    mounted Secret's ``..data`` left out), sorted; None when the directory cannot be read."""
    try:
        directory = _directory()
        names = sorted(
            entry.name for entry in directory.iterdir() if not entry.name.startswith(".")
        )
    except (_Refusal, OSError):
        return None
    return names[:limit]


def _directory() -> Path:
    try:
        return Path(settings.KUBECONFIG_DIR).resolve(strict=True)
    except OSError as exc:
        raise _Refusal(f"KUBECONFIG_DIR {settings.KUBECONFIG_DIR} is not readable: {exc}") from None


def _inside(directory: Path, path: Path) -> Path:
    """``path`` with every symlink resolved; refused unless it lies inside ``directory``."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise _Refusal(f"{path}: {type(exc).__name__}") from None
    if not resolved.is_relative_to(directory) or resolved == directory:
        raise _Refusal(f"{path} resolves to {resolved}, outside KUBECONFIG_DIR")
    return resolved


def _read_file(path: Path) -> bytes:
    """A regular file's bytes, at most MAX_FILE_BYTES; opened without following a symlink
    (the path is already resolved), so it is the file that was checked."""
    try:
        # O_NONBLOCK: a FIFO (or a device) must not hold the process waiting for a writer.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except OSError as exc:
        raise _Refusal(f"{path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _Refusal(f"{path} is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise _Refusal(f"{path} is larger than {MAX_FILE_BYTES} bytes")
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _Refusal(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    return data


def _named(name: str, context: str) -> dict:
    directory = _directory()
    target = _inside(directory, directory / name)
    if target.is_dir():
        return _token_pair(directory, target)
    raw = _read_file(target)
    try:
        document = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise _Refusal(f"{target} is not YAML: {_first_line(exc)}") from None
    return _checked(document, context, base=target.parent, confine_to=directory)


def _token_pair(directory: Path, folder: Path) -> dict:
    parts = {}
    for part in TOKEN_PAIR_FILES:
        parts[part] = _read_file(_inside(directory, folder / part))
    server = parts["server"].decode("utf-8", "replace").strip()
    if not server.startswith("https://") or any(c.isspace() for c in server):
        raise _Refusal(f"{folder}/server must hold one https:// URL")
    token = parts["token"].decode("utf-8", "replace").strip()
    if not token or any(c.isspace() for c in token):
        raise _Refusal(f"{folder}/token must hold one bearer token")
    return _document(
        {"server": server, "certificate-authority-data": _b64(parts["ca.crt"])},
        {"token": token},
    )


def _b64(data: bytes) -> str:
    return base64.standard_b64encode(data).decode("ascii")


def _document(cluster: Mapping[str, Any], user: Mapping[str, Any]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": dict(cluster)}],
        "users": [{"name": "user", "user": dict(user)}],
        "contexts": [{"name": "context", "context": {"cluster": "cluster", "user": "user"}}],
        "current-context": "context",
    }


# --- the content of a kubeconfig ------------------------------------------------------------


def _entry(document: Mapping[str, Any], section: str, name: Any, key: str) -> dict:
    entries = document.get(section)
    if not isinstance(entries, list):
        raise _Refusal(f"no {section} list")
    for item in entries:
        if isinstance(item, Mapping) and item.get("name") == name:
            value = item.get(key)
            if not isinstance(value, Mapping):
                raise _Refusal(f"{section} entry {name!r} has no {key} object")
            return dict(value)
    raise _Refusal(f"no {section} entry named {name!r}")


def _select(document: Any, context: str) -> tuple[dict, dict]:
    """(cluster, user) of the chosen context (else the current one)."""
    if not isinstance(document, Mapping):
        raise _Refusal("not a kubeconfig object")
    chosen = context or document.get("current-context")
    if not isinstance(chosen, str) or not chosen:
        raise _Refusal("no context chosen and no current-context")
    ctx = _entry(document, "contexts", chosen, "context")
    cluster = _entry(document, "clusters", ctx.get("cluster"), "cluster")
    user_name = ctx.get("user")
    user = _entry(document, "users", user_name, "user") if user_name else {}
    if not isinstance(cluster.get("server"), str) or not cluster["server"]:
        raise _Refusal(f"context {chosen!r} has a cluster without a server")
    return cluster, user


def _check_commands(user: Mapping[str, Any]) -> None:
    """Refuse a user that runs a command the operator has not allowed."""
    commands = set(settings.KUBECONFIG_ALLOWED_COMMANDS)
    plugin = user.get("exec")
    if plugin is not None:
        command = plugin.get("command") if isinstance(plugin, Mapping) else None
        if not isinstance(command, str) or command not in commands:
            raise _Refusal(f"exec command {command!r} is not in KUBECONFIG_ALLOWED_COMMANDS")
        env = plugin.get("env") or []
        if not isinstance(env, list):
            raise _Refusal("exec env must be a list")
        allowed = set(settings.KUBECONFIG_EXEC_ENV)
        for item in env:
            key = item.get("name") if isinstance(item, Mapping) else None
            if not isinstance(key, str) or FORBIDDEN_EXEC_ENV.fullmatch(key):
                raise _Refusal(f"exec env {key!r} would change which code runs")
            if key not in allowed:
                raise _Refusal(f"exec env {key!r} is not in KUBECONFIG_EXEC_ENV")
    provider = user.get("auth-provider")
    if provider is not None:
        provider_name = provider.get("name") if isinstance(provider, Mapping) else None
        if provider_name not in set(settings.KUBECONFIG_ALLOWED_AUTH_PROVIDERS):
            raise _Refusal(
                f"auth-provider {provider_name!r} is not in KUBECONFIG_ALLOWED_AUTH_PROVIDERS"
            )
        options = provider.get("config") or {}
        cmd_path = options.get("cmd-path") if isinstance(options, Mapping) else None
        if cmd_path is not None:
            first = str(cmd_path).split()[0] if str(cmd_path).split() else ""
            if first not in commands:
                raise _Refusal(f"auth-provider cmd-path {first!r} is not allowed")


def exec_environment(kubeconfig_env: Any) -> dict[str, str]:
    """The whole environment an allowed exec plugin runs with: the base names and
    ``KUBECONFIG_EXEC_ENV`` from the portal's own, then the kubeconfig's ``env`` entries (already
    checked by ``_check_commands``)."""
    names = [*EXEC_BASE_ENV, *settings.KUBECONFIG_EXEC_ENV]
    env = {
        name: os.environ[name]
        for name in names
        if name in os.environ and (name in EXEC_BASE_ENV or not FORBIDDEN_EXEC_ENV.fullmatch(name))
    }
    for item in kubeconfig_env or ():
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            env[item["name"]] = str(item.get("value", ""))
    return env


class _ScopedExecProvider(ExecProvider):
    """The client's exec provider with :func:`exec_environment` instead of a copy of
    ``os.environ`` (which would hand the plugin the portal's secrets)."""

    def __init__(self, exec_config: Any, cwd: Any, cluster: Any = None) -> None:
        super().__init__(exec_config, cwd, cluster)
        self.env = exec_environment(exec_config.safe_get("env"))


# Every kubeconfig the portal loads goes through this module; the client's loader looks the
# provider up in its module when it runs a plugin.
kube_config.ExecProvider = _ScopedExecProvider


def _inline(entry: dict, files: Mapping[str, str], base: Path, confine_to: Path | None) -> None:
    """Replace each file reference by the file's content (inline), read here once."""
    for file_key, data_key in files.items():
        reference = entry.pop(file_key, None)
        if reference is None or entry.get(data_key):
            continue
        if not isinstance(reference, str) or not reference:
            raise _Refusal(f"{file_key} must be a file name")
        path = base / reference
        if confine_to is not None:
            path = _inside(confine_to, path)
        data = _read_file(path)
        if data_key == "token":
            entry[data_key] = data.decode("utf-8", "replace").strip()
        else:
            entry[data_key] = _b64(data)


def _checked(document: Any, context: str, *, base: Path, confine_to: Path | None) -> dict:
    cluster, user = _select(document, context)
    _check_commands(user)
    _inline(cluster, CLUSTER_FILES, base, confine_to)
    _inline(user, USER_FILES, base, confine_to)
    provider = user.get("auth-provider")
    if isinstance(provider, Mapping) and isinstance(provider.get("config"), Mapping):
        options = dict(provider["config"])
        _inline(
            options,
            {"idp-certificate-authority": "idp-certificate-authority-data"},
            base,
            confine_to,
        )
        user["auth-provider"] = {**provider, "config": options}
    return _document(cluster, user)


# --- the operator's own default lookup ------------------------------------------------------


def _default_lookup(context: str) -> dict:
    """The process's KUBECONFIG (a list: the first file naming an entry wins, as kubectl
    merges) or ~/.kube/config, reduced to the chosen context and checked for commands."""
    # The client's own reading of $KUBECONFIG (else ~/.kube/config), taken when it was imported.
    listed = kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    paths = [os.path.expanduser(p) for p in listed.split(os.pathsep) if p]
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    bases: dict[tuple[str, Any], Path] = {}
    for raw_path in paths:
        path = Path(raw_path)
        if not path.is_file():
            continue
        try:
            document = yaml.safe_load(_read_file(path.resolve()))
        except (yaml.YAMLError, _Refusal) as exc:
            raise CredentialsRefused(f"the default kubeconfig {path} is unusable: {exc}") from None
        if not isinstance(document, Mapping):
            continue
        merged.setdefault("current-context", document.get("current-context"))
        for section in ("clusters", "users", "contexts"):
            names = {item.get("name") for item in merged[section]}
            for item in document.get(section) or []:
                if isinstance(item, Mapping) and item.get("name") not in names:
                    merged[section].append(item)
                    bases[(section, item.get("name"))] = path.parent
    try:
        cluster, user = _select(merged, context)
        _check_commands(user)
        chosen = context or merged.get("current-context")
        ctx = _entry(merged, "contexts", chosen, "context")
        _inline(cluster, CLUSTER_FILES, bases[("clusters", ctx.get("cluster"))], None)
        _inline(user, USER_FILES, bases.get(("users", ctx.get("user")), Path.cwd()), None)
    except _Refusal as exc:
        raise CredentialsRefused(f"the default kubeconfig is not allowed: {exc}") from None
    return _document(cluster, user)
