"""Whether a key and certificate are already what the gateway's TLS steps would make.

Plain Python (and ``cryptography``), no Ansible imports; ``library/tls_check.py`` wraps
it.  ``roles/gateway/tasks/tls_sign.yml`` makes and signs with community.crypto in about
fourteen steps, each of which reads its files again to find that nothing needs doing on a
converged gateway.  ``drift()`` reads the same files once and lists, in words, what one of
those steps would change: a missing or unreadable file, a key of another type, a mode or
owner, a certificate for other names, with other extensions, not signed by the issuer or
for another key, or one that ends within the renewal window.  An empty list means the
steps would change nothing, and the role skips them.

Written for the oldest ``cryptography`` the gateways carry (36, RHEL 9): no
``verify_directly_issued_by`` (40) and no ``not_valid_after_utc`` (42).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import stat

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_MODE = 0o600
CERTIFICATE_MODE = 0o644
FOLDER_MODE = 0o700


def general_name(name: x509.GeneralName) -> str:
    """A subject alternative name or permitted subtree as community.crypto spells it."""
    if isinstance(name, x509.DNSName):
        return "DNS:" + name.value
    if isinstance(name, x509.IPAddress):
        return "IP:%s" % name.value
    return "%s:%s" % (type(name).__name__, name.value)


def normalised(names: list) -> set:
    """``DNS:x`` / ``IP:a`` / ``IP:a/n`` strings with the addresses written one way."""
    out = set()
    for name in names:
        kind, _, value = name.partition(":")
        if kind == "IP":
            value = str(ipaddress.ip_network(value) if "/" in value else ipaddress.ip_address(value))
        out.add("%s:%s" % (kind, value))
    return out


def not_after(certificate: x509.Certificate) -> datetime.datetime:
    end = getattr(certificate, "not_valid_after_utc", None)
    return end if end is not None else certificate.not_valid_after.replace(tzinfo=datetime.timezone.utc)


def signed_by(certificate: x509.Certificate, issuer: x509.Certificate) -> bool:
    """Whether ``issuer`` issued ``certificate``: names chain and the signature verifies."""
    if certificate.issuer != issuer.subject:
        return False
    key = issuer.public_key()
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(certificate.signature, certificate.tbs_certificate_bytes,
                       ec.ECDSA(certificate.signature_hash_algorithm))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(certificate.signature, certificate.tbs_certificate_bytes, padding.PKCS1v15(),
                       certificate.signature_hash_algorithm)
        else:
            return False
    except InvalidSignature:
        return False
    return True


def _public(key) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _extension(certificate: x509.Certificate, kind):
    try:
        return certificate.extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None


def _file_problems(path: str, mode: int, owner: int) -> list:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return ["%s is missing" % path]
    problems = []
    if stat.S_IMODE(info.st_mode) != mode:
        problems.append("%s has mode %04o, not %04o" % (path, stat.S_IMODE(info.st_mode), mode))
    if info.st_uid != owner:
        problems.append("%s is owned by uid %d, not %d" % (path, info.st_uid, owner))
    return problems


def _read_key(path: str, problems: list):
    try:
        with open(path, "rb") as handle:
            key = serialization.load_pem_private_key(handle.read(), None)
    except (OSError, ValueError, TypeError) as exc:
        problems.append("%s cannot be read as an unencrypted PEM key (%s)" % (path, type(exc).__name__))
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp384r1":
        problems.append("%s is not an ECC secp384r1 key" % path)
    return key


def _read_certificate(path: str, problems: list):
    try:
        with open(path, "rb") as handle:
            return x509.load_pem_x509_certificate(handle.read())
    except (OSError, ValueError) as exc:
        problems.append("%s cannot be read as a PEM certificate (%s)" % (path, type(exc).__name__))
        return None


def _common_name(certificate: x509.Certificate) -> str:
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return names[0].value if names else ""


def ca_problems(certificate: x509.Certificate, common_name: str, name_constraints: list) -> list:
    """What differs from the fleet CA's certificate as tls_sign.yml asks for it: self-signed,
    CA:TRUE with path length 0, keyCertSign and cRLSign, the gateway's names alone
    permitted (each critical), no subject alternative name."""
    problems = []
    if _common_name(certificate) != common_name:
        problems.append("the CA certificate is for %r, not %r" % (_common_name(certificate), common_name))
    if not signed_by(certificate, certificate):
        problems.append("the CA certificate is not self-signed")
    basic = _extension(certificate, x509.BasicConstraints)
    if basic is None or not basic.critical or not basic.value.ca or basic.value.path_length != 0:
        problems.append("the CA certificate is not a critical CA:TRUE with path length 0")
    usage = _extension(certificate, x509.KeyUsage)
    if (usage is None or not usage.critical or not usage.value.key_cert_sign or not usage.value.crl_sign
            or usage.value.digital_signature):
        problems.append("the CA certificate's key usage is not a critical keyCertSign, cRLSign")
    constraints = _extension(certificate, x509.NameConstraints)
    permitted = (set(general_name(n) for n in constraints.value.permitted_subtrees or [])
                 if constraints is not None else set())
    if (constraints is None or not constraints.critical or constraints.value.excluded_subtrees
            or permitted != normalised(name_constraints)):
        problems.append("the CA certificate permits %s, not %s" % (
            ", ".join(sorted(permitted)) or "every name", ", ".join(sorted(normalised(name_constraints)))))
    if _extension(certificate, x509.SubjectAlternativeName) is not None:
        problems.append("the CA certificate carries a subject alternative name")
    return problems


def server_problems(certificate: x509.Certificate, issuer: x509.Certificate, common_name: str,
                    subject_alt_name: list, renew_days: int, now: datetime.datetime) -> list:
    """What differs from the server certificate as tls_sign.yml asks for it: the first name as
    its common name, the names as its subject alternative names, serverAuth, signed by the
    fleet CA, and valid past the renewal window."""
    problems = []
    if _common_name(certificate) != common_name:
        problems.append("the server certificate is for %r, not %r" % (_common_name(certificate), common_name))
    names = _extension(certificate, x509.SubjectAlternativeName)
    held = set(general_name(n) for n in names.value) if names is not None else set()
    if held != normalised(subject_alt_name):
        problems.append("the server certificate names %s, not %s" % (
            ", ".join(sorted(held)) or "nothing", ", ".join(sorted(normalised(subject_alt_name)))))
    usage = _extension(certificate, x509.ExtendedKeyUsage)
    if usage is None or list(usage.value) != [ExtendedKeyUsageOID.SERVER_AUTH]:
        problems.append("the server certificate's extended key usage is not serverAuth alone")
    if not signed_by(certificate, issuer):
        problems.append("the server certificate is not signed by the fleet CA")
    if not_after(certificate) <= now + datetime.timedelta(days=renew_days):
        problems.append("the server certificate ends %s, within the %d-day renewal window"
                        % (not_after(certificate).strftime("%Y-%m-%d"), renew_days))
    return problems


def drift(private_key: str, certificate: str, common_name: str, issuer_certificate: str = "",
          subject_alt_name: list = (), name_constraints: list = (), renew_days: int = 0, absent: list = (),
          owner: int = -1, now: datetime.datetime | None = None) -> list:
    """What tls_sign.yml's steps would change about one key and its certificate, in words.

    Without ``issuer_certificate`` the certificate is the fleet CA's (self-signed, checked against
    ``name_constraints``); with it, the server's (checked against ``subject_alt_name`` and
    ``renew_days``).  The key's folder is 0700, the key 0600, the certificate 0644, all
    owned by ``owner`` (default: whoever runs this); the ``absent`` paths do not exist.
    """
    owner = os.geteuid() if owner < 0 else owner
    now = now or datetime.datetime.now(datetime.timezone.utc)
    problems = ["%s is still there" % path for path in absent if os.path.lexists(path)]
    folder = os.path.dirname(private_key)
    if not os.path.isdir(folder):
        return problems + ["%s is missing" % folder]
    if stat.S_IMODE(os.stat(folder).st_mode) != FOLDER_MODE:
        problems.append("%s has mode %04o, not %04o" % (folder, stat.S_IMODE(os.stat(folder).st_mode), FOLDER_MODE))
    files = _file_problems(private_key, KEY_MODE, owner) + _file_problems(certificate, CERTIFICATE_MODE, owner)
    problems += files
    if any(p.endswith(" is missing") for p in files):
        return problems
    key, held = _read_key(private_key, problems), _read_certificate(certificate, problems)
    if key is None or held is None:
        return problems
    if _public(held.public_key()) != _public(key.public_key()):
        problems.append("%s is not for the key %s" % (certificate, private_key))
    if not issuer_certificate:
        return problems + ca_problems(held, common_name, list(name_constraints))
    try:
        issuer = x509.load_pem_x509_certificate(issuer_certificate.encode())
    except ValueError:
        return problems + ["the fleet CA's certificate given cannot be read as PEM"]
    return problems + server_problems(held, issuer, common_name, list(subject_alt_name), renew_days, now)
