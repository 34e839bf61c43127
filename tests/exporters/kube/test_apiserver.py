"""Finding and authenticating to the API server: in-cluster service account, kubeconfig files, and a real
TLS connection with a CA and a client certificate from a kubeconfig."""
from __future__ import annotations

import asyncio
import base64
import re
import ssl
import time
from pathlib import Path

import pytest
import trustme
import yaml
from aiohttp import web

from lockstep.exporters.kube.apiserver import from_kubeconfig, in_cluster
from lockstep.exporters.kube.podwatch import PodWatcher
from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.simulator.kubeapi import PodStore, create_app
from lockstep.simulator.kubepods import SimContainer, SimPod


def service_account(tmp_path: Path, token: str = "t1") -> Path:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(token + "\n")
    (account / "ca.crt").write_text(trustme.CA().cert_pem.bytes().decode())
    (account / "namespace").write_text("lockstep")
    return account


def test_in_cluster_reads_the_rotating_token_for_each_request(tmp_path):
    account = service_account(tmp_path)
    server = in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}, account)
    assert server.url == "https://10.96.0.1:443" and server.headers() == {"Authorization": "Bearer t1"}
    (account / "token").write_text("t2")          # the kubelet rotated the bound token
    assert server.headers() == {"Authorization": "Bearer t2"}
    assert in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, account).url == \
        "https://[fd00::1]:443"


def test_in_cluster_says_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match="KUBERNETES_SERVICE_HOST unset"):
        in_cluster({}, tmp_path)
    with pytest.raises(ValueError, match="automountServiceAccountToken: false"):
        in_cluster({"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path)


def kubeconfig(path: Path, user: dict, cluster: dict, context: str = "agent") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}]}))
    return path


def test_kubeconfig_token_file_relative_to_the_file_and_ca_file(tmp_path):
    (tmp_path / "token").write_text("from-file\n")
    (tmp_path / "ca.crt").write_text("PEM")
    server = from_kubeconfig(kubeconfig(tmp_path / "config", {"tokenFile": "token"},
                                        {"server": "https://api.example:6443/", "certificate-authority": "ca.crt"}))
    assert server.url == "https://api.example:6443" and server.ca_pem == "PEM"
    assert server.headers() == {"Authorization": "Bearer from-file"}


def test_kubeconfig_errors_name_the_file_line_and_key(tmp_path):
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}}
    path = kubeconfig(tmp_path / "config", exec_user, {"server": "https://x"})
    lines = path.read_text().splitlines()
    exec_line = next(i for i, line in enumerate(lines, 1) if line.strip() == "exec:")
    with pytest.raises(ConfigError) as error:
        from_kubeconfig(path)
    assert str(error.value).startswith(f"{path}:{exec_line}: users[0].user.exec: user 'u' authenticates with an exec plugin")
    contexts_line = lines.index("contexts:") + 1
    with pytest.raises(ConfigError, match=re.escape(f"{path}:{contexts_line}: contexts: no context named 'nope'")):
        from_kubeconfig(path, "nope")
    with pytest.raises(ConfigError, match=re.escape(": clusters[0].cluster: cluster 'c' has no server")):
        from_kubeconfig(kubeconfig(tmp_path / "c2", {"token": "x"}, {}))
    bad = kubeconfig(tmp_path / "c3", {"token": ["not", "a", "token"]}, {"server": "https://x"})
    with pytest.raises(ConfigError, match=re.escape(": users[0].user.token: must be str, got list")):
        from_kubeconfig(bad)
    bad = kubeconfig(tmp_path / "c4", {"client-certificate-data": "abc", "client-key-data": "abc"}, {"server": "https://x"})
    with pytest.raises(ConfigError, match=re.escape(": users[0].user.client-certificate-data: not base64 of a PEM text")):
        from_kubeconfig(bad)


def test_a_kubeconfig_alias_bomb_is_refused_naming_file_line_and_key(tmp_path):
    """Before: read with plain ``yaml.safe_load``, nothing bounded what an alias may expand to (an error
    message quoting such a value builds all of it). Now the bounded loader of every lockstep config
    refuses it."""
    path = kubeconfig(tmp_path / "config", {"token": "x"}, {"server": "https://x"})
    levels = ["  - &l0 [" + ", ".join(["lol"] * 9) + "]"]
    levels += [f"  - &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    path.write_text(path.read_text() + "preferences:\n" + "\n".join(levels) + "\n")
    line = len(path.read_text().splitlines()) - 3   # the level whose expansion passes 100,000 nodes: 9**6
    with pytest.raises(ConfigError) as error:
        from_kubeconfig(path)
    assert str(error.value) == (f"{path}:{line}: preferences[5]: aliases expand this value to more than 100000 YAML nodes; "
                                "write it out instead")


async def test_lists_over_tls_with_the_kubeconfigs_ca_and_client_certificate(tmp_path):
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1")
    client_cert = ca.issue_cert("lockstep-node.example", common_name="lockstep-node")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_cert.configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED                 # the server insists on the client certificate
    store = PodStore()
    store.put(SimPod("ml-team", "a-0", "node00", (SimContainer("c", ("0",)),)))
    runner = web.AppRunner(create_app(store, [""]), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()

    def b64(blob) -> str:
        return base64.b64encode(blob.bytes()).decode()

    user = {"client-certificate-data": b64(client_cert.cert_chain_pems[0]),
            "client-key-data": b64(client_cert.private_key_pem)}
    cluster = {"server": f"https://127.0.0.1:{runner.addresses[0][1]}", "certificate-authority-data": b64(ca.cert_pem)}
    watcher = PodWatcher(from_kubeconfig(kubeconfig(tmp_path / "config", user, cluster)), "node00")
    watcher.start()
    try:
        deadline = time.monotonic() + 30
        while not watcher.snapshot().synced and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert set(watcher.snapshot().pods) == {("ml-team", "a-0")}, watcher.snapshot().error
    finally:
        watcher.close()
        await runner.cleanup()
