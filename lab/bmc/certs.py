"""Make a lab CA, a BMC server certificate for 127.0.0.1/localhost, and a bcrypt htpasswd.

    python -m lab.bmc.certs --dir DIR --user U --password P [--rounds 4]

Writes DIR/ca.pem (give it to clients as ca_path), DIR/server.pem, DIR/server.key and
DIR/htpasswd ("U:$2b$..."). Uses python `cryptography` (already installed with ansible-core) and
`bcrypt` (pulled in by sushy-tools). sushy-emulator checks the bcrypt hash on every request, so the
lab uses a low cost factor (4) to keep a BMC answering in milliseconds; it guards test passwords.
"""
import argparse
import datetime
import ipaddress
import os
import sys

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _write(path, data, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def make_ca_and_server(directory, days=30):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufleet lab BMC CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    _write(os.path.join(directory, "ca.pem"), ca_cert.public_bytes(pem), 0o644)
    _write(os.path.join(directory, "server.pem"), cert.public_bytes(pem), 0o644)
    _write(os.path.join(directory, "server.key"), key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def make_htpasswd(directory, user, password, rounds=4):
    digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=rounds)).decode()
    _write(os.path.join(directory, "htpasswd"), ("%s:%s\n" % (user, digest)).encode())


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.bmc.certs", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--rounds", type=int, default=4, help="bcrypt cost factor (4..31)")
    args = parser.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    make_ca_and_server(args.dir)
    make_htpasswd(args.dir, args.user, args.password, args.rounds)
    print("lab.bmc.certs: wrote ca.pem server.pem server.key htpasswd in %s" % args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
