"""The SSH transport against a real OpenSSH sshd on 127.0.0.1: host-key policy, commands, tunnels."""

from __future__ import annotations

import http.server
import threading

import httpx
import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.errors import ConnectError
from mtp_remote.remote import connect as transport
from mtp_remote.remote import facts

pytestmark = pytest.mark.ssh


def test_commands_run_over_ssh_with_a_known_host_key(sshd):
    host = HostConfig(name="t", **sshd.host_config())
    c = transport.connect(host)
    try:
        r = c.run("echo hello; printf '%s' \"$HOME\"", hide=True)
        assert r.stdout.splitlines()[0] == "hello"
        assert facts.get_home(c) == r.stdout.splitlines()[1]
    finally:
        transport.close(c)


def test_an_unknown_host_key_is_rejected_by_default(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = HostConfig(name="t", **sshd.host_config(known_hosts=str(empty)))
    with pytest.raises(ConnectError, match="unknown SSH host key"):
        transport.connect(host)


def test_an_unknown_host_key_is_accepted_only_when_told(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = HostConfig(name="t", **sshd.host_config(known_hosts=str(empty), accept_new_host_key=True))
    c = transport.connect(host)
    try:
        assert c.run("echo ok", hide=True).stdout.strip() == "ok"
    finally:
        transport.close(c)


def test_a_wrong_user_key_fails_with_a_clear_error(sshd, tmp_path):
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    host = HostConfig(name="t", **sshd.host_config(key_file=str(tmp_path / "other")))
    with pytest.raises(ConnectError, match="authentication failed"):
        transport.connect(host)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"through the tunnel"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_the_tunnel_survives_a_refused_channel_and_carries_many_concurrent_connections(sshd):
    import asyncio

    from tests.conftest import free_port

    port = free_port()
    host = HostConfig(name="t", **sshd.host_config(port=port))
    c = transport.connect(host)
    try:
        with transport.tunnel(c, host) as url:
            with pytest.raises(httpx.HTTPError):  # nothing listens yet: this connection fails ...
                httpx.get(url + "/x", timeout=5)
            srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Handler)
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            try:
                async def many():
                    async with httpx.AsyncClient(timeout=10) as client:
                        rs = await asyncio.gather(*(client.get(url + f"/{i}") for i in range(40)))
                    return [r.text for r in rs]

                # ... but the tunnel lives on, and 40 connections at once all get through
                assert asyncio.run(many()) == ["through the tunnel"] * 40
            finally:
                srv.shutdown()
    finally:
        transport.close(c)


def test_the_tunnel_reaches_a_server_bound_to_the_hosts_loopback(sshd):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host = HostConfig(name="t", **sshd.host_config(port=srv.server_address[1]))
    c = transport.connect(host)
    try:
        with transport.tunnel(c, host) as url:
            assert not url.endswith(f":{srv.server_address[1]}")  # a local forward, not the port itself
            for _ in range(3):
                assert httpx.get(url + "/x", timeout=5).text == "through the tunnel"
    finally:
        transport.close(c)
        srv.shutdown()


def test_a_gateway_host_is_used_as_a_jump_host(sshd):
    # the same sshd serves as the bastion: 127.0.0.1 is reached through a direct-tcpip channel of the gateway
    host = HostConfig(name="t", **sshd.host_config(gateway=f"{sshd.user}@127.0.0.1:{sshd.port}"))
    c = transport.connect(host)
    try:
        assert c.gateway is not None and c.gateway.is_connected
        assert c.run("echo via-gateway", hide=True).stdout.strip() == "via-gateway"
    finally:
        transport.close(c)
    assert not c.gateway.is_connected, "closing the host closes its gateway too"


async def _asgi_generate(scope, receive, send):
    """A minimal /generate endpoint served by uvicorn (the HTTP server SGLang runs, keep-alive included)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = b'{"text": "ok", "meta_info": {"completion_tokens": 1, "finish_reason": {"type": "stop"}}}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def uvicorn_server():
    import time

    import uvicorn

    from tests.conftest import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(_asgi_generate, host="127.0.0.1", port=port, log_level="critical",
                                           lifespan="off", timeout_keep_alive=5))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.01)
    yield port
    server.should_exit = True
    t.join(5)


def test_one_http_pool_through_the_tunnel_opens_channels_by_concurrency_not_by_request(sshd, uvicorn_server):
    import asyncio

    from mtp_remote.client import ServerClient

    host = HostConfig(name="t", **sshd.host_config(port=uvicorn_server))
    c = transport.connect(host)
    n, concurrency = 64, 8
    try:
        with transport.open_tunnel(c, host) as tun:
            async def pooled():
                sem = asyncio.Semaphore(concurrency)
                async with ServerClient(tun.url, max_connections=concurrency) as sc:
                    async def one():
                        async with sem:
                            return await sc.generate("x", temperature=0, max_new_tokens=1)
                    return await asyncio.gather(*(one() for _ in range(n)))

            async def client_per_request():  # the anti-pattern, to show what the counter counts
                async def one():
                    async with ServerClient(tun.url) as sc:
                        return await sc.generate("x", temperature=0, max_new_tokens=1)
                return [await one() for _ in range(8)]

            assert [r.error for r in asyncio.run(pooled())] == [None] * n
            pooled_channels = tun.channels_opened
            assert [r.text for r in asyncio.run(client_per_request())] == ["ok"] * 8
            assert tun.channels_opened - pooled_channels == 8
    finally:
        transport.close(c)
    assert 1 <= pooled_channels <= concurrency, pooled_channels  # 64 requests, at most 8 channels


def test_closing_the_tunnel_does_not_stall(sshd):
    import time

    host = HostConfig(name="t", **sshd.host_config(port=1))
    c = transport.connect(host)
    try:
        with transport.open_tunnel(c, host):
            t0 = time.perf_counter()
        assert time.perf_counter() - t0 < 1.0  # was 2.0 s: a join on an accept() that closing did not wake (~10 ms now)
    finally:
        transport.close(c)


def test_an_end_of_stream_under_a_command_before_paramiko_notices_is_a_drop_not_a_bare_eoferror(sshd, monkeypatch):
    """sshd stopping mid-run can end a command's stream (EOFError) while the transport still looks active; the
    tool then saw `SSH failed: EOFError` instead of the drop and its reason. The transport is closed and the
    failure is TransportLost, so the usual reconnect (here: it works again) follows."""
    from fabric import Connection

    from mtp_remote.errors import TransportLost
    from mtp_remote.remote.ssh import _end_of_stream

    host = HostConfig(name="s", **sshd.host_config())
    c = transport.connect(host)
    try:
        assert c.run("echo one", hide=True).stdout.strip() == "one"
        real_run, calls = Connection.run, []

        def eof_once(self, command, **kw):
            calls.append(command)
            if len(calls) == 1:
                raise EOFError()
            return real_run(self, command, **kw)

        monkeypatch.setattr(Connection, "run", eof_once)
        with pytest.raises(TransportLost) as e:
            c.run("echo two", hide=True)
        assert e.value.cause == "dropped" and "EOFError" in e.value.message
        assert not c.is_connected, "the transport was closed, so the next command reconnects"
        assert c.run("echo three", hide=True).stdout.strip() == "three"
        assert c.generation == 2 and c.drops == 1
    finally:
        transport.close(c)
    assert _end_of_stream(EOFError()) and not _end_of_stream(OSError("disk full"))
