//! The apt provider (Debian, Ubuntu): `apt-get` / `apt-cache` / `apt-mark`
//! for what needs repositories, [`Dpkg`] for what is installed.
//!
//! Every apt call runs non-interactive (Salt's `DPKG_ENV_VARS`) with a
//! dpkg lock timeout, keeps old config files (`--force-confold
//! --force-confdef`) unless `force_conf_new`, and reports apt's own error
//! text on failure.

use std::cmp::Ordering;
use std::path::PathBuf;

use halite_state::{Map, Value};
use serde_json::json;

use super::aptsources;
use super::dpkg::Dpkg;
use super::error::{PkgError, PkgResult};
use super::provider::{
    compare_pkg_lists, InstallOptions, LowPkg, PkgProvider, PkgVersions, RepoOptions,
};
use super::run::{argv, run, ToolOutput, DPKG_ENV};
use super::targets::TargetKind;
use super::targets::Targets;
use super::version::{best_match, deb_cmp, has_range};

/// How long apt waits for another apt/dpkg to release the lock, in
/// seconds, unless the `pkg_lock_timeout` option says otherwise.
pub const LOCK_TIMEOUT_SECS: u64 = 60;

/// apt over dpkg.
#[derive(Debug, Clone)]
pub struct Apt {
    dpkg: Dpkg,
    lock_timeout: u64,
}

impl Default for Apt {
    fn default() -> Self {
        Apt {
            dpkg: Dpkg::default(),
            lock_timeout: LOCK_TIMEOUT_SECS,
        }
    }
}

impl Apt {
    /// apt over the host's dpkg database.
    pub fn new() -> Self {
        Apt::default()
    }

    /// Waits at most `secs` for the dpkg lock, then fails with apt's
    /// "Could not get lock" message.
    pub fn with_lock_timeout(secs: u64) -> Self {
        Apt {
            lock_timeout: secs,
            ..Apt::default()
        }
    }

    /// The table's constructor: `pkg_lock_timeout` (seconds) from the
    /// minion options, else [`LOCK_TIMEOUT_SECS`].
    pub fn boxed(opts: &Value) -> Box<dyn PkgProvider> {
        match opts.get("pkg_lock_timeout").and_then(Value::as_u64) {
            Some(secs) => Box::new(Apt::with_lock_timeout(secs)),
            None => Box::new(Apt::new()),
        }
    }

    fn lock_option(&self) -> String {
        format!("DPkg::Lock::Timeout={}", self.lock_timeout)
    }

    /// `apt-get -q -y` plus the lock timeout.
    fn apt_get(&self) -> Vec<String> {
        argv(["apt-get", "-q", "-y", "-o", &self.lock_option()])
    }

    fn call(&self, cmd: &[String]) -> PkgResult<ToolOutput> {
        run(cmd, DPKG_ENV)
    }

    fn basedir(opts: &RepoOptions) -> PathBuf {
        PathBuf::from(
            opts.basedir
                .as_deref()
                .unwrap_or(aptsources::DEFAULT_BASEDIR),
        )
    }

    /// `apt-cache policy` for several names in one process: name -> candidate.
    fn candidates(&self, names: &[String], fromrepo: Option<&str>) -> PkgResult<Map> {
        let mut cmd = argv(["apt-cache", "-q", "policy"]);
        cmd.extend(names.iter().cloned());
        if let Some(repo) = fromrepo {
            cmd.push("-o".into());
            cmd.push(format!("APT::Default-Release={repo}"));
        }
        let out = self.call(&cmd)?;
        if !out.success() {
            return Err(PkgError::failed("apt-cache policy failed", out.message()));
        }
        let mut ret = Map::new();
        let mut current: Option<String> = None;
        for line in out.stdout.lines() {
            if !line.starts_with(' ') && line.ends_with(':') {
                current = Some(line.trim_end_matches(':').to_string());
            } else if let (Some(name), Some(rest)) =
                (current.as_ref(), line.trim().strip_prefix("Candidate:"))
            {
                let cand = rest.trim();
                let cand = if cand.eq_ignore_ascii_case("(none)") {
                    ""
                } else {
                    cand
                };
                ret.insert(name.clone(), json!(cand));
            }
        }
        Ok(ret)
    }

    fn common_install_flags(&self, opts: &InstallOptions) -> Vec<String> {
        let mut cmd = self.apt_get();
        if opts.force_conf_new {
            cmd.extend(argv(["-o", "DPkg::Options::=--force-confnew"]));
        } else {
            cmd.extend(argv([
                "-o",
                "DPkg::Options::=--force-confold",
                "-o",
                "DPkg::Options::=--force-confdef",
            ]));
        }
        match opts.install_recommends {
            Some(false) => cmd.push("--no-install-recommends".into()),
            Some(true) => cmd.push("--install-recommends".into()),
            None => {}
        }
        if opts.skip_verify {
            cmd.push("--allow-unauthenticated".into());
        }
        cmd
    }

    fn held(&self) -> PkgResult<Vec<String>> {
        Ok(self
            .dpkg
            .status()?
            .into_iter()
            .filter(|e| e.want == "hold")
            .map(|e| e.package)
            .collect())
    }
}

/// apt's error text: stderr, preceded by the unmet-dependency report apt
/// prints on stdout (stderr alone only says "held broken packages").
fn apt_error(out: &ToolOutput) -> String {
    let mut msg = String::new();
    if let Some(pos) = out
        .stdout
        .find("The following packages have unmet dependencies")
    {
        msg.push_str(out.stdout[pos..].trim());
        msg.push('\n');
    }
    msg.push_str(&out.message());
    msg
}

/// Parses `apt-get --just-print` output: `Conf name (version ...)`.
fn parse_just_print(out: &str) -> Map {
    let mut ret = Map::new();
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("Conf ") {
            if let Some((name, tail)) = rest.split_once(" (") {
                let version = tail
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .trim_end_matches(')');
                ret.insert(name.to_string(), json!(version));
            }
        }
    }
    ret
}

impl PkgProvider for Apt {
    fn name(&self) -> &'static str {
        "apt"
    }

    fn lowpkg(&self) -> &dyn LowPkg {
        &self.dpkg
    }

    fn version_cmp(&self, a: &str, b: &str) -> Ordering {
        deb_cmp(a, b)
    }

    fn list_pkgs(&self, removed: bool) -> PkgResult<PkgVersions> {
        self.dpkg.packages(removed)
    }

    fn latest_version(
        &self,
        names: &[String],
        fromrepo: Option<&str>,
        refresh: bool,
    ) -> PkgResult<Map> {
        if names.is_empty() {
            return Ok(Map::new());
        }
        if refresh {
            self.refresh_db()?;
        }
        let installed = self.list_pkgs(false)?;
        let candidates = self.candidates(names, fromrepo)?;
        let mut ret = Map::new();
        for name in names {
            let candidate = candidates
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let value = match installed.get(name) {
                None => candidate,
                Some(_) if candidate.is_empty() => String::new(),
                Some(versions) => {
                    if versions
                        .iter()
                        .any(|v| deb_cmp(v, &candidate) != Ordering::Less)
                    {
                        String::new()
                    } else {
                        candidate
                    }
                }
            };
            ret.insert(name.clone(), json!(value));
        }
        Ok(ret)
    }

    fn available_versions(&self, name: &str, _fromrepo: Option<&str>) -> PkgResult<Vec<String>> {
        let out = self.call(&argv(["apt-cache", "-q", "madison", name]))?;
        let mut versions: Vec<String> = Vec::new();
        for line in out.stdout.lines() {
            let cols: Vec<&str> = line.split('|').map(str::trim).collect();
            if cols.len() >= 3 && cols[0] == name && !versions.iter().any(|v| v == cols[1]) {
                versions.push(cols[1].to_string());
            }
        }
        versions.sort_by(|a, b| deb_cmp(b, a));
        Ok(versions)
    }

    fn install(&self, targets: &Targets, opts: &InstallOptions) -> PkgResult<Map> {
        if targets.is_empty() {
            return Ok(Map::new());
        }
        let old = self.list_pkgs(false)?;
        let mut install = Vec::new();
        let mut downgrade = Vec::new();
        let mut reinstall: Vec<(String, String)> = Vec::new();
        let mut errors = Vec::new();
        for (name, spec) in &targets.items {
            let current = old
                .get(name)
                .and_then(|v| v.last())
                .cloned()
                .unwrap_or_default();
            let (wanted_version, arg) = match targets.kind {
                TargetKind::Repository => match spec
                    .as_deref()
                    .map(|s| s.trim())
                    .filter(|s| !s.is_empty() && *s != "latest")
                {
                    None => (None, name.clone()),
                    Some(spec) => {
                        let version = if has_range(spec) {
                            let candidates =
                                self.available_versions(name, opts.fromrepo.as_deref())?;
                            match best_match(&deb_cmp, spec, &candidates) {
                                Some(v) => v,
                                None => {
                                    let avail = if candidates.is_empty() {
                                        "None".to_string()
                                    } else {
                                        candidates.join(", ")
                                    };
                                    errors.push(format!("No version matching '{name}{spec}' could be found (available: {avail})"));
                                    continue;
                                }
                            }
                        } else {
                            spec.trim_start_matches('=').to_string()
                        };
                        (Some(version.clone()), format!("{name}={version}"))
                    }
                },
                TargetKind::File => {
                    let path = spec.clone().unwrap_or_default();
                    let info = self.dpkg.bin_pkg_info(&path)?;
                    let version = info
                        .get("version")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let abs = std::fs::canonicalize(&path).map_err(|e| PkgError::io(&path, e))?;
                    (Some(version), abs.display().to_string())
                }
            };
            match wanted_version {
                None if opts.reinstall && !current.is_empty() => {
                    reinstall.push((name.clone(), arg))
                }
                None => install.push(arg),
                Some(v)
                    if opts.reinstall
                        && !current.is_empty()
                        && deb_cmp(&v, &current) == Ordering::Equal =>
                {
                    reinstall.push((name.clone(), arg))
                }
                Some(v) if current.is_empty() || deb_cmp(&v, &current) != Ordering::Less => {
                    install.push(arg)
                }
                Some(_) => downgrade.push(arg),
            }
        }
        let mut prefix = self.common_install_flags(opts);
        if opts.only_upgrade {
            prefix.push("--only-upgrade".into());
        }
        if let (Some(repo), TargetKind::Repository) = (opts.fromrepo.as_deref(), targets.kind) {
            prefix.push("-t".into());
            prefix.push(repo.to_string());
        }
        let held = self.held()?;
        let names = targets.names();
        if names.iter().any(|n| held.contains(n)) {
            prefix.push("--allow-change-held-packages".into());
        }
        let mut cmds = Vec::new();
        if !install.is_empty() {
            let mut c = prefix.clone();
            c.push("install".into());
            c.extend(install);
            cmds.push(c);
        }
        if !downgrade.is_empty() {
            let mut c = prefix.clone();
            c.push("--allow-downgrades".into());
            c.push("install".into());
            c.extend(downgrade);
            cmds.push(c);
        }
        if !reinstall.is_empty() {
            let mut c = prefix.clone();
            c.push("install".into());
            if targets.kind == TargetKind::Repository {
                c.push("--reinstall".into());
            }
            c.extend(reinstall.iter().map(|(_, a)| a.clone()));
            cmds.push(c);
        }
        if !cmds.is_empty() && opts.refresh {
            self.refresh_db()?;
        }
        for cmd in &cmds {
            let out = self.call(cmd)?;
            if !out.success() {
                errors.push(apt_error(&out));
            }
        }
        let new = self.list_pkgs(false)?;
        let mut changes = compare_pkg_lists(&old, &new);
        for (name, _) in &reinstall {
            if !changes.contains_key(name) {
                let v = |l: &PkgVersions| l.get(name).map(|v| v.join(",")).unwrap_or_default();
                changes.insert(name.clone(), json!({"old": v(&old), "new": v(&new)}));
            }
        }
        if !errors.is_empty() {
            return Err(PkgError::Failed {
                message: "Problem encountered installing package(s)".into(),
                errors,
                changes,
            });
        }
        Ok(changes)
    }

    fn remove(&self, names: &[String], purge: bool) -> PkgResult<Map> {
        let old = self.list_pkgs(false)?;
        let old_removed = self.list_pkgs(true)?;
        let mut targets: Vec<String> = names
            .iter()
            .filter(|n| old.contains_key(*n))
            .cloned()
            .collect();
        if purge {
            targets.extend(
                names
                    .iter()
                    .filter(|n| old_removed.contains_key(*n))
                    .cloned(),
            );
        }
        if targets.is_empty() {
            return Ok(Map::new());
        }
        let mut cmd = self.apt_get();
        cmd.push(if purge { "purge" } else { "remove" }.into());
        cmd.extend(targets);
        let out = self.call(&cmd)?;
        let new = self.list_pkgs(false)?;
        let changes = compare_pkg_lists(&old, &new);
        let ret = if purge {
            let new_removed = self.list_pkgs(true)?;
            let mut m = Map::new();
            m.insert(
                "removed".into(),
                Value::Object(compare_pkg_lists(&old_removed, &new_removed)),
            );
            m.insert("installed".into(), Value::Object(changes));
            m
        } else {
            changes
        };
        if !out.success() {
            return Err(PkgError::Failed {
                message: "Problem encountered removing package(s)".into(),
                errors: vec![out.message()],
                changes: ret,
            });
        }
        Ok(ret)
    }

    fn upgrade(&self, names: &[String], opts: &InstallOptions) -> PkgResult<Map> {
        if opts.refresh {
            self.refresh_db()?;
        }
        let old = self.list_pkgs(false)?;
        let mut cmd = self.common_install_flags(opts);
        cmd.push("--allow-downgrades".into());
        if names.is_empty() {
            cmd.push(
                if opts.dist_upgrade {
                    "dist-upgrade"
                } else {
                    "upgrade"
                }
                .into(),
            );
        } else {
            cmd.push("--only-upgrade".into());
            cmd.push("install".into());
            cmd.extend(names.iter().cloned());
        }
        let out = self.call(&cmd)?;
        let new = self.list_pkgs(false)?;
        let changes = compare_pkg_lists(&old, &new);
        if !out.success() {
            return Err(PkgError::Failed {
                message: "Problem encountered upgrading packages".into(),
                errors: vec![apt_error(&out)],
                changes,
            });
        }
        Ok(changes)
    }

    fn list_upgrades(&self, refresh: bool, opts: &InstallOptions) -> PkgResult<Map> {
        if refresh {
            self.refresh_db()?;
        }
        let mut cmd = argv(["apt-get", "--just-print"]);
        cmd.push(
            if opts.dist_upgrade {
                "dist-upgrade"
            } else {
                "upgrade"
            }
            .into(),
        );
        if let Some(repo) = &opts.fromrepo {
            cmd.push("-o".into());
            cmd.push(format!("APT::Default-Release={repo}"));
        }
        let out = self.call(&cmd)?;
        if !out.success() {
            return Err(PkgError::failed("Failed to get upgrades", out.message()));
        }
        Ok(parse_just_print(&out.stdout))
    }

    fn refresh_db(&self) -> PkgResult<Map> {
        let mut cmd = argv(["apt-get", "-q", "-o", &self.lock_option()]);
        cmd.push("update".into());
        let out = self.call(&cmd)?;
        if !out.success() {
            return Err(PkgError::failed("apt-get update failed", out.message()));
        }
        let mut ret = Map::new();
        let size_suffix = regex::Regex::new(r" \[.+B\]$").ok();
        for line in out.stdout.lines() {
            let mut cols = line.split_whitespace();
            let Some(kind) = cols.next() else { continue };
            let ident: String = cols.collect::<Vec<_>>().join(" ");
            let status = if kind.starts_with("Get") {
                let ident = size_suffix
                    .as_ref()
                    .map(|r| r.replace(&ident, "").into_owned())
                    .unwrap_or(ident);
                ret.insert(ident, Value::Bool(true));
                continue;
            } else if kind.starts_with("Hit") {
                Value::Null
            } else if kind.starts_with("Ign") || kind.starts_with("Err") {
                Value::Bool(false)
            } else {
                continue;
            };
            ret.insert(ident, status);
        }
        Ok(ret)
    }

    fn list_held(&self) -> PkgResult<Option<Vec<String>>> {
        self.held().map(Some)
    }

    fn set_hold(&self, names: &[String], hold: bool) -> PkgResult<Map> {
        let status = self.dpkg.status()?;
        let mut ret = Map::new();
        for name in names {
            let entry = status
                .iter()
                .find(|e| &e.package == name && e.state != "not-installed");
            let mut r = json!({"name": name, "changes": {}, "result": false, "comment": ""});
            match entry {
                None if hold => r["comment"] = json!(format!("Package {name} not currently held.")),
                None => r["comment"] = json!(format!("Package {name} does not have a state.")),
                Some(e) if (e.want == "hold") == hold => {
                    r["result"] = json!(true);
                    r["comment"] = json!(if hold {
                        format!("Package {name} is already set to be held.")
                    } else {
                        format!("Package {name} is already set not to be held.")
                    });
                }
                Some(e) => {
                    let mut cmd = argv(["apt-mark", "-o", &self.lock_option()]);
                    cmd.push(if hold { "hold" } else { "unhold" }.into());
                    cmd.push(name.clone());
                    let out = self.call(&cmd)?;
                    if out.success() {
                        let new = if hold { "hold" } else { "install" };
                        r["changes"] = json!({"old": e.want, "new": new});
                        r["result"] = json!(true);
                        r["comment"] = json!(if hold {
                            format!("Package {name} is now being held.")
                        } else {
                            format!("Package {name} is no longer being held.")
                        });
                    } else {
                        r["comment"] = json!(out.message());
                    }
                }
            }
            ret.insert(name.clone(), r);
        }
        Ok(ret)
    }

    fn list_repos(&self, opts: &RepoOptions) -> PkgResult<Map> {
        aptsources::list_repos(&Self::basedir(opts))
    }

    fn get_repo(&self, repo: &str, opts: &RepoOptions) -> PkgResult<Map> {
        aptsources::get_repo(&Self::basedir(opts), repo)
    }

    fn del_repo(&self, repo: &str, opts: &RepoOptions) -> PkgResult<String> {
        aptsources::del_repo(&Self::basedir(opts), repo)
    }

    fn mod_repo(&self, repo: &str, settings: &Map, opts: &RepoOptions) -> PkgResult<Map> {
        aptsources::mod_repo(&Self::basedir(opts), repo, settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn just_print_conf_lines() {
        let out = "Inst foo [1.0] (2.0 local [all])\nConf foo (2.0 local [all])\nConf lib-x:amd64 (1:3-1 Debian:12 [amd64])\n";
        let m = parse_just_print(out);
        assert_eq!(m["foo"], json!("2.0"));
        assert_eq!(m["lib-x:amd64"], json!("1:3-1"));
    }
}
