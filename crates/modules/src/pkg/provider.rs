//! The provider contract Salt documents for `pkg` and `lowpkg`: the
//! traits every package manager implements and the options and helpers
//! they share (kept out of `pkg/mod.rs` so the providers import it without
//! a circle through their parent).

use halite_state::{Map, Value};

use super::error::{PkgError, PkgResult};
use super::targets::{TargetKind, Targets};

/// Installed packages: name -> versions (more than one only for
/// multi-version package managers such as rpm's kernels).
pub type PkgVersions = indexmap::IndexMap<String, Vec<String>>;

/// Options of `pkg.install` / `pkg.upgrade` shared by every provider.
///
/// Fields mirror Salt's keyword arguments; a provider ignores what it has
/// no equivalent for.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// Repository to install from (`fromrepo`, or the older `repo`).
    pub fromrepo: Option<String>,
    /// Refresh the package database first.
    pub refresh: bool,
    /// Reinstall packages that are already at the wanted version.
    pub reinstall: bool,
    /// Install unsigned packages (`--allow-unauthenticated`, `--nogpgcheck`).
    pub skip_verify: bool,
    /// `Some(false)` adds `--no-install-recommends`, `Some(true)` the reverse.
    pub install_recommends: Option<bool>,
    /// Only upgrade packages that are installed.
    pub only_upgrade: bool,
    /// Take the package's new config files (`--force-confnew`).
    pub force_conf_new: bool,
    /// For upgrade: `dist-upgrade` instead of `upgrade`.
    pub dist_upgrade: bool,
}

/// Options of the repo functions.
#[derive(Debug, Clone, Default)]
pub struct RepoOptions {
    /// The directory holding the repo configuration (`/etc/apt` for apt,
    /// `/etc/yum.repos.d` for yum); `None` for the provider's default.
    pub basedir: Option<String>,
}

/// The package-manager side of Salt's provider contract (`pkg.*`).
///
/// Versions are the package manager's own strings. Functions that take
/// several names return a map; the execution module turns one-name calls
/// into a plain string as Salt does.
pub trait PkgProvider: Send + Sync {
    /// The provider's name (`apt`, `dnf`, `yum`).
    fn name(&self) -> &'static str;
    /// The low-level package database beneath this provider.
    fn lowpkg(&self) -> &dyn LowPkg;
    /// Compares two versions with the package manager's rules.
    fn version_cmp(&self, a: &str, b: &str) -> std::cmp::Ordering;
    /// Installed packages; `removed` lists those removed but not purged
    /// (config files left) instead.
    fn list_pkgs(&self, removed: bool) -> PkgResult<PkgVersions>;
    /// The candidate version of each name, `""` when not found or already
    /// up to date.
    fn latest_version(
        &self,
        names: &[String],
        fromrepo: Option<&str>,
        refresh: bool,
    ) -> PkgResult<Map>;
    /// Every version of each name the repositories offer, newest first.
    fn available_versions(&self, name: &str, fromrepo: Option<&str>) -> PkgResult<Vec<String>>;
    /// Installs targets; returns `{name: {old, new}}` from `list_pkgs`
    /// before and after.
    fn install(&self, targets: &Targets, opts: &InstallOptions) -> PkgResult<Map>;
    /// Removes (or purges) packages; returns `{name: {old, new}}`.
    fn remove(&self, names: &[String], purge: bool) -> PkgResult<Map>;
    /// Upgrades all packages (or only `names`); returns the changes.
    fn upgrade(&self, names: &[String], opts: &InstallOptions) -> PkgResult<Map>;
    /// Packages with an upgrade available: name -> new version.
    fn list_upgrades(&self, refresh: bool, opts: &InstallOptions) -> PkgResult<Map>;
    /// Refreshes the package database; returns per-source status.
    fn refresh_db(&self) -> PkgResult<Map>;
    /// Holds (`hold=true`) or releases packages; Salt's per-package
    /// `{name, changes, result, comment}` map.
    fn set_hold(&self, names: &[String], hold: bool) -> PkgResult<Map>;
    /// The packages currently held (Salt's `pkg.get_selections(state="hold")`
    /// on apt), for `pkg.held`/`pkg.unheld`; `None` where the package
    /// manager has no such list here.
    fn list_held(&self) -> PkgResult<Option<Vec<String>>> {
        Ok(None)
    }
    /// Every configured repository.
    fn list_repos(&self, opts: &RepoOptions) -> PkgResult<Map>;
    /// One repository, `{}` when absent.
    fn get_repo(&self, repo: &str, opts: &RepoOptions) -> PkgResult<Map>;
    /// Deletes a repository; returns a message naming the files touched.
    fn del_repo(&self, repo: &str, opts: &RepoOptions) -> PkgResult<String>;
    /// Creates or modifies a repository (`settings` are the state's fields:
    /// `file`, `disabled`, `signedby`...); returns `{repo: get_repo(repo)}`.
    fn mod_repo(&self, repo: &str, settings: &Map, opts: &RepoOptions) -> PkgResult<Map>;
}

/// The package-database side (`lowpkg.*`): what is installed and which
/// files it owns, without touching repositories.
pub trait LowPkg: Send + Sync {
    /// The database's name (`dpkg`, `rpm`).
    fn name(&self) -> &'static str;
    /// Installed packages (all, or only `names`): name -> version.
    fn list_pkgs(&self, names: &[String]) -> PkgResult<PkgVersions>;
    /// Files that differ from the package database: path ->
    /// `{mismatch: [...], type}` (or `{missing: true}`).
    fn verify(&self, names: &[String]) -> PkgResult<Map>;
    /// `{errors: [...], files: [...]}` for the packages (all when empty).
    fn file_list(&self, names: &[String]) -> PkgResult<Map>;
    /// `{errors: [...], packages: {name: [files]}}`.
    fn file_dict(&self, names: &[String]) -> PkgResult<Map>;
    /// Name and version of a package file on disk (`.deb`, `.rpm`).
    fn bin_pkg_info(&self, path: &str) -> PkgResult<Map>;
}

/// Salt's `salt.utils.data.compare_dicts` over package lists: the names
/// whose version changed, each `{old, new}` (`""` for absent; a removed
/// package reads `{new, old}`, in Salt's key order), versions of
/// multi-version packages joined with `,`.
pub fn compare_pkg_lists(old: &PkgVersions, new: &PkgVersions) -> Map {
    let mut names: Vec<&String> = old
        .keys()
        .chain(new.keys().filter(|k| !old.contains_key(*k)))
        .collect();
    names.sort();
    let mut changes = Map::new();
    for name in names {
        let entry = match (old.get(name), new.get(name)) {
            (None, Some(n)) => json_pair(("old", String::new()), ("new", n.join(","))),
            (Some(o), None) => json_pair(("new", String::new()), ("old", o.join(","))),
            (Some(o), Some(n)) if o != n => json_pair(("old", o.join(",")), ("new", n.join(","))),
            _ => continue,
        };
        changes.insert(name.clone(), entry);
    }
    changes
}

fn json_pair(first: (&str, String), second: (&str, String)) -> Value {
    let mut m = Map::new();
    m.insert(first.0.into(), Value::String(first.1));
    m.insert(second.0.into(), Value::String(second.1));
    Value::Object(m)
}

/// A package list as Salt returns it: a string per name, or a list of
/// versions with `versions_as_list`.
pub fn pkg_versions_to_value(list: &PkgVersions, versions_as_list: bool) -> Value {
    let mut out = Map::new();
    for (name, versions) in list {
        let v = if versions_as_list {
            Value::from(versions.clone())
        } else {
            Value::from(versions.join(","))
        };
        out.insert(name.clone(), v);
    }
    Value::Object(out)
}

impl InstallOptions {
    /// Reads Salt's keyword arguments (`fromrepo` wins over `repo`;
    /// `refresh` defaults to `refresh_default`).
    pub fn from_kwargs(kwargs: &Map, refresh_default: bool) -> Self {
        let flag = |k: &str| {
            kwargs
                .get(k)
                .filter(|v| !v.is_null())
                .map(halite_state::truthy)
        };
        let string = |k: &str| match kwargs.get(k) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        InstallOptions {
            fromrepo: string("fromrepo").or_else(|| string("repo")),
            refresh: flag("refresh").unwrap_or(refresh_default),
            reinstall: flag("reinstall").unwrap_or(false),
            skip_verify: flag("skip_verify").unwrap_or(false),
            install_recommends: flag("install_recommends"),
            only_upgrade: flag("only_upgrade").unwrap_or(false),
            force_conf_new: flag("force_conf_new").unwrap_or(false),
            dist_upgrade: flag("dist_upgrade").unwrap_or(false),
        }
    }
}

impl RepoOptions {
    /// Reads `basedir` from keyword arguments (a list takes its first entry).
    pub fn from_kwargs(kwargs: &Map) -> Self {
        let basedir = match kwargs.get("basedir") {
            Some(Value::String(s)) if !s.is_empty() => {
                Some(s.split(',').next().unwrap_or(s).to_string())
            }
            Some(Value::Array(a)) => a.first().and_then(Value::as_str).map(str::to_string),
            _ => None,
        };
        RepoOptions { basedir }
    }
}

/// Turns `sources` into local paths: `salt://` files are fetched through the
/// file client, `http(s)://` and `ftp://` through the fetch layer's cache
/// (`opts` gives its `cachedir`, proxy and CA keys), `file://` URLs lose
/// their scheme, plain paths stay.
pub fn localize_sources(
    targets: &Targets,
    files: &dyn halite_state::FileClient,
    opts: &halite_state::Value,
    saltenv: &str,
) -> PkgResult<Targets> {
    if targets.kind != TargetKind::File {
        return Ok(targets.clone());
    }
    let mut out = targets.clone();
    for (name, source) in out.items.iter_mut() {
        let Some(src) = source.clone() else { continue };
        let local = if src.starts_with("salt://") || crate::fetch::is_remote(&src) {
            crate::fetch::resolve(files, opts, &src, saltenv, None)
                .map_err(|e| PkgError::Invocation(format!("Unable to cache {src}: {e}")))?
                .ok_or_else(|| {
                    PkgError::Invocation(format!("Unable to cache {src}: file not found"))
                })?
                .display()
                .to_string()
        } else if let Some(path) = src.strip_prefix("file://") {
            path.to_string()
        } else if src.contains("://") {
            return Err(PkgError::Unsupported(format!(
                "source of {name} ({src}) must be a salt://, http(s)://, ftp://, file:// URL or a local path"
            )));
        } else {
            src
        };
        if !std::path::Path::new(&local).is_file() {
            return Err(PkgError::Invocation(format!(
                "{local} does not exist on minion"
            )));
        }
        *source = Some(local);
    }
    Ok(out)
}
