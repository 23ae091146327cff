"""Certificates for the TLS tests, made by the openssl command line tool into a directory: a CA,
and leaf certificates it signs (ECDSA P-256, valid for two days). Keys are written mode 0600, as
warmd wants them.

    ca = make_ca(dir, "test-ca")                       # {"cert": path, "key": path}
    server = make_cert(dir, "server", ca)              # CN localhost, SANs localhost and 127.0.0.1
    client = make_cert(dir, "client", ca, cn="alice")
"""

import os
import subprocess


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(directory, name):
    cert, key = os.path.join(directory, name + ".pem"), os.path.join(directory, name + ".key")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=" + name,
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    os.chmod(key, 0o600)
    return {"cert": cert, "key": key}


def make_cert(directory, name, ca, cn="localhost", sans=("DNS:localhost", "IP:127.0.0.1")):
    cert, key = os.path.join(directory, name + ".pem"), os.path.join(directory, name + ".key")
    csr, ext = os.path.join(directory, name + ".csr"), os.path.join(directory, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        if sans:
            f.write("subjectAltName=" + ",".join(sans) + "\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
             "-out", csr, "-subj", "/CN=" + cn)
    _openssl("x509", "-req", "-in", csr, "-CA", ca["cert"], "-CAkey", ca["key"], "-CAcreateserial",
             "-out", cert, "-days", "2", "-extfile", ext)
    os.chmod(key, 0o600)
    return {"cert": cert, "key": key}
