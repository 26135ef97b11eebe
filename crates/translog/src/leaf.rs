//! Leaf hashes: one per record of the day's public feed.

use sha2::{Digest, Sha256};

use crate::merkle::Hash;
use crate::sha;

/// Separator between the fields of a leaf preimage.
pub const FIELD_SEPARATOR: u8 = 0x00;

/// Why a record cannot be turned into a leaf.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeafError {
    #[error("executable name is empty")]
    EmptyExecutableName,
    #[error("{field} contains a control character")]
    ControlCharacter { field: &'static str },
    #[error("hash_sha256 must be exactly 64 lowercase hex characters")]
    InvalidSha256,
}

/// The record fields that make up a leaf, as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub executable_name: &'a str,
    /// Lowercase hex text of the file's SHA-256 (64 characters).
    pub hash_sha256: &'a str,
    pub version: &'a str,
    pub platform: &'a str,
    pub arch: &'a str,
}

/// Rejects an empty executable name or one containing a control character
/// (Unicode category Cc: U+0000-U+001F and U+007F-U+009F).
pub fn validate_executable_name(name: &str) -> Result<(), LeafError> {
    if name.is_empty() {
        return Err(LeafError::EmptyExecutableName);
    }
    reject_control("executable_name", name)
}

fn reject_control(field: &'static str, value: &str) -> Result<(), LeafError> {
    // Printable ASCII (the common case) has no control character; only
    // other text needs the per-character Unicode check.
    if is_printable_ascii(value) || !value.chars().any(char::is_control) {
        return Ok(());
    }
    Err(LeafError::ControlCharacter { field })
}

/// Every byte in 0x20..=0x7e. Branch-free so that it vectorizes: this runs
/// for every field of every record when a day's tree is built.
fn is_printable_ascii(s: &str) -> bool {
    s.bytes()
        .fold(0u8, |bad, b| bad | u8::from(!(0x20..0x7f).contains(&b)))
        == 0
}

/// True for exactly 64 characters of `[0-9a-f]`.
pub fn is_lowercase_sha256_hex(s: &str) -> bool {
    // Fixed-length, branch-free scan: it vectorizes.
    let Ok(bytes) = <&[u8; 64]>::try_from(s.as_bytes()) else {
        return false;
    };
    let bad = bytes.iter().fold(0u8, |acc, &b| {
        acc | u8::from(!(b.is_ascii_digit() | (b'a'..=b'f').contains(&b)))
    });
    bad == 0
}

impl Record<'_> {
    /// Checks the rules that make the preimage unambiguous: no field holds a
    /// control character (so none holds the 0x00 separator), the name is
    /// non-empty and the hash is 64 lowercase hex characters. Together these
    /// keep every preimage at 69 bytes or more, so it can never be mistaken
    /// for a 65-byte interior-node preimage.
    pub fn validate(&self) -> Result<(), LeafError> {
        validate_executable_name(self.executable_name)?;
        if !is_lowercase_sha256_hex(self.hash_sha256) {
            return Err(LeafError::InvalidSha256);
        }
        reject_control("version", self.version)?;
        reject_control("platform", self.platform)?;
        reject_control("arch", self.arch)
    }

    fn fields(&self) -> [&str; 5] {
        [
            self.executable_name,
            self.hash_sha256,
            self.version,
            self.platform,
            self.arch,
        ]
    }

    /// The bytes that are hashed: the five fields joined by 0x00.
    pub fn preimage(&self) -> Result<Vec<u8>, LeafError> {
        self.validate()?;
        Ok(self.fields().join("\0").into_bytes())
    }

    /// Leaf hash: SHA-256 of [`Record::preimage`], used unprefixed as the tree leaf.
    /// Fails exactly when [`Record::validate`] fails.
    pub fn leaf_hash(&self) -> Result<Hash, LeafError> {
        self.validate()?;
        let fields = self.fields();
        let len = fields.iter().map(|f| f.len()).sum::<usize>() + fields.len() - 1;
        // Typical records fit a stack buffer hashed in one go (this runs
        // once per record per day); longer ones take the streaming path.
        let mut buf = [0u8; 5 * sha::BLOCK_LEN];
        if len > sha::max_message_len(buf.len()) {
            return Ok(Sha256::digest(fields.join("\0")).into());
        }
        let mut at = 0;
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                buf[at] = FIELD_SEPARATOR;
                at += 1;
            }
            buf[at..at + field.len()].copy_from_slice(field.as_bytes());
            at += field.len();
        }
        Ok(sha::sha256_short(&mut buf, at))
    }
}

/// Leaf hash of a record (see [`Record::leaf_hash`]).
pub fn leaf_hash(record: &Record<'_>) -> Result<Hash, LeafError> {
    record.leaf_hash()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn record() -> Record<'static> {
        Record {
            executable_name: "firefox.exe",
            hash_sha256: SHA,
            version: "128.0",
            platform: "windows",
            arch: "amd64",
        }
    }

    #[test]
    fn leaf_hash_is_sha256_of_nul_joined_fields() {
        let preimage = format!("firefox.exe\0{SHA}\0128.0\0windows\0amd64");
        let want: Hash = Sha256::digest(preimage.as_bytes()).into();
        assert_eq!(record().preimage().unwrap(), preimage.as_bytes());
        assert_eq!(leaf_hash(&record()).unwrap(), want);
    }

    #[test]
    fn known_answer() {
        // Computed independently: python3 hashlib.sha256 over the NUL-joined fields
        assert_eq!(
            hex::encode(record().leaf_hash().unwrap()),
            "3e08b0669cbf6d64093b63d505c9b08cb75ac54bd504ec64405ed475fd13d0ae"
        );
    }

    #[test]
    fn rejects_control_characters_everywhere() {
        for bad in [
            "a\0b",
            "tab\there",
            "nl\n",
            "del\u{7f}",
            "c1\u{85}",
            "\u{1}x",
        ] {
            assert_eq!(
                validate_executable_name(bad),
                Err(LeafError::ControlCharacter {
                    field: "executable_name"
                })
            );
            let r = Record {
                version: bad,
                ..record()
            };
            assert_eq!(
                r.leaf_hash(),
                Err(LeafError::ControlCharacter { field: "version" })
            );
            let r = Record {
                platform: bad,
                ..record()
            };
            assert!(r.validate().is_err());
            let r = Record {
                arch: bad,
                ..record()
            };
            assert!(r.validate().is_err());
        }
        assert_eq!(
            validate_executable_name(""),
            Err(LeafError::EmptyExecutableName)
        );
        assert!(validate_executable_name("Visual Studio Code.exe").is_ok());
        assert!(validate_executable_name("ünïcode-名前.exe").is_ok());
    }

    #[test]
    fn control_check_matches_unicode_cc_for_every_char() {
        for c in (0u32..0x3000).filter_map(char::from_u32) {
            let text = format!("a{c}b");
            assert_eq!(
                reject_control("f", &text).is_err(),
                c.is_control(),
                "U+{:04X}",
                c as u32
            );
        }
    }

    #[test]
    fn rejects_non_canonical_sha256() {
        let upper = SHA.to_uppercase();
        for bad in [
            &SHA[..63],
            upper.as_str(),
            "",
            &format!("{SHA}0"),
            &format!("g{}", &SHA[1..]),
        ] {
            let r = Record {
                hash_sha256: bad,
                ..record()
            };
            assert_eq!(r.leaf_hash(), Err(LeafError::InvalidSha256), "{bad}");
        }
    }

    #[test]
    fn leaf_hash_fails_exactly_when_validate_fails() {
        let pieces = [
            "", "a", "ü", "\u{85}", "\u{7f}", "\t", "\0", "x y", "名", "\u{1f}", "~", "\u{a0}",
        ];
        for a in pieces {
            for b in pieces {
                let name = format!("{a}tool{b}");
                let version = format!("{b}1.{a}");
                for r in [
                    Record {
                        executable_name: &name,
                        ..record()
                    },
                    Record {
                        version: &version,
                        ..record()
                    },
                    Record {
                        arch: a,
                        platform: b,
                        ..record()
                    },
                    Record {
                        executable_name: a,
                        ..record()
                    },
                ] {
                    match r.validate() {
                        Ok(()) => {
                            let want: Hash = Sha256::digest(r.preimage().unwrap()).into();
                            assert_eq!(r.leaf_hash(), Ok(want), "{r:?}");
                        }
                        Err(e) => assert_eq!(r.leaf_hash(), Err(e), "{r:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn long_records_hash_the_same_way() {
        let long = "v".repeat(300);
        let r = Record {
            version: &long,
            ..record()
        };
        let want: Hash = Sha256::digest(r.preimage().unwrap()).into();
        assert_eq!(r.leaf_hash().unwrap(), want);
        // Exactly at and just past the stack buffer size.
        for extra in [0, 1] {
            let fill = "x".repeat(311 - 4 - 64 - 11 - 5 - 7 + extra);
            let r = Record {
                version: &fill,
                ..record()
            };
            let want: Hash = Sha256::digest(r.preimage().unwrap()).into();
            assert_eq!(r.leaf_hash().unwrap(), want);
        }
    }

    #[test]
    fn empty_optional_fields_are_allowed_and_distinct() {
        let a = Record {
            version: "",
            ..record()
        }
        .leaf_hash()
        .unwrap();
        let b = Record {
            platform: "",
            ..record()
        }
        .leaf_hash()
        .unwrap();
        assert_ne!(a, b);
        assert!(
            Record {
                version: "",
                platform: "",
                arch: "",
                ..record()
            }
            .preimage()
            .unwrap()
            .len()
                >= 69
        );
    }
}
