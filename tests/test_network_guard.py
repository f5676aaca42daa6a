"""The offline guard of tests/conftest.py: remote addresses and names are refused at once, before any packet
leaves; the loopback and unix sockets work as usual."""

import socket
import threading
import time
import urllib.request

import pytest

# 10.255.255.1 is a private address that nothing answers: a real connect would hang until its timeout.
UNANSWERED = ("10.255.255.1", 80)
REFUSED = "tests run offline"


def _refused_at_once(call, network_guard):
    start = time.perf_counter()
    with pytest.raises(Exception, match=REFUSED) as raised:
        call()
    assert time.perf_counter() - start < 0.5, "the guard let the attempt reach the network"
    assert not isinstance(raised.value, OSError), "an OSError could be mistaken for a dropped connection"
    assert len(network_guard) == 1
    network_guard.clear()  # refused on purpose: the test must not be failed for it


@pytest.mark.parametrize("method", ["connect", "connect_ex"])
def test_a_socket_to_a_remote_address_is_refused_before_it_connects(method, network_guard):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        _refused_at_once(lambda: getattr(sock, method)(UNANSWERED), network_guard)
        with pytest.raises(OSError):
            sock.getpeername()  # never connected


def test_datagrams_to_a_remote_address_are_refused(network_guard):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        _refused_at_once(lambda: sock.sendto(b"x", ("8.8.8.8", 53)), network_guard)


@pytest.mark.parametrize(
    "call",
    [
        lambda: socket.create_connection(UNANSWERED, timeout=3),
        lambda: socket.create_connection(("example.com", 443), timeout=3),
        lambda: socket.getaddrinfo("example.com", 443),
        lambda: socket.gethostbyname("example.com"),
        lambda: urllib.request.urlopen("https://example.com", timeout=3),
    ],
    ids=["create_connection-address", "create_connection-name", "getaddrinfo", "gethostbyname", "urlopen"],
)
def test_remote_names_and_addresses_are_refused_before_any_lookup(call, network_guard):
    _refused_at_once(call, network_guard)


@pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason="a swallowed refusal still fails the test")
def test_a_test_that_swallows_a_refusal_fails():
    try:
        socket.getaddrinfo("example.com", 443)
    except Exception:
        pass  # what a library with a fallback would do


def _echo_server(family: int, address) -> tuple[socket.socket, threading.Thread]:
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(1)

    def serve():
        connection, _ = server.accept()
        with connection:
            connection.sendall(connection.recv(16))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.3.2.1"])
def test_loopback_connections_work(host, network_guard):
    server, thread = _echo_server(socket.AF_INET, ("127.0.0.1" if host == "localhost" else host, 0))
    with server, socket.create_connection((host, server.getsockname()[1]), timeout=5) as client:
        client.sendall(b"ping")
        assert client.recv(16) == b"ping"
    thread.join(5)
    assert network_guard == []


def test_ipv6_loopback_works(network_guard):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        server, thread = _echo_server(socket.AF_INET6, ("::1", 0))
    except OSError as error:
        pytest.skip(f"::1 is not configured here: {error}")
    with server, socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(("::1", server.getsockname()[1]))
        client.sendall(b"ping")
        assert client.recv(16) == b"ping"
    thread.join(5)
    assert network_guard == []


def test_unix_sockets_work(tmp_path, network_guard):
    path = str(tmp_path / "echo.sock")
    server, thread = _echo_server(socket.AF_UNIX, path)
    with server, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(path)
        client.sendall(b"ping")
        assert client.recv(16) == b"ping"
    thread.join(5)
    assert network_guard == []
