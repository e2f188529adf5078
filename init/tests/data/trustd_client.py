# SPDX-License-Identifier: Apache-2.0
"""trustd (securityapi.SecurityService/Certificate, port 50001) over the `h2` library and
Python's ssl (grpcio's BoringSSL has no Ed25519, the CA's key type), the way a Talos worker
calls it: a CSR made with `cryptography`, machine.token in the `token`
metadata, TLS trusting machine.ca. Checks the codes of the refusals and that what is signed
chains to the CA, names only what the CSR asked for, and serves both server and client auth.

usage: trustd_client.py NAME HOST:PORT CA_PEM_FILE TOKEN
"""

import ipaddress
import socket
import ssl
import struct
import sys

import h2.config
import h2.connection
import h2.events
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

METHOD = "/securityapi.SecurityService/Certificate"


def field_bytes(num, data):
    n, out = len(data), bytearray([num << 3 | 2])
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + data


def parse(msg):
    """protobuf length-delimited fields of a message: {number: bytes}."""
    out, i = {}, 0
    while i < len(msg):
        key = msg[i]
        i += 1
        n = shift = 0
        while True:
            b = msg[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        out[key >> 3] = msg[i : i + n]
        i += n
    return out


def csr_pem():
    key = ec.generate_private_key(ec.SECP256R1())
    sans = x509.SubjectAlternativeName(
        [
            x509.DNSName("worker-x"),
            x509.IPAddress(ipaddress.ip_address("10.0.0.9")),
            x509.UniformResourceIdentifier("spiffe://not/copied"),
        ]
    )
    b = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "worker-x")])
    )
    return b.add_extension(sans, critical=False).sign(key, hashes.SHA256()).public_bytes(
        Encoding.PEM
    )


OK, UNIMPLEMENTED, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAUTHENTICATED = 0, 12, 3, 8, 16


def call(target, ca_file, path, body, token):
    """One unary call on a new connection: (grpc-status, reply message or None)."""
    host, port = target.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.check_hostname = False  # the address is checked below, against the SANs
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection((host, int(port)), timeout=10)
    s = ctx.wrap_socket(raw)
    sans = [v for k, v in s.getpeercert().get("subjectAltName", ()) if k == "IP Address"]
    assert host in sans, sans
    c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    head = [(":method", "POST"), (":scheme", "https"), (":path", path),
            (":authority", target), ("content-type", "application/grpc"), ("te", "trailers")]
    if token is not None:
        head.append(("token", token))
    c.send_headers(1, head)
    framed = struct.pack(">BI", 0, len(body)) + body
    for i in range(0, len(framed), 16384):
        c.send_data(1, framed[i : i + 16384], end_stream=i + 16384 >= len(framed))
    s.sendall(c.data_to_send())
    data, status = b"", None
    while status is None:
        chunk = s.recv(65536)
        if not chunk:
            break
        for e in c.receive_data(chunk):
            if isinstance(e, h2.events.DataReceived):
                data += e.data
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            headers = getattr(e, "headers", None)
            if headers:
                for k, v in headers:
                    if k in (b"grpc-status", "grpc-status"):
                        status = int(v)
            if isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                status = -1 if status is None else status
        s.sendall(c.data_to_send())
    s.close()
    return status, (data[5:] if len(data) >= 5 else None)


def main():
    name, target, ca_file, token = sys.argv[1:5]
    ca_pem = open(ca_file, "rb").read()
    path = "/securityapi.SecurityService/Certificate"

    def code_of(body, tok):
        return call(target, ca_file, path, body, tok)[0]

    good = field_bytes(1, csr_pem())
    assert code_of(good, "wrong." + token) == UNAUTHENTICATED
    assert code_of(good, None) == UNAUTHENTICATED
    assert code_of(field_bytes(1, b"garbage"), token) == INVALID_ARGUMENT
    assert code_of(field_bytes(1, b"-" * 20000), token) == RESOURCE_EXHAUSTED
    # A CSR whose signature does not match what it asks for.
    der = x509.load_pem_x509_csr(csr_pem()).public_bytes(Encoding.DER)
    at = der.find(bytes([10, 0, 0, 9]))
    bad = der[: at + 3] + bytes([10]) + der[at + 4 :]
    assert code_of(field_bytes(1, bad), token) == INVALID_ARGUMENT
    # Other methods are not served on this port.
    assert call(target, ca_file, "/machine.MachineService/Version", b"", token)[0] == UNIMPLEMENTED

    status, msg = call(target, ca_file, path, good, token)
    assert status == OK, status
    reply = parse(msg)
    ca = x509.load_pem_x509_certificate(reply[1])
    crt = x509.load_pem_x509_certificate(reply[2])
    assert ca == x509.load_pem_x509_certificate(ca_pem)
    crt.verify_directly_issued_by(ca)
    san = crt.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["worker-x"], san
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.9")], san
    assert not san.get_values_for_type(x509.UniformResourceIdentifier), san
    eku = crt.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku and ExtendedKeyUsageOID.CLIENT_AUTH in eku
    print(f"ok {name}")


main()
