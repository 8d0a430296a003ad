//! The dnf / yum provider (RedHat family), written from Salt's yumpkg
//! contract. Tested against Debian's dnf on a private `--installroot`; the
//! old `yum` tool and `versionlock` holds are not (see docs/pkg.md).

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use halite_state::{Map, Value};
use serde_json::json;

use super::error::{PkgError, PkgResult};
use super::provider::{
    compare_pkg_lists, InstallOptions, LowPkg, PkgProvider, PkgVersions, RepoOptions,
};
use super::rpm::Rpm;
use super::run::{argv, run, ToolOutput};
use super::targets::TargetKind;
use super::targets::Targets;
use super::version::{best_match, has_range, rpm_cmp};

/// Where yum/dnf read `.repo` files unless told otherwise.
pub const DEFAULT_REPO_DIR: &str = "/etc/yum.repos.d";

/// dnf or yum over rpm.
#[derive(Debug, Clone)]
pub struct Yum {
    tool: &'static str,
    rpm: Rpm,
    /// `--installroot` and `--releasever` for a system other than the host.
    installroot: Option<(PathBuf, String)>,
}

impl Yum {
    /// `dnf` when it is on this host, else `yum`.
    pub fn detect() -> Self {
        let tool = if Path::new("/usr/bin/dnf").exists() {
            "dnf"
        } else {
            "yum"
        };
        Yum {
            tool,
            rpm: Rpm::default(),
            installroot: None,
        }
    }

    /// dnf/yum managing the system installed under `root` (dnf's
    /// `--installroot`; `releasever` is needed when that system has no
    /// release package). Repos are read from `<root>/etc/yum.repos.d`.
    pub fn with_installroot(root: impl Into<PathBuf>, releasever: &str) -> Self {
        let root = root.into();
        Yum {
            rpm: Rpm::with_root(&root),
            installroot: Some((root, releasever.to_string())),
            ..Yum::detect()
        }
    }

    /// The table's constructor.
    pub fn boxed(_opts: &Value) -> Box<dyn PkgProvider> {
        Box::new(Yum::detect())
    }

    fn call(&self, args: &[&str], opts: Option<&InstallOptions>) -> PkgResult<ToolOutput> {
        let mut cmd = argv([self.tool, "-y"]);
        if let Some((root, releasever)) = &self.installroot {
            cmd.push(format!("--installroot={}", root.display()));
            cmd.push(format!("--releasever={releasever}"));
        }
        if let Some(o) = opts {
            if let Some(repo) = &o.fromrepo {
                cmd.push("--disablerepo=*".into());
                cmd.push(format!("--enablerepo={repo}"));
            }
            if o.skip_verify {
                cmd.push("--nogpgcheck".into());
            }
        }
        cmd.extend(args.iter().map(|s| s.to_string()));
        run(&cmd, &[])
    }

    fn basedir(&self, opts: &RepoOptions) -> PathBuf {
        match (&opts.basedir, &self.installroot) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some((root, _))) => root.join(DEFAULT_REPO_DIR.trim_start_matches('/')),
            (None, None) => PathBuf::from(DEFAULT_REPO_DIR),
        }
    }
}

/// Parses `dnf check-update` / `list` rows: `name.arch  version  repo`.
fn parse_name_arch_version(out: &str) -> Map {
    let mut ret = Map::new();
    for line in out.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() != 3 || cols[0].ends_with(':') {
            continue;
        }
        let name = cols[0].rsplit_once('.').map(|(n, _)| n).unwrap_or(cols[0]);
        ret.insert(name.to_string(), json!(cols[1]));
    }
    ret
}

impl PkgProvider for Yum {
    fn name(&self) -> &'static str {
        self.tool
    }

    fn lowpkg(&self) -> &dyn LowPkg {
        &self.rpm
    }

    fn version_cmp(&self, a: &str, b: &str) -> Ordering {
        rpm_cmp(a, b)
    }

    fn list_pkgs(&self, removed: bool) -> PkgResult<PkgVersions> {
        if removed {
            // rpm keeps no record of removed packages.
            return Ok(PkgVersions::new());
        }
        self.rpm.packages_full()
    }

    fn latest_version(
        &self,
        names: &[String],
        fromrepo: Option<&str>,
        refresh: bool,
    ) -> PkgResult<Map> {
        if refresh {
            self.refresh_db()?;
        }
        let installed = self.list_pkgs(false)?;
        let opts = InstallOptions {
            fromrepo: fromrepo.map(str::to_string),
            ..Default::default()
        };
        let mut args = vec!["-q", "list", "available"];
        args.extend(names.iter().map(String::as_str));
        let out = self.call(&args, Some(&opts))?;
        let avail = parse_name_arch_version(&out.stdout);
        let mut ret = Map::new();
        for name in names {
            let cand = avail
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let value = match installed.get(name) {
                Some(v) if v.iter().any(|i| rpm_cmp(i, &cand) != Ordering::Less) => String::new(),
                _ => cand,
            };
            ret.insert(name.clone(), json!(value));
        }
        Ok(ret)
    }

    fn available_versions(&self, name: &str, fromrepo: Option<&str>) -> PkgResult<Vec<String>> {
        let opts = InstallOptions {
            fromrepo: fromrepo.map(str::to_string),
            ..Default::default()
        };
        let out = self.call(
            &["-q", "list", "available", "--showduplicates", name],
            Some(&opts),
        )?;
        let mut versions: Vec<String> = Vec::new();
        for line in out.stdout.lines() {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() == 3 && cols[0].rsplit_once('.').map(|(n, _)| n) == Some(name) {
                versions.push(cols[1].to_string());
            }
        }
        versions.sort_by(|a, b| rpm_cmp(b, a));
        versions.dedup();
        Ok(versions)
    }

    fn install(&self, targets: &Targets, opts: &InstallOptions) -> PkgResult<Map> {
        if targets.is_empty() {
            return Ok(Map::new());
        }
        if opts.refresh {
            self.refresh_db()?;
        }
        let old = self.list_pkgs(false)?;
        let (mut install, mut downgrade, mut reinstall, mut errors) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (name, spec) in &targets.items {
            let current = old
                .get(name)
                .and_then(|v| v.last())
                .cloned()
                .unwrap_or_default();
            let (version, arg) = match targets.kind {
                TargetKind::File => {
                    let path = spec.clone().unwrap_or_default();
                    let info = self.rpm.bin_pkg_info(&path)?;
                    (
                        info.get("version")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        path,
                    )
                }
                TargetKind::Repository => match spec
                    .as_deref()
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && *s != "latest")
                {
                    None => (None, name.clone()),
                    Some(spec) => {
                        let v = if has_range(spec) {
                            let cands = self.available_versions(name, opts.fromrepo.as_deref())?;
                            match best_match(&rpm_cmp, spec, &cands) {
                                Some(v) => v,
                                None => {
                                    errors.push(format!(
                                        "No version matching '{name}{spec}' could be found"
                                    ));
                                    continue;
                                }
                            }
                        } else {
                            spec.trim_start_matches('=').to_string()
                        };
                        (Some(v.clone()), format!("{name}-{v}"))
                    }
                },
            };
            match version {
                Some(v) if !current.is_empty() && rpm_cmp(&v, &current) == Ordering::Less => {
                    downgrade.push(arg)
                }
                Some(v) if opts.reinstall && rpm_cmp(&v, &current) == Ordering::Equal => {
                    reinstall.push(arg)
                }
                None if opts.reinstall && !current.is_empty() => reinstall.push(arg),
                _ => install.push(arg),
            }
        }
        for (verb, list) in [
            ("install", &install),
            ("downgrade", &downgrade),
            ("reinstall", &reinstall),
        ] {
            if list.is_empty() {
                continue;
            }
            let mut args = vec![verb];
            args.extend(list.iter().map(String::as_str));
            let out = self.call(&args, Some(opts))?;
            if !out.success() {
                errors.push(out.message());
            }
        }
        let changes = compare_pkg_lists(&old, &self.list_pkgs(false)?);
        if !errors.is_empty() {
            return Err(PkgError::Failed {
                message: "Error occurred installing package(s)".into(),
                errors,
                changes,
            });
        }
        Ok(changes)
    }

    fn remove(&self, names: &[String], _purge: bool) -> PkgResult<Map> {
        let old = self.list_pkgs(false)?;
        let targets: Vec<&str> = names
            .iter()
            .filter(|n| old.contains_key(*n))
            .map(String::as_str)
            .collect();
        if targets.is_empty() {
            return Ok(Map::new());
        }
        let mut args = vec!["remove"];
        args.extend(targets);
        let out = self.call(&args, None)?;
        let changes = compare_pkg_lists(&old, &self.list_pkgs(false)?);
        if !out.success() {
            return Err(PkgError::Failed {
                message: "Error occurred removing package(s)".into(),
                errors: vec![out.message()],
                changes,
            });
        }
        Ok(changes)
    }

    fn upgrade(&self, names: &[String], opts: &InstallOptions) -> PkgResult<Map> {
        let old = self.list_pkgs(false)?;
        let mut args = vec!["upgrade"];
        args.extend(names.iter().map(String::as_str));
        if !opts.refresh {
            args.insert(0, "--cacheonly");
        }
        let out = self.call(&args, Some(opts))?;
        let changes = compare_pkg_lists(&old, &self.list_pkgs(false)?);
        if !out.success() {
            return Err(PkgError::Failed {
                message: "Problem encountered upgrading packages".into(),
                errors: vec![out.message()],
                changes,
            });
        }
        Ok(changes)
    }

    fn list_upgrades(&self, refresh: bool, opts: &InstallOptions) -> PkgResult<Map> {
        let mut args = vec!["-q", "check-update"];
        if !refresh {
            args.insert(0, "--cacheonly");
        }
        let out = self.call(&args, Some(opts))?;
        // check-update exits 100 when updates are available.
        if out.retcode != 0 && out.retcode != 100 {
            return Err(PkgError::failed("Failed to get upgrades", out.message()));
        }
        Ok(parse_name_arch_version(&out.stdout))
    }

    fn refresh_db(&self) -> PkgResult<Map> {
        let _ = self.call(&["-q", "clean", "expire-cache"], None)?;
        let out = self.call(&["-q", "check-update"], None)?;
        if out.retcode != 0 && out.retcode != 100 {
            return Err(PkgError::failed(
                format!("{} check-update failed", self.tool),
                out.message(),
            ));
        }
        Ok(Map::new())
    }

    fn set_hold(&self, names: &[String], hold: bool) -> PkgResult<Map> {
        let mut ret = Map::new();
        for name in names {
            let verb = if hold { "add" } else { "delete" };
            let out = self.call(&["versionlock", verb, name], None)?;
            let r = if out.success() {
                json!({"name": name, "result": true,
                       "changes": {"old": if hold {""} else {"hold"}, "new": if hold {"hold"} else {""}},
                       "comment": if hold { format!("Package {name} is now being held.") } else { format!("Package {name} is no longer being held.") }})
            } else {
                json!({"name": name, "result": false, "changes": {}, "comment": out.message()})
            };
            ret.insert(name.clone(), r);
        }
        Ok(ret)
    }

    fn list_repos(&self, opts: &RepoOptions) -> PkgResult<Map> {
        let mut ret = Map::new();
        for (file, sections) in read_repo_files(&self.basedir(opts))? {
            for (id, mut keys) in sections {
                keys.insert("file".into(), json!(file.display().to_string()));
                ret.insert(id, Value::Object(keys));
            }
        }
        Ok(ret)
    }

    fn get_repo(&self, repo: &str, opts: &RepoOptions) -> PkgResult<Map> {
        Ok(self
            .list_repos(opts)?
            .get(repo)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default())
    }

    fn del_repo(&self, repo: &str, opts: &RepoOptions) -> PkgResult<String> {
        for (file, mut sections) in read_repo_files(&self.basedir(opts))? {
            if sections.shift_remove(repo).is_some() {
                if sections.is_empty() {
                    std::fs::remove_file(&file).map_err(|e| PkgError::io(&file, e))?;
                    return Ok(format!(
                        "File {} containing repo {repo} has been removed",
                        file.display()
                    ));
                }
                write_repo_file(&file, &sections)?;
                return Ok(format!(
                    "Repo {repo} has been removed from {}",
                    file.display()
                ));
            }
        }
        Err(PkgError::failed(
            format!("Error: the {repo} repo does not exist"),
            "",
        ))
    }

    fn mod_repo(&self, repo: &str, settings: &Map, opts: &RepoOptions) -> PkgResult<Map> {
        let basedir = self.basedir(opts);
        let mut files = read_repo_files(&basedir)?;
        let found = files.iter().position(|(_, s)| s.contains_key(repo));
        let (path, mut sections) = match found {
            Some(i) => files.swap_remove(i),
            None => {
                let path = settings
                    .get("file")
                    .and_then(Value::as_str)
                    .map(PathBuf::from)
                    .unwrap_or_else(|| basedir.join(format!("{repo}.repo")));
                let existing = files
                    .into_iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, s)| s)
                    .unwrap_or_default();
                (path, existing)
            }
        };
        let section = sections.entry(repo.to_string()).or_default();
        for (k, v) in settings {
            if matches!(k.as_str(), "file" | "basedir" | "name" | "repo") {
                if k == "name" {
                    section.insert(k.clone(), v.clone());
                }
                continue;
            }
            if v.is_null() {
                section.remove(k);
            } else {
                section.insert(k.clone(), v.clone());
            }
        }
        write_repo_file(&path, &sections)?;
        let mut ret = Map::new();
        ret.insert(repo.to_string(), Value::Object(self.get_repo(repo, opts)?));
        Ok(ret)
    }
}

type RepoSections = indexmap::IndexMap<String, Map>;

/// Reads every `*.repo` file of `dir` as INI: `[id]` then `key=value`.
fn read_repo_files(dir: &Path) -> PkgResult<Vec<(PathBuf, RepoSections)>> {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "repo"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(PkgError::io(dir, e)),
    };
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|e| PkgError::io(&path, e))?;
        let mut sections = RepoSections::new();
        let mut current: Option<String> = None;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(id) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                current = Some(id.to_string());
                sections.entry(id.to_string()).or_default();
            } else if let (Some(id), Some((k, v))) = (&current, line.split_once('=')) {
                if let Some(section) = sections.get_mut(id) {
                    section.insert(k.trim().to_string(), json!(v.trim()));
                }
            }
        }
        out.push((path, sections));
    }
    Ok(out)
}

fn write_repo_file(path: &Path, sections: &RepoSections) -> PkgResult<()> {
    let mut text = String::new();
    for (id, keys) in sections {
        text.push_str(&format!("[{id}]\n"));
        for (k, v) in keys {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
                other => other.to_string(),
            };
            text.push_str(&format!("{k}={v}\n"));
        }
        text.push('\n');
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| PkgError::io(dir, e))?;
    }
    std::fs::write(path, text).map_err(|e| PkgError::io(path, e))
}
