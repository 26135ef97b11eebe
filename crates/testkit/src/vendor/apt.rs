//! A Debian-format archive served by a [`Site`] (feature `apt`): suites whose `InRelease` is
//! cleartext-signed with an OpenPGP key made at test time (standing in for the archive
//! key), `Packages.xz` indexes whose SHA-256 and size the signed `Release` lists, and `.deb`
//! packages (ar: `debian-binary`, `control.tar.gz`, `data.tar.xz`, with the package's own
//! `md5sums`) whose SHA-256 the index lists. Layout and fields follow
//! <https://wiki.debian.org/DebianRepository/Format> and deb(5); the Release fields are those
//! of `deb.debian.org/debian/dists/stable/InRelease`, Ubuntu's `meta-release` that of
//! `changelogs.ubuntu.com/meta-release`.

use std::io::Write as _;

use md5::Digest as _;
use pgp::composed::{CleartextSignedMessage, KeyType, SecretKeyParamsBuilder, SignedSecretKey};
use pgp::types::Password;

use super::Site;

/// Ubuntu's release list as the release upgrader reads it: warty (unsupported) and noble
/// (supported).
pub const UBUNTU_META_RELEASE: &str = "Dist: warty\nName: Warty Warthog\nVersion: 04.10\nDate: Wed, 20 Oct 2004 07:28:17 UTC\nSupported: 0\n\
Description: This is the 04.10 release\nRelease-File: http://old-releases.ubuntu.com/ubuntu/dists/warty/Release\n\n\
Dist: noble\nName: Noble Numbat\nVersion: 24.04.3 LTS\nDate: Thu, 25 April 2024 15:10:33 UTC\nSupported: 1\n\
Description: This is the 24.04.3 LTS release\nRelease-File: http://archive.ubuntu.com/ubuntu/dists/noble-updates/Release\n\
ReleaseNotes: http://archive.ubuntu.com/ubuntu/dists/noble-updates/main/dist-upgrader-all/current/ReleaseAnnouncement\n\
UpgradeTool: http://archive.ubuntu.com/ubuntu/dists/noble-updates/main/dist-upgrader-all/current/noble.tar.gz\n\
UpgradeToolSignature: http://archive.ubuntu.com/ubuntu/dists/noble-updates/main/dist-upgrader-all/current/noble.tar.gz.gpg\n";

fn sha256(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

fn md5(data: &[u8]) -> String {
    hex::encode(md5::Md5::digest(data))
}

/// A signing key made for this test (an archive's, or a repository's), and its public key
/// armored.
pub fn archive_key() -> (SignedSecretKey, String) {
    let mut rng = rand08::thread_rng();
    let params = SecretKeyParamsBuilder::default()
        .key_type(KeyType::Ed25519Legacy)
        .can_certify(true)
        .can_sign(true)
        .primary_user_id("Test Archive Automatic Signing Key <ftpmaster@example.org>".into())
        .build()
        .unwrap();
    let secret = params
        .generate(&mut rng)
        .unwrap()
        .sign(&mut rng, &Password::empty())
        .unwrap();
    let public = secret
        .signed_public_key()
        .to_armored_string(None.into())
        .unwrap();
    (secret, public)
}

/// `text` cleartext-signed with `key`, as an `InRelease` file is.
pub fn sign(key: &SignedSecretKey, text: &str) -> String {
    let mut rng = rand08::thread_rng();
    CleartextSignedMessage::sign(&mut rng, text, &**key, &Password::empty())
        .unwrap()
        .to_armored_string(None.into())
        .unwrap()
}

pub fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    b.append_data(&mut dir, "./usr/bin/", std::io::empty())
        .unwrap();
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// An `ar` archive (the `.deb` container): global header, 60-byte member headers, even
/// padding.
fn ar(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in members {
        let header = format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            name,
            1_700_000_000,
            0,
            0,
            "100644",
            data.len()
        );
        assert_eq!(header.len(), 60);
        out.extend(header.bytes());
        out.extend(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

/// A `.deb` of `package` whose data holds `files` (paths without the leading `./`) and
/// whose `md5sums` control file is `md5sums`.
fn build_deb(package: &str, files: &[(&str, &[u8])], md5sums: &str) -> Vec<u8> {
    let control = format!("Package: {package}\n");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar(&[
        ("./control", control.as_bytes()),
        ("./md5sums", md5sums.as_bytes()),
    ]))
    .unwrap();
    let control = gz.finish().unwrap();
    let paths: Vec<String> = files.iter().map(|(p, _)| format!("./{p}")).collect();
    let data: Vec<(&str, &[u8])> = paths
        .iter()
        .zip(files)
        .map(|(p, (_, d))| (p.as_str(), *d))
        .collect();
    ar(&[
        ("debian-binary", b"2.0\n".to_vec()),
        ("control.tar.gz", control),
        ("data.tar.xz", xz(&tar(&data))),
    ])
}

/// A `.deb` of `package` holding `files` (paths without the leading `./`, e.g.
/// `usr/bin/ls`), its `md5sums` listing each.
pub fn deb_package(package: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let md5sums: String = files
        .iter()
        .map(|(path, data)| format!("{}  {path}\n", md5(data)))
        .collect();
    build_deb(package, files, &md5sums)
}

/// The ELF `ls` of a package for `arch`.
pub fn ls_binary(arch: &str) -> Vec<u8> {
    let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
    elf.extend(format!("coreutils ls for {arch} ").repeat(2_000).bytes());
    elf
}

/// A coreutils `.deb` for `arch`: `usr/bin/ls` and its copyright file.
pub fn deb(arch: &str) -> Vec<u8> {
    deb_listing(arch, &md5(&ls_binary(arch)))
}

/// A coreutils `.deb` whose `md5sums` control file lists `ls_md5` for `usr/bin/ls`.
pub fn deb_listing(arch: &str, ls_md5: &str) -> Vec<u8> {
    let ls = ls_binary(arch);
    let md5sums = format!(
        "{ls_md5}  usr/bin/ls\n{}  usr/share/doc/coreutils/copyright\n",
        md5(b"GPL-3+\n")
    );
    build_deb(
        "coreutils",
        &[
            ("usr/bin/ls", &ls),
            ("usr/share/doc/coreutils/copyright", b"GPL-3+\n"),
        ],
        &md5sums,
    )
}

/// The `Packages` stanza of `body` served at `filename`.
pub fn stanza(name: &str, version: &str, arch: &str, filename: &str, body: &[u8]) -> String {
    format!(
        "Package: {name}\nVersion: {version}\nInstalled-Size: 6000\nMaintainer: Michael Stone <mstone@debian.org>\n\
         Architecture: {arch}\nMulti-Arch: foreign\nEssential: yes\nDescription: GNU core utilities\n\
         Description-md5: 71ce3b9b9fb9d5b3e1e5b3ab3a2e8d4e\nTag: interface::commandline,\n implemented-in::c\n\
         Section: utils\nPriority: required\nFilename: {filename}\nSize: {}\nMD5sum: {}\nSHA256: {}\n",
        body.len(),
        md5(body),
        sha256(body)
    )
}

/// One suite of an archive: `<prefix>/dists/<suite>/`, its `Release` naming `origin`
/// (`Debian`, `Ubuntu`), `codename` and `arches`.
pub struct Suite<'a> {
    pub origin: &'a str,
    pub prefix: &'a str,
    pub suite: &'a str,
    pub codename: &'a str,
    pub arches: &'a [&'a str],
}

/// A package of a suite: (name, version, priority, `.deb` bytes).
pub type Package<'a> = (&'a str, &'a str, &'a str, Vec<u8>);

/// Publishes `suite` on `site`, signed by `key`: its `InRelease` (with `Codename`) over one
/// `Packages.xz` per architecture, each listing `packages` (the same `.deb` for every
/// architecture, served at its `Filename`,
/// `pool/main/<initial>/<name>/<name>_<version>_<arch>.deb`, under the prefix).
pub fn publish(site: &Site, key: &SignedSecretKey, suite: &Suite, packages: &[Package]) {
    let Suite {
        origin,
        prefix,
        suite,
        codename,
        arches,
    } = *suite;
    let mut sums = String::new();
    for arch in arches {
        let mut stanzas = Vec::new();
        for (name, version, priority, body) in packages {
            let filename = format!(
                "pool/main/{}/{name}/{name}_{version}_{arch}.deb",
                &name[..1]
            );
            stanzas.push(
                stanza(name, version, arch, &filename, body)
                    .replace("Priority: required", &format!("Priority: {priority}")),
            );
            site.file(&format!("{prefix}/{filename}"), body.clone());
        }
        let index = xz(stanzas.join("\n").as_bytes());
        sums.push_str(&format!(
            " {} {} main/binary-{arch}/Packages.xz\n",
            sha256(&index),
            index.len()
        ));
        site.file(
            &format!("{prefix}/dists/{suite}/main/binary-{arch}/Packages.xz"),
            index,
        );
    }
    let release = format!(
        "Origin: {origin}\nLabel: {origin}\nSuite: {suite}\nCodename: {codename}\n\
         Date: Sat, 08 Nov 2025 09:00:00 UTC\nArchitectures: {}\nComponents: main\n\
         SHA256:\n{sums}",
        arches.join(" ")
    );
    site.file(
        &format!("{prefix}/dists/{suite}/InRelease"),
        sign(key, &release),
    );
}

/// A signed Debian suite at `<prefix>/dists/<suite>/` for amd64 and arm64 (see
/// [`publish`]).
pub fn publish_suite(
    site: &Site,
    key: &SignedSecretKey,
    prefix: &str,
    suite: &str,
    codename: &str,
    packages: &[Package],
) {
    let suite = Suite {
        origin: "Debian",
        prefix,
        suite,
        codename,
        arches: &["amd64", "arm64"],
    };
    publish(site, key, &suite, packages);
}

/// One file of a binary package version as Debian's snapshot service places it: its
/// architecture, the archive and moment it was first seen in, its pool directory and name,
/// and its bytes (for its SHA-1 and size).
pub struct SnapshotFile<'a> {
    pub architecture: &'a str,
    /// `debian` or `debian-security`.
    pub archive_name: &'a str,
    /// `YYYYMMDDTHHMMSSZ`.
    pub first_seen: &'a str,
    /// `/pool/main/c/coreutils`.
    pub path: &'a str,
    /// `coreutils_9.1-1_amd64.deb`.
    pub name: &'a str,
    pub body: &'a [u8],
}

/// The snapshot service's answer to `/mr/binary/<name>/<version>/binfiles?fileinfo=1` for
/// `files`: `result` lists each file by architecture and SHA-1, `fileinfo` where each SHA-1
/// was first seen. Format: <https://salsa.debian.org/snapshot-team/snapshot/-/blob/master/API>.
pub fn snapshot_binfiles(name: &str, version: &str, files: &[SnapshotFile]) -> String {
    let sha1 = |body: &[u8]| {
        hex::encode(aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
            body,
        ))
    };
    let result: Vec<String> = files
        .iter()
        .map(|f| {
            format!(
                "{{\"architecture\": {:?}, \"hash\": {:?}}}",
                f.architecture,
                sha1(f.body)
            )
        })
        .collect();
    let fileinfo: Vec<String> = files
        .iter()
        .map(|f| {
            format!(
                "{:?}: [{{\"archive_name\": {:?}, \"first_seen\": {:?}, \"name\": {:?}, \
                 \"path\": {:?}, \"size\": {}}}]",
                sha1(f.body),
                f.archive_name,
                f.first_seen,
                f.name,
                f.path,
                f.body.len()
            )
        })
        .collect();
    format!(
        "{{\"_comment\": \"foo\", \"binary\": {name:?}, \"binary_version\": {version:?}, \
         \"result\": [{}], \"fileinfo\": {{{}}}}}",
        result.join(", "),
        fileinfo.join(", ")
    )
}
