//! Salt's `pkg` execution module over the host's [`PkgProvider`]
//! (`pkg.install`, `pkg.latest_version`, `pkg.mod_repo`...).

use halite_state::{Map, Value};
use serde_json::json;

use crate::exec::{Args, ExecError, ExecModule};
use crate::pkg::{
    localize_sources, parse_targets, pkg_versions_to_value, provider_for, InstallOptions,
    PkgProvider, RepoOptions,
};
use crate::Host;

/// `pkg.*`: the provider chosen from the host's `os_family` grain.
pub struct PkgExec;

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

impl ExecModule for PkgExec {
    fn name(&self) -> &'static str {
        "pkg"
    }

    fn functions(&self) -> Vec<&'static str> {
        vec![
            "list_pkgs",
            "latest_version",
            "available_version",
            "version",
            "upgrade_available",
            "install",
            "remove",
            "purge",
            "upgrade",
            "list_upgrades",
            "refresh_db",
            "hold",
            "unhold",
            "list_repos",
            "get_repo",
            "del_repo",
            "mod_repo",
            "version_cmp",
            "verify",
            "file_list",
            "file_dict",
            "list_repo_pkgs",
        ]
    }

    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        let provider = provider_for(&host.grains, &host.opts)?;
        let provider = provider.as_ref();
        let kw = &args.kwargs;
        let names = names_of(args);
        match fun {
            "list_pkgs" => {
                let removed = args.get_bool(usize::MAX, "removed", false);
                Ok(pkg_versions_to_value(
                    &provider.list_pkgs(removed)?,
                    args.get_bool(0, "versions_as_list", false),
                ))
            }
            "latest_version" | "available_version" => {
                let opts = InstallOptions::from_kwargs(kw, true);
                let map =
                    provider.latest_version(&names, opts.fromrepo.as_deref(), opts.refresh)?;
                Ok(one_or_map(&names, map))
            }
            "version" => version_value(provider, &names),
            "upgrade_available" => {
                let name = args.require_str(0, "name", "upgrade_available")?;
                let opts = InstallOptions::from_kwargs(kw, false);
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
            "install" => {
                let targets = targets_of(args, host, fun)?;
                let opts = InstallOptions::from_kwargs(kw, false);
                Ok(Value::Object(provider.install(&targets, &opts)?))
            }
            "remove" | "purge" => {
                let targets = targets_of(args, host, fun)?;
                Ok(Value::Object(
                    provider.remove(&targets.names(), fun == "purge")?,
                ))
            }
            "upgrade" => {
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
            "list_upgrades" => {
                let mut opts = InstallOptions::from_kwargs(kw, true);
                opts.dist_upgrade = kw
                    .get("dist_upgrade")
                    .map(halite_state::truthy)
                    .unwrap_or(true);
                Ok(Value::Object(provider.list_upgrades(opts.refresh, &opts)?))
            }
            "refresh_db" => Ok(Value::Object(provider.refresh_db()?)),
            "hold" | "unhold" => {
                let targets = targets_of(args, host, fun)?;
                if targets.is_empty() {
                    return Err(ExecError::Invocation(
                        "One of name, pkgs, or sources must be specified.".into(),
                    ));
                }
                Ok(Value::Object(
                    provider.set_hold(&targets.names(), fun == "hold")?,
                ))
            }
            "list_repos" => Ok(Value::Object(
                provider.list_repos(&RepoOptions::from_kwargs(kw))?,
            )),
            "get_repo" => {
                let repo = args.require_str(0, "repo", fun)?;
                Ok(Value::Object(
                    provider.get_repo(&repo, &RepoOptions::from_kwargs(kw))?,
                ))
            }
            "del_repo" => {
                let repo = args.require_str(0, "repo", fun)?;
                Ok(json!(
                    provider.del_repo(&repo, &RepoOptions::from_kwargs(kw))?
                ))
            }
            "mod_repo" => {
                let repo = args.require_str(0, "repo", fun)?;
                Ok(Value::Object(provider.mod_repo(
                    &repo,
                    kw,
                    &RepoOptions::from_kwargs(kw),
                )?))
            }
            "version_cmp" => {
                let a = args.require_str(0, "pkg1", fun)?;
                let b = args.require_str(1, "pkg2", fun)?;
                Ok(json!(match provider.version_cmp(&a, &b) {
                    std::cmp::Ordering::Less => -1,
                    std::cmp::Ordering::Equal => 0,
                    std::cmp::Ordering::Greater => 1,
                }))
            }
            "verify" => Ok(Value::Object(provider.lowpkg().verify(&names)?)),
            "file_list" => Ok(Value::Object(provider.lowpkg().file_list(&names)?)),
            "file_dict" => Ok(Value::Object(provider.lowpkg().file_dict(&names)?)),
            "list_repo_pkgs" => {
                let mut map = Map::new();
                for n in &names {
                    map.insert(n.clone(), json!(provider.available_versions(n, None)?));
                }
                Ok(Value::Object(map))
            }
            other => Err(ExecError::NotAvailable(format!("pkg.{other}"))),
        }
    }
}

/// This module, as registered.
pub const MODULE: PkgExec = PkgExec;
