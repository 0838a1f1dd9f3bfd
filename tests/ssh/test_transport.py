"""The SSH transport against a real OpenSSH sshd on 127.0.0.1: host-key policy, commands, tunnels."""

from __future__ import annotations

import http.server
import threading

import httpx
import pytest

from mtp_remote.config import HostConfig
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
