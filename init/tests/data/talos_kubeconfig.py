# SPDX-License-Identifier: Apache-2.0
"""The admin kubeconfig of a control-plane node, checked with clients nobody here wrote:
grpcio for `Kubeconfig` on the node's socket, Python's tarfile for the archive, and the
`cryptography` package for the certificate. Prints `ok SCENARIO` at the end.

  python3 talos_kubeconfig.py config OUT_YAML CA_DIR TYPE     (writes a Kubernetes CA too)
  python3 talos_kubeconfig.py check SOCKET CA_DIR FILE_WRITTEN_BY_THE_CLI
  python3 talos_kubeconfig.py worker SOCKET"""
import base64
import datetime
import io
import os
import stat
import sys
import tarfile

import grpc
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from talos_api import EMPTY, grpcio_call, grpcio_fails, say  # noqa: E402

from talos_linux_api.v1_6_0 import common as tcommon  # noqa: E402

ENDPOINT = "https://10.0.0.2:6443"


def config(out, ca_dir, kind):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.timezone.utc)
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    crt = ca.public_bytes(serialization.Encoding.PEM)
    # SEC1 `EC PRIVATE KEY`, as Talos writes its Kubernetes CA key.
    kpem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
    os.makedirs(ca_dir, exist_ok=True)
    open(os.path.join(ca_dir, "ca.crt"), "wb").write(crt)
    b64 = lambda b: base64.b64encode(b).decode()
    doc = {
        "version": "v1alpha1",
        "machine": {
            "type": kind,
            "network": {"hostname": "cp-1", "interfaces": [{"interface": "eth0", "addresses": ["10.0.0.2/24"]}]},
            "time": {"disabled": True},
        },
        "cluster": {"controlPlane": {"endpoint": ENDPOINT}, "ca": {"crt": b64(crt), "key": b64(kpem)}},
    }
    open(out, "w").write(yaml.safe_dump(doc))
    say("ok config")


def check_kubeconfig(text, ca_pem):
    kc = yaml.safe_load(text)
    cluster = kc["clusters"][0]["cluster"]
    assert cluster["server"] == ENDPOINT, cluster
    assert base64.b64decode(cluster["certificate-authority-data"]) == ca_pem
    ctx = next(c for c in kc["contexts"] if c["name"] == kc["current-context"])["context"]
    user = next(u for u in kc["users"] if u["name"] == ctx["user"])["user"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
    key = serialization.load_pem_private_key(base64.b64decode(user["client-key-data"]), None)
    ca = x509.load_pem_x509_certificate(ca_pem)
    cert.verify_directly_issued_by(ca)
    subject = {a.oid: a.value for a in cert.subject}
    assert subject == {NameOID.ORGANIZATION_NAME: "system:masters", NameOID.COMMON_NAME: "admin"}, cert.subject
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH in eku, eku
    return cert


def check(sock, ca_dir, written):
    ca_pem = open(os.path.join(ca_dir, "ca.crt"), "rb").read()
    mode = stat.S_IMODE(os.stat(written).st_mode)
    assert mode == 0o600, oct(mode)
    cert = check_kubeconfig(open(written).read(), ca_pem)
    say("  CLI's file: mode 0600,", cert.subject.rfc4514_string(), "issued by the cluster CA")
    ch = grpc.insecure_channel(f"unix:{sock}")
    chunks = list(grpcio_call(ch, "/machine.MachineService/Kubeconfig", EMPTY, tcommon.Data, stream=True))
    data = b"".join(c.bytes for c in chunks)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["kubeconfig"], members
        assert members[0].mode == 0o600 and members[0].isfile(), members[0]
        text = tar.extractfile(members[0]).read().decode()
    check_kubeconfig(text, ca_pem)
    say("  gRPC Kubeconfig: a tar.gz of kubeconfig (0600),", len(data), "bytes")
    say("ok check")


def worker(sock):
    ch = grpc.insecure_channel(f"unix:{sock}")
    grpcio_fails("Kubeconfig on a worker", grpc.StatusCode.FAILED_PRECONDITION, lambda: list(grpcio_call(ch, "/machine.MachineService/Kubeconfig", EMPTY, tcommon.Data, stream=True)))
    say("ok worker")


def main():
    what, args = sys.argv[1], sys.argv[2:]
    {"config": config, "check": check, "worker": worker}[what](*args)


if __name__ == "__main__":
    main()
