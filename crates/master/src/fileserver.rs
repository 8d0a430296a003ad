//! The master's fileserver: `salt://` files of its backends
//! (`fileserver_backend`: `file_roots` and gitfs, in order), served to
//! minions over their session by sha256 and in chunks, never outside a
//! root (absolute paths, `..` and symlinks that leave it are refused).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use halite_gitfs::Fileserver;
use halite_modules::exec::file::meta::sha256_file;
use halite_proto::msg::{FileStat, ReplyBody, RequestBody};
use halite_state::{FileClient, FileClientError};
use serde_json::Value;

/// Serves the fileserver backends to minions; remembers each file's
/// sha256 until the file changes (size or mtime), so a big tree is hashed
/// once (a gitfs file is a file of a commit's tree, which never changes).
pub struct FileServer {
    client: Fileserver,
    chunk_size: usize,
    hashes: Mutex<HashMap<PathBuf, (SystemTime, u64, String)>>,
    /// Where the manifests' `salt://` paths lead, for one version of the
    /// tree (see [`FileServer::manifest`]).
    lookups: Mutex<TreeLookups>,
    /// The custom modules' digests of one version of the tree (see
    /// [`FileServer::modules_digest`]).
    modules: Mutex<ModulesDigests>,
}

/// [`FileServer::modules_digest`]'s answers for the tree stamp they were
/// made under: the saltenvs a highstate syncs are the same few for a whole
/// fleet, so a fleet's warm highstate lists each kind once, not once per
/// minion.
#[derive(Default)]
struct ModulesDigests {
    /// The stamp these digests belong to.
    stamp: String,
    /// saltenvs (in the sync's order) -> digest.
    digests: HashMap<Vec<String>, String>,
}

/// Most sets of saltenvs whose modules' digest is remembered for one tree
/// stamp (a fleet has a handful; more start again).
const MAX_MODULES_DIGESTS: usize = 256;

/// The manifests' path lookups (which backend and root serves
/// `salt://path`, or which files a directory source lists) for the tree
/// stamp they were made under (`compile_record::tree_stamp`): every
/// minion of a job names the same few sources, and resolving one is a
/// `realpath` per root (issue 25: 6% of the master's cold CPU, for the
/// same 50 paths of every minion). A new stamp starts them again.
#[derive(Default)]
struct TreeLookups {
    /// The stamp these lookups belong to.
    stamp: String,
    /// saltenv -> path -> the file it resolves to, `None` for no file.
    files: LookupMap<PathBuf>,
    /// saltenv -> path -> the files below the directory, `None` when not listable.
    dirs: LookupMap<Vec<String>>,
    /// How many lookups `files` and `dirs` hold.
    held: usize,
}

/// saltenv -> path -> a lookup's answer (`None`: nothing there).
type LookupMap<T> = HashMap<String, HashMap<String, Option<T>>>;

/// Most `salt://` lookups remembered for one tree stamp (a tree with more
/// sources starts again when full).
const MAX_LOOKUPS: usize = 65_536;

/// Why a file could not be served.
#[derive(Debug, thiserror::Error)]
pub enum FileServerError {
    /// The path is not served (outside the file roots, or refused); the text says why.
    #[error("{0}")]
    Refused(String),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path below `salt://`.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A file exists but cannot be served (the text says why).
    #[error("{0}")]
    Unreadable(String),
    /// The file changed between two chunks; the minion must start again.
    #[error("salt://{0} changed on the master while it was being sent; fetch it again")]
    Changed(String),
}

impl FileServer {
    /// A fileserver over `roots` (saltenv -> directories), sending
    /// `chunk_size` bytes at most per reply.
    pub fn new(roots: BTreeMap<String, Vec<PathBuf>>, chunk_size: usize) -> Self {
        Self::with_backends(Fileserver::roots_only(roots), chunk_size)
    }

    /// A fileserver over `backends` (`fileserver_backend` in order).
    pub fn with_backends(backends: Fileserver, chunk_size: usize) -> Self {
        Self {
            client: backends,
            chunk_size: chunk_size.clamp(4096, 8 * 1024 * 1024),
            hashes: Mutex::new(HashMap::new()),
            lookups: Mutex::new(TreeLookups::default()),
            modules: Mutex::new(ModulesDigests::default()),
        }
    }

    /// The digest of the custom modules a minion's `saltutil.sync_all
    /// saltenv=<envs>` would copy from this file server
    /// ([`halite_modules::exec::saltutil::served_digest`]), under tree
    /// `stamp` (`compile_record::tree_stamp`): computed once per stamp and
    /// set of saltenvs, from the listings the manifests keep under the
    /// same stamp. A minion whose modules give the same digest need not
    /// sync (issue 25, one round trip). An error (a listing refused) is
    /// not remembered: the minion then syncs, and its sync says why.
    pub fn modules_digest(&self, stamp: &str, envs: &[String]) -> Result<String, String> {
        let mut held = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
        if held.stamp != stamp {
            *held = ModulesDigests {
                stamp: stamp.to_string(),
                ..ModulesDigests::default()
            };
        }
        if let Some(digest) = held.digests.get(envs) {
            return Ok(digest.clone());
        }
        let digest = halite_modules::exec::saltutil::served_digest(
            envs,
            |env, prefix| self.listed(env, prefix, stamp).map_err(|e| e.to_string()),
            |env, path| {
                self.stat(env, path)
                    .map(|stat| stat.map(|s| s.sha256))
                    .map_err(|e| e.to_string())
            },
        )?;
        if held.digests.len() >= MAX_MODULES_DIGESTS {
            held.digests.clear();
        }
        held.digests.insert(envs.to_vec(), digest.clone());
        Ok(digest)
    }

    /// The file client over the same backends (the compiler reads SLS with it).
    pub fn client(&self) -> &Fileserver {
        &self.client
    }

    fn resolve(&self, saltenv: &str, path: &str) -> Result<Option<PathBuf>, FileServerError> {
        // Minions send paths relative to the root (`salt:///x` is `x`).
        if path.starts_with('/') {
            return Err(FileServerError::Refused(format!(
                "refusing absolute path '{path}'"
            )));
        }
        self.client
            .resolve(path, saltenv)
            .map(|p| p.filter(|p| p.is_file()))
            .map_err(|e| FileServerError::Refused(e.to_string()))
    }

    /// Size, sha256 and mode of `salt://path`; `None` when there is no such file.
    pub fn stat(&self, saltenv: &str, path: &str) -> Result<Option<FileStat>, FileServerError> {
        Ok(self.locate(saltenv, path)?.map(|(_, stat)| stat))
    }

    /// Where `salt://path` is on disk, and its stat.
    fn locate(
        &self,
        saltenv: &str,
        path: &str,
    ) -> Result<Option<(PathBuf, FileStat)>, FileServerError> {
        let Some(real) = self.resolve(saltenv, path)? else {
            return Ok(None);
        };
        self.stat_of(real).map(Some)
    }

    /// The stat of the resolved file `real` (its sha256 remembered while
    /// its size and mtime are unchanged).
    fn stat_of(&self, real: PathBuf) -> Result<(PathBuf, FileStat), FileServerError> {
        let io = |source| FileServerError::Io {
            path: real.display().to_string(),
            source,
        };
        let meta = std::fs::metadata(&real).map_err(io)?;
        let mtime = meta.modified().map_err(io)?;
        let size = meta.len();
        let cached = self
            .hashes
            .lock()
            .ok()
            .and_then(|h| h.get(&real).cloned())
            .filter(|(m, s, _)| *m == mtime && *s == size)
            .map(|(_, _, sha)| sha);
        let sha256 = match cached {
            Some(sha) => sha,
            None => {
                let sha =
                    sha256_file(&real).map_err(|e| FileServerError::Unreadable(e.to_string()))?;
                if let Ok(mut h) = self.hashes.lock() {
                    h.insert(real.clone(), (mtime, size, sha.clone()));
                }
                sha
            }
        };
        let stat = FileStat {
            size,
            sha256,
            mode: meta.mode() & 0o7777,
        };
        Ok((real, stat))
    }

    /// Up to one chunk of `salt://path` from `offset`, refused when the
    /// file is no longer the version `sha256` names.
    pub fn chunk(
        &self,
        saltenv: &str,
        path: &str,
        offset: u64,
        sha256: &str,
    ) -> Result<Vec<u8>, FileServerError> {
        let (real, stat) = self
            .locate(saltenv, path)?
            .ok_or_else(|| FileServerError::Refused(format!("salt://{path} does not exist")))?;
        if stat.sha256 != sha256 {
            return Err(FileServerError::Changed(path.to_string()));
        }
        let io = |source| FileServerError::Io {
            path: real.display().to_string(),
            source,
        };
        let mut file = std::fs::File::open(&real).map_err(io)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut buf = Vec::with_capacity(self.chunk_size.min(stat.size as usize));
        file.take(self.chunk_size as u64)
            .read_to_end(&mut buf)
            .map_err(io)?;
        Ok(buf)
    }

    /// Answers one fileserver request of a minion.
    pub fn answer(&self, body: &RequestBody) -> ReplyBody {
        let result = match body {
            RequestBody::FileStat { saltenv, path } => {
                self.stat(saltenv, path).map(ReplyBody::FileStat)
            }
            RequestBody::FileChunk {
                saltenv,
                path,
                offset,
                sha256,
            } => self
                .chunk(saltenv, path, *offset, sha256)
                .map(ReplyBody::FileChunk),
            RequestBody::FileList {
                saltenv,
                prefix,
                dirs,
            } => {
                let listed = if *dirs {
                    self.client.list_dirs(saltenv, prefix)
                } else {
                    self.client.list_files(saltenv, prefix)
                };
                listed
                    .map(ReplyBody::List)
                    .map_err(|e| FileServerError::Refused(e.to_string()))
            }
            RequestBody::FileEnvs => Ok(ReplyBody::List(self.client.envs())),
            RequestBody::Bundle { .. }
            | RequestBody::CallBundle { .. }
            | RequestBody::Mine(_)
            | RequestBody::OwnJob { .. } => {
                Err(FileServerError::Refused("not a fileserver request".into()))
            }
        };
        result.unwrap_or_else(|e| ReplyBody::Error(e.to_string()))
    }

    /// The `salt://` files `chunks` reference (sources of file.managed,
    /// file.recurse, cmd.script, archive.extracted...), with their sha256:
    /// saltenv -> path -> sha256. A directory source lists every file below
    /// it. Unknown or refused paths are left out (the state reports them).
    ///
    /// `tree` is the stamp of the state tree the chunks were compiled from
    /// (`compile_record::tree_stamp`, one per job): under it, where each
    /// path leads is looked up once and reused by every later manifest of
    /// the same stamp, so that a fleet's compiles resolve their shared
    /// sources once per job, not once per minion. Each file's size and
    /// mtime are still read for every manifest, so its sha256 is always
    /// the file's as it is now. `None` looks every path up.
    pub fn manifest(
        &self,
        chunks: &[Value],
        tree: Option<&str>,
    ) -> BTreeMap<String, BTreeMap<String, String>> {
        let refs = SourceRefs::new(chunks, &|s| s.starts_with("salt://"));
        self.manifest_of(&refs, tree, &as_is, &url_as_is)
    }

    /// [`FileServer::manifest`] of the chunks `refs` were read from, with
    /// every string it decides on read through `put_back` first (an id
    /// form's, issue 25: `halite_state::id_memo::IdChunks::put_back`);
    /// `url` is the `salt://` URL a string puts back to, if it is one
    /// (without building the strings that are not). `refs` holds every
    /// string of the chunks `url` may accept.
    pub fn manifest_of(
        &self,
        refs: &SourceRefs,
        tree: Option<&str>,
        put_back: &dyn for<'s> Fn(&'s str) -> Cow<'s, str>,
        url: &dyn for<'s> Fn(&'s str) -> Option<Cow<'s, str>>,
    ) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut lookups = tree.map(|stamp| self.lookups_for(stamp));
        for chunk in &refs.chunks {
            let env = put_back(&chunk.env);
            let env = env.as_ref();
            let urls: Vec<Cow<'_, str>> = chunk.urls.iter().filter_map(|s| url(s)).collect();
            for url in &urls {
                let Some((path, env_override)) = halite_state::strip_salt_url(url) else {
                    continue;
                };
                let env = env_override.unwrap_or(env);
                let path = path.trim_matches('/');
                let file = match lookups.as_deref_mut() {
                    Some(memo) => memo.file(env, path, |env, path| self.lookup(env, path)),
                    None => self.lookup(env, path),
                };
                if let Some(real) = file {
                    if let Ok((_, stat)) = self.stat_of(real) {
                        out.entry(env.to_string())
                            .or_default()
                            .insert(path.to_string(), stat.sha256);
                        continue;
                    }
                }
                // A directory (file.recurse): every file below it.
                let listed = match lookups.as_deref_mut() {
                    Some(memo) => memo.dir(env, path, |env, path| self.listing(env, path)),
                    None => self.listing(env, path),
                };
                for file in listed.unwrap_or_default() {
                    let real = match lookups.as_deref_mut() {
                        Some(memo) => memo.file(env, &file, |env, path| self.lookup(env, path)),
                        None => self.lookup(env, &file),
                    };
                    if let Some(Ok((_, stat))) = real.map(|real| self.stat_of(real)) {
                        out.entry(env.to_string())
                            .or_default()
                            .insert(file, stat.sha256);
                    }
                }
            }
        }
        out
    }

    /// The file `salt://path` of `saltenv` resolves to now; `None` for
    /// none, or a path that is refused.
    fn lookup(&self, saltenv: &str, path: &str) -> Option<PathBuf> {
        self.resolve(saltenv, path).ok().flatten()
    }

    /// The files below `salt://path` of `saltenv` now; `None` when it
    /// cannot be listed.
    fn listing(&self, saltenv: &str, path: &str) -> Option<Vec<String>> {
        self.client.list_files(saltenv, path).ok()
    }

    /// The files below `salt://prefix` of `saltenv`, listed once under
    /// tree `stamp` and remembered with the manifests' directory
    /// listings (the same question: [`FileServer::listing`]).
    fn listed(
        &self,
        saltenv: &str,
        prefix: &str,
        stamp: &str,
    ) -> Result<Vec<String>, FileClientError> {
        let listed = self
            .lookups_for(stamp)
            .dir(saltenv, prefix, |env, path| self.listing(env, path));
        match listed {
            Some(files) => Ok(files),
            // Not remembered as an error: asked again, for its message.
            None => self.client.list_files(saltenv, prefix),
        }
    }

    /// The lookups of tree `stamp`, held for one manifest (a manifest of
    /// another stamp waits for it).
    fn lookups_for(&self, stamp: &str) -> std::sync::MutexGuard<'_, TreeLookups> {
        let mut lookups = self.lookups.lock().unwrap_or_else(PoisonError::into_inner);
        if lookups.stamp != stamp {
            *lookups = TreeLookups {
                stamp: stamp.to_string(),
                ..TreeLookups::default()
            };
        }
        lookups
    }
}

/// The fileserver as one job's compiles read it: the listing of a
/// saltenv's files (which SLS exist, for the top file's globs and
/// `include`s: `filter_avail`) is made once under the job's tree stamp
/// and shared by the job's minions, as the manifests' lookups are (issue
/// 25: the walk of `file_roots` per minion was 4% of the cold compile).
/// Files themselves are read as they are now.
pub struct JobFiles {
    server: Arc<FileServer>,
    /// The job's tree stamp (`compile_record::tree_stamp`).
    stamp: String,
}

impl JobFiles {
    /// `server`'s files for a job whose tree stamp is `stamp`.
    pub fn new(server: Arc<FileServer>, stamp: String) -> Self {
        JobFiles { server, stamp }
    }
}

impl FileClient for JobFiles {
    fn cache_file(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError> {
        self.server.client.cache_file(path, saltenv)
    }
    fn list_files(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.server.listed(saltenv, prefix, &self.stamp)
    }
    fn list_dirs(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.server.client.list_dirs(saltenv, prefix)
    }
    fn envs(&self) -> Vec<String> {
        self.server.client.envs()
    }
    fn read_text(&self, path: &str, saltenv: &str) -> Result<Option<String>, FileClientError> {
        self.server.client.read_text(path, saltenv)
    }
}

impl TreeLookups {
    /// Where `salt://path` of `env` leads, looked up by `lookup` the first
    /// time under this stamp.
    fn file(
        &mut self,
        env: &str,
        path: &str,
        lookup: impl FnOnce(&str, &str) -> Option<PathBuf>,
    ) -> Option<PathBuf> {
        self.remembered(|l| &mut l.files, env, path, lookup)
    }

    /// The files below the directory `salt://path` of `env`, listed by
    /// `list` the first time under this stamp.
    fn dir(
        &mut self,
        env: &str,
        path: &str,
        list: impl FnOnce(&str, &str) -> Option<Vec<String>>,
    ) -> Option<Vec<String>> {
        self.remembered(|l| &mut l.dirs, env, path, list)
    }

    /// The answer `map` (one of the two kinds of lookup) holds for `env`
    /// and `path`, or `compute`'s, remembered under this stamp.
    fn remembered<T: Clone>(
        &mut self,
        map: fn(&mut Self) -> &mut LookupMap<T>,
        env: &str,
        path: &str,
        compute: impl FnOnce(&str, &str) -> Option<T>,
    ) -> Option<T> {
        if let Some(found) = map(self).get(env).and_then(|paths| paths.get(path)) {
            return found.clone();
        }
        let found = compute(env, path);
        self.make_room();
        map(self)
            .entry(env.to_string())
            .or_default()
            .insert(path.to_string(), found.clone());
        found
    }

    /// Counts one more lookup, forgetting them all first when full.
    fn make_room(&mut self) {
        if self.held >= MAX_LOOKUPS {
            self.files.clear();
            self.dirs.clear();
            self.held = 0;
        }
        self.held += 1;
    }
}

/// Every `salt://` string in `value` (a chunk argument), nested lists and
/// dicts included (`sources`, `source` lists).
/// A string read as it is ([`FileServer::manifest`]).
fn as_is(s: &str) -> Cow<'_, str> {
    Cow::Borrowed(s)
}

/// A string that is a `salt://` URL, read as it is.
fn url_as_is(s: &str) -> Option<Cow<'_, str>> {
    s.starts_with("salt://").then_some(Cow::Borrowed(s))
}

/// The strings of compiled chunks a manifest reads
/// ([`FileServer::manifest_of`]): for each chunk that may name a
/// `salt://` source, its saltenv (`saltenv`, else `__env__`, else `base`)
/// and, in order, the strings of its arguments that may be a URL. Why it
/// exists: a fleet's id form is read once into these (issue 25: the walk
/// of every chunk's arguments per minion was 2-3% of the cold master),
/// and each minion's manifest reads only them.
#[derive(Debug, Default)]
pub struct SourceRefs {
    chunks: Vec<ChunkRefs>,
}

/// One chunk's part of [`SourceRefs`].
#[derive(Debug)]
struct ChunkRefs {
    env: String,
    urls: Vec<String>,
}

impl SourceRefs {
    /// The strings of `chunks` a manifest reads: the arguments' strings
    /// (not under `__` keys) for which `candidate` holds; a chunk without
    /// one is left out. `candidate` must hold for every string the
    /// manifest's `url` may accept.
    pub fn new(chunks: &[Value], candidate: &dyn Fn(&str) -> bool) -> Self {
        let mut out = Vec::new();
        for chunk in chunks {
            let mut urls = Vec::new();
            if let Some(map) = chunk.as_object() {
                for (key, value) in map {
                    if key.starts_with("__") {
                        continue;
                    }
                    collect_urls(value, candidate, &mut urls);
                }
            }
            if urls.is_empty() {
                continue;
            }
            let env = chunk
                .get("saltenv")
                .or_else(|| chunk.get("__env__"))
                .and_then(Value::as_str)
                .unwrap_or("base");
            out.push(ChunkRefs {
                env: env.to_string(),
                urls,
            });
        }
        Self { chunks: out }
    }
}

fn collect_urls(value: &Value, candidate: &dyn Fn(&str) -> bool, out: &mut Vec<String>) {
    match value {
        Value::String(s) if candidate(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_urls(v, candidate, out)),
        Value::Object(map) => map.values().for_each(|v| collect_urls(v, candidate, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn server(root: &Path) -> FileServer {
        FileServer::new(
            BTreeMap::from([("base".to_string(), vec![root.to_path_buf()])]),
            4096,
        )
    }

    #[test]
    fn serves_files_in_chunks_by_hash() {
        let dir = tempfile::tempdir().unwrap();
        let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("big.bin"), &body).unwrap();
        let fs = server(dir.path());
        let stat = fs.stat("base", "big.bin").unwrap().unwrap();
        assert_eq!(stat.size, 10_000);
        let mut got = Vec::new();
        while (got.len() as u64) < stat.size {
            let part = fs
                .chunk("base", "big.bin", got.len() as u64, &stat.sha256)
                .unwrap();
            assert!(!part.is_empty() && part.len() <= 4096);
            got.extend(part);
        }
        assert_eq!(got, body);
        // Another version is refused rather than mixed.
        let err = fs.chunk("base", "big.bin", 0, "00").unwrap_err();
        assert!(err.to_string().contains("changed"), "{err}");
        assert_eq!(fs.stat("base", "nope").unwrap(), None);
    }

    #[test]
    fn refuses_paths_that_leave_the_root() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("outdir")).unwrap();
        std::fs::write(dir.path().join("ok.txt"), "fine").unwrap();
        let fs = server(dir.path());
        for path in [
            "../secret",
            "/etc/passwd",
            "a/../../secret",
            "link",
            "outdir/secret",
        ] {
            let reply = fs.answer(&RequestBody::FileStat {
                saltenv: "base".into(),
                path: path.into(),
            });
            assert!(matches!(reply, ReplyBody::Error(_)), "{path}: {reply:?}");
            let reply = fs.answer(&RequestBody::FileChunk {
                saltenv: "base".into(),
                path: path.into(),
                offset: 0,
                sha256: String::new(),
            });
            assert!(matches!(reply, ReplyBody::Error(_)), "{path}: {reply:?}");
        }
        let listed = fs.answer(&RequestBody::FileList {
            saltenv: "base".into(),
            prefix: String::new(),
            dirs: false,
        });
        assert_eq!(listed, ReplyBody::List(vec!["ok.txt".into()]));
        let listed = fs.answer(&RequestBody::FileList {
            saltenv: "base".into(),
            prefix: "outdir".into(),
            dirs: false,
        });
        assert_eq!(listed, ReplyBody::List(vec![]));
        let listed = fs.answer(&RequestBody::FileList {
            saltenv: "base".into(),
            prefix: "../".into(),
            dirs: false,
        });
        assert!(matches!(listed, ReplyBody::Error(_)), "{listed:?}");
    }

    #[test]
    fn manifest_names_sources_and_directory_trees() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tree/sub")).unwrap();
        std::fs::write(dir.path().join("tree/a"), "a").unwrap();
        std::fs::write(dir.path().join("tree/sub/b"), "b").unwrap();
        std::fs::write(dir.path().join("motd"), "hi").unwrap();
        let fs = server(dir.path());
        let chunks = vec![
            serde_json::json!({"state": "file", "fun": "managed", "__env__": "base",
                "source": ["salt://missing", "salt://motd"]}),
            serde_json::json!({"state": "file", "fun": "recurse", "__env__": "base",
                "source": "salt://tree"}),
        ];
        let m = fs.manifest(&chunks, None);
        let base = &m["base"];
        assert_eq!(
            base.keys().collect::<Vec<_>>(),
            vec!["motd", "tree/a", "tree/sub/b"]
        );
        assert_eq!(base["motd"], sha256_file(&dir.path().join("motd")).unwrap());
    }
}
