"""tls_state.drift: a converged fleet CA and server certificate read as in place, and each
thing the gateway's signing steps would change reads as a difference, in words."""
from __future__ import annotations

import datetime
import ipaddress
import os

import pytest
from ansible.module_utils.tls_state import drift
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime(2026, 12, 6, tzinfo=datetime.timezone.utc)
SAN = ["DNS:gw.example.net", "IP:10.0.0.5"]
CONSTRAINTS = ["DNS:gw.example.net", "IP:10.0.0.5/32"]


def key(curve=ec.SECP384R1()):
    return ec.generate_private_key(curve)


def general_names(names: list, network: bool) -> list:
    out = []
    for name in names:
        kind, _, value = name.partition(":")
        if kind == "DNS":
            out.append(x509.DNSName(value))
        else:
            out.append(x509.IPAddress(ipaddress.ip_network(value) if network else ipaddress.ip_address(value)))
    return out


def ca_certificate(ca_key, constraints=CONSTRAINTS, path_length=0, signer=None):
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vllm-fleet CA")])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(ca_key.public_key())
               .serial_number(1).not_valid_before(NOW - datetime.timedelta(days=1))
               .not_valid_after(NOW + datetime.timedelta(days=3650))
               .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
               .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True))
    if constraints:
        builder = builder.add_extension(x509.NameConstraints(general_names(constraints, True), None), critical=True)
    return builder.sign(signer or ca_key, hashes.SHA256())


def server_certificate(server_key, ca, ca_key, names=SAN, days=825, usage=ExtendedKeyUsageOID.SERVER_AUTH,
                       common_name="gw.example.net"):
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca.subject).public_key(server_key.public_key()).serial_number(2)
            .not_valid_before(NOW - datetime.timedelta(days=1)).not_valid_after(NOW + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(general_names(names, False)), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(ca_key, hashes.SHA256()))


def write(folder, name: str, data: bytes, mode: int) -> str:
    path = folder / name
    path.write_bytes(data)
    path.chmod(mode)
    return str(path)


def pem_key(private) -> bytes:
    return private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())


def pem(certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@pytest.fixture
def fleet(tmp_path):
    """A converged control-node CA folder and gateway PKI folder (0700 each)."""
    ca_dir, pki = tmp_path / "ca", tmp_path / "pki"
    for folder in (ca_dir, pki):
        folder.mkdir()
        folder.chmod(0o700)
    ca_key, server_key = key(), key()
    ca = ca_certificate(ca_key)
    state = dict(ca_dir=ca_dir, pki=pki, ca_key=ca_key, ca=ca, server_key=server_key,
                 ca_key_path=write(ca_dir, "gw-ca.key", pem_key(ca_key), 0o600),
                 ca_path=write(ca_dir, "gw-ca.crt", pem(ca), 0o644),
                 key_path=write(pki, "server.key", pem_key(server_key), 0o600),
                 crt_path=write(pki, "server.crt", pem(server_certificate(server_key, ca, ca_key)), 0o644))
    return state


def ca_drift(fleet, **kwargs):
    return drift(fleet["ca_key_path"], fleet["ca_path"], "vllm-fleet CA",
                 name_constraints=kwargs.pop("name_constraints", CONSTRAINTS), now=NOW, **kwargs)


def server_drift(fleet, **kwargs):
    args = dict(issuer_certificate=pem(fleet["ca"]).decode(), subject_alt_name=SAN, renew_days=30, now=NOW,
                absent=[str(fleet["pki"] / "ca.key"), str(fleet["pki"] / "ca.crt")])
    args.update(kwargs)
    return drift(fleet["key_path"], fleet["crt_path"], args.pop("common_name", "gw.example.net"), **args)


def test_a_converged_ca_and_server_certificate_are_in_place(fleet):
    assert ca_drift(fleet) == []
    assert server_drift(fleet) == []
    # (names compare as addresses, however they are written)
    assert server_drift(fleet, subject_alt_name=["IP:10.0.0.5", "DNS:gw.example.net"]) == []


def test_a_missing_ca_folder_key_or_certificate_is_a_difference(fleet, tmp_path):
    assert drift(str(tmp_path / "none" / "gw-ca.key"), str(tmp_path / "none" / "gw-ca.crt"), "vllm-fleet CA",
                 now=NOW) == ["%s is missing" % (tmp_path / "none")]
    os.unlink(fleet["ca_path"])
    assert ca_drift(fleet) == ["%s is missing" % fleet["ca_path"]]


def test_modes_the_steps_would_set_are_differences(fleet):
    os.chmod(fleet["key_path"], 0o640)
    fleet["pki"].chmod(0o755)
    assert server_drift(fleet) == ["%s has mode 0755, not 0700" % fleet["pki"],
                                   "%s has mode 0640, not 0600" % fleet["key_path"]]


def test_a_file_owned_by_another_user_is_a_difference(fleet):
    owner = os.geteuid() + 1
    assert server_drift(fleet, owner=owner) == [
        "%s is owned by uid %d, not %d" % (path, os.geteuid(), owner) for path in (fleet["key_path"], fleet["crt_path"])]


def test_a_key_of_another_type_or_curve_is_a_difference(fleet):
    other = rsa.generate_private_key(65537, 2048)
    write(fleet["pki"], "server.key", pem_key(other), 0o600)
    found = server_drift(fleet)
    assert "%s is not an ECC secp384r1 key" % fleet["key_path"] in found
    assert "%s is not for the key %s" % (fleet["crt_path"], fleet["key_path"]) in found
    write(fleet["pki"], "server.key", pem_key(key(ec.SECP256R1())), 0o600)
    assert "%s is not an ECC secp384r1 key" % fleet["key_path"] in server_drift(fleet)


def test_an_unreadable_key_is_a_difference(fleet):
    write(fleet["pki"], "server.key", b"not a key", 0o600)
    assert server_drift(fleet) == ["%s cannot be read as an unencrypted PEM key (ValueError)" % fleet["key_path"]]


def test_a_ca_for_other_names_or_with_other_constraints_is_a_difference(fleet):
    assert ca_drift(fleet, name_constraints=["DNS:gw.example.net", "IP:10.0.0.6/32"]) == [
        "the CA certificate permits DNS:gw.example.net, IP:10.0.0.5/32, not DNS:gw.example.net, IP:10.0.0.6/32"]
    write(fleet["ca_dir"], "gw-ca.crt", pem(ca_certificate(fleet["ca_key"], constraints=[], path_length=1)), 0o644)
    assert ca_drift(fleet) == [
        "the CA certificate is not a critical CA:TRUE with path length 0",
        "the CA certificate permits every name, not DNS:gw.example.net, IP:10.0.0.5/32"]


def test_a_ca_certificate_signed_by_another_key_is_a_difference(fleet):
    write(fleet["ca_dir"], "gw-ca.crt", pem(ca_certificate(fleet["ca_key"], signer=key())), 0o644)
    assert ca_drift(fleet) == ["the CA certificate is not self-signed"]


def test_a_server_certificate_for_other_names_or_uses_is_a_difference(fleet):
    ca, ca_key, server_key = fleet["ca"], fleet["ca_key"], fleet["server_key"]
    write(fleet["pki"], "server.crt", pem(server_certificate(server_key, ca, ca_key, names=SAN[:1])), 0o644)
    assert server_drift(fleet) == [
        "the server certificate names DNS:gw.example.net, not DNS:gw.example.net, IP:10.0.0.5"]
    write(fleet["pki"], "server.crt", pem(server_certificate(server_key, ca, ca_key,
                                                             usage=ExtendedKeyUsageOID.CLIENT_AUTH)), 0o644)
    assert server_drift(fleet) == ["the server certificate's extended key usage is not serverAuth alone"]
    write(fleet["pki"], "server.crt", pem(server_certificate(server_key, ca, ca_key)), 0o644)
    assert server_drift(fleet, common_name="other.example.net") == [
        "the server certificate is for 'gw.example.net', not 'other.example.net'"]


def test_a_server_certificate_from_another_ca_is_a_difference(fleet):
    other_key = key()
    other = ca_certificate(other_key)
    write(fleet["pki"], "server.crt", pem(server_certificate(fleet["server_key"], other, other_key)), 0o644)
    assert server_drift(fleet) == ["the server certificate is not signed by the fleet CA"]


def test_a_server_certificate_ending_within_the_renewal_window_is_a_difference(fleet):
    write(fleet["pki"], "server.crt", pem(server_certificate(fleet["server_key"], fleet["ca"], fleet["ca_key"],
                                                             days=30)), 0o644)
    assert server_drift(fleet) == ["the server certificate ends 2027-01-05, within the 30-day renewal window"]
    assert server_drift(fleet, renew_days=29) == []


def test_the_fleet_ca_left_on_the_gateway_is_a_difference(fleet):
    write(fleet["pki"], "ca.key", pem_key(fleet["ca_key"]), 0o600)
    assert server_drift(fleet) == ["%s is still there" % (fleet["pki"] / "ca.key")]


def test_the_module_returns_the_ca_certificate_only_when_it_is_in_place(fleet, run_module):
    args = dict(private_key=fleet["ca_key_path"], certificate=fleet["ca_path"], common_name="vllm-fleet CA",
                name_constraints=CONSTRAINTS)
    result = run_module("tls_check", args, check_mode=True)
    assert result["in_place"] and result["drift"] == [] and not result["changed"]
    assert result["certificate"] == pem(fleet["ca"]).decode()
    result = run_module("tls_check", dict(args, common_name="another CA"))
    assert not result["in_place"] and "certificate" not in result
    assert result["drift"] == ["the CA certificate is for 'vllm-fleet CA', not 'another CA'"]
