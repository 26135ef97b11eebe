//! STIX 2.1 (<https://docs.oasis-open.org/cti/stix/v2.1/os/stix-v2.1-os.html>): per record
//! an `indicator` (benign, a pattern over every hash the record has), a `file` and a
//! `software` observable, and `related-to` relationships between them; the producer's
//! `identity` and the TLP:CLEAR `marking-definition` once. SDO and SRO ids are derived from
//! what they describe (stable across days, see [`own_uuid`]); SCO ids are the deterministic
//! ids of STIX 2.1 section 2.9. Timestamps have milliseconds; hex is lowercase.

use std::collections::HashSet;
use std::sync::LazyLock;

use chrono::{DateTime, TimeZone, Utc};
use model::HashRecord;
use serde_json::{Value, json};

use crate::millis;

pub const MEDIA_TYPE: &str = "application/stix+json;version=2.1";

/// The namespace of deterministic SCO ids (STIX 2.1 section 2.9).
const SCO_NAMESPACE: [u8; 16] = [
    0x00, 0xab, 0xed, 0xb4, 0xaa, 0x42, 0x46, 0x6c, 0x9c, 0x01, 0xfe, 0xd2, 0x33, 0x15, 0xa9, 0xb7,
];

/// This service's namespace for the ids of its own objects.
static NAMESPACE: LazyLock<[u8; 16]> = LazyLock::new(|| uuid5_bytes(&SCO_NAMESPACE, "knowngood"));

/// The TLP:CLEAR marking of TLP 2.0, as OASIS publishes it.
pub const TLP_CLEAR: &str = "marking-definition--94868c89-83c2-464b-929b-a1a8aa3c8487";
const TLP_EXTENSION: &str = "extension-definition--60a3c5c5-0d10-413e-aab3-9e08dde9e88d";

/// The producer.
pub static IDENTITY: LazyLock<String> =
    LazyLock::new(|| format!("identity--{}", own_uuid("identity:knowngood")));

/// When the producer's identity (and this service's use of the marking) begins; also their
/// date added in TAXII, before any record's.
pub fn origin() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
}

fn uuid5_bytes(namespace: &[u8; 16], name: &str) -> [u8; 16] {
    use sha1::Digest as _;
    let mut hasher = sha1::Sha1::new();
    hasher.update(namespace);
    hasher.update(name.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x50;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

fn uuid_text(b: [u8; 16]) -> String {
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A UUIDv5 (RFC 9562) of `name` in `namespace`.
pub fn uuid5(namespace: &[u8; 16], name: &str) -> String {
    uuid_text(uuid5_bytes(namespace, name))
}

/// The id of one of this service's own objects (SDOs, SROs, TAXII collections): STIX 2.1
/// asks for UUIDv4 there, and these must also be stable across days and replicas, so the
/// "random" bits are SHA-256 of the name in this service's namespace, with the version-4
/// and variant bits set.
pub fn own_uuid(name: &str) -> String {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    hasher.update(*NAMESPACE);
    hasher.update(name.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid_text(bytes)
}

/// The deterministic id of an SCO: UUIDv5 in the SCO namespace over the JSON
/// canonicalization (RFC 8785) of its id-contributing properties. Our properties are
/// strings and objects of strings: sorted keys (serde_json's map is ordered) and
/// serde_json's escaping are exactly the canonical form.
fn sco_id(kind: &str, contributing: &Value) -> String {
    let canonical = serde_json::to_string(contributing).unwrap_or_default();
    format!("{kind}--{}", uuid5(&SCO_NAMESPACE, &canonical))
}

/// The record's hashes under their STIX names.
fn hashes(r: &HashRecord) -> serde_json::Map<String, Value> {
    let n = &r.record;
    let mut hashes = serde_json::Map::new();
    hashes.insert("SHA-256".into(), n.hash_sha256.clone().into());
    if let Some(sha1) = &n.hash_sha1 {
        hashes.insert("SHA-1".into(), sha1.clone().into());
    }
    if let Some(md5) = &n.hash_md5 {
        hashes.insert("MD5".into(), md5.clone().into());
    }
    hashes
}

/// The one hash that contributes to a file's id: MD5, else SHA-1, else SHA-256, with its
/// STIX name; records that share it share the file observable.
pub fn contributing_hash(r: &HashRecord) -> (&'static str, &str) {
    let n = &r.record;
    match (&n.hash_md5, &n.hash_sha1) {
        (Some(md5), _) => ("MD5", md5),
        (None, Some(sha1)) => ("SHA-1", sha1),
        (None, None) => ("SHA-256", &n.hash_sha256),
    }
}

/// The indicator's pattern: the file has any of the record's hashes.
fn pattern(r: &HashRecord) -> String {
    let n = &r.record;
    let mut terms = vec![format!("file:hashes.'SHA-256' = '{}'", n.hash_sha256)];
    if let Some(sha1) = &n.hash_sha1 {
        terms.push(format!("file:hashes.'SHA-1' = '{sha1}'"));
    }
    if let Some(md5) = &n.hash_md5 {
        terms.push(format!("file:hashes.MD5 = '{md5}'"));
    }
    format!("[{}]", terms.join(" OR "))
}

/// One STIX object with what TAXII needs to know of it.
#[derive(Debug, Clone)]
pub struct StixObject {
    pub id: String,
    pub kind: &'static str,
    /// `modified`, or `created`, or for observables (which have neither) the date added.
    pub version: DateTime<Utc>,
    /// When the object entered the feed: distinct per object, increasing with the records.
    pub date_added: DateTime<Utc>,
    pub json: String,
}

impl StixObject {
    fn new(
        kind: &'static str,
        json: &Value,
        version: DateTime<Utc>,
        date_added: DateTime<Utc>,
    ) -> Self {
        Self {
            id: json["id"].as_str().unwrap_or_default().to_string(),
            kind,
            version,
            date_added,
            json: serde_json::to_string(json).unwrap_or_default(),
        }
    }
}

/// The objects every feed starts with: the producer and the marking.
pub fn preamble() -> Vec<StixObject> {
    let at = origin();
    let identity = json!({
        "type": "identity",
        "spec_version": "2.1",
        "id": *IDENTITY,
        "created": millis(at),
        "modified": millis(at),
        "name": "knowngood",
        "description": "Known-good hash verification service: hashes of vendor releases.",
        "identity_class": "system",
        "object_marking_refs": [TLP_CLEAR],
    });
    let marking = json!({
        "type": "marking-definition",
        "spec_version": "2.1",
        "id": TLP_CLEAR,
        "created": "2022-10-01T00:00:00.000Z",
        "name": "TLP:CLEAR",
        "extensions": {
            TLP_EXTENSION: {"extension_type": "property-extension", "tlp_2_0": "clear"}
        },
    });
    let marking_created = Utc
        .with_ymd_and_hms(2022, 10, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    vec![
        StixObject::new("identity", &identity, at, at),
        StixObject::new(
            "marking-definition",
            &marking,
            marking_created,
            at + chrono::Duration::microseconds(1),
        ),
    ]
}

/// The ids of the objects one record names, computed without the objects themselves.
pub struct RecordObjectIds {
    pub indicator: String,
    pub file: String,
    pub software: String,
    /// The relationship indicator -> file.
    pub indicates_file: String,
    /// The relationship file -> software.
    pub file_of_software: String,
}

impl RecordObjectIds {
    pub fn of(r: &HashRecord) -> Self {
        let n = &r.record;
        let (kind, digest) = contributing_hash(r);
        let id_hashes = serde_json::Map::from_iter([(kind.to_owned(), Value::from(digest))]);
        let indicator = format!("indicator--{}", own_uuid(&format!("record:{}", r.id)));
        let file = sco_id(
            "file",
            &json!({"hashes": id_hashes, "name": n.executable_name}),
        );
        let software = sco_id(
            "software",
            &json!({"name": n.executable_name, "vendor": n.vendor, "version": n.version}),
        );
        Self {
            indicates_file: relationship_id(&indicator, &file),
            file_of_software: relationship_id(&file, &software),
            indicator,
            file,
            software,
        }
    }

    /// All five, in the order [`record_objects`] lists them.
    pub fn all(&self) -> [&str; 5] {
        [
            &self.indicator,
            &self.file,
            &self.software,
            &self.indicates_file,
            &self.file_of_software,
        ]
    }
}

fn relationship_id(source: &str, target: &str) -> String {
    format!(
        "relationship--{}",
        own_uuid(&format!("related-to:{source}:{target}"))
    )
}

/// The first 8 bytes of an object id's UUID (`type--xxxxxxxx-xxxx-xxxx-…`) as a signed
/// integer: the key the object is found by in the store; None when `id` is no STIX id.
pub fn object_key(id: &str) -> Option<i64> {
    let (_, uuid) = id.split_once("--")?;
    let hex: String = uuid.chars().filter(|c| *c != '-').take(16).collect();
    if hex.len() != 16 || uuid.len() != 36 {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok().map(|v| v as i64)
}

/// The objects of one record, in the order their dates added follow:
/// indicator, file, software, indicator -> file, file -> software.
pub fn record_objects(r: &HashRecord) -> Vec<StixObject> {
    let n = &r.record;
    let ids = RecordObjectIds::of(r);
    // `created` and `modified` have milliseconds; the version TAXII shows is the same instant.
    let created = chrono::SubsecRound::trunc_subsecs(r.added_at, 3);
    let added = |i: i64| r.added_at + chrono::Duration::microseconds(i);
    let mut indicator = json!({
        "type": "indicator",
        "spec_version": "2.1",
        "id": ids.indicator,
        "created_by_ref": *IDENTITY,
        "created": millis(created),
        "modified": millis(created),
        "name": crate::record_title(r),
        "description": format!("Known-good file: {} version {} from {}, {}/{}, published at {}.",
            n.executable_name, n.version, n.vendor, n.platform, n.arch, n.source_url),
        "indicator_types": ["benign"],
        "pattern": pattern(r),
        "pattern_type": "stix",
        "pattern_version": "2.1",
        "valid_from": millis(r.valid_from),
        "object_marking_refs": [TLP_CLEAR],
    });
    if let Some(until) = r.valid_until
        && millis(until) > millis(r.valid_from)
        && let Some(map) = indicator.as_object_mut()
    {
        map.insert("valid_until".into(), millis(until).into());
    }
    let file = json!({
        "type": "file",
        "spec_version": "2.1",
        "id": ids.file,
        "hashes": hashes(r),
        "name": n.executable_name,
        "object_marking_refs": [TLP_CLEAR],
    });
    let software = json!({
        "type": "software",
        "spec_version": "2.1",
        "id": ids.software,
        "name": n.executable_name,
        "vendor": n.vendor,
        "version": n.version,
        "object_marking_refs": [TLP_CLEAR],
    });
    let relationship = |id: &str, source: &str, target: &str, description: &str| {
        json!({
            "type": "relationship",
            "spec_version": "2.1",
            "id": id,
            "created_by_ref": *IDENTITY,
            "created": millis(created),
            "modified": millis(created),
            "relationship_type": "related-to",
            "description": description,
            "source_ref": source,
            "target_ref": target,
            "object_marking_refs": [TLP_CLEAR],
        })
    };
    let indicates_file = relationship(
        &ids.indicates_file,
        &ids.indicator,
        &ids.file,
        "The indicator matches this file.",
    );
    let file_of_software = relationship(
        &ids.file_of_software,
        &ids.file,
        &ids.software,
        "The file is part of this release.",
    );
    vec![
        StixObject::new("indicator", &indicator, created, added(0)),
        StixObject::new("file", &file, added(1), added(1)),
        StixObject::new("software", &software, added(2), added(2)),
        StixObject::new("relationship", &indicates_file, created, added(3)),
        StixObject::new("relationship", &file_of_software, created, added(4)),
    ]
}

/// Every object of the feed for `records` (already [`crate::feed_records`], so in the
/// order they were added), each once: an observable several records share (a release's
/// software, an identical file) belongs to the first record that names it.
pub fn objects(records: &[&HashRecord]) -> Vec<StixObject> {
    let mut seen = HashSet::new();
    let mut objects = preamble();
    for object in &objects {
        seen.insert(object.id.clone());
    }
    for r in records {
        for object in record_objects(r) {
            if seen.insert(object.id.clone()) {
                objects.push(object);
            }
        }
    }
    objects
}

/// The bundle of `objects`; its id is derived from its content, so equal feeds are equal
/// bytes.
pub fn bundle(objects: &[StixObject]) -> Vec<u8> {
    use sha2::Digest as _;
    let mut digest = sha2::Sha256::new();
    for object in objects {
        digest.update(object.json.as_bytes());
    }
    let bundle_id = format!("bundle--{}", own_uuid(&hex::encode(digest.finalize())));
    let mut out =
        String::with_capacity(objects.iter().map(|o| o.json.len() + 1).sum::<usize>() + 96);
    out.push_str("{\"type\":\"bundle\",\"id\":\"");
    out.push_str(&bundle_id);
    out.push_str("\",\"objects\":[");
    for (i, object) in objects.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&object.json);
    }
    out.push_str("]}");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::record;

    #[test]
    fn uuid5_matches_rfc_9562_example() {
        // RFC 9562 appendix A.4: UUIDv5 of "www.example.com" in the DNS namespace.
        let dns = [
            0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4,
            0x30, 0xc8,
        ];
        assert_eq!(
            uuid5(&dns, "www.example.com"),
            "2ed6657d-e927-568b-95e1-2665a8aea6a2"
        );
    }

    #[test]
    fn records_give_linked_objects_and_shared_observables_once() {
        let a = record("r1", "putty.exe", "0.81", 1);
        let mut b = record("r2", "putty.exe", "0.81", 2);
        b.record.arch = model::Arch::Arm64;
        let objects = objects(&[&a, &b]);
        let kinds: Vec<&str> = objects.iter().map(|o| o.kind).collect();
        // The second record shares the first one's software (same name, vendor, version).
        assert_eq!(kinds.iter().filter(|k| **k == "software").count(), 1);
        assert_eq!(kinds.iter().filter(|k| **k == "indicator").count(), 2);
        let ids: HashSet<&str> = objects.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids.len(), objects.len());
        // Dates added are distinct and increasing.
        assert!(
            objects
                .windows(2)
                .all(|w| w[0].date_added < w[1].date_added)
        );
        let indicator: Value = serde_json::from_str(&objects[2].json).unwrap();
        assert_eq!(indicator["indicator_types"], json!(["benign"]));
        assert!(
            indicator["pattern"]
                .as_str()
                .unwrap()
                .contains(" OR file:hashes.MD5 = '")
        );
        assert_eq!(indicator["valid_from"], "2026-03-01T12:00:01.000Z");
        // Stable across builds, and in UUIDv4 form as STIX asks of SDOs.
        assert_eq!(objects[2].id, super::objects(&[&a])[2].id);
        let uuid = objects[2].id.strip_prefix("indicator--").unwrap();
        assert_eq!(&uuid[14..15], "4");
        assert!(matches!(&uuid[19..20], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn object_ids_are_the_objects_ids_and_keys_read_their_uuids() {
        let r = record("r1", "putty.exe", "0.81", 1);
        let listed: Vec<String> = record_objects(&r).into_iter().map(|o| o.id).collect();
        let ids = RecordObjectIds::of(&r);
        assert_eq!(ids.all().to_vec(), listed);
        // The key is the UUID's first 8 bytes, whatever the object's type.
        let key = object_key(&ids.software).unwrap();
        let uuid = ids.software.strip_prefix("software--").unwrap();
        let expected = u64::from_str_radix(&uuid.replace('-', "")[..16], 16).unwrap();
        assert_eq!(key, expected as i64);
        for not_an_id in ["", "indicator--", "indicator--1234", "software", "x--zz"] {
            assert_eq!(object_key(not_an_id), None, "{not_an_id:?}");
        }
        assert_eq!(
            object_key("indicator--0123456g-89ab-4def-8123-456789abcdef"),
            None
        );
    }
}
