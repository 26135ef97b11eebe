#!/usr/bin/env python3
"""Coverage of real systems: what share of their package-owned files the service knows.

For each system the truth is its own package database, never the service's output:
- Debian roots (`debootstrap --variant=minbase`, one per supported release, discovered from
  the archive's `oldstable` and `stable` Release files) and this machine: every regular file
  under usr/ that dpkg's `<package>.list` names and that is an ELF object or a script (`#!`).
  The service ingests exactly the installed `name=version` list (`items_file`) of that
  release; the files are looked up by SHA-256 (`lookup/historical`, so a superseded build
  counts as known, as it does for `knowngood scan`).
- A Python environment (`pip install --target`) of packages with compiled extensions pinned
  to versions more than a year old: every `.so` its wheels' RECORD files list, with the
  service following exactly those pinned releases (`[vendors.pypi] items`).

Prints, per system: files, known, coverage, the ingest time and records per second, and the
unknown files grouped by package. On this machine, packages whose installed version the
archive no longer serves are counted apart (the archive cannot vouch for them).

Run through bench/coverage.sh, which builds the binary and installs debootstrap.
"""

import argparse
import collections
import json
import lzma
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BIN = os.environ.get("KNOWNGOOD_BIN", "knowngood")
MIRROR = os.environ.get("DEBIAN_MIRROR", "https://deb.debian.org/debian")
SECURITY = os.environ.get("DEBIAN_SECURITY_MIRROR", "https://security.debian.org/debian-security")
ARCH = "amd64"

# Packages with compiled extensions, each pinned to a release more than a year old
# (published on PyPI between 2023 and 2024; cp311 manylinux wheels exist for each).
PYTHON_PINS = [
    "cffi==1.16.0",
    "cryptography==42.0.5",
    "orjson==3.9.15",
    "pydantic-core==2.16.3",
    "PyYAML==6.0.1",
    "numpy==1.26.4",
    "lxml==5.1.0",
    "MarkupSafe==2.1.5",
    "msgpack==1.0.8",
    "psutil==5.9.8",
    "regex==2023.12.25",
    "ujson==5.9.0",
    "charset-normalizer==3.3.2",
    "frozenlist==1.4.1",
    "multidict==6.0.5",
    "yarl==1.9.4",
    "aiohttp==3.9.3",
    "pillow==10.2.0",
    "zstandard==0.22.0",
    "bcrypt==4.1.2",
    "greenlet==3.0.3",
    "simplejson==3.19.2",
    "websockets==12.0",
]


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def fetch(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def codename(suite):
    """The code name the archive's Release file gives a suite alias."""
    text = fetch(f"{MIRROR}/dists/{suite}/Release").decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("Codename:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"no Codename in {suite}'s Release file")


def served_versions(release):
    """(package, version) pairs the archive serves for a release, its updates and security."""
    served = set()
    sources = [
        f"{MIRROR}/dists/{release}/main/binary-{ARCH}/Packages.xz",
        f"{MIRROR}/dists/{release}-updates/main/binary-{ARCH}/Packages.xz",
        f"{SECURITY}/dists/{release}-security/main/binary-{ARCH}/Packages.xz",
    ]
    for url in sources:
        try:
            text = lzma.decompress(fetch(url)).decode("utf-8", "replace")
        except Exception as e:  # a pocket may be empty or absent
            log(f"  {url}: {e}")
            continue
        name = None
        for line in text.splitlines():
            if line.startswith("Package: "):
                name = line[9:].strip()
            elif line.startswith("Version: ") and name:
                served.add((name, line[9:].strip()))
    return served


def installed(admindir):
    """name -> version of every installed package of a dpkg database."""
    out = subprocess.run(
        ["dpkg-query", f"--admindir={admindir}", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packages = {}
    for line in out.splitlines():
        name, version, status = line.split("\t")
        if status.startswith("ii"):
            packages[name] = version
    return packages


def is_executable_content(path):
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head == b"\x7fELF" or head[:2] == b"#!"


def owned_files(root, admindir, packages):
    """package -> package-owned ELF objects and scripts under usr/ (from dpkg's lists)."""
    info = os.path.join(admindir, "info")
    owned = {}
    for entry in os.listdir(info):
        if not entry.endswith(".list"):
            continue
        package = entry[: -len(".list")].split(":")[0]
        if package not in packages:
            continue
        with open(os.path.join(info, entry), encoding="utf-8", errors="replace") as f:
            for line in f:
                rel = line.rstrip("\n")
                if not rel.startswith("/usr/"):
                    continue
                path = os.path.join(root, rel.lstrip("/"))
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                if is_executable_content(path):
                    owned.setdefault(package, set()).add(path)
    return owned


def sha256_of(path):
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """A fresh data dir: ingest one vendor's configuration, then serve and look up."""

    def __init__(self, work, vendor_toml):
        self.dir = tempfile.mkdtemp(dir=work, prefix="data-")
        self.config = os.path.join(self.dir, "knowngood.toml")
        with open(self.config, "w") as f:
            f.write('[schedule]\ndaily_refresh = "off"\n' + vendor_toml)
        self.env = dict(os.environ)
        self.env.pop("KNOWNGOOD_DATABASE_URL", None)
        self.env.update(
            KNOWNGOOD_DATA_DIR=os.path.join(self.dir, "data"),
            KNOWNGOOD_CONFIG=self.config,
            RUST_LOG="warn",
        )
        self.server = None

    def run(self, *args):
        return subprocess.run([BIN, *args], env=self.env, capture_output=True, text=True)

    def ingest(self, vendor):
        start = time.monotonic()
        r = self.run("ingest", "--vendor", vendor)
        elapsed = time.monotonic() - start
        if r.returncode != 0:
            log(f"  ingest --vendor {vendor} exited {r.returncode}:\n{r.stderr[-4000:]}{r.stdout[-2000:]}")
        return elapsed, r.stdout + r.stderr

    def serve(self):
        port = free_port()
        env = dict(self.env, KNOWNGOOD_LISTEN=f"127.0.0.1:{port}",
                   KNOWNGOOD_METRICS_LISTEN=f"127.0.0.1:{free_port()}")
        self.server = subprocess.Popen([BIN, "serve"], env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if fetch(f"{self.base}/readyz"):
                    break
            except Exception:
                time.sleep(0.1)
        r = self.run("admin", "create-account", "--team", "coverage-bench", "--tier", "teams",
                     "--role", "analyst")
        if r.returncode != 0:
            raise SystemExit(f"create-account failed: {r.stderr}")
        self.key = r.stdout.strip().splitlines()[-1].strip()
        stats = self.get("/api/v1/intel/stats")
        return stats["totals"]["known_good_hashes"]

    def get(self, path):
        req = urllib.request.Request(self.base + path, headers={"X-API-Key": self.key})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)

    def known(self, digests):
        """The subset of `digests` the service knows as vendor releases (any version)."""
        known = set()
        digests = sorted(digests)
        for i in range(0, len(digests), 100):
            batch = digests[i : i + 100]
            body = json.dumps({"hashes": batch}).encode()
            while True:
                req = urllib.request.Request(
                    self.base + "/api/v1/intel/lookup/historical",
                    data=body,
                    headers={"X-API-Key": self.key, "Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        results = json.load(r)["results"]
                    break
                except urllib.error.HTTPError as e:
                    if e.code != 429:
                        raise
                    time.sleep(int(e.headers.get("Retry-After", "1")))
            known |= {h for h, v in results.items() if v["classification"] == "known_vendor_release"}
        return known

    def stop(self):
        if self.server:
            self.server.terminate()
            self.server.wait()


def report(title, owned, known_digests, digest_of, ingest_secs, records, apart=None):
    apart = apart or set()
    counted = {p: fs for p, fs in owned.items() if p not in apart}
    files = sum(len(fs) for fs in counted.values())
    known = sum(1 for fs in counted.values() for f in fs if digest_of[f] in known_digests)
    share = 100.0 * known / files if files else 0.0
    rate = records / ingest_secs if ingest_secs else 0.0
    print(f"\n## {title}")
    print(f"files {files}  known {known}  coverage {share:.2f} %  "
          f"(ingest {ingest_secs:.0f} s, {records} SHA-256 known, {rate:.0f} a second)")
    if apart:
        n = sum(len(owned[p]) for p in apart if p in owned)
        print(f"apart: {len(apart)} packages ({n} files) whose installed version the archive no longer serves")
    unknown = collections.Counter()
    for p, fs in counted.items():
        for f in fs:
            if digest_of[f] not in known_digests:
                unknown[p] += 1
    if unknown:
        print("unknown files by package:", ", ".join(f"{p} {n}" for p, n in unknown.most_common(30)))
    return share


def debian_system(work, title, root, release, apart_served=False):
    admindir = os.path.join(root, "var/lib/dpkg")
    packages = installed(admindir)
    items = os.path.join(work, f"items-{title.replace(' ', '-')}.txt")
    with open(items, "w") as f:
        f.writelines(f"{p}={v}\n" for p, v in sorted(packages.items()))
    owned = owned_files(root, admindir, packages)
    digest_of = {f: sha256_of(f) for fs in owned.values() for f in fs}
    apart = set()
    if apart_served:
        served = served_versions(release)
        apart = {p for p, v in packages.items() if (p, v) not in served and p in owned}
    svc = Service(work, f'[vendors.debian]\nreleases = ["{release}"]\nitems_file = "{items}"\n')
    try:
        secs, _ = svc.ingest("debian")
        records = svc.serve()
        known = svc.known(set(digest_of.values()))
    finally:
        svc.stop()
    return report(title, owned, known, digest_of, secs, records, apart)


def roots(work):
    shares = []
    for suite in ["oldstable", "stable"]:
        release = codename(suite)
        root = os.path.join(work, f"root-{release}")
        if not os.path.exists(os.path.join(root, "var/lib/dpkg/status")):
            log(f"debootstrap --variant=minbase {release}")
            subprocess.run(["debootstrap", "--variant=minbase", release, root, MIRROR], check=True,
                           stdout=subprocess.DEVNULL)
        shares.append(debian_system(work, f"fresh minbase {release} root", root, release))
    return shares


def host(work):
    release = None
    with open("/etc/os-release") as f:
        for line in f:
            if line.startswith("VERSION_CODENAME="):
                release = line.split("=", 1)[1].strip().strip('"')
    if not release:
        raise SystemExit("no VERSION_CODENAME in /etc/os-release")
    return [debian_system(work, f"this machine ({release})", "/", release, apart_served=True)]


def python_env(work):
    target = os.path.join(work, "site-packages")
    if not os.path.isdir(target):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:",
                        "--target", target, *PYTHON_PINS], check=True)
    owned = {}
    for entry in os.listdir(target):
        if not entry.endswith(".dist-info"):
            continue
        package = entry.split("-")[0].lower()
        with open(os.path.join(target, entry, "RECORD"), encoding="utf-8") as f:
            for line in f:
                rel = line.split(",")[0]
                if ".so" in os.path.basename(rel):
                    path = os.path.join(target, rel)
                    if os.path.isfile(path):
                        owned.setdefault(package, set()).add(path)
    digest_of = {f: sha256_of(f) for fs in owned.values() for f in fs}
    items = ", ".join(json.dumps(p) for p in PYTHON_PINS)
    svc = Service(work, f"[vendors.pypi]\nitems = [{items}]\n")
    try:
        secs, _ = svc.ingest("pypi")
        records = svc.serve()
        known = svc.known(set(digest_of.values()))
    finally:
        svc.stop()
    return [report(f"Python environment ({len(PYTHON_PINS)} pinned packages, compiled modules)",
                   owned, known, digest_of, secs, records)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=["roots", "host", "python"])
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    parts = args.only or ["roots", "host", "python"]
    work = os.environ.get("COVERAGE_WORK") or tempfile.mkdtemp(prefix="knowngood-coverage-")
    os.makedirs(work, exist_ok=True)
    log(f"work directory {work}")
    try:
        for part in parts:
            {"roots": roots, "host": host, "python": python_env}[part](work)
    finally:
        if not args.keep and not os.environ.get("COVERAGE_WORK"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
