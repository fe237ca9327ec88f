"""Where long work runs: on this machine (`local`, the default: this process and its forks), or
on a Ray cluster (`ray`, `ray://HOST:PORT`).

Ray is asked for by name so a user sees where the work goes; nothing about a run's results
depends on the executor.  `ray` joins the cluster `$RAY_ADDRESS` names, else starts one on
this machine; `ray://HOST:PORT` connects through Ray Client (the head's client server port,
10001 unless set otherwise), which needs `pip install "corpus-audit[ray]"`.  Every node must
have corpus-audit installed and see the index directories at the same paths (a shared
filesystem).
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import StrEnum
from types import ModuleType

from audit.errors import AuditError

INSTALL_HINT = 'pip install "corpus-audit[ray]"'
# Ray Client's proxy now and then fails to start the server it runs for a new client (the more
# so on a loaded head); a new connection gets a new one.
CONNECT_ATTEMPTS = 3
PROXY_FAILURE = "Initialization failure from server"
# Seconds a Ray Client connection may take to come back after its stream breaks before the
# head's proxy cleans its session up (Ray's default is 30): on a loaded two-core machine a
# reconnection came later than that, and the run failed with "a session that has already
# been cleaned up".  The client sends it to the head when it connects; a value in the
# environment wins.
CLIENT_RECONNECT_GRACE_S = 120


class ExecutorError(AuditError):
    """An executor that cannot be named or reached."""


class ExecutorKind(StrEnum):
    LOCAL = "local"
    RAY = "ray"


@dataclass(frozen=True)
class Executor:
    """`address` is a Ray Client address (`ray://HOST:PORT`), or None for `$RAY_ADDRESS` or a
    cluster started on this machine."""

    kind: ExecutorKind = ExecutorKind.LOCAL
    address: str | None = None

    @property
    def distributed(self) -> bool:
        return self.kind is ExecutorKind.RAY

    def cluster(self) -> ModuleType | None:
        """Ray, connected to the cluster this executor names; None when work stays on this
        machine.  Raises ExecutorError when the cluster cannot be reached."""
        return connect(self) if self.distributed else None

    def __str__(self) -> str:
        return self.address or self.kind.value


LOCAL = Executor()


def parse_executor(value: str | None) -> Executor:
    """`local`, `ray` or `ray://HOST:PORT`, as `--executor` takes it."""
    text = (value or "local").strip()
    if text == "local":
        return LOCAL
    if text == "ray":
        return Executor(ExecutorKind.RAY)
    if text.startswith("ray://"):
        host, _, port = text.removeprefix("ray://").rpartition(":")
        if not host or not port.isdigit():
            raise ExecutorError(f"--executor {text}: expected ray://HOST:PORT (the Ray Client port of the cluster's head)")
        return Executor(ExecutorKind.RAY, text)
    raise ExecutorError(f"--executor {text}: expected local, ray, or ray://HOST:PORT")


def ray_module() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"the Ray executor needs Ray: {INSTALL_HINT}") from None
    return ray


def _auth_token_available() -> bool:
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or os.path.isfile(path)


def connect(executor: Executor) -> ModuleType:
    """Ray, initialised for `executor` (once per process): the cluster it names, `$RAY_ADDRESS`,
    or a new one on this machine.  Usage reports stay off: the tool never phones home."""
    # Ray reads these when it is first imported, or (the grace period) when a client connects.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_CLIENT_RECONNECT_GRACE_PERIOD", str(CLIENT_RECONNECT_GRACE_S))
    if executor.address and "RAY_AUTH_MODE" not in os.environ and _auth_token_available():
        # Ray Client sends the cluster's token only when told to; `ray start` makes one by default.
        os.environ["RAY_AUTH_MODE"] = "token"
    ray = ray_module()
    if ray.is_initialized():
        return ray
    address = executor.address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        _reachable(_bootstrap(address), f"the Ray cluster at {address}" + ("" if executor.address else " ($RAY_ADDRESS)"))
    attempts = 0
    while True:
        attempts += 1
        try:
            if address is None:
                ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
            else:
                ray.init(address=address, log_to_driver=False)
            return ray
        except (ConnectionError, RuntimeError, ValueError) as error:
            if PROXY_FAILURE not in str(error):
                raise ExecutorError(f"cannot reach the Ray cluster at {address or 'a new local instance'}: {error}") from None
            if attempts == CONNECT_ATTEMPTS:
                raise ExecutorError(
                    f"{address}: the cluster's Ray Client proxy failed {CONNECT_ATTEMPTS} times to start a server for this connection; "
                    "see ray_client_server*.err in the head's Ray logs (on a loaded head, start it with RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S above its default 30)"
                ) from None
        except ImportError as error:
            raise ExecutorError(f"Ray Client needs its extra dependencies ({error}): {INSTALL_HINT}") from None


def _bootstrap(address: str) -> str | None:
    """The HOST:PORT an address names: a Ray Client address as given, `auto` as Ray resolves
    it (the cluster `ray start` last started here), None for `local` (a new cluster)."""
    if address == "local" or address.startswith("ray://"):
        return None if address == "local" else address
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address
        except ImportError:
            return None
        try:
            return canonicalize_bootstrap_address(address)
        except (ConnectionError, ValueError) as error:
            raise ExecutorError(f"cannot reach the Ray cluster at {address} ($RAY_ADDRESS): {error}") from None
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"$RAY_ADDRESS {address}: expected HOST:PORT (the cluster's GCS address), auto, local or ray://HOST:PORT")
    return address


def _reachable(address: str | None, what: str) -> None:
    """Fail at once when nothing listens at a cluster's address: Ray Client would retry for
    30 s, a GCS client for minutes."""
    if address is None:
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as error:
        raise ExecutorError(f"cannot reach {what}: nothing answers at {host}:{port} ({error.strerror or error})") from None
