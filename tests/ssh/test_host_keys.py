"""Host keys like OpenSSH, against a real sshd: trust on first use appends one line and touches nothing else,
a changed, revoked or CA-only key is refused with its fingerprint and the fix, never with a traceback."""

from __future__ import annotations

import logging
import os
import stat
import subprocess

import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.errors import HostKeyError
from mtp_remote.remote import connect as transport
from mtp_remote.remote.hostkeys import fingerprint, host_matches, parse_known_hosts

pytestmark = pytest.mark.ssh

# a FIDO key line as ssh-keygen writes it (paramiko cannot read this type; it must survive untouched)
SK_LINE = ("gpu-7.example.com sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAIC"
           "yv4xQyODItqYITKaq6YvXGy6i7G4JJ7XQT4Y6TgAhRAAAABHNzaDo= fido")
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def _keygen_fingerprint(pub_line: str, tmp_path) -> str:
    p = tmp_path / "k.pub"
    p.write_text(pub_line + "\n")
    return subprocess.run(["ssh-keygen", "-l", "-f", str(p)], capture_output=True, text=True,
                          check=True).stdout.split()[1]


def _connects(host: HostConfig) -> bool:
    c = transport.connect(host)
    try:
        return c.run("echo ok", hide=True).stdout.strip() == "ok"
    finally:
        transport.close(c)


def test_first_use_creates_known_hosts_0600_in_a_new_0700_directory_and_prints_the_fingerprint(
        sshd, tmp_path, caplog):
    kh = tmp_path / "new" / "dir" / "known_hosts"
    host = HostConfig(name="t", **sshd.host_config(known_hosts=str(kh), accept_new_host_key=True))
    with caplog.at_level(logging.WARNING):
        assert _connects(host)
    assert stat.S_IMODE(kh.stat().st_mode) == 0o600
    assert stat.S_IMODE(kh.parent.stat().st_mode) == 0o700
    assert kh.read_text() == f"[127.0.0.1]:{sshd.port} {sshd.host_key_pub}\n"
    want = _keygen_fingerprint(sshd.host_key_pub, tmp_path)
    assert want.startswith("SHA256:") and any(want in r.getMessage() for r in caplog.records)
    # remembered: the next connection needs no permission, and a stranger's key is not accepted later
    assert _connects(HostConfig(name="t", **sshd.host_config(known_hosts=str(kh))))


def test_first_use_appends_one_line_and_leaves_every_other_byte_and_the_symlink_alone(sshd, tmp_path):
    script = (f"f=$(mktemp); echo 'other.example.com {OTHER_KEY}' > $f; ssh-keygen -q -H -f $f >/dev/null 2>&1; "
              f"head -1 $f; rm -f $f $f.old")
    salt_hashed = subprocess.run(["bash", "-c", script],  # a hashed entry for another host, as ssh-keygen -H writes
                                 capture_output=True, text=True, check=True).stdout
    assert salt_hashed.startswith("|1|")
    original = ("# fleet keys, managed by hand\n"
                f"{SK_LINE}\n"
                f"a.example.com,b.example.com,10.0.0.7 {OTHER_KEY}\n"
                f"{salt_hashed.strip()}\n"
                f"@cert-authority *.example.com {OTHER_KEY}\n"
                "\n"
                f"last.example.com {OTHER_KEY} no-newline-at-end").encode()
    real = tmp_path / "real_known_hosts"
    real.write_bytes(original)
    os.chmod(real, 0o644)
    link = tmp_path / "known_hosts"
    link.symlink_to(real)
    host = HostConfig(name="t", **sshd.host_config(known_hosts=str(link), accept_new_host_key=True))
    assert _connects(host)
    assert link.is_symlink() and os.readlink(link) == str(real)
    after = real.read_bytes()
    assert after == original + f"\n[127.0.0.1]:{sshd.port} {sshd.host_key_pub}\n".encode()
    assert stat.S_IMODE(real.stat().st_mode) == 0o644  # a file we did not create keeps its mode


def test_a_rotated_host_key_is_refused_with_both_fingerprints_the_line_and_the_fix(own_sshd, tmp_path):
    server = own_sshd.server
    kh = tmp_path / "known_hosts"
    kh.write_text(f"# first line\n[127.0.0.1]:{server.port} {server.host_key_pub}\n")
    old_fp = _keygen_fingerprint(server.host_key_pub, tmp_path)
    new_pub = own_sshd.rotate_host_key()
    new_fp = _keygen_fingerprint(new_pub, tmp_path)
    for accept_new in (False, True):  # accept-new never accepts a *changed* key (as OpenSSH)
        host = HostConfig(name="t", **server.host_config(known_hosts=str(kh), accept_new_host_key=accept_new))
        with pytest.raises(HostKeyError) as err:
            transport.connect(host)
        msg = str(err.value)
        assert "CHANGED" in msg and new_fp in msg and old_fp in msg
        assert f"{kh} line 2" in msg
        assert f"ssh-keygen -R '[127.0.0.1]:{server.port}' -f {kh}" in msg
    assert kh.read_text() == f"# first line\n[127.0.0.1]:{server.port} {server.host_key_pub}\n"


def test_a_revoked_key_is_refused_even_when_also_listed_or_accept_new_is_on(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@revoked * {sshd.host_key_pub}\n[127.0.0.1]:{sshd.port} {sshd.host_key_pub}\n")
    for accept_new in (False, True):
        host = HostConfig(name="t", **sshd.host_config(known_hosts=str(kh), accept_new_host_key=accept_new))
        with pytest.raises(HostKeyError, match=rf"@revoked in {kh} line 1: refusing"):
            transport.connect(host)
    assert kh.read_text().count("\n") == 2


def test_a_cert_authority_line_is_skipped_with_a_warning_never_a_traceback(sshd, tmp_path, caplog):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority [127.0.0.1]:* {OTHER_KEY}\n")
    host = HostConfig(name="t", **sshd.host_config(known_hosts=str(kh)))
    with caplog.at_level(logging.WARNING), pytest.raises(HostKeyError, match="unknown SSH host key"):
        transport.connect(host)
    assert any("line 1: @cert-authority is not supported" in r.getMessage() for r in caplog.records)
    kh.write_text(f"@cert-authority [127.0.0.1]:* {OTHER_KEY}\n[127.0.0.1]:{sshd.port} {sshd.host_key_pub}\n")
    assert _connects(host)


def test_an_unknown_key_message_gives_the_fingerprint_and_the_keyscan_command(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    host = HostConfig(name="t", **sshd.host_config(known_hosts=str(kh)))
    with pytest.raises(HostKeyError) as err:
        transport.connect(host)
    fp = _keygen_fingerprint(sshd.host_key_pub, tmp_path)
    assert fp in str(err.value) and f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {kh}" in str(err.value)
    assert kh.read_text() == ""


def test_known_hosts_patterns_match_as_openssh_reads_them():
    assert host_matches("a.example.com,*.lab", "gpu.lab")
    assert not host_matches("*.lab,!gpu.lab", "gpu.lab")
    assert host_matches("[127.0.0.1]:2222", "[127.0.0.1]:2222")  # brackets are literal, not a class
    assert not host_matches("[127.0.0.1]:2222", "1")
    assert host_matches("gpu-?", "GPU-1")
    hashed = "|1|a3UEquuC7wMpex5+4D0ALI8n//k=|ys/wR1ylpsJNRdvJ2eccNOYYt6U="  # ssh-keygen -H of other.example.com
    assert host_matches(hashed, "other.example.com") and not host_matches(hashed, "other.example.org")
    kh = parse_known_hosts("#c\n@bogus x y z\nhost onlytwo\nh ssh-ed25519 !!notbase64\n")
    assert kh.lines == [] and [p.split(":")[0] for p in kh.problems] == ["line 2", "line 3", "line 4"]
    assert fingerprint(b"") == "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
