//! Salt's `pkg` execution module over the host's [`PkgProvider`]
//! (`pkg.install`, `pkg.latest_version`, `pkg.mod_repo`...).

use halite_state::{Map, Value};
use serde_json::json;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::pkg::{
    localize_sources, parse_targets, pkg_versions_to_value, provider_for, InstallOptions,
    PkgProvider, RepoOptions,
};
use crate::Host;

/// The module's table; every function runs over the provider chosen from
/// the host's `os_family` grain ([`with_provider`]).
pub const MODULE: ExecTable = ExecTable {
    name: "pkg",
    functions: &[
        ExecFunction::new("list_pkgs", |a, h| with_provider(a, h, list_pkgs)),
        ExecFunction::new("latest_version", |a, h| with_provider(a, h, latest_version)),
        ExecFunction::new("available_version", |a, h| {
            with_provider(a, h, latest_version)
        }),
        ExecFunction::new("version", |a, h| with_provider(a, h, version)),
        ExecFunction::new("upgrade_available", |a, h| {
            with_provider(a, h, upgrade_available)
        }),
        ExecFunction::new("install", |a, h| with_provider(a, h, install)),
        ExecFunction::new("remove", |a, h| with_provider(a, h, remove)),
        ExecFunction::new("purge", |a, h| with_provider(a, h, purge)),
        ExecFunction::new("upgrade", |a, h| with_provider(a, h, upgrade)),
        ExecFunction::new("list_upgrades", |a, h| with_provider(a, h, list_upgrades)),
        ExecFunction::new("refresh_db", |a, h| with_provider(a, h, refresh_db)),
        ExecFunction::new("hold", |a, h| with_provider(a, h, hold)),
        ExecFunction::new("unhold", |a, h| with_provider(a, h, unhold)),
        ExecFunction::new("list_repos", |a, h| with_provider(a, h, list_repos)),
        ExecFunction::new("get_repo", |a, h| with_provider(a, h, get_repo)),
        ExecFunction::new("del_repo", |a, h| with_provider(a, h, del_repo)),
        ExecFunction::new("mod_repo", |a, h| with_provider(a, h, mod_repo)),
        ExecFunction::new("version_cmp", |a, h| with_provider(a, h, version_cmp)),
        ExecFunction::new("verify", |a, h| with_provider(a, h, verify)),
        ExecFunction::new("file_list", |a, h| with_provider(a, h, file_list)),
        ExecFunction::new("file_dict", |a, h| with_provider(a, h, file_dict)),
        ExecFunction::new("list_repo_pkgs", |a, h| with_provider(a, h, list_repo_pkgs)),
    ],
};

/// A `pkg` function run over the host's provider.
type PkgHandler = fn(&dyn PkgProvider, &Args, &Host) -> Result<Value, ExecError>;

/// Runs `f` over the provider of the host's `os_family` (an error naming
/// the family when halite has none for it).
fn with_provider(args: &Args, host: &Host, f: PkgHandler) -> Result<Value, ExecError> {
    let provider = provider_for(&host.grains, &host.opts)?;
    f(provider.as_ref(), args, host)
}

/// The positional arguments as package names (Salt's `*names`).
pub(crate) fn names_of(args: &Args) -> Vec<String> {
    args.positional
        .iter()
        .filter_map(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        })
        .collect()
}

/// Salt's shape: a plain value for one name, the map for several.
pub(crate) fn one_or_map(names: &[String], map: Map) -> Value {
    if names.len() == 1 {
        map.get(&names[0]).cloned().unwrap_or_else(|| json!(""))
    } else {
        Value::Object(map)
    }
}

fn saltenv(args: &Args) -> String {
    args.kwargs
        .get("saltenv")
        .and_then(Value::as_str)
        .unwrap_or("base")
        .to_string()
}

/// `pkg.install` / `remove` / `purge` targets from `name`, `pkgs`, `sources`.
fn targets_of(args: &Args, host: &Host, fun: &str) -> Result<crate::pkg::Targets, ExecError> {
    let name = args.get_str(0, "name");
    let version = args.kwargs.get("version").and_then(|v| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    let targets = parse_targets(
        name.as_deref(),
        args.kwargs.get("pkgs"),
        args.kwargs.get("sources"),
        version.as_deref(),
    )?;
    if targets.is_empty() && fun == "install" {
        return Ok(targets);
    }
    Ok(localize_sources(
        &targets,
        host.files.as_ref(),
        &host.opts,
        &saltenv(args),
    )?)
}

fn version_value(provider: &dyn PkgProvider, names: &[String]) -> Result<Value, ExecError> {
    let installed = provider.list_pkgs(false)?;
    let mut map = Map::new();
    for n in names {
        map.insert(
            n.clone(),
            json!(installed.get(n).map(|v| v.join(",")).unwrap_or_default()),
        );
    }
    Ok(one_or_map(names, map))
}

/// `pkg.list_pkgs [versions_as_list] [removed]`.
fn list_pkgs(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let removed = args.get_bool(usize::MAX, "removed", false);
    Ok(pkg_versions_to_value(
        &provider.list_pkgs(removed)?,
        args.get_bool(0, "versions_as_list", false),
    ))
}

/// `pkg.latest_version` and `pkg.available_version` `<names...>`.
fn latest_version(
    provider: &dyn PkgProvider,
    args: &Args,
    _host: &Host,
) -> Result<Value, ExecError> {
    let names = names_of(args);
    let opts = InstallOptions::from_kwargs(&args.kwargs, true);
    let map = provider.latest_version(&names, opts.fromrepo.as_deref(), opts.refresh)?;
    Ok(one_or_map(&names, map))
}

/// `pkg.version <names...>`.
fn version(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    version_value(provider, &names_of(args))
}

/// `pkg.upgrade_available <name>`.
fn upgrade_available(
    provider: &dyn PkgProvider,
    args: &Args,
    _host: &Host,
) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "upgrade_available")?;
    let opts = InstallOptions::from_kwargs(&args.kwargs, false);
    let map = provider.latest_version(
        std::slice::from_ref(&name),
        opts.fromrepo.as_deref(),
        opts.refresh,
    )?;
    Ok(json!(map
        .get(&name)
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())))
}

/// `pkg.install [name] [pkgs=] [sources=]`.
fn install(provider: &dyn PkgProvider, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let targets = targets_of(args, host, "install")?;
    let opts = InstallOptions::from_kwargs(&args.kwargs, false);
    Ok(Value::Object(provider.install(&targets, &opts)?))
}

/// `pkg.remove [name] [pkgs=]`.
fn remove(provider: &dyn PkgProvider, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let targets = targets_of(args, host, "remove")?;
    Ok(Value::Object(provider.remove(&targets.names(), false)?))
}

/// `pkg.purge [name] [pkgs=]`: removes with the configuration.
fn purge(provider: &dyn PkgProvider, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let targets = targets_of(args, host, "purge")?;
    Ok(Value::Object(provider.remove(&targets.names(), true)?))
}

/// `pkg.upgrade [pkgs=] [dist_upgrade=]`.
fn upgrade(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let kw = &args.kwargs;
    let mut opts = InstallOptions::from_kwargs(kw, true);
    if kw.get("dist_upgrade").is_none() {
        opts.dist_upgrade = false;
    }
    let pkgs = kw
        .get("pkgs")
        .map(|p| parse_targets(None, Some(p), None, None))
        .transpose()?;
    let pkg_names = pkgs.map(|t| t.names()).unwrap_or_default();
    Ok(Value::Object(provider.upgrade(&pkg_names, &opts)?))
}

/// `pkg.list_upgrades [refresh] [dist_upgrade=]`.
fn list_upgrades(
    provider: &dyn PkgProvider,
    args: &Args,
    _host: &Host,
) -> Result<Value, ExecError> {
    let kw = &args.kwargs;
    let mut opts = InstallOptions::from_kwargs(kw, true);
    opts.dist_upgrade = kw
        .get("dist_upgrade")
        .map(halite_state::truthy)
        .unwrap_or(true);
    Ok(Value::Object(provider.list_upgrades(opts.refresh, &opts)?))
}

/// `pkg.refresh_db`.
fn refresh_db(provider: &dyn PkgProvider, _args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(provider.refresh_db()?))
}

/// `pkg.hold` and `pkg.unhold` (`hold`) `[name] [pkgs=]`.
fn set_hold(
    provider: &dyn PkgProvider,
    args: &Args,
    host: &Host,
    hold: bool,
) -> Result<Value, ExecError> {
    let targets = targets_of(args, host, if hold { "hold" } else { "unhold" })?;
    if targets.is_empty() {
        return Err(ExecError::Invocation(
            "One of name, pkgs, or sources must be specified.".into(),
        ));
    }
    Ok(Value::Object(provider.set_hold(&targets.names(), hold)?))
}

/// `pkg.hold [name] [pkgs=]`.
fn hold(provider: &dyn PkgProvider, args: &Args, host: &Host) -> Result<Value, ExecError> {
    set_hold(provider, args, host, true)
}

/// `pkg.unhold [name] [pkgs=]`.
fn unhold(provider: &dyn PkgProvider, args: &Args, host: &Host) -> Result<Value, ExecError> {
    set_hold(provider, args, host, false)
}

/// `pkg.list_repos`.
fn list_repos(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(
        provider.list_repos(&RepoOptions::from_kwargs(&args.kwargs))?,
    ))
}

/// `pkg.get_repo <repo>`.
fn get_repo(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let repo = args.require_str(0, "repo", "get_repo")?;
    Ok(Value::Object(provider.get_repo(
        &repo,
        &RepoOptions::from_kwargs(&args.kwargs),
    )?))
}

/// `pkg.del_repo <repo>`.
fn del_repo(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let repo = args.require_str(0, "repo", "del_repo")?;
    Ok(json!(provider.del_repo(
        &repo,
        &RepoOptions::from_kwargs(&args.kwargs)
    )?))
}

/// `pkg.mod_repo <repo> [settings...]`.
fn mod_repo(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let kw = &args.kwargs;
    let repo = args.require_str(0, "repo", "mod_repo")?;
    Ok(Value::Object(provider.mod_repo(
        &repo,
        kw,
        &RepoOptions::from_kwargs(kw),
    )?))
}

/// `pkg.version_cmp <pkg1> <pkg2>`: -1, 0 or 1.
fn version_cmp(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fun = "version_cmp";
    let a = args.require_str(0, "pkg1", fun)?;
    let b = args.require_str(1, "pkg2", fun)?;
    Ok(json!(match provider.version_cmp(&a, &b) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    }))
}

/// `pkg.verify [names...]`.
fn verify(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(provider.lowpkg().verify(&names_of(args))?))
}

/// `pkg.file_list [names...]`.
fn file_list(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(provider.lowpkg().file_list(&names_of(args))?))
}

/// `pkg.file_dict [names...]`.
fn file_dict(provider: &dyn PkgProvider, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(provider.lowpkg().file_dict(&names_of(args))?))
}

/// `pkg.list_repo_pkgs [names...]`: the versions each repository offers.
fn list_repo_pkgs(
    provider: &dyn PkgProvider,
    args: &Args,
    _host: &Host,
) -> Result<Value, ExecError> {
    let mut map = Map::new();
    for n in &names_of(args) {
        map.insert(n.clone(), json!(provider.available_versions(n, None)?));
    }
    Ok(Value::Object(map))
}
