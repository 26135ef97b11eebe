//! Writes the seed inputs of the fuzz targets (`fuzz/`), made by the same code the tests use:
//! a signed and an unsigned PE, CRLs, small RDS databases of both layouts, SBOMs of every
//! accepted format (and nested past the parser's depth limit), OSV advisories, lookup bodies
//! and TAXII query strings.
//!
//!     cargo run -p testkit --example fuzz_seeds -- fuzz/corpus
//!
//! Each target's seeds go to `<dir>/<target>/`. The signed PE needs `osslsigncode`; without
//! it only the unsigned one is written.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a developer tool: fails loudly

use std::path::{Path, PathBuf};

use chrono::{TimeZone, Utc};
use corpus::Layout;
use testkit::pki::{self, RevocationReason, TestCa};

fn write(dir: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = dir.join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn main() {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fuzz/corpus".into()),
    );

    // Lookup bodies: accepted, and each kind of refusal.
    let lookups = [
        format!(
            r#"{{"hashes": ["{SHA}", "d41d8cd98f00b204e9800998ecf8427e", "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709"]}}"#
        ),
        format!(r#"{{"hashes": ["{SHA}", "{SHA}"]}}"#),
        r#"{"hashes": []}"#.to_string(),
        r#"{"hashes": ["xyz"], "extra": 1}"#.to_string(),
        r#"{"hashes": ["a\u0000b"]}"#.to_string(),
        format!(
            r#"{{"hashes": [{}]}}"#,
            vec![format!("\"{SHA}\""); 101].join(",")
        ),
    ];
    for (i, body) in lookups.iter().enumerate() {
        write(
            &out,
            "lookup_body",
            &format!("seed-{i}.json"),
            body.as_bytes(),
        );
    }

    // PE files: unsigned, and signed with a chain whose leaf names a CRL.
    let ca = TestCa::new("Fuzz Seed CA");
    let pe = pki::build_pe(1);
    write(&out, "authenticode", "unsigned.exe", &pe);
    if pki::have_osslsigncode("fuzz_seeds") {
        let leaf = ca.leaf(
            "Fuzz Seed Signer",
            &[0x01, 0x02, 0x03],
            "http://crl.example/ca.crl",
        );
        let tmp = tempfile::tempdir().unwrap();
        write(
            &out,
            "authenticode",
            "signed.exe",
            &pki::sign_pe(tmp.path(), &pe, &leaf, &ca),
        );
    }

    // CRLs: empty, and listing serials with and without a reason.
    let at = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
    write(&out, "crl", "empty.crl", &ca.crl(1, at, &[]));
    let revoked: [(&[u8], _, _); 3] = [
        (
            &[0x01, 0x02, 0x03],
            at,
            Some(RevocationReason::KeyCompromise),
        ),
        (&[0x00, 0xff], at, None),
        (&[0x7f; 20], at, Some(RevocationReason::Superseded)),
    ];
    write(&out, "crl", "three.crl", &ca.crl(2, at, &revoked));

    // RDS databases, both layouts.
    let tmp = tempfile::tempdir().unwrap();
    for (name, layout) in [("minimal.db", Layout::Minimal), ("full.db", Layout::Full)] {
        let path = tmp.path().join(name);
        corpus::synth::write_rds(&path, layout, 4, 7).unwrap();
        write(&out, "rds_reader", name, &std::fs::read(&path).unwrap());
    }

    // SBOMs: CycloneDX JSON and XML, SPDX JSON, tag-value and 3.0 JSON-LD.
    let sboms = [
        (
            "cyclonedx.json",
            format!(
                r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","metadata":{{"component":{{"name":"app"}}}},
            "components":[{{"type":"library","name":"requests","version":"2.31.0","purl":"pkg:pypi/requests@2.31.0",
            "hashes":[{{"alg":"SHA-256","content":"{SHA}"}}],
            "components":[{{"name":"urllib3","version":"2.0.0","purl":"pkg:pypi/urllib3@2.0.0"}}]}},
            {{"name":"core","group":"@babel","version":"7.0.0","purl":"pkg:npm/%40babel/core@7.0.0?x=1#sub"}}]}}"#
            ),
        ),
        (
            "cyclonedx.xml",
            format!(
                r#"<?xml version="1.0"?><bom xmlns="http://cyclonedx.org/schema/bom/1.4" version="1">
            <components><component type="library"><name>lodash</name><version>4.17.21</version>
            <purl>pkg:npm/lodash@4.17.21</purl><hashes><hash alg="SHA-256">{SHA}</hash></hashes>
            </component></components></bom>"#
            ),
        ),
        (
            "spdx.json",
            format!(
                r#"{{"spdxVersion":"SPDX-2.3","packages":[{{"SPDXID":"SPDXRef-1","name":"lodash","versionInfo":"4.17.21",
            "externalRefs":[{{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"pkg:npm/lodash@4.17.21"}}],
            "checksums":[{{"algorithm":"SHA256","checksumValue":"{SHA}"}}]}}]}}"#
            ),
        ),
        (
            "spdx.tv",
            format!(
                "SPDXVersion: SPDX-2.2\nDataLicense: CC0-1.0\nDocumentComment: <text>multi\nline</text>\n\
             PackageName: requests\nSPDXID: SPDXRef-1\nPackageVersion: 2.31.0\n\
             PackageChecksum: SHA256: {SHA}\nExternalRef: PACKAGE-MANAGER purl pkg:pypi/requests@2.31.0\n"
            ),
        ),
        (
            "spdx3.jsonld",
            format!(
                r#"{{"@context":"https://spdx.org/rdf/3.0.1/spdx-context.jsonld","@graph":[
            {{"type":"CreationInfo","@id":"_:c","specVersion":"3.0.1"}},
            {{"type":"software_Package","spdxId":"urn:1","name":"requests","software_packageVersion":"2.31.0",
            "externalIdentifier":[{{"type":"ExternalIdentifier","externalIdentifierType":"packageUrl","identifier":"pkg:pypi/requests@2.31.0"}}],
            "verifiedUsing":[{{"type":"Hash","algorithm":"sha256","hashValue":"{SHA}"}}]}}]}}"#
            ),
        ),
    ];
    for (name, body) in &sboms {
        write(&out, "sbom", name, body.as_bytes());
    }
    // Nesting far past the parser's limit (each of these once overflowed the stack), and
    // just within it.
    let xml = |inner: String| {
        format!(
            r#"<?xml version="1.0"?><bom xmlns="http://cyclonedx.org/schema/bom/1.5" version="1">{inner}</bom>"#
        )
    };
    let metadata_xml = |depth: usize| {
        xml(format!(
            "<metadata>{}{}</metadata><components/>",
            "<tools>".repeat(depth),
            "</tools>".repeat(depth)
        ))
    };
    let components_xml = |depth: usize| {
        xml(format!(
            "<components>{}{}</components>",
            r#"<component type="library"><name>a</name><components>"#.repeat(depth),
            "</components></component>".repeat(depth)
        ))
    };
    let components_json = |depth: usize| {
        format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}{}]}}"#,
            r#"{"name":"a","purl":"pkg:npm/a@1.0.0","components":["#.repeat(depth),
            "]}".repeat(depth)
        )
    };
    let nested = [
        ("deep-metadata.xml", metadata_xml(10_000)),
        ("deep-components.xml", components_xml(2_000)),
        ("limit-components.xml", components_xml(62)),
        ("deep-components.json", components_json(3_000)),
        ("limit-components.json", components_json(63)),
        (
            "deep-metadata.json",
            format!(
                r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","metadata":{}1{}}}"#,
                "[".repeat(10_000),
                "]".repeat(10_000)
            ),
        ),
        (
            "deep-spdx3.jsonld",
            format!(
                r#"{{"@context":"https://spdx.org/rdf/3.0.1/spdx-context.jsonld","@graph":[{{"type":"software_Package","name":"a","verifiedUsing":{}[]{}}}]}}"#,
                "[".repeat(10_000),
                "]".repeat(10_000)
            ),
        ),
        (
            "deep-spdx.tv",
            format!(
                "SPDXVersion: SPDX-2.3\n{}PackageName: a\n",
                "PackageComment: <text>\n".repeat(2_000)
            ),
        ),
    ];
    for (name, body) in &nested {
        write(&out, "sbom", name, body.as_bytes());
    }

    // OSV advisories: a real Go standard-library record, a mixed one, one nested too deep.
    write(
        &out,
        "osv",
        "GO-2022-0229.json",
        include_bytes!("../../packages/testdata/osv/GO-2022-0229.json"),
    );
    write(
        &out,
        "osv",
        "mixed.json",
        br#"{"id":"MIX-1","aliases":["CVE-2024-1"],"affected":[
            {"package":{"ecosystem":"Maven","name":"org.x:y"}},
            {"package":{"ecosystem":"PyPI","name":"Django"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"4.2"},{"fixed":"4.2.11"},{"introduced":"5.0a1"},{"last_affected":"5.0.2"}]}],"versions":["3.2.1"]},
            {"package":{"ecosystem":"npm","name":"lodash"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"4.17.21"}]}]},
            {"package":{"ecosystem":"Go","name":"toolchain"},"ranges":[{"type":"SEMVER","events":[{"introduced":"1.21.0-0"},{"fixed":"1.21.5"}]}]}]}"#,
    );
    write(
        &out,
        "osv",
        "deep.json",
        format!(
            r#"{{"id":"X","affected":[{{"package":{{"ecosystem":"npm","name":"a"}},"ranges":[{{"type":"SEMVER","events":[{{"introduced":{}1{}}}]}}]}}]}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        )
        .as_bytes(),
    );

    // TAXII query strings.
    let queries = [
        "added_after=2026-03-01T12:00:01.000Z&limit=2",
        "limit=1&next=YWZ0ZXI6MTc3MjM2NjQwMDAwMDAwMA",
        "match[type]=indicator,file&match[version]=last&match[spec_version]=2.1",
        "match[id]=indicator--1,file--2&match[version]=2026-03-01T12:00:00Z,first",
        "limit=0",
        "added_after=not-a-time",
    ];
    for (i, q) in queries.iter().enumerate() {
        write(&out, "taxii_query", &format!("seed-{i}.txt"), q.as_bytes());
    }
    // Filters are flat comma-separated lists: long ones, and bracket runs that would nest in
    // a recursive reader.
    let long_lists = [
        format!("match[id]={}", vec!["indicator--1"; 5_000].join(",")),
        format!(
            "match[type]={}&match[version]={}",
            "[".repeat(10_000),
            "(".repeat(10_000)
        ),
    ];
    for (i, q) in long_lists.iter().enumerate() {
        write(&out, "taxii_query", &format!("long-{i}.txt"), q.as_bytes());
    }
    println!("fuzz seeds written under {}", out.display());
}
