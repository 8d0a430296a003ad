//! The compile record (issue 25): what each minion's last highstate or
//! `state.sls` compile read, so that the next job for that minion skips the
//! render and compile when none of it changed and the minion already holds
//! the bundle that compile gave ("you have it" without compiling).
//!
//! A record holds, per minion, the digest of the compile's inputs, the
//! `opts` values its renders read, and the digest of the bundle it gave.
//! The inputs ([`Inputs`]) are compared whole, by digest:
//!
//! - the job's function, positional args and keyword args (`test=`,
//!   `pillar=`, `saltenv=`, `pillarenv=`, `exclude=`...): they choose what
//!   is compiled and how;
//! - the minion's id and its whole grains, as the master has them cached:
//!   templates and top-file matching read them;
//! - the minion's pillar, **compiled again** for every job (pillar SLS,
//!   `ext_pillar`, git_pillar, gpg): its result is compared, so a pillar
//!   source whose output changes (a `cmd_json` command) is seen;
//!   the cleartexts gpg decrypted count too (the bundle carries them);
//! - a stamp of the whole state tree ([`tree_stamp`]): every file and
//!   directory of every `file_roots` directory (path, size, mtime, ctime,
//!   inode) and every gitfs saltenv with the commit it serves. Any change
//!   anywhere in the tree (a changed, added or removed SLS, include,
//!   Jinja import, top file or `salt://` source) recompiles every minion:
//!   coarser than the files each compile looked up, but it cannot miss a
//!   lookup a render made. The tree is stamped once per job, at the job's
//!   first compile: a job's compiles see one version of the tree.
//!
//! The master's own options are fixed for the life of the [`crate::compiler::Compiler`]
//! that holds the records (a master restart, or a new configuration, starts
//! with none). The `opts` keys a render read are compared by value (the
//! job id is in `opts`, so a template that reads `opts['jid']` is compiled
//! every time). A compile whose renders called a `salt[...]` function other
//! than a pure lookup of grains, pillar and options (`cmd.run`, `mine.get`,
//! time, random: their answer can change at any time), read the minion's
//! own options, ran an external renderer (`py`, `gpg`, `_renderers`),
//! failed, or asked the minion anything, is not recorded: it runs every
//! time ([`halite_render::watch`]).
//!
//! Records live in memory only, at most [`MAX_RECORDS`] (the whole set is
//! dropped when full), and never hold a bundle: a minion that does not hold
//! the recorded bundle gets a fresh compile.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use halite_gitfs::Fileserver;
use halite_render::watch::CompileReads;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::minion_records::MinionRecords;
use sha2::{Digest, Sha256};

/// Most minions whose last compile is remembered at once.
pub const MAX_RECORDS: usize = 100_000;
/// Most jobs whose tree stamp is remembered at once.
const MAX_STAMPS: usize = 16;

/// The job functions whose compile is recorded: the ones that render the
/// state tree into chunks for the minion to run.
pub fn recorded_function(fun: &str) -> bool {
    matches!(
        fun,
        "state.apply" | "state.highstate" | "state.sls" | "state.test" | "state.top"
    )
}

/// Everything a compile's result depends on besides the `opts` values its
/// renders read (see the module's documentation for why each is here).
#[derive(Serialize)]
pub struct Inputs<'a> {
    /// The minion's id.
    pub id: &'a str,
    /// The job's function.
    pub fun: &'a str,
    /// The job's positional args.
    pub arg: &'a [Value],
    /// The job's keyword args.
    pub kwarg: &'a Map<String, Value>,
    /// The minion's cached grains.
    pub grains: &'a Value,
    /// The minion's pillar, compiled for this job.
    pub pillar: &'a Value,
    /// The cleartexts the gpg renderer decrypted for that pillar.
    pub secrets: &'a [String],
    /// The state tree's stamp for this job ([`tree_stamp`]).
    pub tree: &'a str,
}

impl Inputs<'_> {
    /// The digest the record compares (sha256 of the inputs' JSON).
    pub fn digest(&self) -> String {
        digest_of(self)
    }
}

/// The sha256 of `inputs`' JSON, in hex: the digest records compare.
pub(crate) fn digest_of(inputs: &impl Serialize) -> String {
    let mut hasher = HashWriter(Sha256::new());
    // Writing into a hasher cannot fail; a value serde cannot encode
    // (none in JSON data) gives a digest no other compile matches.
    if serde_json::to_writer(&mut hasher, inputs).is_err() {
        hasher.0.update(b"\0unencodable");
    }
    format!("{:x}", hasher.0.finalize())
}

/// A stamp of every entry of the directories `dirs` (see [`tree_stamp`]):
/// the pillar tree's, for the pillar record.
pub(crate) fn dirs_stamp(dirs: &[std::path::PathBuf]) -> String {
    let mut hasher = Sha256::new();
    for dir in dirs {
        stamp_dir(&mut hasher, dir);
    }
    format!("{:x}", hasher.finalize())
}

/// A hasher as an `io::Write`, so inputs are hashed without a copy.
struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One minion's last recorded compile.
struct Record {
    inputs: String,
    opts: Vec<(String, Option<Value>)>,
    digest: String,
}

/// The compile records of every minion and the tree stamps of the last
/// jobs (see the module's documentation).
#[derive(Default)]
pub struct CompileRecords {
    records: MinionRecords<Record>,
    stamps: Mutex<VecDeque<(String, String)>>,
}

impl CompileRecords {
    /// The stamp of the state tree `files` serves, taken at job `jid`'s
    /// first compile and reused for its later ones. A `halite-call`
    /// through the master (jid [`halite_proto::jid::CALLER_JID`], the same
    /// for every call) is one compile: it gets a stamp of its own, or the
    /// lookups kept under the stamp (which SLS exist, where a `salt://`
    /// source leads) would outlive a change of the tree.
    pub fn tree_stamp(&self, jid: &str, files: &Fileserver) -> String {
        if jid == halite_proto::jid::CALLER_JID {
            return tree_stamp(files);
        }
        let mut stamps = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, stamp)) = stamps.iter().find(|(j, _)| j == jid) {
            return stamp.clone();
        }
        // Taken under the lock: the job's other compiles wait for it
        // rather than each stamping the tree again.
        let stamp = tree_stamp(files);
        if stamps.len() >= MAX_STAMPS {
            stamps.pop_front();
        }
        stamps.push_back((jid.to_string(), stamp.clone()));
        stamp
    }

    /// The digest of the bundle minion `id`'s last compile gave, when that
    /// compile read exactly `inputs` and the `opts` values it read are
    /// still those of `opts`.
    pub fn unchanged(&self, id: &str, inputs: &str, opts: &Value) -> Option<String> {
        self.records.find(id, |record| {
            let same = record.inputs == inputs
                && record
                    .opts
                    .iter()
                    .all(|(key, value)| opts.get(key) == value.as_ref());
            same.then(|| record.digest.clone())
        })
    }

    /// Records minion `id`'s compile of `inputs`, which read `reads` and
    /// gave the bundle `digest`; a compile that cannot be reused drops the
    /// minion's record instead.
    pub fn keep(&self, id: &str, inputs: String, reads: CompileReads, digest: String) {
        if let Some(why) = reads.not_skippable {
            tracing::debug!(%id, reason = why, "compile not recorded: it runs again next job");
            self.records.remove(id);
            return;
        }
        self.records.insert(
            id,
            Record {
                inputs,
                opts: reads.opts,
                digest,
            },
        );
    }

    /// Drops minion `id`'s record (its compile cannot be reused).
    pub fn forget(&self, id: &str) {
        self.records.remove(id);
    }

    /// How many minions have a record.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no minion has a record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// A stamp of everything `files` serves: every entry of every `file_roots`
/// directory (path, type, size, mtime, ctime, inode; an unreadable entry by
/// its error) and every gitfs saltenv with its commits. Two stamps are equal
/// only if no file was changed, added or removed in between (to the
/// resolution of the filesystem's timestamps; a rewrite also changes the
/// ctime, which no tool can set back).
pub fn tree_stamp(files: &Fileserver) -> String {
    let mut hasher = Sha256::new();
    for dir in files.root_dirs() {
        stamp_dir(&mut hasher, &dir);
    }
    let envs = files.served_envs();
    let commits = files.commits(&envs.iter().cloned().collect());
    hasher.update(b"\0gitfs\0");
    for env in &envs {
        hasher.update(env.as_bytes());
        hasher.update(b"\0");
    }
    for (mount, commit) in &commits {
        hasher.update(mount.as_bytes());
        hasher.update(b"=");
        hasher.update(commit.as_bytes());
        hasher.update(b"\0");
    }
    format!("{:x}", hasher.finalize())
}

fn stamp_dir(hasher: &mut Sha256, dir: &Path) {
    hasher.update(b"\0root\0");
    hasher.update(dir.as_os_str().as_encoded_bytes());
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
    {
        hasher.update(b"\0");
        match entry {
            Ok(entry) => {
                hasher.update(entry.path().as_os_str().as_encoded_bytes());
                match entry.metadata() {
                    Ok(meta) => {
                        let fields = [
                            u64::from(meta.is_dir()),
                            meta.len(),
                            meta.ino(),
                            meta.mtime() as u64,
                            meta.mtime_nsec() as u64,
                            meta.ctime() as u64,
                            meta.ctime_nsec() as u64,
                        ];
                        for field in fields {
                            hasher.update(field.to_le_bytes());
                        }
                    }
                    Err(e) => hasher.update(e.to_string().as_bytes()),
                }
            }
            Err(e) => hasher.update(e.to_string().as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn roots(dir: &Path) -> Fileserver {
        Fileserver::roots_only(BTreeMap::from([(
            "base".to_string(),
            vec![dir.to_path_buf()],
        )]))
    }

    #[test]
    fn the_tree_stamp_follows_every_change_and_only_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("web")).unwrap();
        std::fs::write(dir.path().join("web/init.sls"), "a: {}\n").unwrap();
        let files = roots(dir.path());
        let first = tree_stamp(&files);
        assert_eq!(
            first,
            tree_stamp(&files),
            "an unchanged tree stamps the same"
        );
        // Same size, new text.
        std::fs::write(dir.path().join("web/init.sls"), "b: {}\n").unwrap();
        let edited = tree_stamp(&files);
        assert_ne!(first, edited);
        std::fs::write(dir.path().join("web/new.sls"), "").unwrap();
        let added = tree_stamp(&files);
        assert_ne!(edited, added);
        std::fs::remove_file(dir.path().join("web/new.sls")).unwrap();
        assert_ne!(added, tree_stamp(&files));
    }

    #[test]
    fn a_record_answers_only_for_the_same_inputs_and_opts() {
        let records = CompileRecords::default();
        let reads = CompileReads {
            opts: vec![("renderer".into(), Some(Value::from("jinja|yaml")))],
            not_skippable: None,
        };
        records.keep("web1", "inputs-1".into(), reads, "digest-1".into());
        let opts = serde_json::json!({"renderer": "jinja|yaml", "jid": "1"});
        assert_eq!(
            records.unchanged("web1", "inputs-1", &opts),
            Some("digest-1".to_string())
        );
        assert_eq!(records.unchanged("web1", "inputs-2", &opts), None);
        assert_eq!(records.unchanged("web2", "inputs-1", &opts), None);
        let other = serde_json::json!({"renderer": "yaml"});
        assert_eq!(records.unchanged("web1", "inputs-1", &other), None);
        // A compile that cannot be reused drops the record.
        let volatile = CompileReads {
            opts: vec![],
            not_skippable: Some("a render called cmd.run"),
        };
        records.keep("web1", "inputs-1".into(), volatile, "digest-1".into());
        assert_eq!(records.unchanged("web1", "inputs-1", &opts), None);
    }
}
