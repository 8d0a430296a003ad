//! The secrets this process knows, kept out of its logs and of what it
//! writes to disk.
//!
//! The master learns each minion's gpg-decrypted cleartexts when it
//! compiles that minion's pillar; a minion learns its own from each
//! bundle (`Bundle::secrets`). Both record them here, per owner (a minion
//! id), in memory only. The log writer installed by [`crate::init`] masks
//! every one of them in each line before it reaches `log_file` or stderr
//! (a `cmd.run` whose output echoes a secret at `log_level: debug`), and
//! stores (the minion's spooled returns) mask an owner's with
//! [`secrets_of`]. The masking rule itself is
//! `halite_salt_rules::secret::Cleartexts`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use halite_salt_rules::secret::Cleartexts;
use tracing_subscriber::fmt::MakeWriter;

/// Every owner's secrets, and their union for the log writer.
#[derive(Default)]
struct Known {
    /// Owner -> its secrets (sorted, deduplicated) and their patterns.
    by_owner: HashMap<String, (Vec<String>, Arc<Cleartexts>)>,
    /// Every owner's patterns together.
    all: Arc<Cleartexts>,
}

static KNOWN: LazyLock<RwLock<Known>> = LazyLock::new(|| RwLock::new(Known::default()));

/// Whether any secret is known: lets the log writer skip the lock when
/// there is nothing to mask (the common case).
static ANY: AtomicBool = AtomicBool::new(false);

/// Records `secrets` as `owner`'s (replacing what it had): from now on the
/// logs show them as `**********`. Returns the owner's patterns.
pub fn set_secrets(owner: &str, secrets: &[String]) -> Arc<Cleartexts> {
    let mut list = secrets.to_vec();
    list.sort();
    list.dedup();
    // Every compile calls this; most change nothing, so no write lock then.
    {
        let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
        match known.by_owner.get(owner) {
            Some((old, patterns)) if *old == list => return patterns.clone(),
            None if list.is_empty() => return Arc::new(Cleartexts::default()),
            _ => {}
        }
    }
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    if let Some((old, patterns)) = known.by_owner.get(owner) {
        if *old == list {
            return patterns.clone();
        }
    }
    let patterns = Arc::new(Cleartexts::new(&list));
    if list.is_empty() {
        known.by_owner.remove(owner);
    } else {
        known
            .by_owner
            .insert(owner.to_string(), (list, patterns.clone()));
    }
    rebuild(&mut known);
    patterns
}

/// Adds `secrets` to those `owner` has (a compile that decrypted more, a
/// minion's next bundle); atomic, so two jobs adding at once lose none.
pub fn add_secrets(owner: &str, secrets: &[String]) -> Arc<Cleartexts> {
    {
        let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
        match known.by_owner.get(owner) {
            Some((old, patterns)) if secrets.iter().all(|s| old.binary_search(s).is_ok()) => {
                return patterns.clone()
            }
            None if secrets.is_empty() => return Arc::new(Cleartexts::default()),
            _ => {}
        }
    }
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    let mut list = known
        .by_owner
        .get(owner)
        .map(|(list, _)| list.clone())
        .unwrap_or_default();
    list.extend(secrets.iter().cloned());
    list.sort();
    list.dedup();
    let patterns = Arc::new(Cleartexts::new(&list));
    known
        .by_owner
        .insert(owner.to_string(), (list, patterns.clone()));
    rebuild(&mut known);
    patterns
}

/// Forgets `owner`'s secrets (its key was deleted).
pub fn forget(owner: &str) {
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    if known.by_owner.remove(owner).is_some() {
        rebuild(&mut known);
    }
}

/// `owner`'s secrets, to mask in what is written for it (`None`: none).
pub fn secrets_of(owner: &str) -> Option<Arc<Cleartexts>> {
    KNOWN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .by_owner
        .get(owner)
        .map(|(_, patterns)| patterns.clone())
        .filter(|p| !p.is_empty())
}

/// `text` with every known secret of every owner masked.
pub fn mask_text(text: &str) -> String {
    if !ANY.load(Ordering::Acquire) {
        return text.to_string();
    }
    let all = KNOWN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .all
        .clone();
    all.mask_text(text)
}

fn rebuild(known: &mut Known) {
    let all: Vec<&str> = known
        .by_owner
        .values()
        .flat_map(|(list, _)| list.iter().map(String::as_str))
        .collect();
    known.all = Arc::new(Cleartexts::new(all));
    ANY.store(!known.all.is_empty(), Ordering::Release);
}

/// A [`MakeWriter`] whose writers mask every known secret in each log line.
pub struct Masking<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Masking<M> {
    type Writer = MaskingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        MaskingWriter(self.0.make_writer())
    }
}

/// One log line's writer: the formatter hands it a whole event at once,
/// so a secret is never split between two writes.
pub struct MaskingWriter<W>(W);

impl<W: Write> Write for MaskingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !ANY.load(Ordering::Acquire) {
            return self.0.write(buf);
        }
        let masked = mask_text(&String::from_utf8_lossy(buf));
        self.0.write_all(masked.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use super::*;

    #[test]
    fn known_secrets_are_masked_per_owner_and_in_log_lines() {
        let secret = "redact-test-Secret-991".to_string();
        set_secrets("web1", std::slice::from_ref(&secret));
        add_secrets("web1", &["second-Secret-992".to_string()]);
        let line = format!("DEBUG output: {secret} and second-Secret-992\n");
        let mut out = Vec::new();
        MaskingWriter(&mut out).write_all(line.as_bytes()).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "DEBUG output: ********** and **********\n");
        let mine = secrets_of("web1").unwrap();
        assert!(mine.found_in(&secret));
        assert!(secrets_of("db1").is_none());
        // Another owner's secrets are still masked in the logs.
        set_secrets("db1", &["db1-Secret-993".to_string()]);
        assert_eq!(
            mask_text("db1-Secret-993 redact-test-Secret-991"),
            "********** **********"
        );
        forget("web1");
        assert!(secrets_of("web1").is_none());
        assert_eq!(mask_text(&secret), secret);
        set_secrets("db1", &[]);
        assert!(secrets_of("db1").is_none());
        assert_eq!(mask_text("db1-Secret-993"), "db1-Secret-993");
    }
}
