//! C2SP signed notes (c2sp.org/signed-note) with Ed25519 signatures, and
//! tlog checkpoints (c2sp.org/tlog-checkpoint) carried in them.

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::encoding;
use crate::merkle::Hash;

/// Signature type identifier byte for Ed25519 in the signed-note key ID.
pub const ED25519_SIGNATURE_TYPE: u8 = 0x01;

/// Verifiers must accept at least 16 signatures; more than this is refused
/// to bound work on hostile input.
pub const MAX_SIGNATURES: usize = 100;

const SIGNATURE_LINE_PREFIX: &str = "\u{2014} ";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("malformed note: {0}")]
    Malformed(&'static str),
    #[error("invalid key name: must be non-empty without spaces or '+'")]
    InvalidKeyName,
    #[error("malformed verifier key: {0}")]
    InvalidVerifierKey(&'static str),
    #[error("signature from the trusted key does not verify")]
    BadSignature,
    #[error("note has no signature from the trusted key")]
    NoTrustedSignature,
    #[error("malformed checkpoint: {0}")]
    InvalidCheckpoint(&'static str),
}

/// Key names: non-empty, no Unicode whitespace, no '+', no control characters.
fn check_key_name(name: &str) -> Result<(), NoteError> {
    let bad = |c: char| c.is_whitespace() || c == '+' || c.is_control();
    if name.is_empty() || name.chars().any(bad) {
        return Err(NoteError::InvalidKeyName);
    }
    Ok(())
}

/// Note text: non-empty, ends in a newline, no control characters other than newline.
fn check_text(text: &str) -> Result<(), NoteError> {
    if !text.ends_with('\n') {
        return Err(NoteError::Malformed("text must end with a newline"));
    }
    if text.chars().any(|c| c < ' ' && c != '\n') {
        return Err(NoteError::Malformed("control character"));
    }
    Ok(())
}

/// Ed25519 key ID: the first 4 bytes of
/// `SHA-256(key name || 0x0A || 0x01 || 32-byte public key)`.
pub fn note_key_id(name: &str, key: &VerifyingKey) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([b'\n', ED25519_SIGNATURE_TYPE]);
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

/// Verifier key string as used by Go's `sumdb/note` and witness tooling:
/// `<name>+<key ID as 8 hex digits>+<base64(0x01 || public key)>`.
pub fn note_verifier_key(name: &str, key: &VerifyingKey) -> Result<String, NoteError> {
    check_key_name(name)?;
    let mut typed = vec![ED25519_SIGNATURE_TYPE];
    typed.extend_from_slice(key.as_bytes());
    Ok(format!(
        "{name}+{}+{}",
        hex::encode(note_key_id(name, key)),
        encoding::base64_encode(&typed)
    ))
}

/// Parses a verifier key string (see [`note_verifier_key`]), checking that
/// the key ID matches the name and key.
pub fn parse_note_verifier_key(s: &str) -> Result<(String, VerifyingKey), NoteError> {
    let bad = NoteError::InvalidVerifierKey;
    let mut parts = s.split('+');
    let (Some(name), Some(id_hex), Some(key_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("expected name+id+key"));
    };
    check_key_name(name)?;
    let typed =
        encoding::base64_decode("verifier key", key_b64).map_err(|_| bad("key is not base64"))?;
    let Some((&ED25519_SIGNATURE_TYPE, raw)) = typed.split_first() else {
        return Err(bad("not an Ed25519 key"));
    };
    let raw: [u8; 32] = raw
        .try_into()
        .map_err(|_| bad("Ed25519 key must be 32 bytes"))?;
    let key = VerifyingKey::from_bytes(&raw).map_err(|_| bad("invalid Ed25519 point"))?;
    if id_hex.len() != 8 || id_hex != hex::encode(note_key_id(name, &key)) {
        return Err(bad("key ID does not match name and key"));
    }
    Ok((name.to_owned(), key))
}

/// Signs `text` and returns the note: text, blank line, one signature line
/// `— <name> <base64(key ID || signature)>`.
pub fn sign_note(text: &str, name: &str, key: &SigningKey) -> Result<String, NoteError> {
    check_text(text)?;
    check_key_name(name)?;
    let mut blob = note_key_id(name, &key.verifying_key()).to_vec();
    blob.extend_from_slice(&key.sign(text.as_bytes()).to_bytes());
    Ok(format!(
        "{text}\n{SIGNATURE_LINE_PREFIX}{name} {}\n",
        encoding::base64_encode(&blob)
    ))
}

/// Verifies a note against one trusted key and returns its text.
///
/// Signatures from other keys (a different name or key ID) are ignored; a
/// signature matching the trusted name and ID that fails to verify rejects
/// the whole note; at least one must verify.
pub fn open_note<'a>(note: &'a str, name: &str, key: &VerifyingKey) -> Result<&'a str, NoteError> {
    if note.chars().any(|c| c < ' ' && c != '\n') {
        return Err(NoteError::Malformed("control character"));
    }
    // The text is separated from the signatures by the last blank line.
    let split = note
        .rfind("\n\n")
        .ok_or(NoteError::Malformed("no blank line before signatures"))?;
    let (text, signatures) = (&note[..split + 1], &note[split + 2..]);
    let Some(signatures) = signatures.strip_suffix('\n') else {
        return Err(NoteError::Malformed(
            "signature block must end with a newline",
        ));
    };
    let want_id = note_key_id(name, key);
    let mut verified = false;
    for (count, line) in signatures.split('\n').enumerate() {
        if count >= MAX_SIGNATURES {
            return Err(NoteError::Malformed("too many signatures"));
        }
        let rest = line
            .strip_prefix(SIGNATURE_LINE_PREFIX)
            .ok_or(NoteError::Malformed("bad signature line"))?;
        let (sig_name, b64) = rest
            .split_once(' ')
            .ok_or(NoteError::Malformed("bad signature line"))?;
        check_key_name(sig_name)
            .map_err(|_| NoteError::Malformed("bad key name in signature line"))?;
        let blob = encoding::base64_decode("note signature", b64)
            .map_err(|_| NoteError::Malformed("signature is not base64"))?;
        if blob.len() < 5 {
            return Err(NoteError::Malformed("signature too short"));
        }
        if sig_name != name || blob[..4] != want_id {
            continue; // someone else's signature (a witness, a rotated key)
        }
        let sig: [u8; 64] = blob[4..].try_into().map_err(|_| NoteError::BadSignature)?;
        key.verify_strict(text.as_bytes(), &Signature::from_bytes(&sig))
            .map_err(|_| NoteError::BadSignature)?;
        verified = true;
    }
    if !verified {
        return Err(NoteError::NoTrustedSignature);
    }
    Ok(text)
}

/// A tlog checkpoint body: origin, tree size, root hash, optional extension lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub tree_size: u64,
    pub root_hash: Hash,
    /// Opaque, non-empty lines after the root hash (not recommended by C2SP).
    pub extensions: Vec<String>,
}

impl Checkpoint {
    /// A checkpoint without extension lines.
    pub fn new(origin: impl Into<String>, tree_size: u64, root_hash: Hash) -> Self {
        Self {
            origin: origin.into(),
            tree_size,
            root_hash,
            extensions: Vec::new(),
        }
    }

    /// Note text: `<origin>\n<tree size>\n<base64 root>\n` plus extension lines.
    pub fn to_note_text(&self) -> Result<String, NoteError> {
        let line_ok = |l: &str| !l.is_empty() && !l.contains('\n');
        if !line_ok(&self.origin) {
            return Err(NoteError::InvalidCheckpoint(
                "origin must be one non-empty line",
            ));
        }
        if !self.extensions.iter().all(|l| line_ok(l)) {
            return Err(NoteError::InvalidCheckpoint(
                "extension lines must be non-empty single lines",
            ));
        }
        let mut text = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.tree_size,
            encoding::base64_encode(&self.root_hash)
        );
        for line in &self.extensions {
            text.push_str(line);
            text.push('\n');
        }
        check_text(&text)?;
        Ok(text)
    }

    /// Parses checkpoint note text (already verified, see [`open_checkpoint`]).
    pub fn from_note_text(text: &str) -> Result<Self, NoteError> {
        let bad = NoteError::InvalidCheckpoint;
        let body = text
            .strip_suffix('\n')
            .ok_or(bad("text must end with a newline"))?;
        let mut lines = body.split('\n');
        let (Some(origin), Some(size), Some(root)) = (lines.next(), lines.next(), lines.next())
        else {
            return Err(bad("need origin, tree size and root hash lines"));
        };
        if origin.is_empty() {
            return Err(bad("empty origin"));
        }
        let canonical_digits = !size.is_empty()
            && size.bytes().all(|b| b.is_ascii_digit())
            && (size == "0" || !size.starts_with('0'));
        if !canonical_digits {
            return Err(bad("tree size must be decimal without leading zeros"));
        }
        let tree_size = size.parse().map_err(|_| bad("tree size out of range"))?;
        let root_hash =
            encoding::base64_decode_array("root hash", root).map_err(|_| bad("root hash"))?;
        let extensions: Vec<String> = lines.map(str::to_owned).collect();
        if extensions.iter().any(String::is_empty) {
            return Err(bad("empty extension line"));
        }
        Ok(Self {
            origin: origin.to_owned(),
            tree_size,
            root_hash,
            extensions,
        })
    }
}

/// Signs a checkpoint as a note. C2SP says the key name should equal the origin.
pub fn sign_checkpoint(
    checkpoint: &Checkpoint,
    name: &str,
    key: &SigningKey,
) -> Result<String, NoteError> {
    sign_note(&checkpoint.to_note_text()?, name, key)
}

/// Verifies a checkpoint note with the trusted key and parses it.
pub fn open_checkpoint(
    note: &str,
    name: &str,
    key: &VerifyingKey,
) -> Result<Checkpoint, NoteError> {
    Checkpoint::from_note_text(open_note(note, name, key)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known-answer data from golang.org/x/mod sumdb/note (note_test.go,
    // TestSign / TestOpen): the "PeterNeumann" key, text and signed note.
    const PETER_SKEY_B64: &str = "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"; // 0x01 || seed
    const PETER_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const ENOCH_VKEY: &str = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop";
    const TEXT: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const PETER_SIG: &str = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
    const ENOCH_SIG: &str = "\u{2014} EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n";

    fn peter_signing_key() -> SigningKey {
        let typed = encoding::base64_decode("skey", PETER_SKEY_B64).unwrap();
        assert_eq!(typed[0], ED25519_SIGNATURE_TYPE);
        SigningKey::from_bytes(&typed[1..].try_into().unwrap())
    }

    #[test]
    fn go_known_answer_sign_and_key_id() {
        let sk = peter_signing_key();
        let vk = sk.verifying_key();
        assert_eq!(hex::encode(note_key_id("PeterNeumann", &vk)), "c74f20a3");
        assert_eq!(note_verifier_key("PeterNeumann", &vk).unwrap(), PETER_VKEY);
        assert_eq!(
            sign_note(TEXT, "PeterNeumann", &sk).unwrap(),
            format!("{TEXT}\n{PETER_SIG}")
        );
    }

    #[test]
    fn go_known_answer_open() {
        let (name, peter) = parse_note_verifier_key(PETER_VKEY).unwrap();
        let (enoch_name, enoch) = parse_note_verifier_key(ENOCH_VKEY).unwrap();
        let both = format!("{TEXT}\n{PETER_SIG}{ENOCH_SIG}");
        assert_eq!(open_note(&both, &name, &peter), Ok(TEXT));
        assert_eq!(open_note(&both, &enoch_name, &enoch), Ok(TEXT));
        // Only an unknown key's signature: rejected.
        let enoch_only = format!("{TEXT}\n{ENOCH_SIG}");
        assert_eq!(
            open_note(&enoch_only, &name, &peter),
            Err(NoteError::NoTrustedSignature)
        );
        // Corrupted trusted signature: whole note rejected.
        let corrupt = format!("{TEXT}\n{}ABCD{}", &PETER_SIG[..60], &PETER_SIG[60..]);
        assert!(open_note(&corrupt, &name, &peter).is_err());
        // Too many signatures.
        let many = format!("{TEXT}\n{}", PETER_SIG.repeat(MAX_SIGNATURES + 1));
        assert!(matches!(
            open_note(&many, &name, &peter),
            Err(NoteError::Malformed(_))
        ));
    }

    #[test]
    fn malformed_notes_rejected() {
        let (name, peter) = parse_note_verifier_key(PETER_VKEY).unwrap();
        let bad_notes = [
            TEXT.to_owned(),
            format!("{TEXT}\n"),
            format!("{TEXT}\n{}", &PETER_SIG[..PETER_SIG.len() - 1]),
            format!("\u{1}{TEXT}\n{PETER_SIG}"),
            format!(
                "{TEXT}\n\u{2014} Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
            ),
            format!("{TEXT}\n{PETER_SIG}Unexpected line.\n"),
        ];
        for note in &bad_notes {
            assert!(
                matches!(open_note(note, &name, &peter), Err(NoteError::Malformed(_))),
                "{note:?}"
            );
        }
    }

    #[test]
    fn verifier_key_manglings_rejected() {
        assert!(parse_note_verifier_key(PETER_VKEY).is_ok());
        let b = PETER_VKEY.as_bytes();
        for i in 0..b.len() {
            let mut m = b.to_vec();
            m[i] = m[i].wrapping_add(1);
            if let Ok(s) = std::str::from_utf8(&m) {
                assert!(parse_note_verifier_key(s).is_err(), "{s}");
            }
        }
        for end in 0..b.len() {
            assert!(parse_note_verifier_key(&PETER_VKEY[..end]).is_err());
        }
    }

    #[test]
    fn checkpoint_round_trip() {
        let sk = SigningKey::from_bytes(&[4u8; 32]);
        let vk = sk.verifying_key();
        let origin = "knowngood.example/transparency/2024-05-01";
        let cp = Checkpoint::new(origin, 1234, [0x11; 32]);
        let note = sign_checkpoint(&cp, origin, &sk).unwrap();
        let (head, _) = note.split_once("\n\n").unwrap();
        assert_eq!(
            head,
            format!("{origin}\n1234\n{}", encoding::base64_encode(&[0x11; 32]))
        );
        assert_eq!(open_checkpoint(&note, origin, &vk), Ok(cp.clone()));
        let tampered = note.replacen("1234", "1235", 1);
        assert_eq!(
            open_checkpoint(&tampered, origin, &vk),
            Err(NoteError::BadSignature)
        );
        assert_eq!(
            open_checkpoint(&note, "other.example", &vk),
            Err(NoteError::NoTrustedSignature)
        );
        let with_ext = Checkpoint {
            extensions: vec!["ext".into()],
            ..cp
        };
        let note = sign_checkpoint(&with_ext, origin, &sk).unwrap();
        assert_eq!(open_checkpoint(&note, origin, &vk), Ok(with_ext));
    }

    #[test]
    fn checkpoint_text_rules() {
        let root = encoding::base64_encode(&[0u8; 32]);
        assert!(Checkpoint::from_note_text(&format!("o\n0\n{root}\n")).is_ok());
        for bad in [
            format!("o\n01\n{root}\n"),
            format!("o\n\n{root}\n"),
            format!("o\n-1\n{root}\n"),
            format!("o\n1 \n{root}\n"),
            format!("\n1\n{root}\n"),
            format!("o\n1\n{root}"),
            "o\n1\nAAAA\n".to_owned(),
            format!("o\n1\n{root}\n\n"),
            format!("o\n99999999999999999999\n{root}\n"),
            "o\n1\n".to_owned(),
        ] {
            assert!(Checkpoint::from_note_text(&bad).is_err(), "{bad:?}");
        }
        assert!(Checkpoint::new("", 1, [0; 32]).to_note_text().is_err());
        assert!(Checkpoint::new("a\nb", 1, [0; 32]).to_note_text().is_err());
        assert!(sign_note("no newline", "n", &SigningKey::from_bytes(&[1; 32])).is_err());
        assert!(sign_note("x\n", "bad name", &SigningKey::from_bytes(&[1; 32])).is_err());
    }
}
