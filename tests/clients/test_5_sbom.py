"""Bills of materials written by real generators, scanned by the real server.

CycloneDX's Python generator (`cyclonedx-py requirements`, from cyclonedx-bom) turns the
pinned requirements file `sbom/requirements.txt` into CycloneDX 1.5 JSON and 1.6 XML; the
SPDX project's library (spdx-tools) writes the same packages as an SPDX 2.3 JSON document,
validated on writing, and its `pyspdxtools` converts that to tag-value. Both work offline:
the generator reads the file and resolves nothing. Each document is posted to
`/api/v1/intel/sbom` and must come back with the file's eight packages: their ecosystem and
version, the wheel hash the requirement pins, the real advisory imported for `requests`
(GHSA-9wx4-h78v-vm56, as published in the OSV format by GitHub's advisory database) and
the look-alike `reqeusts` flagged."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from spdx_tools.spdx.model import (
    Actor,
    ActorType,
    Checksum,
    ChecksumAlgorithm,
    CreationInfo,
    Document,
    ExternalPackageRef,
    ExternalPackageRefCategory,
    Package,
    Relationship,
    RelationshipType,
    SpdxNoAssertion,
)
from spdx_tools.spdx.writer.write_anything import write_file

HERE = pathlib.Path(__file__).parent / "sbom"
BIN = pathlib.Path(sys.executable).parent
REQUESTS_WHEEL = "58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f"
EXPECTED = {
    "certifi": "2024.2.2",
    "charset-normalizer": "3.3.2",
    "idna": "3.6",
    "python-dateutil": "2.9.0.post0",
    "reqeusts": "2.31.0",
    "requests": "2.31.0",
    "six": "1.16.0",
    "urllib3": "2.2.1",
}


def tool(name):
    path = BIN / name
    assert path.exists(), f"{name} is not installed in the client venv"
    return str(path)


@pytest.fixture(scope="module")
def advisories(env):
    """The real OSV document, imported with the service's own command while it runs."""
    out = subprocess.run(
        [
            os.environ["KG_BIN"],
            "advisories",
            "import",
            str(HERE / "GHSA-9wx4-h78v-vm56.json"),
            "--data-dir",
            str(env.data_dir),
            "--config",
            os.environ["KG_CONFIG"],
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "1 imported" in out.stdout + out.stderr, out


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The documents, generated now from the committed requirements file."""
    out = tmp_path_factory.mktemp("sbom")
    requirements = HERE / "requirements.txt"
    docs = {}
    for fmt, version, name in (("JSON", "1.5", "bom.json"), ("XML", "1.6", "bom.xml")):
        subprocess.run(
            [tool("cyclonedx-py"), "requirements", str(requirements), "--sv", version,
             "--of", fmt, "-o", str(out / name)],
            check=True,
            timeout=120,
        )
        docs[f"cyclonedx-{fmt.lower()}"] = out / name

    # The CycloneDX packages as an SPDX 2.3 document (validated by write_file), then
    # converted to tag-value by the SPDX tools' command line.
    bom = json.loads((out / "bom.json").read_text())
    packages = []
    for i, c in enumerate(bom["components"]):
        digests = [h for r in c.get("externalReferences", []) for h in r.get("hashes", [])]
        packages.append(
            Package(
                spdx_id=f"SPDXRef-Package-{i}",
                name=c["name"],
                version=c["version"],
                download_location=SpdxNoAssertion(),
                files_analyzed=False,
                checksums=[
                    Checksum(ChecksumAlgorithm.SHA256, h["content"])
                    for h in digests
                    if h["alg"] == "SHA-256"
                ],
                external_references=[
                    ExternalPackageRef(
                        ExternalPackageRefCategory.PACKAGE_MANAGER, "purl", c["purl"]
                    )
                ],
            )
        )
    document = Document(
        CreationInfo(
            spdx_version="SPDX-2.3",
            spdx_id="SPDXRef-DOCUMENT",
            name="clients-requirements",
            document_namespace="https://knowngood.invalid/spdx/clients-requirements",
            creators=[Actor(ActorType.TOOL, "cyclonedx-py")],
            created=datetime.now(timezone.utc).replace(microsecond=0),
        ),
        packages=packages,
        relationships=[
            Relationship("SPDXRef-DOCUMENT", RelationshipType.DESCRIBES, p.spdx_id)
            for p in packages
        ],
    )
    write_file(document, str(out / "bom.spdx.json"))
    subprocess.run(
        [tool("pyspdxtools"), "-i", str(out / "bom.spdx.json"), "-o", str(out / "bom.spdx")],
        check=True,
        timeout=120,
    )
    docs["spdx-json"] = out / "bom.spdx.json"
    docs["spdx-tag-value"] = out / "bom.spdx"
    yield docs
    shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize(
    "doc, fmt, spec, encoding",
    [
        ("cyclonedx-json", "CycloneDX", "1.5", "json"),
        ("cyclonedx-xml", "CycloneDX", "1.6", "xml"),
        ("spdx-json", "SPDX", "SPDX-2.3", "json"),
        ("spdx-tag-value", "SPDX", "SPDX-2.3", "tag-value"),
    ],
)
def test_generated_sbom_is_scanned(env, advisories, generated, doc, fmt, spec, encoding):
    body = generated[doc].read_bytes()
    r = env.post(
        "/api/v1/intel/sbom",
        data=body,
        headers={"x-api-key": env.teams_admin_key, "content-type": "application/octet-stream"},
    )
    assert r.status_code == 200, r.text
    report = r.json()
    assert (report["format"], report["spec_version"], report["encoding"]) == (fmt, spec, encoding)
    components = {c["name"]: c for c in report["components"]}
    assert {n: c["version"] for n, c in components.items()} == EXPECTED
    assert {c["ecosystem"] for c in report["components"]} == {"pypi"}
    assert all(c["purl"].startswith("pkg:pypi/") for c in report["components"])

    summary = report["summary"]
    assert summary["components"] == len(EXPECTED)
    # The one pinned wheel hash is looked up (the service has no record of it).
    assert components["requests"]["hash"]["classification"] == "unknown"
    assert (summary["hash_unknown"], summary["hash_known"]) == (1, 0)
    assert summary["no_hash"] == len(EXPECTED) - 1

    look_alike = components["reqeusts"]["name_risk"]
    assert look_alike["risk"] == "typosquat"
    assert look_alike["nearest_known"] == "requests"
    assert summary["typosquat"] == 1
    for name in ("requests", "urllib3", "certifi", "six", "idna"):
        assert components[name]["name_risk"]["risk"] == "known", components[name]

    found = components["requests"]["advisories"]
    assert [a["id"] for a in found] == ["GHSA-9wx4-h78v-vm56"]
    assert found[0]["aliases"] == ["CVE-2024-35195"]
    assert summary["with_advisories"] == 1
