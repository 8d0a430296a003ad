//! Salt's `pip` execution module: pip run as Salt runs it, `python -m pip`
//! of a virtualenv (`bin_env` as a venv directory), a given pip or python
//! binary, or the system's `python3`; as `user`, in `cwd`, with
//! `env_vars`. The `pip` states are built on the Rust functions here.

pub mod requirement;

use std::path::Path;

use halite_state::{CmdOptions, CmdOutput, FileClient, Map, Value};

use crate::exec::cmd::{env_pairs, run_all_value};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

pub use requirement::normalize;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "pip",
    functions: &[
        ExecFunction::new("install", install_fn),
        ExecFunction::new("uninstall", uninstall_fn),
        ExecFunction::new("freeze", freeze_fn),
        ExecFunction::new("list", list_fn),
        ExecFunction::new("list_freeze_parse", list_fn),
        ExecFunction::new("version", version_fn),
        ExecFunction::new("list_upgrades", list_upgrades_fn),
        ExecFunction::new("list_all_versions", list_all_versions_fn),
        ExecFunction::new("is_installed", is_installed_fn),
        ExecFunction::new("upgrade_available", upgrade_available_fn),
        ExecFunction::new("upgrade", upgrade_fn),
        ExecFunction::new("normalize", normalize_fn),
    ],
};

/// URL schemes Salt accepts for `find_links` and the index URLs.
const VALID_PROTOS: [&str; 4] = ["http", "https", "ftp", "file"];

/// Where and how pip runs: the `bin_env`, `user`, `cwd` and `env_vars`
/// every pip function takes.
#[derive(Debug, Clone, Default)]
pub struct PipEnv {
    /// A virtualenv directory, or a pip or python binary.
    pub bin_env: Option<String>,
    /// Who runs pip (Salt's `runas`).
    pub user: Option<String>,
    /// The directory pip runs in.
    pub cwd: Option<String>,
    /// Extra environment variables (`env_vars`).
    pub env_vars: Vec<(String, String)>,
}

impl PipEnv {
    /// Reads `bin_env`, `user`, `cwd`, `env_vars` through `get` (the
    /// keyword arguments of a call, or a state's chunk).
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<Value>) -> Result<Self, ExecError> {
        let env_vars = match get("env_vars") {
            None | Some(Value::Null) => Vec::new(),
            Some(v @ Value::Object(_)) => env_pairs(Some(&v)).map_err(ExecError::Execution)?,
            Some(other) => {
                return Err(ExecError::Execution(format!(
                    "env_vars {} is not a dictionary",
                    crate::exec::py_str(&other)
                )))
            }
        };
        Ok(Self {
            bin_env: get("bin_env").and_then(|v| str_of(&v)),
            user: get("user").and_then(|v| str_of(&v)),
            cwd: get("cwd").and_then(|v| str_of(&v)),
            env_vars,
        })
    }

    /// The command line that starts pip here (Salt's `_get_pip_bin`).
    pub fn pip_bin(&self) -> Result<Vec<String>, ExecError> {
        pip_bin(self.bin_env.as_deref())
    }

    /// Runs pip with `args`; `VIRTUAL_ENV` is set for a venv directory.
    fn run(&self, args: &[String]) -> Result<CmdOutput, ExecError> {
        if let Some(user) = &self.user {
            // Salt's cmd.run refuses an unknown runas before running anything.
            if crate::exec::user::info(user).is_none() {
                return Err(ExecError::Execution(format!(
                    "User '{user}' is not available"
                )));
            }
        }
        let mut argv = self.pip_bin()?;
        argv.extend(args.iter().cloned());
        run_argv(&argv, self.cmd_options())
    }

    fn cmd_options(&self) -> CmdOptions {
        let mut env = Vec::new();
        if let Some(dir) = self.bin_env.as_deref().filter(|d| Path::new(d).is_dir()) {
            env.push(("VIRTUAL_ENV".to_string(), dir.to_string()));
        }
        env.extend(self.env_vars.iter().cloned());
        CmdOptions {
            runas: self.user.clone(),
            cwd: self.cwd.clone(),
            env,
            ..CmdOptions::default()
        }
    }
}

/// A string argument as Salt passes it on (`None` and empty are absent).
fn str_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        other => Some(crate::exec::py_str(other)),
    }
}

/// Runs a command given as words (never through a shell).
pub fn run_argv(argv: &[String], opts: CmdOptions) -> Result<CmdOutput, ExecError> {
    crate::command::run_argv(argv, &opts).map_err(|e| {
        let bin = argv.first().map(String::as_str).unwrap_or_default();
        ExecError::Execution(format!("Unable to run {bin}: {e}"))
    })
}

/// Salt's `_get_pip_bin`: `python -m pip` of a virtualenv directory, a
/// python or pip binary given as `bin_env`, or the system's `python3`.
pub fn pip_bin(bin_env: Option<&str>) -> Result<Vec<String>, ExecError> {
    let words = |bin: &str, module: bool| {
        let mut v = vec![bin.to_string()];
        if module {
            v.extend(["-m".to_string(), "pip".to_string()]);
        }
        v
    };
    let Some(bin_env) = bin_env.filter(|b| !b.is_empty()) else {
        let python = crate::exec::cmd::which("python3").unwrap_or_else(|| "python3".into());
        return Ok(words(&python, true));
    };
    let path = Path::new(bin_env);
    if path.is_dir() {
        for candidate in ["python", "bin/python", "Scripts/python"] {
            let p = path.join(candidate);
            if is_executable(&p) {
                return Ok(words(&p.to_string_lossy(), true));
            }
        }
        // A venv with only python3 / python3.11.
        let bindir = path.join("bin");
        if let Ok(entries) = std::fs::read_dir(&bindir) {
            let mut ranked: Vec<(u8, String)> = entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| is_python_name(n) && is_executable(&bindir.join(n)))
                .map(|n| (if n == "python3" { 1 } else { 2 }, n))
                .collect();
            ranked.sort();
            if let Some((_, name)) = ranked.first() {
                return Ok(words(&bindir.join(name).to_string_lossy(), true));
            }
        }
        return Err(ExecError::Execution(format!(
            "Could not find a pip binary in virtualenv {bin_env}"
        )));
    }
    if is_executable(path) {
        let base = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(words(bin_env, base.contains("python")));
    }
    Err(ExecError::Execution(format!(
        "Access denied to {bin_env}, could not find a pip binary"
    )))
}

fn is_python_name(n: &str) -> bool {
    n.strip_prefix("python").is_some_and(|rest| {
        rest.is_empty()
            || (rest.starts_with(|c: char| c.is_ascii_digit())
                && rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `pip --version`: pip's version (Salt's `pip.version`); a pip that does
/// not run is Salt's "Could not find a `pip` binary".
///
/// Remembered per pip command line and user until something is installed
/// or removed, as Salt keeps it in `__context__`: every `pip.list` asks it
/// first, and a Python start is the slow part of each call.
pub fn version(env: &PipEnv) -> Result<Option<String>, ExecError> {
    let key = (env.pip_bin()?, env.user.clone());
    if let Some(known) = VERSIONS
        .lock()
        .ok()
        .and_then(|cache| cache.get(&key).cloned())
    {
        return Ok(known);
    }
    let out = env.run(&["--version".to_string()])?;
    if out.retcode != 0 {
        return Err(ExecError::Execution(
            "Could not find a `pip` binary".to_string(),
        ));
    }
    let found = out
        .stdout
        .strip_prefix("pip ")
        .and_then(|r| r.split_whitespace().next())
        .map(String::from);
    if let Ok(mut cache) = VERSIONS.lock() {
        cache.insert(key, found.clone());
    }
    Ok(found)
}

/// The pip versions [`version`] found, by command line and user.
static VERSIONS: std::sync::LazyLock<std::sync::Mutex<VersionCache>> =
    std::sync::LazyLock::new(Default::default);

type VersionCache = std::collections::HashMap<(Vec<String>, Option<String>), Option<String>>;

/// Forgets the remembered pip versions (Salt's `_clear_context`): an
/// install may have changed pip itself.
fn forget_versions() {
    if let Ok(mut cache) = VERSIONS.lock() {
        cache.clear();
    }
}

/// `pip freeze --all`: one `name==version` line per installed package.
pub fn freeze(env: &PipEnv) -> Result<Vec<String>, ExecError> {
    version(env)?;
    let out = env.run(&words(&["freeze", "--all", "--disable-pip-version-check"]))?;
    if out.retcode != 0 {
        return Err(ExecError::Execution(out.stderr));
    }
    Ok(out.stdout.lines().map(String::from).collect())
}

/// `pip list --format=json`: normalized name -> version, only names
/// starting with the normalized `prefix` when one is given.
pub fn list(env: &PipEnv, prefix: Option<&str>) -> Result<Map, ExecError> {
    version(env)?;
    let out = env.run(&words(&[
        "list",
        "--format=json",
        "--disable-pip-version-check",
    ]))?;
    if out.retcode != 0 {
        return Err(ExecError::Execution(out.stderr));
    }
    let pkgs: Vec<Value> = serde_json::from_str(&out.stdout)
        .map_err(|_| ExecError::Execution("Invalid JSON".to_string()))?;
    let prefix = prefix.filter(|p| !p.is_empty()).map(normalize);
    let mut packages = Map::new();
    for pkg in pkgs {
        let (Some(name), Some(ver)) = (
            pkg.get("name").and_then(Value::as_str),
            pkg.get("version").and_then(Value::as_str),
        ) else {
            continue;
        };
        let name = normalize(name);
        if prefix.as_ref().is_none_or(|p| name.starts_with(p.as_str())) {
            packages.insert(name, Value::from(ver));
        }
    }
    Ok(packages)
}

/// `pip list --outdated`: name -> `"<latest> [<filetype>]"`.
pub fn list_upgrades(env: &PipEnv) -> Result<Map, ExecError> {
    version(env)?;
    let out = env.run(&words(&[
        "list",
        "--outdated",
        "--disable-pip-version-check",
        "--format=json",
    ]))?;
    if out.retcode != 0 {
        return Err(ExecError::Execution(out.stderr));
    }
    let pkgs: Vec<Value> = serde_json::from_str(&out.stdout)
        .map_err(|_| ExecError::Execution("Invalid JSON".to_string()))?;
    let mut packages = Map::new();
    for pkg in pkgs {
        let field = |k: &str| pkg.get(k).and_then(Value::as_str).unwrap_or_default();
        packages.insert(
            field("name").to_string(),
            Value::from(format!(
                "{} [{}]",
                field("latest_version"),
                field("latest_filetype")
            )),
        );
    }
    Ok(packages)
}

/// Which pre-releases `list_all_versions` keeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct PreReleases {
    /// Keep versions with an `a`.
    pub alpha: bool,
    /// Keep versions with a `b`.
    pub beta: bool,
    /// Keep versions with `rc`.
    pub rc: bool,
}

/// `pip index versions <pkg>`: every version the index (and pip's own
/// configuration) offers, oldest first; `None` when there are none.
pub fn list_all_versions(
    env: &PipEnv,
    pkg: &str,
    pre: PreReleases,
    index_url: Option<&str>,
    extra_index_url: Option<&str>,
) -> Result<Option<Vec<String>>, ExecError> {
    version(env)?;
    let mut args = words(&["--disable-pip-version-check", "index", "versions", pkg]);
    push_url(&mut args, "--index-url", index_url)?;
    push_url(&mut args, "--extra-index-url", extra_index_url)?;
    let out = env.run(&args)?;
    let mut excluded = Vec::new();
    if !pre.alpha {
        excluded.push("a");
    }
    if !pre.beta {
        excluded.push("b");
    }
    if !pre.rc {
        excluded.push("rc");
    }
    let text = format!("{}\n{}", out.stdout, out.stderr);
    let mut versions: Vec<String> = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("Available versions: "))
        .map(|list| {
            list.split(", ")
                .filter(|v| !v.is_empty() && !excluded.iter().any(|x| v.contains(x)))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    requirement::sort_versions(&mut versions);
    Ok((!versions.is_empty()).then_some(versions))
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Salt's `salt.utils.url.validate(url, VALID_PROTOS)`.
fn valid_url(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(scheme, _)| VALID_PROTOS.contains(&scheme))
}

fn push_url(args: &mut Vec<String>, flag: &str, url: Option<&str>) -> Result<(), ExecError> {
    if let Some(url) = url {
        if !valid_url(url) {
            return Err(ExecError::Execution(format!("'{url}' is not a valid URL")));
        }
        args.extend([flag.to_string(), url.to_string()]);
    }
    Ok(())
}

/// A list argument Salt also takes as a comma-separated string.
fn comma_list(v: Option<Value>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().filter_map(str_of).collect(),
        Some(other) => str_of(&other)
            .map(|s| {
                s.split(',')
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Everything `pip.install` takes besides the [`PipEnv`].
#[derive(Debug, Clone, Default)]
pub struct InstallOpts {
    /// Packages; a `;` inside one stands for a `,` of a version range.
    pub pkgs: Vec<String>,
    /// Requirement files: local paths or `salt://` URLs.
    pub requirements: Vec<String>,
    /// `--editable` targets.
    pub editable: Vec<String>,
    /// Flags that take a value, in Salt's order, already validated.
    flags: Vec<String>,
    /// The saltenv `salt://` requirements come from.
    pub saltenv: String,
}

impl InstallOpts {
    /// Reads `pip.install`'s keyword arguments through `get`.
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<Value>) -> Result<Self, ExecError> {
        let s = |k: &str| get(k).as_ref().and_then(str_of);
        let b = |k: &str| get(k).as_ref().is_some_and(crate::exec::py_truth);
        let mut flags = Vec::new();
        let mut push = |flag: &str, val: Option<String>| {
            if let Some(v) = val {
                flags.extend([flag.to_string(), v]);
            }
        };
        if let Some(no_binary) = get("no_binary").filter(crate::exec::py_truth) {
            push("--no-binary", Some(comma_list(Some(no_binary)).join(",")));
        }
        push("--log", s("log"));
        push("--proxy", s("proxy"));
        if let Some(timeout) = get("timeout").filter(crate::exec::py_truth) {
            if timeout.is_f64() || str_of(&timeout).is_none_or(|t| t.parse::<i64>().is_err()) {
                return Err(ExecError::Invocation(format!(
                    "'{}' is not a valid timeout, must be an integer",
                    crate::exec::py_str(&timeout)
                )));
            }
            push("--timeout", str_of(&timeout));
        }
        for link in comma_list(get("find_links")) {
            if !(valid_url(&link) || Path::new(&link).exists()) {
                return Err(ExecError::Execution(format!(
                    "'{link}' is not a valid URL or path"
                )));
            }
            push("--find-links", Some(link));
        }
        let (index_url, extra_index_url) = (s("index_url"), s("extra_index_url"));
        if b("no_index") && (index_url.is_some() || extra_index_url.is_some()) {
            return Err(ExecError::Execution(
                "'no_index' and ('index_url' or 'extra_index_url') are mutually exclusive."
                    .to_string(),
            ));
        }
        let mut urls = Vec::new();
        push_url(&mut urls, "--index-url", index_url.as_deref())?;
        push_url(&mut urls, "--extra-index-url", extra_index_url.as_deref())?;
        flags.extend(urls);
        let mut switch = |on: bool, flag: &str| {
            if on {
                flags.push(flag.to_string());
            }
        };
        switch(b("no_index"), "--no-index");
        if get("mirrors").as_ref().is_some_and(crate::exec::py_truth) {
            return Err(ExecError::Execution(
                "pip >= 7.0.0 does not support mirror argument: use index_url and/or extra_index_url instead".to_string(),
            ));
        }
        switch(b("disable_version_check"), "--disable-pip-version-check");
        let mut push = |flag: &str, val: Option<String>| {
            if let Some(v) = val {
                flags.extend([flag.to_string(), v]);
            }
        };
        push("--build", s("build"));
        push("--target", s("target"));
        push("--download", s("download"));
        push(
            "--cache-dir",
            s("download_cache").or_else(|| s("cache_dir")),
        );
        push("--source", s("source"));
        let mut switch = |on: bool, flag: &str| {
            if on {
                flags.push(flag.to_string());
            }
        };
        switch(b("upgrade"), "--upgrade");
        switch(b("force_reinstall"), "--force-reinstall");
        switch(b("ignore_installed"), "--ignore-installed");
        if let Some(action) = s("exists_action") {
            if !["s", "i", "w", "b"].contains(&action.to_lowercase().as_str()) {
                return Err(ExecError::Execution(format!(
                    "The exists_action pip option only supports the values s, i, w, and b. '{action}' is not valid."
                )));
            }
            flags.extend(["--exists-action".to_string(), action]);
        }
        let mut switch = |on: bool, flag: &str| {
            if on {
                flags.push(flag.to_string());
            }
        };
        switch(b("no_deps"), "--no-deps");
        switch(b("no_install"), "--no-install");
        switch(b("no_download"), "--no-download");
        switch(b("no_cache_dir"), "--no-cache-dir");
        switch(b("pre_releases"), "--pre");
        if let Some(cert) = s("cert") {
            flags.extend(["--cert".to_string(), cert]);
        }
        for opt in comma_list(get("global_options")) {
            flags.extend(["--global-option".to_string(), opt]);
        }
        for opt in comma_list(get("install_options")) {
            flags.extend(["--install-option".to_string(), opt]);
        }
        let editable = comma_list(get("editable"));
        for entry in &editable {
            let local = entry == "." || entry.starts_with("file://") || entry.starts_with('/');
            let egg = entry
                .split_once("#egg=")
                .or_else(|| entry.split_once("&egg="))
                .is_some_and(|(_, e)| !e.split('&').next().unwrap_or_default().is_empty());
            if !local && !egg {
                return Err(ExecError::Execution(
                    "You must specify an egg for this editable".to_string(),
                ));
            }
        }
        if b("allow_all_external") {
            flags.push("--allow-all-external".to_string());
        }
        for pkg in comma_list(get("allow_external")) {
            flags.extend(["--allow-external".to_string(), pkg]);
        }
        for pkg in comma_list(get("allow_unverified")) {
            flags.extend(["--allow-unverified".to_string(), pkg]);
        }
        if b("process_dependency_links") {
            flags.push("--process-dependency-links".to_string());
        }
        if let Some(host) = s("trusted_host") {
            flags.extend(["--trusted-host".to_string(), host]);
        }
        let mut extra = Vec::new();
        if let Some(Value::Array(items)) = get("extra_args") {
            for item in items {
                match item {
                    Value::Object(m) => {
                        for (k, v) in m {
                            if v.is_object() || v.is_array() {
                                return Err(ExecError::Invocation(format!(
                                    "Too many levels in: {k}"
                                )));
                            }
                            extra.push(k.clone());
                            extra.extend(str_of(&v));
                        }
                    }
                    other => extra.extend(str_of(&other)),
                }
            }
        }
        Ok(Self {
            pkgs: comma_list(get("pkgs")),
            requirements: comma_list(get("requirements")),
            editable,
            flags: [flags, extra].concat(),
            saltenv: s("saltenv").unwrap_or_else(|| "base".to_string()),
        })
    }
}

/// A requirements file made readable for the run: cached from the
/// master, or copied for `user`; copies are removed when dropped.
struct Requirements {
    args: Vec<String>,
    _tempdir: Option<tempfile::TempDir>,
}

/// Salt's `_process_requirements`: `--requirement` arguments for every
/// file, `salt://` ones fetched through the file client; with `user`, the
/// files (and the ones they include with `-r`) copied into a directory
/// that user owns. `Err(comment)` when a `salt://` file does not exist.
fn requirement_args(
    env: &PipEnv,
    requirements: &[String],
    files: &dyn FileClient,
    saltenv: &str,
) -> Result<Result<Requirements, String>, ExecError> {
    let mut args = Vec::new();
    let mut tempdir = None;
    for requirement in requirements {
        let mut path = requirement.clone();
        if let Some((rel, env_override)) = halite_state::strip_salt_url(requirement) {
            let cached = files
                .cache_file(rel, env_override.unwrap_or(saltenv))
                .map_err(|e| ExecError::Execution(e.to_string()))?;
            let Some(cached) = cached else {
                return Ok(Err(format!(
                    "pip requirements file '{requirement}' not found"
                )));
            };
            path = cached.to_string_lossy().into_owned();
        }
        if let Some(user) = &env.user {
            let dir = match &tempdir {
                Some(d) => d,
                None => tempdir.insert(
                    tempfile::Builder::new()
                        .prefix("halite-pip-req")
                        .tempdir()
                        .map_err(|e| ExecError::Execution(format!("temporary directory: {e}")))?,
                ),
            };
            let base = match &env.cwd {
                Some(cwd) if !Path::new(&path).is_absolute() => Path::new(cwd).join(&path),
                _ => Path::new(&path).to_path_buf(),
            };
            for file in requirements_chain(&base) {
                let Some(name) = file.file_name() else {
                    continue;
                };
                let target = dir.path().join(name);
                if !target.exists() {
                    std::fs::copy(&file, &target).map_err(|e| {
                        ExecError::Execution(format!(
                            "copying requirements file {}: {e}",
                            file.display()
                        ))
                    })?;
                }
                chown_to(&target, user)?;
            }
            chown_to(dir.path(), user)?;
            let name = base.file_name().map(|n| n.to_owned()).unwrap_or_default();
            path = dir.path().join(name).to_string_lossy().into_owned();
        }
        args.extend(["--requirement".to_string(), path]);
    }
    Ok(Ok(Requirements {
        args,
        _tempdir: tempdir,
    }))
}

/// A requirements file and every file it includes with `-r` / `--requirement`.
fn requirements_chain(file: &Path) -> Vec<std::path::PathBuf> {
    let mut chain = vec![file.to_path_buf()];
    let Ok(text) = std::fs::read_to_string(file) else {
        return chain;
    };
    let base = file.parent().unwrap_or(Path::new("/"));
    for line in text.lines() {
        let line = line.split(" #").next().unwrap_or_default().trim();
        let child = line
            .strip_prefix("-r ")
            .or_else(|| line.strip_prefix("--requirement="))
            .or_else(|| line.strip_prefix("--requirement "));
        if let Some(child) = child {
            chain.extend(requirements_chain(&base.join(child.trim())));
        }
    }
    chain
}

fn chown_to(path: &Path, user: &str) -> Result<(), ExecError> {
    let found = nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .ok_or_else(|| ExecError::Execution(format!("User {user} does not exist")))?;
    nix::unistd::chown(path, Some(found.uid), None)
        .map_err(|e| ExecError::Execution(format!("chown {}: {e}", path.display())))
}

/// `pip install`: Salt's `pip.install`, returning `cmd.run_all`'s dict, or
/// `{"result": False, "comment": ...}` when a `salt://` requirements file
/// does not exist.
pub fn install(env: &PipEnv, opts: &InstallOpts, files: &dyn FileClient) -> Result<Map, ExecError> {
    let reqs = match requirement_args(env, &opts.requirements, files, &opts.saltenv)? {
        Ok(r) => r,
        Err(comment) => return Ok(failure(comment)),
    };
    version(env)?;
    let mut args = vec!["install".to_string()];
    args.extend(reqs.args.iter().cloned());
    args.extend(opts.flags.iter().cloned());
    if !opts.pkgs.is_empty() {
        args.extend(opts.pkgs.iter().map(|p| p.replace(';', ",")));
    } else if opts.requirements.is_empty() && opts.editable.is_empty() {
        let mut m = Map::new();
        m.insert("retcode".into(), Value::from(0));
        m.insert("stdout".into(), Value::from("No packages to install."));
        return Ok(m);
    }
    for entry in &opts.editable {
        args.extend(["--editable".to_string(), entry.clone()]);
    }
    let out = env.run(&args);
    forget_versions();
    Ok(as_map(run_all_value(&out?)))
}

fn as_map(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn failure(comment: String) -> Map {
    let mut m = Map::new();
    m.insert("result".into(), Value::Bool(false));
    m.insert("comment".into(), Value::from(comment));
    m
}

/// `pip uninstall -y`: Salt's `pip.uninstall`, returning `cmd.run_all`'s dict.
pub fn uninstall(
    env: &PipEnv,
    pkgs: &[String],
    requirements: &[String],
    files: &dyn FileClient,
    saltenv: &str,
) -> Result<Map, ExecError> {
    let reqs = match requirement_args(env, requirements, files, saltenv)? {
        Ok(r) => r,
        Err(comment) => return Ok(failure(comment)),
    };
    let mut args = vec!["uninstall".to_string(), "-y".to_string()];
    args.extend(reqs.args.iter().cloned());
    args.extend(pkgs.iter().cloned());
    let out = env.run(&args);
    forget_versions();
    Ok(as_map(run_all_value(&out?)))
}

/// `pip.upgrade`: `pip install -U` of every outdated package; `changes`
/// as Salt's `compare_dicts` of the package lists before and after.
pub fn upgrade(env: &PipEnv) -> Result<Map, ExecError> {
    let old = list(env, None)?;
    let mut comment = String::new();
    let mut errors = false;
    for pkg in list_upgrades(env)?.keys() {
        let out = env.run(&words(&[
            "install",
            "-U",
            "--disable-pip-version-check",
            pkg,
        ]))?;
        errors |= out.retcode != 0;
        comment.push_str(&out.stderr);
    }
    forget_versions();
    let new = list(env, None)?;
    let mut changes = Map::new();
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (o, n) = (old.get(name), new.get(name));
        if o == n {
            continue;
        }
        let text = |v: Option<&Value>| v.cloned().unwrap_or_else(|| Value::from(""));
        let mut entry = Map::new();
        entry.insert("old".into(), text(o));
        entry.insert("new".into(), text(n));
        changes.insert(name.clone(), Value::Object(entry));
    }
    let mut ret = Map::new();
    ret.insert("changes".into(), Value::Object(changes));
    ret.insert("result".into(), Value::Bool(!errors));
    ret.insert("comment".into(), Value::from(comment));
    Ok(ret)
}

/// The keyword arguments of an exec call as a lookup (positional
/// arguments are read by each function itself).
fn kwarg_lookup(args: &Args) -> impl Fn(&str) -> Option<Value> + '_ {
    move |k| args.kwargs.get(k).cloned()
}

fn pip_env(args: &Args, first_positional: usize) -> Result<PipEnv, ExecError> {
    let lookup = |k: &str| {
        let i = match k {
            "bin_env" => first_positional,
            "user" => first_positional + 1,
            "cwd" => first_positional + 2,
            _ => usize::MAX,
        };
        args.get(i, k).cloned()
    };
    PipEnv::from_lookup(&lookup)
}

/// `pip.install [pkgs] [requirements] [bin_env] ...`.
fn install_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let lookup = |k: &str| {
        let i = match k {
            "pkgs" => 0,
            "requirements" => 1,
            "bin_env" => 2,
            _ => usize::MAX,
        };
        args.get(i, k).cloned()
    };
    let env = PipEnv::from_lookup(&lookup)?;
    let opts = InstallOpts::from_lookup(&lookup)?;
    install(&env, &opts, host.files.as_ref()).map(Value::Object)
}

/// `pip.uninstall [pkgs] [requirements] [bin_env] ...`.
fn uninstall_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let lookup = |k: &str| {
        let i = match k {
            "pkgs" => 0,
            "requirements" => 1,
            "bin_env" => 2,
            _ => usize::MAX,
        };
        args.get(i, k).cloned()
    };
    let env = PipEnv::from_lookup(&lookup)?;
    let saltenv = lookup("saltenv")
        .as_ref()
        .and_then(str_of)
        .unwrap_or_else(|| "base".into());
    uninstall(
        &env,
        &comma_list(lookup("pkgs")),
        &comma_list(lookup("requirements")),
        host.files.as_ref(),
        &saltenv,
    )
    .map(Value::Object)
}

/// `pip.freeze [bin_env] [user] [cwd]`.
fn freeze_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::from(freeze(&pip_env(args, 0)?)?))
}

/// `pip.list [prefix] [bin_env] [user] [cwd]`.
fn list_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let prefix = args.get_str(0, "prefix");
    list(&pip_env(args, 1)?, prefix.as_deref()).map(Value::Object)
}

/// `pip.version [bin_env] [cwd] [user]`.
fn version_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let lookup = |k: &str| {
        let i = match k {
            "bin_env" => 0,
            "cwd" => 1,
            "user" => 2,
            _ => usize::MAX,
        };
        args.get(i, k).cloned()
    };
    Ok(version(&PipEnv::from_lookup(&lookup)?)?
        .map(Value::from)
        .unwrap_or(Value::Null))
}

/// `pip.list_upgrades [bin_env] [user] [cwd]`.
fn list_upgrades_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    list_upgrades(&pip_env(args, 0)?).map(Value::Object)
}

/// `pip.list_all_versions <pkg> [bin_env] ...`.
fn list_all_versions_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let pkg = args.require_str(0, "pkg", "list_all_versions")?;
    let lookup = kwarg_lookup(args);
    let env = PipEnv::from_lookup(&|k| match k {
        "bin_env" => args.get(1, k).cloned(),
        _ => lookup(k),
    })?;
    let pre = PreReleases {
        alpha: args.get_bool(usize::MAX, "include_alpha", false),
        beta: args.get_bool(usize::MAX, "include_beta", false),
        rc: args.get_bool(usize::MAX, "include_rc", false),
    };
    let index = args.get_str(usize::MAX, "index_url");
    let extra = args.get_str(usize::MAX, "extra_index_url");
    Ok(
        list_all_versions(&env, &pkg, pre, index.as_deref(), extra.as_deref())?
            .map(Value::from)
            .unwrap_or(Value::Null),
    )
}

/// `pip.is_installed <pkgname> [bin_env] [user] [cwd]`.
fn is_installed_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "pkgname", "is_installed")?;
    let pkgs = list(&pip_env(args, 1)?, Some(&name))?;
    Ok(Value::Bool(
        pkgs.keys().any(|k| k.to_lowercase() == name.to_lowercase()),
    ))
}

/// `pip.upgrade_available <pkg> [bin_env] [user] [cwd]`.
fn upgrade_available_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let pkg = args.require_str(0, "pkg", "upgrade_available")?;
    Ok(Value::Bool(
        list_upgrades(&pip_env(args, 1)?)?.contains_key(&pkg),
    ))
}

/// `pip.upgrade [bin_env] [user] [cwd]`; with `test=True` (the call's or
/// the run's) it changes nothing and says so, so a dry run of a minion
/// never upgrades its Python packages (`pip.list_upgrades` names them).
fn upgrade_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let env = pip_env(args, 0)?;
    if args.get_bool(usize::MAX, "test", host.test_mode()) {
        let mut ret = Map::new();
        ret.insert("changes".into(), Value::Object(Map::new()));
        ret.insert("result".into(), Value::Null);
        ret.insert(
            "comment".into(),
            Value::from("Every package pip.list_upgrades names would be upgraded"),
        );
        return Ok(Value::Object(ret));
    }
    upgrade(&env).map(Value::Object)
}

/// `pip.normalize <name>`.
fn normalize_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::from(normalize(&args.require_str(
        0,
        "name",
        "normalize",
    )?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_bin_of_a_pip_path_a_python_path_and_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let pip = dir.path().join("pip3");
        std::fs::write(&pip, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pip, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = pip.to_string_lossy().into_owned();
        assert_eq!(pip_bin(Some(&p)).unwrap(), vec![p.clone()]);
        let err = pip_bin(Some(&dir.path().to_string_lossy())).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("Could not find a pip binary in virtualenv"));
        let err = pip_bin(Some("/nonexistent/halite-t")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Access denied to /nonexistent/halite-t, could not find a pip binary"
        );
        assert_eq!(pip_bin(None).unwrap()[1..], ["-m", "pip"]);
    }

    #[test]
    fn install_options_are_validated_as_salt_does() {
        let get = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| Value::from(*v))
            }
        };
        let err = InstallOpts::from_lookup(&get(&[("find_links", "nowhere-halite")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "'nowhere-halite' is not a valid URL or path"
        );
        let err = InstallOpts::from_lookup(&get(&[
            ("no_index", "True"),
            ("index_url", "https://x.invalid/simple"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("mutually exclusive"));
        let err = InstallOpts::from_lookup(&get(&[("editable", "git+https://x.invalid/r.git")]))
            .unwrap_err();
        assert_eq!(err.to_string(), "You must specify an egg for this editable");
        let ok =
            InstallOpts::from_lookup(&get(&[("pkgs", "a, b>=1;<2"), ("upgrade", "True")])).unwrap();
        assert_eq!(ok.pkgs, ["a", "b>=1;<2"]);
        assert!(ok.flags.contains(&"--upgrade".to_string()));
    }
}
