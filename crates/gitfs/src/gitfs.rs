//! gitfs: the branches and tags of `gitfs_remotes` served as saltenvs,
//! as Salt 3008 maps them: `gitfs_base` (default `master`) is `base`,
//! every other branch and tag (per `ref_types`) is the saltenv of its
//! name, a remote's `saltenv` option maps a saltenv to any ref with its
//! own `root`/`mountpoint`, `all_saltenvs` serves one ref for every
//! saltenv, `disable_saltenv_mapping` leaves only `base` and the explicit
//! ones, and `gitfs_saltenv_whitelist`/`blacklist` filter them all.
//!
//! Reads never run git: they look at the refs of each remote's last good
//! fetch (reloaded when an update, here or in `halite-run`, changes the
//! `generation` stamp) and at the tree checked out for that commit.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use serde_json::Value;

use crate::config::{gitfs_remotes, saltenv_allowed, RemoteConfig};
use crate::repo::{cache_name, Repo, RepoState};

/// Most saltenvs whose mounts are remembered between two updates.
const MAX_CACHED_SALTENVS: usize = 256;

/// Whether an update changed what readers are served: the refs, or the
/// error `unfetched` reports (not the time of the fetch).
fn served_changed(before: &RepoState, after: &RepoState) -> bool {
    before.refs != after.refs
        || before.error != after.error
        || before.fetched.is_none() != after.fetched.is_none()
}

/// Where one saltenv's files come from in one remote.
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    /// The remote's id.
    pub remote: String,
    /// The commit served.
    pub commit: String,
    /// The directory holding the files (the commit's tree, below `root`).
    pub dir: PathBuf,
    /// The `salt://` prefix they are served under (empty: none).
    pub mountpoint: String,
}

/// The saltenv `name` (a branch or tag) is served as, for a remote whose
/// `base` ref is `base`.
fn env_of(name: &str, base: &str) -> String {
    if name == base {
        "base".to_string()
    } else {
        name.to_string()
    }
}

/// The ref, root and mountpoint serving `saltenv` in remote `cfg`, and
/// the commit the fetched `refs` give it; `None` when it serves none.
pub fn resolve_env(
    cfg: &RemoteConfig,
    refs: &BTreeMap<String, String>,
    saltenv: &str,
) -> Option<(String, String, String)> {
    let own = cfg.saltenv.get(saltenv);
    let explicit = own.and_then(|p| p.git_ref.clone());
    if cfg.disable_saltenv_mapping
        && explicit.is_none()
        && own.is_none()
        && saltenv != "base"
        && cfg.all_saltenvs.is_none()
    {
        return None;
    }
    let wanted = explicit
        .or_else(|| cfg.all_saltenvs.clone())
        .or_else(|| (saltenv == "base").then(|| cfg.base.clone()))
        .unwrap_or_else(|| saltenv.to_string());
    // A saltenv named like the base ref is not served under that name.
    if saltenv != "base" && own.is_none() && cfg.all_saltenvs.is_none() && saltenv == cfg.base {
        return None;
    }
    let commit = cfg.ref_types.iter().find_map(|t| match t.as_str() {
        "branch" => refs.get(&format!("heads/{wanted}")).cloned(),
        "tag" => refs.get(&format!("tags/{wanted}")).cloned(),
        "sha" if wanted.len() >= 7 && wanted.chars().all(|c| c.is_ascii_hexdigit()) => refs
            .values()
            .find(|c| c.starts_with(&wanted.to_ascii_lowercase()))
            .cloned(),
        _ => None,
    })?;
    let root = own
        .and_then(|p| p.root.clone())
        .map(|r| r.trim_matches('/').to_string())
        .unwrap_or_else(|| cfg.root.clone());
    let mountpoint = own
        .and_then(|p| p.mountpoint.clone())
        .map(|m| {
            m.trim_start_matches("salt://")
                .trim_matches('/')
                .to_string()
        })
        .unwrap_or_else(|| cfg.mountpoint.clone());
    Some((commit, root, mountpoint))
}

/// The saltenvs remote `cfg` serves with the fetched `refs` (before the
/// whitelist and blacklist).
pub fn remote_envs(cfg: &RemoteConfig, refs: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut candidates = BTreeSet::from(["base".to_string()]);
    if !cfg.disable_saltenv_mapping {
        for name in refs.keys() {
            if let Some(b) = name.strip_prefix("heads/") {
                if cfg.ref_types.iter().any(|t| t == "branch") {
                    candidates.insert(env_of(b, &cfg.base));
                }
            } else if let Some(t) = name.strip_prefix("tags/") {
                if cfg.ref_types.iter().any(|x| x == "tag") {
                    candidates.insert(env_of(t, &cfg.base));
                }
            }
        }
    }
    candidates.extend(cfg.saltenv.keys().cloned());
    candidates
        .into_iter()
        .filter(|env| resolve_env(cfg, refs, env).is_some())
        .collect()
}

/// The cached refs of every remote, and the stamp they were read at;
/// with each saltenv's mounts, and the paths resolved and the listings
/// made in them, worked out once per stamp: the trees served are
/// checked out once per commit and never change, and a fleet's compiles
/// look the same files up thousands of times between two fetches.
#[derive(Default)]
struct View {
    stamp: Option<(u64, SystemTime)>,
    states: Arc<Vec<RepoState>>,
    mounts: HashMap<String, Arc<Vec<Mount>>>,
    /// (saltenv, path) -> the file serving it (`None`: no mount has it).
    resolved: HashMap<(String, String), Option<PathBuf>>,
    /// (saltenv, prefix, directories?) -> the listing.
    listed: HashMap<(String, String, bool), Arc<Vec<String>>>,
}

/// Most paths whose resolution is remembered between two updates (a
/// minion may ask for any path: past it, lookups are not remembered).
const MAX_CACHED_PATHS: usize = 100_000;
/// Most listings remembered between two updates.
const MAX_CACHED_LISTINGS: usize = 1_000;

/// The gitfs backend: its remotes, their caches, and the refs last fetched.
pub struct GitFs {
    opts: Value,
    repos: Vec<Repo>,
    root: PathBuf,
    /// Remotes left out for their configuration (each message names one).
    config_errors: Vec<String>,
    view: RwLock<View>,
    /// How many times the refs were reread (a changed `generation` stamp).
    reloads: AtomicU64,
}

impl std::fmt::Debug for GitFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitFs")
            .field("remotes", &self.remote_ids())
            .field("root", &self.root)
            .finish()
    }
}

impl GitFs {
    /// gitfs over the master's options `opts` (`gitfs_remotes` and the
    /// `gitfs_*` keys), caching under `<cachedir>/gitfs`. Misconfigured
    /// remotes are logged and left out.
    pub fn new(opts: &Value, cachedir: &Path) -> Self {
        let (remotes, errors) = gitfs_remotes(opts);
        let config_errors: Vec<String> = errors.into_iter().map(|e| e.0).collect();
        for e in &config_errors {
            tracing::error!(error = %e, "gitfs remote left out");
        }
        Self::with_remotes(opts, cachedir.join("gitfs"), remotes, config_errors)
    }

    /// gitfs over `remotes` cached under `root` (git_pillar uses its own root).
    pub(crate) fn with_remotes(
        opts: &Value,
        root: PathBuf,
        remotes: Vec<RemoteConfig>,
        config_errors: Vec<String>,
    ) -> Self {
        let repos: Vec<Repo> = remotes.into_iter().map(|r| Repo::new(&root, r)).collect();
        // Salt's remote_map.txt: which cache directory is which remote.
        if !repos.is_empty() && std::fs::create_dir_all(&root).is_ok() {
            let map: String = repos
                .iter()
                .map(|r| format!("{} = {}\n", cache_name(&r.cfg.id), r.scrub(&r.cfg.id)))
                .collect();
            let _ = std::fs::write(root.join("remote_map.txt"), map);
        }
        Self {
            opts: opts.clone(),
            repos,
            root,
            config_errors,
            view: RwLock::new(View::default()),
            reloads: AtomicU64::new(0),
        }
    }

    /// The ids of the remotes served (names, else URLs).
    pub fn remote_ids(&self) -> Vec<String> {
        self.repos.iter().map(|r| r.scrub(&r.cfg.id)).collect()
    }

    /// The remotes' caches.
    pub fn repos(&self) -> &[Repo] {
        &self.repos
    }

    /// Why remotes were left out of the configuration.
    pub fn config_errors(&self) -> &[String] {
        &self.config_errors
    }

    /// Seconds between background fetches: the shortest `update_interval`
    /// of the remotes (Salt's `gitfs_update_interval`, default 60).
    pub fn update_interval(&self) -> Option<u64> {
        self.repos.iter().map(|r| r.cfg.update_interval).min()
    }

    fn generation(&self) -> PathBuf {
        self.root.join("generation")
    }

    /// Fetches the remotes (those whose id or URL is `only`, when given),
    /// checks out the commits their saltenvs need, and tells readers.
    /// Returns each remote's id and its error, if any (already logged,
    /// credentials scrubbed).
    pub fn update(&self, only: Option<&str>) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        let mut changed = false;
        for repo in &self.repos {
            if only.is_some_and(|o| o != repo.cfg.id && o != repo.cfg.url) {
                continue;
            }
            let cfg = repo.cfg.clone();
            let opts = &self.opts;
            let wanted = |refs: &BTreeMap<String, String>| -> BTreeSet<String> {
                remote_envs(&cfg, refs)
                    .into_iter()
                    .filter(|env| saltenv_allowed(opts, "gitfs", env))
                    .filter_map(|env| resolve_env(&cfg, refs, &env).map(|(c, _, _)| c))
                    .collect()
            };
            let before = repo.state();
            let result = repo.update(wanted);
            let id = repo.scrub(&repo.cfg.id);
            match &result {
                Ok(state) => {
                    tracing::debug!(remote = %id, refs = state.refs.len(), "gitfs remote fetched")
                }
                Err(e) => {
                    tracing::warn!(remote = %id, error = %e, "gitfs remote not updated; serving its last good fetch")
                }
            }
            if served_changed(&before, &repo.state()) {
                tracing::info!(remote = %id, "gitfs remote moved: serving its new refs");
                changed = true;
            }
            out.push((id, result.err()));
        }
        // A fetch that moved nothing leaves readers' views (and what they
        // cached from them) alone: the background fetch runs every
        // `gitfs_update_interval` all through a fleet's compiles.
        if changed || self.stamp().is_none() {
            self.touch_generation();
        }
        out
    }

    /// How many times this process reread the remotes' refs because an
    /// update changed what is served (for tests and `master.stats`).
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// The `generation` stamp: the inode and mtime of the file an update
    /// replaces when what is served changed (`None`: never written).
    fn stamp(&self) -> Option<(u64, SystemTime)> {
        std::fs::metadata(self.generation())
            .ok()
            .and_then(|m| Some((m.ino(), m.modified().ok()?)))
    }

    /// Tells every reader (this process and the master) to reload the refs.
    fn touch_generation(&self) {
        let tmp = self
            .root
            .join(format!(".generation.{}", std::process::id()));
        let stamp = format!("{:?}\n", SystemTime::now());
        if std::fs::create_dir_all(&self.root).is_ok() && std::fs::write(&tmp, stamp).is_ok() {
            let _ = std::fs::rename(&tmp, self.generation());
        }
    }

    /// The refs of each remote's last good fetch, reread after an update,
    /// and the stamp they were read at.
    fn states_at(&self) -> (Arc<Vec<RepoState>>, Option<(u64, SystemTime)>) {
        let stamp = self.stamp();
        if let Ok(view) = self.view.read() {
            if view.stamp == stamp && view.states.len() == self.repos.len() {
                return (view.states.clone(), stamp);
            }
        }
        let states = Arc::new(self.repos.iter().map(Repo::state).collect::<Vec<_>>());
        self.reloads.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut view) = self.view.write() {
            *view = View {
                stamp,
                states: states.clone(),
                ..View::default()
            };
        }
        (states, stamp)
    }

    /// The refs of each remote's last good fetch, reread after an update.
    fn states(&self) -> Arc<Vec<RepoState>> {
        self.states_at().0
    }

    /// Where `saltenv`'s files come from, remote by remote in config order
    /// (worked out once per update that changed what is served).
    pub fn mounts(&self, saltenv: &str) -> Arc<Vec<Mount>> {
        let (states, stamp) = self.states_at();
        self.mounts_at(&states, stamp, saltenv)
    }

    /// [`GitFs::mounts`] for the refs `states` read at `stamp`.
    fn mounts_at(
        &self,
        states: &[RepoState],
        stamp: Option<(u64, SystemTime)>,
        saltenv: &str,
    ) -> Arc<Vec<Mount>> {
        if let Ok(view) = self.view.read() {
            if view.stamp == stamp {
                if let Some(mounts) = view.mounts.get(saltenv) {
                    return mounts.clone();
                }
            }
        }
        let mounts = Arc::new(self.work_out_mounts(states, saltenv));
        if let Ok(mut view) = self.view.write() {
            // Bounded by the saltenvs asked for: unknown ones are cached
            // empty, so a client naming many is capped.
            if view.stamp == stamp && view.mounts.len() < MAX_CACHED_SALTENVS {
                view.mounts.insert(saltenv.to_string(), mounts.clone());
            }
        }
        mounts
    }

    /// The file `path` of `saltenv` is in the trees served, as `find`
    /// resolves it in the mounts; remembered until an update changes what
    /// is served (errors are not remembered).
    pub fn resolve_cached<E>(
        &self,
        saltenv: &str,
        path: &str,
        find: impl FnOnce(&[Mount]) -> Result<Option<PathBuf>, E>,
    ) -> Result<Option<PathBuf>, E> {
        let (states, stamp) = self.states_at();
        let key = (saltenv.to_string(), path.to_string());
        if let Ok(view) = self.view.read() {
            if view.stamp == stamp {
                if let Some(found) = view.resolved.get(&key) {
                    return Ok(found.clone());
                }
            }
        }
        let found = find(&self.mounts_at(&states, stamp, saltenv))?;
        if let Ok(mut view) = self.view.write() {
            if view.stamp == stamp && view.resolved.len() < MAX_CACHED_PATHS {
                view.resolved.insert(key, found.clone());
            }
        }
        Ok(found)
    }

    /// The files (or directories) below `prefix` in `saltenv`, as `list`
    /// lists them in the mounts; remembered like [`GitFs::resolve_cached`].
    pub fn list_cached<E>(
        &self,
        saltenv: &str,
        prefix: &str,
        dirs: bool,
        list: impl FnOnce(&[Mount]) -> Result<Vec<String>, E>,
    ) -> Result<Arc<Vec<String>>, E> {
        let (states, stamp) = self.states_at();
        let key = (saltenv.to_string(), prefix.to_string(), dirs);
        if let Ok(view) = self.view.read() {
            if view.stamp == stamp {
                if let Some(listed) = view.listed.get(&key) {
                    return Ok(listed.clone());
                }
            }
        }
        let listed = Arc::new(list(&self.mounts_at(&states, stamp, saltenv))?);
        if let Ok(mut view) = self.view.write() {
            if view.stamp == stamp && view.listed.len() < MAX_CACHED_LISTINGS {
                view.listed.insert(key, listed.clone());
            }
        }
        Ok(listed)
    }

    fn work_out_mounts(&self, states: &[RepoState], saltenv: &str) -> Vec<Mount> {
        if !saltenv_allowed(&self.opts, "gitfs", saltenv) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (repo, state) in self.repos.iter().zip(states.iter()) {
            if let Some((commit, root, mountpoint)) = resolve_env(&repo.cfg, &state.refs, saltenv) {
                let tree = repo.tree(&commit);
                if !tree.is_dir() {
                    continue;
                }
                out.push(Mount {
                    remote: repo.scrub(&repo.cfg.id),
                    dir: if root.is_empty() {
                        tree
                    } else {
                        tree.join(root)
                    },
                    commit,
                    mountpoint,
                });
            }
        }
        out
    }

    /// Every saltenv some remote serves (`fileserver.envs`).
    pub fn envs(&self) -> Vec<String> {
        let states = self.states();
        let mut out = BTreeSet::new();
        for (repo, state) in self.repos.iter().zip(states.iter()) {
            out.extend(remote_envs(&repo.cfg, &state.refs));
        }
        out.into_iter()
            .filter(|e| saltenv_allowed(&self.opts, "gitfs", e))
            .collect()
    }

    /// The remotes never fetched successfully, with the last error of each.
    pub fn unfetched(&self) -> Vec<(String, String)> {
        let states = self.states();
        self.repos
            .iter()
            .zip(states.iter())
            .filter(|(_, s)| s.fetched.is_none())
            .map(|(r, s)| {
                (
                    r.scrub(&r.cfg.id),
                    s.error
                        .clone()
                        .unwrap_or_else(|| "no fetch has finished yet".to_string()),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(params: Value) -> RemoteConfig {
        let opts = json!({ "gitfs_remotes": [ { "file:///r.git": params } ] });
        let (mut r, e) = gitfs_remotes(&opts);
        assert!(e.is_empty(), "{e:?}");
        r.remove(0)
    }

    fn refs() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("heads/master".to_string(), "aaaaaaa1".to_string()),
            ("heads/dev".to_string(), "bbbbbbb2".to_string()),
            ("tags/v1".to_string(), "ccccccc3".to_string()),
        ])
    }

    #[test]
    fn branches_and_tags_are_saltenvs_and_master_is_base() {
        let c = cfg(json!([]));
        assert_eq!(
            remote_envs(&c, &refs()).into_iter().collect::<Vec<_>>(),
            vec!["base", "dev", "v1"]
        );
        assert_eq!(resolve_env(&c, &refs(), "base").unwrap().0, "aaaaaaa1");
        assert_eq!(resolve_env(&c, &refs(), "master"), None);
        assert_eq!(resolve_env(&c, &refs(), "bbbbbbb").unwrap().0, "bbbbbbb2");
        let branches = cfg(json!([{"ref_types": ["branch"]}]));
        assert_eq!(resolve_env(&branches, &refs(), "v1"), None);
    }

    #[test]
    fn explicit_mapping_all_saltenvs_and_disabled_mapping() {
        let c = cfg(
            json!([{"saltenv": [{"prod": [{"ref": "v1"}, {"mountpoint": "salt://app"}]}]},
            {"disable_saltenv_mapping": true}]),
        );
        assert_eq!(
            remote_envs(&c, &refs()).into_iter().collect::<Vec<_>>(),
            vec!["base", "prod"]
        );
        assert_eq!(
            resolve_env(&c, &refs(), "prod"),
            Some(("ccccccc3".into(), String::new(), "app".into()))
        );
        assert_eq!(resolve_env(&c, &refs(), "dev"), None);
        let all = cfg(json!([{"all_saltenvs": "dev"}]));
        assert_eq!(
            resolve_env(&all, &refs(), "anything").unwrap().0,
            "bbbbbbb2"
        );
        assert_eq!(resolve_env(&all, &refs(), "base").unwrap().0, "bbbbbbb2");
    }
}
