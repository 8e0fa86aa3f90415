"""SSH keys: parsed by cryptography's OpenSSH loader, each refusal a clear field error in
the reader's language with nothing stored, and a private key pasted by mistake never echoed
or logged."""

import logging

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from accounts.models import SshKey
from tests.support.ssh import ed25519_key, public_line

pytestmark = pytest.mark.django_db
URL = "/api/v1/ssh-keys/"


def private_text(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()


@pytest.mark.parametrize(
    ("key", "kind", "bits"),
    [
        (ed25519.Ed25519PrivateKey.generate(), "ssh-ed25519", 256),
        (ec.generate_private_key(ec.SECP256R1()), "ecdsa-sha2-nistp256", 256),
        (ec.generate_private_key(ec.SECP384R1()), "ecdsa-sha2-nistp384", 384),
        (rsa.generate_private_key(public_exponent=65537, key_size=3072), "ssh-rsa", 3072),
    ],
    ids=["ed25519", "p256", "p384", "rsa3072"],
)
def test_accepted_keys_are_stored_with_their_fingerprint(alice_api, key, kind, bits):
    line = public_line(key)
    response = alice_api.post(URL, {"public_key": line})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["type"], body["bits"], body["name"]) == (kind, bits, "alice@laptop")
    assert body["fingerprint"].startswith("SHA256:") and "=" not in body["fingerprint"]
    stored = SshKey.objects.get()
    assert stored.public_key == " ".join(line.split()[:2])
    assert alice_api.get(URL).json() == [body]


def test_the_fingerprint_is_what_ssh_keygen_prints(alice_api, tmp_path):
    import subprocess

    key = ed25519_key()
    (tmp_path / "k.pub").write_text(public_line(key) + "\n")
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(tmp_path / "k.pub")],
        capture_output=True, text=True, check=True,
    ).stdout.split()[1]  # fmt: skip
    assert alice_api.post(URL, {"public_key": public_line(key)}).json()["fingerprint"] == printed


def _refused(api, text, **extra):
    response = api.post(URL, {"public_key": text, **extra}, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"
    assert not SshKey.objects.exists()
    return response.json()["errors"]["public_key"][0]


def test_a_private_key_is_refused_and_never_echoed_or_logged(alice_api, client, alice, caplog):
    secret = private_text(ed25519_key())
    body = secret.splitlines()[1]
    with caplog.at_level(logging.DEBUG):
        message = _refused(alice_api, secret)
        client.force_login(alice)
        page = client.post("/account/ssh-keys/", {"public_key": secret})
    assert "private key" in message and body not in message
    assert page.status_code == 400 and body not in page.content.decode()
    assert "This is a private key" in page.content.decode()
    assert body not in caplog.text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZp", "DSA"),
        ('command="/bin/sh" {key}', "options"),
        ("{key}\n{other}", "one key"),
        ("ssh-ed25519 AAAA!!!notbase64", "damaged"),
        ("hello world", "Not an accepted public key"),
        ("", "may not be blank"),
    ],
    ids=["dsa", "options", "two-keys", "damaged", "not-a-key", "empty"],
)
def test_refusals_say_what_is_wrong(alice_api, text, words):
    line = text.format(key=public_line(ed25519_key()), other=public_line(ed25519_key()))
    assert words in _refused(alice_api, line)


def test_short_rsa_is_refused_with_its_size(alice_api):
    short = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert "2048 bits; at least 3072" in _refused(alice_api, public_line(short))


def test_a_body_over_16_kib_is_refused(alice_api):
    line = public_line(ed25519_key()) + " " + "x" * (16 * 1024)
    assert _refused(alice_api, line)


def test_a_key_added_twice_is_refused_the_second_time(alice_api):
    line = public_line(ed25519_key())
    assert alice_api.post(URL, {"public_key": line}).status_code == 201
    again = alice_api.post(URL, {"public_key": line.replace("alice@laptop", "again")})
    assert again.status_code == 400 and "added this key already" in again.json()["detail"]
    assert SshKey.objects.count() == 1


def test_refusals_in_polish(alice_api):
    short = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    response = alice_api.post(URL, {"public_key": public_line(short)}, HTTP_ACCEPT_LANGUAGE="pl")
    assert "co najmniej 3072" in response.json()["errors"]["public_key"][0]


def test_keys_are_each_persons_own(alice_api, bob_api):
    mine = alice_api.post(URL, {"public_key": public_line(ed25519_key())}).json()
    assert bob_api.get(URL).json() == []
    assert bob_api.delete(f"{URL}{mine['id']}/").status_code == 404
    assert alice_api.delete(f"{URL}{mine['id']}/").status_code == 204
    assert not SshKey.objects.exists()


def test_the_page_adds_lists_and_removes_a_key(client, alice):
    client.force_login(alice)
    line = public_line(ed25519_key(), comment="")
    added = client.post("/account/ssh-keys/", {"name": "work laptop", "public_key": line})
    assert added.status_code == 302
    page = client.get("/account/ssh-keys/").content.decode()
    key = SshKey.objects.get()
    assert "work laptop" in page and key.fingerprint in page
    client.post("/account/ssh-keys/", {"delete": key.pk})
    assert not SshKey.objects.exists()
