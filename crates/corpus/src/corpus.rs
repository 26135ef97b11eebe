//! The corpus root: generations, the `CURRENT` pointer, the import lock, and the live
//! generation behind an `ArcSwap`.

use std::fs::{File, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwapOption;

use crate::error::{Error, IoContext, Result};
use crate::format::GenerationInfo;
use crate::generation::{Generation, OpenOptions};

const CURRENT: &str = "CURRENT";
const IMPORT_LOCK: &str = "IMPORT.lock";
const GEN_PREFIX: &str = "gen-";
const TMP_PREFIX: &str = ".tmp-";

/// A corpus root and its live generation. Cheap to share (`&Corpus` across threads).
pub struct Corpus {
    root: PathBuf,
    options: OpenOptions,
    current: ArcSwapOption<Generation>,
    /// Serialises reloads; lookups never take it.
    reload_lock: Mutex<()>,
    /// Replaced generations that requests may still hold.
    retired: Mutex<Vec<Weak<Generation>>>,
    /// The generation `CURRENT` named that failed its checks, with its manifest's
    /// modification time: not opened (and checksummed) again until either changes.
    refused: Mutex<Option<(String, Option<std::time::SystemTime>)>>,
}

impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("root", &self.root)
            .field(
                "current",
                &self.current.load().as_ref().map(|g| g.name().to_string()),
            )
            .finish()
    }
}

impl Corpus {
    /// Opens (creating if needed) a corpus root and loads its current generation, if any.
    pub fn open(root: &Path) -> Result<Corpus> {
        Self::open_with(root, OpenOptions::default())
    }

    pub fn open_with(root: &Path, options: OpenOptions) -> Result<Corpus> {
        std::fs::create_dir_all(root).at(root)?;
        clean_stale(root)?;
        let current = match read_current(root)? {
            Some(name) => {
                let generation = Generation::open_with(&root.join(&name), &options)?;
                remove_older(root, seq_of(&name).unwrap_or(0), &[]);
                Some(Arc::new(generation))
            }
            None => None,
        };
        Ok(Corpus {
            root: root.to_path_buf(),
            options,
            current: ArcSwapOption::new(current),
            reload_lock: Mutex::new(()),
            retired: Mutex::new(Vec::new()),
            refused: Mutex::new(None),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The live generation; keep the `Arc` for the whole request so it sees one generation.
    pub fn current(&self) -> Option<Arc<Generation>> {
        self.current.load_full()
    }

    /// The generation `CURRENT` names when it failed its checks (the live one stays).
    pub fn refused(&self) -> Option<String> {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(name, _)| name.clone())
    }

    pub fn info(&self) -> Option<GenerationInfo> {
        self.current.load().as_ref().map(|g| g.info())
    }

    /// Switches to the generation `CURRENT` names, if it changed. Returns whether it did.
    /// On error the live generation stays.
    pub fn reload(&self) -> Result<bool> {
        let _guard = self.reload_lock.lock().unwrap_or_else(|e| e.into_inner());
        let Some(name) = read_current(&self.root)? else {
            return Ok(false);
        };
        if self
            .current
            .load()
            .as_ref()
            .is_some_and(|g| g.name() == name)
        {
            return Ok(false);
        }
        let dir = self.root.join(&name);
        let stamp = std::fs::metadata(dir.join(crate::format::MANIFEST))
            .and_then(|m| m.modified())
            .ok();
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if refused
            .as_ref()
            .is_some_and(|(n, s)| *n == name && *s == stamp)
        {
            return Ok(false);
        }
        let generation = match Generation::open_with(&dir, &self.options) {
            Ok(g) => Arc::new(g),
            Err(e) => {
                *refused = Some((name, stamp));
                return Err(e);
            }
        };
        *refused = None;
        drop(refused);
        let old = self.current.swap(Some(generation));
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = old {
            old.retire();
            retired.push(Arc::downgrade(&old));
        }
        // Replaced generations go with their last reader; older ones that were imported but
        // never loaded here go now.
        retired.retain(|g| g.strong_count() > 0);
        let alive: Vec<String> = retired
            .iter()
            .filter_map(|g| g.upgrade().map(|g| g.name().to_string()))
            .collect();
        remove_older(&self.root, seq_of(&name).unwrap_or(0), &alive);
        Ok(true)
    }
}

pub(crate) fn generation_name(seq: u64) -> String {
    format!("{GEN_PREFIX}{seq:08}")
}

fn seq_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(GEN_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The generation `CURRENT` names, or `None` when there is no `CURRENT`.
pub(crate) fn read_current(root: &Path) -> Result<Option<String>> {
    let path = root.join(CURRENT);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::Io { path, source: e }),
    };
    let value = String::from_utf8_lossy(&text).trim().to_string();
    // Only a plain generation name: never a path that could point outside the root.
    if seq_of(&value).is_none() {
        return Err(Error::BadCurrent { path, value });
    }
    Ok(Some(value))
}

/// Replaces `CURRENT` atomically: temporary file, fsync, rename, fsync of the directory.
pub(crate) fn write_current(root: &Path, name: &str) -> Result<()> {
    let tmp = root.join(format!("{TMP_PREFIX}{CURRENT}"));
    let mut file = File::create(&tmp).at(&tmp)?;
    file.write_all(format!("{name}\n").as_bytes()).at(&tmp)?;
    file.sync_all().at(&tmp)?;
    let path = root.join(CURRENT);
    std::fs::rename(&tmp, &path).at(&path)?;
    sync_dir(root)
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// Takes the root's import lock (waiting for a running import to finish), then removes
/// what killed imports left.
pub(crate) fn lock_import(root: &Path) -> Result<File> {
    let path = root.join(IMPORT_LOCK);
    let file = File::create(&path).at(&path)?;
    file.lock().at(&path)?;
    remove_temporaries(root)?;
    Ok(file)
}

/// Removes leftovers of killed imports, unless an import is running right now.
fn clean_stale(root: &Path) -> Result<()> {
    let path = root.join(IMPORT_LOCK);
    let file = File::create(&path).at(&path)?;
    match file.try_lock() {
        Ok(()) => remove_temporaries(root),
        Err(TryLockError::WouldBlock) => Ok(()),
        Err(TryLockError::Error(e)) => Err(Error::Io { path, source: e }),
    }
}

fn remove_temporaries(root: &Path) -> Result<()> {
    for entry in std::fs::read_dir(root).at(root)? {
        let entry = entry.at(root)?;
        if entry.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
            let path = entry.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.at(&path)?;
        }
    }
    Ok(())
}

/// Removes generations older than the current one, except those in `keep`. Safe while
/// another process still maps one: its mapping outlives the directory entry.
fn remove_older(root: &Path, current: u64, keep: &[String]) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if seq_of(&name).is_some_and(|seq| seq < current) && !keep.contains(&name) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Next generation number: one past every generation or temporary directory present.
pub(crate) fn next_seq(root: &Path) -> Result<u64> {
    let mut max = 0;
    for entry in std::fs::read_dir(root).at(root)? {
        let name = entry.at(root)?.file_name().to_string_lossy().into_owned();
        let name = name.strip_prefix(TMP_PREFIX).unwrap_or(&name);
        if let Some(seq) = seq_of(name) {
            max = max.max(seq);
        }
    }
    Ok(max + 1)
}
