//! Salt's `pkgrepo` state module: `managed` and `absent` over the
//! provider's repo functions (apt source lines, yum `.repo` sections).

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};
use serde_json::json;

use crate::pkg::aptsources::{apply_settings, SourceEntry};
use crate::pkg::{provider_for, PkgError, PkgProvider, RepoOptions};

/// The module's table; both functions run over the provider chosen from
/// the host's `os_family` grain ([`with_provider`]).
pub const MODULE: StateTable = StateTable {
    name: "pkgrepo",
    functions: &[
        StateFunction::new("managed", |c| with_provider(c, managed)),
        StateFunction::new("absent", |c| with_provider(c, absent)),
    ],
};

/// A `pkgrepo` state function over the host's provider.
type RepoStateFn = fn(&StateCall<'_>, &dyn PkgProvider) -> Result<StateResult, PkgError>;

/// Runs `f` over the provider of the host's `os_family`; no provider, or
/// a provider error, is a failed state with the error as its comment.
fn with_provider(call: &StateCall<'_>, f: RepoStateFn) -> Result<StateResult, StateError> {
    let provider = match provider_for(call.env.grains(), call.env.opts()) {
        Ok(p) => p,
        Err(e) => return Ok(StateResult::fail(call.name(), e.to_string())),
    };
    Ok(
        f(call, provider.as_ref())
            .unwrap_or_else(|e| StateResult::fail(call.name(), e.to_string())),
    )
}

/// Keyword arguments that are not repo settings.
const NOT_SETTINGS: &[&str] = &[
    "key_url",
    "key_text",
    "aptkey",
    "clean_file",
    "state",
    "name",
    "__sls__",
    "__env__",
    "__id__",
    "order",
    "fun",
    "refresh",
    "basedir",
    "test",
];

fn settings_of(call: &StateCall<'_>) -> Map {
    call.chunk
        .iter()
        .filter(|(k, v)| !NOT_SETTINGS.contains(k) && !k.starts_with("__") && !v.is_null())
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The apt source line the state describes: `name` when it is a source
/// line, else built from `type`/`uri`/`dist`/`comps`, with the settings
/// (`architectures`, `signedby`, `disabled`...) applied.
fn apt_entry(call: &StateCall<'_>, settings: &Map) -> Result<SourceEntry, PkgError> {
    let mut entry = match SourceEntry::parse(call.name()) {
        Some(e) if !e.disabled => e,
        _ => {
            let uri = call.arg_str("uri").ok().flatten().ok_or_else(|| {
                PkgError::Invocation(format!(
                    "'{}' is not an apt source line; give 'deb URI DIST [COMPS]' as name, or uri and dist",
                    call.name()
                ))
            })?;
            let dist = call
                .arg_str("dist")
                .ok()
                .flatten()
                .unwrap_or_else(|| "./".to_string());
            let kind = call
                .arg_str("type")
                .ok()
                .flatten()
                .unwrap_or_else(|| "deb".to_string());
            SourceEntry {
                disabled: false,
                kind,
                options: Vec::new(),
                uri,
                dist,
                comps: Vec::new(),
                comment: String::new(),
            }
        }
    };
    apply_settings(&mut entry, settings);
    Ok(entry)
}

/// Options and components in a canonical order, for "already configured".
fn normalized(line: &str) -> Option<SourceEntry> {
    let mut e = SourceEntry::parse(line)?;
    e.options.sort();
    e.comps.sort();
    Some(e)
}

/// Puts the repository's signing key (`key_text`, or `key_url`: `salt://`,
/// `http(s)://`, `ftp://`, `file://` or a local path) at the `signedby` path, de-armoring it with
/// `gpg --dearmor` unless the path ends in `.asc`. Returns the path when
/// the key is (or, under test, would be) written; `None` when there is no
/// key to manage or it is already in place.
fn signing_key(call: &StateCall<'_>, test: bool) -> Result<Option<String>, String> {
    let key_text = call.arg_str("key_text").map_err(|e| e.to_string())?;
    let key_url = call.arg_str("key_url").map_err(|e| e.to_string())?;
    if key_text.is_none() && key_url.is_none() {
        return Ok(None);
    }
    let target = call
        .arg_str("signedby")
        .map_err(|e| e.to_string())?
        .filter(|s| !s.is_empty())
        .ok_or("key_url/key_text need signedby: the keyring path apt should trust for this repo")?;
    let content: Vec<u8> = match (key_text, key_url) {
        (Some(text), _) => text.into_bytes(),
        (None, Some(url)) => {
            let saltenv = if call.chunk.env().is_empty() {
                "base"
            } else {
                call.chunk.env()
            };
            let local = if url.contains("://") || url.starts_with('/') {
                crate::fetch::resolve(call.env.file_client(), call.env.opts(), &url, saltenv, None)?
                    .ok_or_else(|| format!("key_url {url} not found"))?
            } else {
                std::path::PathBuf::from(&url)
            };
            std::fs::read(&local)
                .map_err(|e| format!("cannot read key {}: {e}", local.display()))?
        }
        (None, None) => return Ok(None),
    };
    let armored = content.starts_with(b"-----BEGIN PGP");
    let wanted = if armored && !target.ends_with(".asc") {
        gpg_dearmor(&content)?
    } else {
        content
    };
    if std::fs::read(&target).ok().as_deref() == Some(wanted.as_slice()) {
        return Ok(None);
    }
    if !test {
        if let Some(dir) = std::path::Path::new(&target).parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(&target, &wanted).map_err(|e| format!("cannot write {target}: {e}"))?;
    }
    Ok(Some(target))
}

/// `gpg --dearmor` of an ASCII-armored key: the binary keyring apt reads
/// from a `.gpg` path.
fn gpg_dearmor(armored: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let mut child = std::process::Command::new("gpg")
        .args(["--batch", "--dearmor"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("gpg --dearmor: {e}; install gnupg or give signedby a .asc path"))?;
    // Feed stdin from a thread so a large keyring cannot fill both pipes.
    let writer = child.stdin.take().map(|mut stdin| {
        let data = armored.to_vec();
        std::thread::spawn(move || stdin.write_all(&data))
    });
    let out = child
        .wait_with_output()
        .map_err(|e| format!("gpg --dearmor: {e}"))?;
    if let Some(Ok(Err(e))) = writer.map(|w| w.join()) {
        return Err(format!("gpg --dearmor: {e}"));
    }
    if !out.status.success() {
        return Err(format!(
            "gpg --dearmor failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

const MAY_DIFFER: &str = "This may cause pkg states to behave differently than stated if this action is repeated \
                          without test=True, due to the differences in the configured repositories.";

fn managed(call: &StateCall<'_>, provider: &dyn PkgProvider) -> Result<StateResult, PkgError> {
    let name = call.name().to_string();
    let opts = RepoOptions::from_kwargs(&call.chunk.to_map());
    let settings = settings_of(call);
    let apt = provider.name() == "apt";
    let (repo, desired_line) = if apt {
        let entry = apt_entry(call, &settings)?;
        let mut lookup = entry.clone();
        lookup.disabled = false;
        (lookup.to_line(), Some(entry.to_line()))
    } else {
        (name.clone(), None)
    };
    let key_change = if apt {
        match signing_key(call, call.test) {
            Ok(k) => k,
            Err(e) => {
                return Ok(StateResult::fail(
                    name.clone(),
                    format!("Failed to configure repo '{name}': {e}"),
                ))
            }
        }
    } else {
        None
    };
    let pre = provider.get_repo(&repo, &opts)?;
    let configured = match &desired_line {
        Some(line) => {
            pre.get("line").and_then(Value::as_str).and_then(normalized) == normalized(line)
        }
        None => {
            !pre.is_empty()
                && settings
                    .iter()
                    .filter(|(k, _)| k.as_str() != "file")
                    .all(|(k, v)| match (pre.get(k), v) {
                        (Some(Value::String(a)), Value::Bool(b)) => {
                            halite_state::truthy(&json!(a)) == *b
                        }
                        (Some(Value::String(a)), Value::String(b)) => a == b,
                        (Some(Value::String(a)), Value::Number(n)) => {
                            a.parse::<f64>().ok() == n.as_f64()
                        }
                        _ => false,
                    })
        }
    };
    // clean_file: the file must hold only this repo (Salt #68208).
    let clean_file = if apt && call.arg_bool("clean_file", false) {
        call.arg_str("file").ok().flatten()
    } else {
        None
    };
    let stale_lines = clean_file.as_deref().is_some_and(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines().map(str::trim).any(|l| {
                !l.is_empty()
                    && !l.starts_with('#')
                    && normalized(l) != desired_line.as_deref().and_then(normalized)
            })
        })
    });
    let configured = configured && !stale_lines;
    if !pre.is_empty() && configured {
        let Some(key) = key_change else {
            return Ok(StateResult::ok(
                name.clone(),
                format!("Package repo '{name}' already configured"),
            ));
        };
        let comment = if call.test {
            format!("Package repo '{name}' would be configured. {MAY_DIFFER}")
        } else {
            format!("Configured package repo '{name}'")
        };
        let mut r = StateResult::new(name, if call.test { None } else { Some(true) });
        r.comment = comment;
        r.changes.insert("key".into(), json!(key));
        return Ok(r);
    }
    let diff = |post: &Map| -> Map {
        let mut changes = Map::new();
        for (k, new) in post {
            if pre.get(k) != Some(new) && k != "file" {
                changes.insert(k.clone(), json!({"new": new, "old": pre.get(k)}));
            }
        }
        changes
    };
    if call.test {
        let changes = if pre.is_empty() {
            let mut c = Map::new();
            c.insert("repo".into(), json!(name));
            c
        } else if let Some(line) = &desired_line {
            let mut c = Map::new();
            c.insert("line".into(), json!({"new": line, "old": pre.get("line")}));
            c
        } else {
            diff(&settings)
        };
        let mut changes = changes;
        if let Some(key) = key_change {
            changes.insert("key".into(), json!(key));
        }
        return Ok(StateResult::would_change(
            name.clone(),
            format!("Package repo '{name}' would be configured. {MAY_DIFFER}"),
            changes,
        ));
    }
    if let Some(file) = &clean_file {
        if let Err(e) = std::fs::write(file, "") {
            return Ok(StateResult::fail(
                name.clone(),
                format!("Failed to configure repo '{name}': {file}: {e}"),
            ));
        }
    }
    let mut mod_settings = settings.clone();
    if let Some(line) = &desired_line {
        // The line already carries every setting; only the file matters.
        mod_settings.retain(|k, _| k == "file");
        if let Some(entry) = SourceEntry::parse(line) {
            mod_settings.insert("disabled".into(), json!(entry.disabled));
        }
    }
    if let Err(e) = provider.mod_repo(&repo, &mod_settings, &opts) {
        return Ok(StateResult::fail(
            name.clone(),
            format!("Failed to configure repo '{name}': {e}"),
        ));
    }
    if call.arg_bool("refresh", true) {
        if let Err(e) = provider.refresh_db() {
            return Ok(StateResult::fail(
                name.clone(),
                format!("Failed to configure repo '{name}': {e}"),
            ));
        }
    }
    let post = provider.get_repo(&repo, &opts)?;
    let changes = if pre.is_empty() {
        let mut c = Map::new();
        c.insert("repo".into(), json!(repo));
        c
    } else {
        diff(&post)
    };
    let mut r = StateResult::ok(name.clone(), format!("Configured package repo '{name}'"));
    r.changes = changes;
    if let Some(key) = key_change {
        r.changes.insert("key".into(), json!(key));
    }
    Ok(r)
}

fn absent(call: &StateCall<'_>, provider: &dyn PkgProvider) -> Result<StateResult, PkgError> {
    let name = call.name().to_string();
    let opts = RepoOptions::from_kwargs(&call.chunk.to_map());
    let apt = provider.name() == "apt";
    let repo = if apt {
        apt_entry(call, &settings_of(call))?.to_line()
    } else {
        name.clone()
    };
    let mut pre = provider.get_repo(&repo, &opts)?;
    if apt && !pre.is_empty() {
        let wanted = SourceEntry::parse(&repo)
            .map(|e| e.architectures())
            .unwrap_or_default();
        let have: Vec<String> = pre
            .get("architectures")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if wanted != have {
            pre = Map::new();
        }
    }
    if pre.is_empty() {
        return Ok(StateResult::ok(
            name.clone(),
            format!("Package repo {name} is absent"),
        ));
    }
    if call.test {
        return Ok(StateResult::would_change(
            name.clone(),
            format!("Package repo '{name}' will be removed. {MAY_DIFFER}"),
            Map::new(),
        ));
    }
    if let Err(e) = provider.del_repo(&repo, &opts) {
        return Ok(StateResult::fail(name, e.to_string()));
    }
    if !provider.get_repo(&repo, &opts)?.is_empty() {
        return Ok(StateResult::fail(
            name.clone(),
            format!("Failed to remove repo {name}"),
        ));
    }
    let mut r = StateResult::ok(name.clone(), format!("Removed repo {name}"));
    r.changes.insert("repo".into(), json!(name));
    Ok(r)
}
