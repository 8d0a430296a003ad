//! Salt's `pkg` state module: `installed`, `latest`, `removed`, `purged`,
//! `uptodate` and `mod_watch`, over the host's [`PkgProvider`].
//!
//! Each state reads the package list once before acting and once after,
//! never one process per package; with `test=True` it predicts the
//! changes from the package lists and repository candidates only.

mod hold;

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};
use indexmap::IndexMap;
use serde_json::json;

use crate::pkg::version::satisfies;
use crate::pkg::{
    localize_sources, parse_targets, provider_for, InstallOptions, PkgError, PkgProvider,
    PkgVersions, TargetKind, Targets,
};

/// The module's table; every function runs over the provider chosen from
/// the host's `os_family` grain ([`with_run`]).
pub const MODULE: StateTable = StateTable {
    name: "pkg",
    functions: &[
        StateFunction::new("installed", |c| with_run(c, |r| r.installed())),
        StateFunction::new("latest", |c| with_run(c, |r| r.latest())),
        StateFunction::new("removed", |c| with_run(c, |r| r.uninstall(false))),
        StateFunction::new("purged", |c| with_run(c, |r| r.uninstall(true))),
        StateFunction::new("uptodate", |c| with_run(c, |r| r.uptodate())),
        StateFunction::new("held", |c| with_run(c, |r| hold::held(r.call, r.provider))),
        StateFunction::new("unheld", |c| {
            with_run(c, |r| hold::unheld(r.call, r.provider))
        }),
        StateFunction::new("mod_watch", |c| with_run(c, mod_watch)),
    ],
};

/// A `pkg` state function over the host's provider.
type PkgStateFn = fn(&StateRun<'_>) -> Result<StateResult, PkgError>;

/// Runs `f` over the provider of the host's `os_family`; no provider, or
/// a provider error, is a failed state with the error as its comment.
fn with_run(call: &StateCall<'_>, f: PkgStateFn) -> Result<StateResult, StateError> {
    let provider = match provider_for(call.env.grains(), call.env.opts()) {
        Ok(p) => p,
        Err(e) => return Ok(StateResult::fail(call.name(), e.to_string())),
    };
    let run = StateRun {
        call,
        provider: provider.as_ref(),
    };
    Ok(f(&run).unwrap_or_else(|e| StateResult::fail(call.name(), e.to_string())))
}

/// `pkg.mod_watch`: runs the watching state's function again
/// (`installed`, `latest`, `removed`, `purged`); the others do not watch.
fn mod_watch(run: &StateRun<'_>) -> Result<StateResult, PkgError> {
    match run.call.sfun {
        Some("installed") => run.installed(),
        Some("latest") => run.latest(),
        Some("removed") => run.uninstall(false),
        Some("purged") => run.uninstall(true),
        other => Ok(StateResult::fail(
            run.call.name(),
            format!(
                "pkg.{} does not work with the watch requisite",
                other.unwrap_or("")
            ),
        )),
    }
}

/// What `pkg.installed` has to do: Salt's `targets` and `to_reinstall`.
struct InstallPlan {
    /// Missing, or not at the wanted version.
    targets: IndexMap<String, Option<String>>,
    /// Installed, and `reinstall=True`.
    to_reinstall: IndexMap<String, Option<String>>,
    /// Whether a version was asked for (the "already installed" comment
    /// then says "and are at the desired version").
    version_spec: bool,
}

/// The targets after the install, as the package database shows them.
struct InstallOutcome {
    modified: Vec<String>,
    not_modified: Vec<String>,
    failed: Vec<String>,
}

/// The report phase of `pkg.installed`: its result and comment.
fn report_install(
    desired: &IndexMap<String, Option<String>>,
    plan: &InstallPlan,
    outcome: &InstallOutcome,
    pkg_ret: &Map,
    sources: bool,
    hold_comments: Vec<String>,
    hold_failed: bool,
) -> (bool, String) {
    let to_reinstall = &plan.to_reinstall;
    let (modified, not_modified, failed) =
        (&outcome.modified, &outcome.not_modified, &outcome.failed);
    let mut comment: Vec<String> = Vec::new();
    let fmt = |list: &[String]| -> String {
        list.iter()
            .map(|x| {
                if sources {
                    x.clone()
                } else {
                    desired_pkg(x, desired.get(x).and_then(|v| v.as_deref()))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !modified.is_empty() {
        let summary = fmt(modified);
        if summary.len() < 20 {
            comment.push(format!(
                "The following packages were installed/updated: {summary}"
            ));
        } else {
            let n = modified.len();
            comment.push(format!(
                "{n} targeted package{} {} installed/updated.",
                if n > 1 { "s" } else { "" },
                if n > 1 { "were" } else { "was" }
            ));
        }
    }
    if !not_modified.is_empty() {
        let n = not_modified.len();
        if n <= 20 {
            comment.push(format!(
                "The following packages were already installed: {}",
                fmt(not_modified)
            ));
        } else {
            comment.push(format!(
                "{n} targeted package{} {} already installed",
                if n > 1 { "s" } else { "" },
                if n > 1 { "were" } else { "was" }
            ));
        }
    }
    comment.extend(hold_comments);
    let mut result = !hold_failed;
    if !failed.is_empty() {
        comment.insert(
            0,
            format!(
                "The following packages failed to install/update: {}",
                fmt(failed)
            ),
        );
        result = false;
    }
    for pkg in to_reinstall.keys() {
        let pkgstr = if sources {
            pkg.clone()
        } else {
            desired_pkg(pkg, desired.get(pkg).and_then(|v| v.as_deref()))
        };
        if pkg_ret.contains_key(pkg) {
            comment.push(format!("Package {pkgstr} was reinstalled."));
        } else {
            comment.push(format!(
                "Reinstall was not successful for package {pkgstr}."
            ));
            result = false;
        }
    }
    (result, comment.join("\n"))
}

struct StateRun<'a> {
    call: &'a StateCall<'a>,
    provider: &'a dyn PkgProvider,
}

/// Salt's `_get_desired_pkg`: `name`, `name=1.0` or `name>=1.0`.
fn desired_pkg(name: &str, spec: Option<&str>) -> String {
    match spec {
        None | Some("") => name.to_string(),
        Some(s) if s.starts_with(['<', '>', '=']) => format!("{name}{s}"),
        Some(s) => format!("{name}={s}"),
    }
}

fn is_range_or_pinned(spec: &Option<String>) -> Option<&str> {
    spec.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl StateRun<'_> {
    fn name(&self) -> String {
        self.call.name().to_string()
    }

    fn kwargs(&self) -> Map {
        self.call.chunk.to_map()
    }

    fn cmp(&self) -> impl Fn(&str, &str) -> std::cmp::Ordering + '_ {
        move |a: &str, b: &str| self.provider.version_cmp(a, b)
    }

    fn targets(&self, with_sources: bool) -> Result<Targets, PkgError> {
        let version = self.call.arg_str("version").ok().flatten();
        let sources = if with_sources {
            self.call.arg("sources")
        } else {
            None
        };
        // Salt's pkg states pack a lone name (and version) into `pkgs`, so a
        // name is one package even with a comma in it.
        let lone = (self.call.arg("pkgs").is_none() && sources.is_none()).then(|| {
            let version = version
                .clone()
                .filter(|v| !v.is_empty())
                .map(Value::from)
                .unwrap_or(Value::Null);
            json!([{ self.call.name(): version }])
        });
        let pkgs = lone.as_ref().or(self.call.arg("pkgs"));
        let targets = parse_targets(None, pkgs, sources, None)?;
        let saltenv = if self.call.chunk.env().is_empty() {
            "base"
        } else {
            self.call.chunk.env()
        };
        localize_sources(
            &targets,
            self.call.env.file_client(),
            self.call.env.opts(),
            saltenv,
        )
    }

    /// `pkg.installed`, phase by phase: the targets and the versions they
    /// resolve to ([`Self::resolve_latest`]), what needs installing
    /// ([`Self::plan_install`]), the prediction under `test=True`
    /// ([`Self::would_install`]), the install and `hold`
    /// ([`Self::apply_hold`]), then what the package database says now
    /// ([`Self::verify_install`]) and the report ([`report_install`]).
    fn installed(&self) -> Result<StateResult, PkgError> {
        let name = self.name();
        if self
            .call
            .arg("pkgs")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            return Ok(StateResult::ok(name, "No packages to install provided"));
        }
        if self.call.arg("pkgs").is_some() && self.call.arg("sources").is_some() {
            return Ok(StateResult::fail(
                name,
                "Only one of \"pkgs\" and \"sources\" is permitted.",
            ));
        }
        let targets_in = match self.targets(true) {
            Ok(t) => t,
            Err(PkgError::Invocation(m)) => return Ok(StateResult::fail(name, m)),
            Err(e) => return Err(e),
        };
        let mut opts = InstallOptions::from_kwargs(&self.kwargs(), false);
        let sources = targets_in.kind == TargetKind::File;
        let cur = self.provider.list_pkgs(false)?;
        let desired = self.resolve_latest(&targets_in, &mut opts, &cur, sources)?;
        let plan = self.plan_install(&desired, &cur, sources, opts.reinstall);

        if plan.targets.is_empty() && plan.to_reinstall.is_empty() {
            let suffix = if plan.version_spec && !sources {
                " and are at the desired version"
            } else {
                ""
            };
            let r = StateResult::ok(
                name,
                format!("All specified packages are already installed{suffix}"),
            );
            return self.with_hold(r, &targets_in.names());
        }
        if self.call.test {
            return self.would_install(name, &plan, sources);
        }

        let mut install_items = plan.targets.clone();
        install_items.extend(plan.to_reinstall.clone());
        opts.reinstall = !plan.to_reinstall.is_empty();
        let install_targets = Targets {
            kind: targets_in.kind,
            items: install_items,
        };
        let mut changes = match self.provider.install(&install_targets, &opts) {
            Ok(c) => c,
            Err(e @ PkgError::Failed { .. }) => {
                let mut r = StateResult::fail(name, e.to_string());
                r.changes = e.changes();
                return Ok(r);
            }
            Err(e) => {
                return Ok(StateResult::fail(
                    name,
                    format!("An error was encountered while installing package(s): {e}"),
                ))
            }
        };
        let pkg_ret = changes.clone();
        let (hold_comments, hold_failed) = self.apply_hold(&desired, &mut changes)?;
        let outcome = self.verify_install(&desired, &plan, &pkg_ret, sources)?;
        let (result, comment) = report_install(
            &desired,
            &plan,
            &outcome,
            &pkg_ret,
            sources,
            hold_comments,
            hold_failed,
        );
        let mut r = StateResult::new(name, Some(result));
        r.changes = changes;
        r.comment = comment;
        Ok(r)
    }

    /// The resolve phase: each target's wanted version, `latest` looked up
    /// (one refresh at most: it is spent here when used).
    fn resolve_latest(
        &self,
        targets_in: &Targets,
        opts: &mut InstallOptions,
        cur: &PkgVersions,
        sources: bool,
    ) -> Result<IndexMap<String, Option<String>>, PkgError> {
        let mut desired: IndexMap<String, Option<String>> = targets_in.items.clone();
        if !sources {
            let wants_latest: Vec<String> = desired
                .iter()
                .filter(|(_, v)| v.as_deref() == Some("latest"))
                .map(|(k, _)| k.clone())
                .collect();
            if !wants_latest.is_empty() {
                let resolved = self.provider.latest_version(
                    &wants_latest,
                    opts.fromrepo.as_deref(),
                    opts.refresh,
                )?;
                opts.refresh = false;
                for n in wants_latest {
                    let v = resolved
                        .get(&n)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let v = if v.is_empty() {
                        cur.get(&n).and_then(|l| l.last()).cloned()
                    } else {
                        Some(v)
                    };
                    desired.insert(n, v);
                }
            }
        }
        Ok(desired)
    }

    /// The check phase: which targets are missing or at the wrong version,
    /// which are reinstalled, and whether any version was asked for.
    fn plan_install(
        &self,
        desired: &IndexMap<String, Option<String>>,
        cur: &PkgVersions,
        sources: bool,
        reinstall: bool,
    ) -> InstallPlan {
        let cmp = self.cmp();
        let mut targets: IndexMap<String, Option<String>> = IndexMap::new();
        let mut to_reinstall: IndexMap<String, Option<String>> = IndexMap::new();
        let mut version_spec = false;
        for (pkg, spec) in desired {
            let cver = cur.get(pkg).cloned().unwrap_or_default();
            if cver.is_empty() {
                targets.insert(pkg.clone(), spec.clone());
                continue;
            }
            let verstr = if sources {
                if reinstall {
                    to_reinstall.insert(pkg.clone(), spec.clone());
                    continue;
                }
                let path = spec.clone().unwrap_or_default();
                match self.provider.lowpkg().bin_pkg_info(&path) {
                    Ok(info) => info
                        .get("version")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    Err(_) => continue,
                }
            } else {
                if reinstall {
                    to_reinstall.insert(pkg.clone(), spec.clone());
                    continue;
                }
                match is_range_or_pinned(spec) {
                    None => continue,
                    Some(s) => s.to_string(),
                }
            };
            version_spec = true;
            if !satisfies(&cmp, &cver, &verstr) {
                targets.insert(pkg.clone(), spec.clone());
            }
        }
        InstallPlan {
            targets,
            to_reinstall,
            version_spec,
        }
    }

    /// What `test=True` reports: the packages that would be installed,
    /// updated or reinstalled.
    fn would_install(
        &self,
        name: String,
        plan: &InstallPlan,
        sources: bool,
    ) -> Result<StateResult, PkgError> {
        let (targets, to_reinstall) = (&plan.targets, &plan.to_reinstall);
        let mut changes = Map::new();
        let mut comment = Vec::new();
        if !targets.is_empty() {
            if sources {
                for t in targets.keys() {
                    changes.insert(t.clone(), json!({"new": "installed", "old": ""}));
                }
            } else {
                changes.extend(self.installable_versions(targets, &PkgVersions::new())?);
            }
            comment.push(format!(
                "The following packages would be installed/updated: {}",
                targets.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if !to_reinstall.is_empty() {
            let list: Vec<String> = to_reinstall
                .iter()
                .map(|(k, v)| {
                    if sources {
                        k.clone()
                    } else {
                        desired_pkg(k, v.as_deref())
                    }
                })
                .collect();
            for x in &list {
                changes.insert(x.clone(), json!({"new": "installed", "old": ""}));
            }
            comment.push(format!(
                "The following packages would be reinstalled: {}",
                list.join(", ")
            ));
        }
        Ok(StateResult::would_change(name, comment.join("\n"), changes))
    }

    /// `hold`/`unhold` after installing: the hold changes merged into
    /// `changes`; the hold comments, and whether a hold failed.
    fn apply_hold(
        &self,
        desired: &IndexMap<String, Option<String>>,
        changes: &mut Map,
    ) -> Result<(Vec<String>, bool), PkgError> {
        let mut hold_comments = Vec::new();
        let mut hold_failed = false;
        if let Some(hold) = self.call.arg("hold") {
            let names: Vec<String> = desired.keys().cloned().collect();
            let hold_ret = self.provider.set_hold(&names, halite_state::truthy(hold))?;
            for (pkg, r) in &hold_ret {
                let ok = r.get("result").map(halite_state::truthy).unwrap_or(false);
                let c = r
                    .get("comment")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let ch = r
                    .get("changes")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                if !ok {
                    hold_failed = true;
                } else if !ch.is_empty() {
                    let new = ch
                        .get("new")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    match changes.get_mut(pkg).and_then(Value::as_object_mut) {
                        Some(existing) => {
                            let joined = |old: Option<&Value>, add: &str| {
                                let old = old.and_then(Value::as_str).unwrap_or("");
                                if old.is_empty() {
                                    add.to_string()
                                } else {
                                    format!("{old}\n{add}")
                                }
                            };
                            let n = joined(existing.get("new"), &new);
                            existing.insert("new".into(), json!(n));
                            let o = joined(
                                existing.get("old"),
                                ch.get("old").and_then(Value::as_str).unwrap_or(""),
                            );
                            existing.insert("old".into(), json!(o));
                        }
                        None => {
                            changes.insert(pkg.clone(), json!({"new": new}));
                        }
                    }
                }
                hold_comments.push(c);
            }
        }
        Ok((hold_comments, hold_failed))
    }

    /// The verify phase: which targets the package database now shows
    /// installed as wanted, which were already, which failed.
    fn verify_install(
        &self,
        desired: &IndexMap<String, Option<String>>,
        plan: &InstallPlan,
        pkg_ret: &Map,
        sources: bool,
    ) -> Result<InstallOutcome, PkgError> {
        let (targets, to_reinstall) = (&plan.targets, &plan.to_reinstall);
        let cmp = self.cmp();
        let (modified, not_modified, failed): (Vec<String>, Vec<String>, Vec<String>) = if sources {
            let modified: Vec<String> = pkg_ret
                .keys()
                .filter(|k| targets.contains_key(*k))
                .cloned()
                .collect();
            let not_modified = desired
                .keys()
                .filter(|k| !targets.contains_key(*k) && !to_reinstall.contains_key(*k))
                .cloned()
                .collect();
            let failed = targets
                .keys()
                .filter(|k| !modified.contains(k))
                .cloned()
                .collect();
            (modified, not_modified, failed)
        } else {
            let new = self.provider.list_pkgs(false)?;
            let mut ok = Vec::new();
            let mut bad = Vec::new();
            for (pkg, spec) in desired {
                let cver = new.get(pkg).cloned().unwrap_or_default();
                let good = !cver.is_empty()
                    && match is_range_or_pinned(spec) {
                        None | Some("latest") => true,
                        Some(s) => satisfies(&cmp, &cver, s),
                    };
                if good {
                    ok.push(pkg.clone())
                } else {
                    bad.push(pkg.clone())
                }
            }
            let modified = ok
                .iter()
                .filter(|k| targets.contains_key(*k))
                .cloned()
                .collect();
            let not_modified = ok
                .iter()
                .filter(|k| !targets.contains_key(*k) && !to_reinstall.contains_key(*k))
                .cloned()
                .collect();
            let failed = bad
                .into_iter()
                .filter(|k| targets.contains_key(k))
                .collect();
            (modified, not_modified, failed)
        };
        Ok(InstallOutcome {
            modified,
            not_modified,
            failed,
        })
    }

    /// Salt's hold handling when nothing needed installing: each hold
    /// result's comment is appended after ".\n", changed holds become the
    /// changes. Not predicted under `test=True`.
    fn with_hold(&self, mut r: StateResult, names: &[String]) -> Result<StateResult, PkgError> {
        let Some(hold) = self.call.arg("hold") else {
            return Ok(r);
        };
        if self.call.test {
            return Ok(r);
        }
        let hold_ret = match self.provider.set_hold(names, halite_state::truthy(hold)) {
            Ok(h) => h,
            Err(e) => return Ok(StateResult::fail(r.name, e.to_string())),
        };
        let entries: Vec<(&String, &Value)> = hold_ret.iter().collect();
        let ok = |v: &Value| v.get("result").map(halite_state::truthy).unwrap_or(false);
        let changed = |v: &Value| {
            v.get("changes")
                .and_then(Value::as_object)
                .is_some_and(|c| !c.is_empty())
        };
        let modified = entries.iter().filter(|(_, v)| changed(v));
        let unchanged = entries.iter().filter(|(_, v)| !changed(v) && ok(v));
        let failed = entries.iter().filter(|(_, v)| !ok(v));
        for (pkg, v) in modified.chain(unchanged).chain(failed) {
            r.comment.push_str(&format!(
                ".\n{}",
                v.get("comment").and_then(Value::as_str).unwrap_or("")
            ));
            r.result = Some(ok(v));
            if changed(v) {
                r.changes.insert(
                    (*pkg).clone(),
                    v.get("changes").cloned().unwrap_or(Value::Null),
                );
            }
        }
        Ok(r)
    }

    /// Salt's `_get_installable_versions`: what test mode predicts as `new`.
    fn installable_versions(
        &self,
        targets: &IndexMap<String, Option<String>>,
        current: &PkgVersions,
    ) -> Result<Map, PkgError> {
        let latest_names: Vec<String> = targets
            .iter()
            .filter(|(_, v)| is_range_or_pinned(v).is_none())
            .map(|(k, _)| k.clone())
            .collect();
        let latest = self.provider.latest_version(&latest_names, None, false)?;
        let cmp = self.cmp();
        let mut out = Map::new();
        for (pkg, spec) in targets {
            let new = match is_range_or_pinned(spec) {
                None => latest
                    .get(pkg)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                // Salt predicts "installed" for a range it would resolve later.
                Some(s) if crate::pkg::version::has_range(s) => String::new(),
                Some(s) => {
                    let avail = self.provider.available_versions(pkg, None)?;
                    crate::pkg::version::best_match(&cmp, s, &avail).unwrap_or_default()
                }
            };
            let new = if new.is_empty() {
                "installed".to_string()
            } else {
                new
            };
            let old = current.get(pkg).map(|v| v.join(",")).unwrap_or_default();
            out.insert(pkg.clone(), json!({"new": new, "old": old}));
        }
        Ok(out)
    }

    fn latest(&self) -> Result<StateResult, PkgError> {
        let name = self.name();
        let desired: Vec<String> = match self.call.arg("pkgs") {
            Some(p) => match parse_targets(None, Some(p), None, None) {
                Ok(t) => t.names(),
                Err(e) => return Ok(StateResult::fail(name, e.to_string())),
            },
            None => vec![name.clone()],
        };
        let has_pkgs = self.call.arg("pkgs").is_some();
        let opts = InstallOptions::from_kwargs(&self.kwargs(), true);
        let avail = match self.provider.latest_version(&desired, opts.fromrepo.as_deref(), opts.refresh) {
            Ok(a) => a,
            Err(e) => {
                return Ok(StateResult::fail(
                    name,
                    format!("An error was encountered while checking the newest available version of package(s): {e}"),
                ))
            }
        };
        let installed = self.provider.list_pkgs(false)?;
        let cur = |p: &str| installed.get(p).map(|v| v.join(",")).unwrap_or_default();
        let mut targets: IndexMap<String, String> = IndexMap::new();
        let mut problems = Vec::new();
        for pkg in &desired {
            let a = avail.get(pkg).and_then(Value::as_str).unwrap_or("");
            if a.is_empty() {
                if cur(pkg).is_empty() {
                    problems.push(format!("No information found for '{pkg}'."));
                }
            } else {
                targets.insert(pkg.clone(), a.to_string());
            }
        }
        if !problems.is_empty() {
            return Ok(StateResult::fail(name, problems.join(" ")));
        }
        if targets.is_empty() {
            let comment = if desired.len() > 10 {
                format!("All {} packages are up-to-date.", desired.len())
            } else if desired.len() > 1 {
                let mut d = desired.clone();
                d.sort();
                format!("All packages are up-to-date ({}).", d.join(", "))
            } else {
                format!("Package {} is already up-to-date", desired[0])
            };
            return Ok(StateResult::ok(name, comment));
        }
        let mut up_to_date: Vec<String> = if has_pkgs {
            desired
                .iter()
                .filter(|x| !targets.contains_key(*x))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        up_to_date.sort();
        let mut sorted_targets: Vec<String> = targets.keys().cloned().collect();
        sorted_targets.sort();
        if self.call.test {
            let mut comments = vec![format!(
                "The following packages would be installed/upgraded: {}",
                sorted_targets.join(", ")
            )];
            if !up_to_date.is_empty() {
                if up_to_date.len() <= 10 {
                    let list: Vec<String> = up_to_date
                        .iter()
                        .map(|x| format!("{x} ({})", cur(x)))
                        .collect();
                    comments.push(format!(
                        "The following packages are already up-to-date: {}",
                        list.join(", ")
                    ));
                } else {
                    comments.push(format!(
                        "{} packages are already up-to-date",
                        up_to_date.len()
                    ));
                }
            }
            let mut changes = Map::new();
            for (pkg, v) in &targets {
                changes.insert(pkg.clone(), json!({"new": v, "old": cur(pkg)}));
            }
            return Ok(StateResult::would_change(
                name,
                comments.join("\n"),
                changes,
            ));
        }
        let install_opts = InstallOptions {
            refresh: false,
            ..opts
        };
        let t = Targets {
            kind: TargetKind::Repository,
            items: targets.keys().map(|k| (k.clone(), None)).collect(),
        };
        let changes = match self.provider.install(&t, &install_opts) {
            Ok(c) => c,
            Err(e) => {
                return Ok(StateResult::fail(
                    name,
                    format!("An error was encountered while installing package(s): {e}"),
                ))
            }
        };
        if changes.is_empty() {
            let comment = if targets.len() > 10 {
                format!(
                    "{} targeted packages failed to update. See debug log for details.",
                    targets.len()
                )
            } else if targets.len() > 1 {
                format!(
                    "The following targeted packages failed to update. See debug log for details: ({}).",
                    sorted_targets.join(", ")
                )
            } else {
                format!("Package {} failed to update.", sorted_targets[0])
            };
            return Ok(StateResult::fail(name, comment));
        }
        let failed: Vec<String> = sorted_targets
            .iter()
            .filter(|x| {
                let new = changes
                    .get(*x)
                    .and_then(|c| c.get("new"))
                    .and_then(Value::as_str);
                match new {
                    None => true,
                    Some(n) => !n.split(',').any(|v| v == targets[*x]),
                }
            })
            .cloned()
            .collect();
        let successful: Vec<String> = sorted_targets
            .iter()
            .filter(|x| !failed.contains(x))
            .cloned()
            .collect();
        let mut comments = Vec::new();
        if !failed.is_empty() {
            comments.push(format!(
                "The following packages failed to update: {}",
                failed.join(", ")
            ));
        }
        if !successful.is_empty() {
            comments.push(format!(
                "The following packages were successfully installed/upgraded: {}",
                successful.join(", ")
            ));
        }
        if !up_to_date.is_empty() {
            if up_to_date.len() <= 10 {
                comments.push(format!(
                    "The following packages were already up-to-date: {}",
                    up_to_date.join(", ")
                ));
            } else {
                comments.push(format!(
                    "{} packages were already up-to-date ",
                    up_to_date.len()
                ));
            }
        }
        let mut r = StateResult::new(name, Some(failed.is_empty()));
        r.changes = changes;
        r.comment = comments.join(" ");
        Ok(r)
    }

    fn uninstall(&self, purge: bool) -> Result<StateResult, PkgError> {
        let name = self.name();
        let action = if purge { "purge" } else { "remove" };
        let params = match self.targets(false) {
            Ok(t) => t,
            Err(e) => {
                return Ok(StateResult::fail(
                    name,
                    format!("An error was encountered while parsing targets: {e}"),
                ))
            }
        };
        let cur = self.provider.list_pkgs(false)?;
        let cmp = self.cmp();
        let mut version_spec = false;
        let mut targets: Vec<String> = Vec::new();
        for (pkg, spec) in &params.items {
            let Some(cver) = cur.get(pkg) else { continue };
            match is_range_or_pinned(spec) {
                None => targets.push(pkg.clone()),
                Some(s) => {
                    version_spec = true;
                    if satisfies(&cmp, cver, s) {
                        targets.push(pkg.clone());
                    }
                }
            }
        }
        if targets.is_empty() && !purge {
            let m = if version_spec {
                " (matching specified versions)"
            } else {
                ""
            };
            return Ok(StateResult::ok(
                name,
                format!("All specified packages{m} are already absent"),
            ));
        }
        let old_removed = if purge {
            self.provider.list_pkgs(true)?
        } else {
            PkgVersions::new()
        };
        if purge {
            targets.extend(
                params
                    .items
                    .keys()
                    .filter(|p| old_removed.contains_key(*p))
                    .cloned(),
            );
        }
        targets.sort();
        targets.dedup();
        if targets.is_empty() {
            let m = if purge { " or partially installed" } else { "" };
            return Ok(StateResult::ok(
                name,
                format!("None of the targeted packages are installed{m}"),
            ));
        }
        if self.call.test {
            let mut changes = Map::new();
            for t in &targets {
                changes.insert(t.clone(), json!({"new": format!("{action}d"), "old": ""}));
            }
            return Ok(StateResult::would_change(
                name,
                format!(
                    "The following packages will be {action}d: {}.",
                    targets.join(", ")
                ),
                changes,
            ));
        }
        let changes = match self.provider.remove(&targets, purge) {
            Ok(c) => c,
            Err(e) => {
                let mut r = StateResult::fail(name, e.to_string());
                r.changes = e.changes();
                return Ok(r);
            }
        };
        let new = self.provider.list_pkgs(false)?;
        let mut failed: Vec<String> = params
            .items
            .keys()
            .filter(|p| new.contains_key(*p))
            .cloned()
            .collect();
        if purge {
            let new_removed = self.provider.list_pkgs(true)?;
            failed.extend(
                params
                    .items
                    .keys()
                    .filter(|p| new_removed.contains_key(*p))
                    .cloned(),
            );
        }
        failed.sort();
        if !failed.is_empty() {
            let mut r = StateResult::fail(
                name,
                format!(
                    "The following packages failed to {action}: {}.",
                    failed.join(", ")
                ),
            );
            r.changes = changes;
            return Ok(r);
        }
        let mut not_installed: Vec<String> = params
            .items
            .keys()
            .filter(|p| !targets.contains(*p))
            .cloned()
            .collect();
        not_installed.sort();
        let comment = if not_installed.is_empty() {
            format!("All targeted packages were {action}d.")
        } else {
            format!(
                "The following packages were not installed: {} The following packages were {action}d: {}.",
                not_installed.join(", "),
                targets.join(", ")
            )
        };
        let mut r = StateResult::ok(name, comment);
        r.changes = changes;
        Ok(r)
    }

    fn uptodate(&self) -> Result<StateResult, PkgError> {
        let name = self.name();
        let opts = InstallOptions::from_kwargs(&self.kwargs(), false);
        let pkgs: Option<Vec<String>> = match self.call.arg("pkgs") {
            Some(p) => Some(parse_targets(None, Some(p), None, None)?.names()),
            None => None,
        };
        let mut list_opts = opts.clone();
        list_opts.dist_upgrade = self
            .call
            .arg("dist_upgrade")
            .map(halite_state::truthy)
            .unwrap_or(true);
        let upgrades = match self.provider.list_upgrades(opts.refresh, &list_opts) {
            Ok(u) => u,
            Err(e) => return Ok(StateResult::fail(name, e.to_string())),
        };
        let installed = self.provider.list_pkgs(false)?;
        let mut expected = Map::new();
        for (pkg, ver) in &upgrades {
            if pkgs.as_ref().is_some_and(|p| !p.contains(pkg)) {
                continue;
            }
            let old = installed.get(pkg).map(|v| v.join(",")).unwrap_or_default();
            expected.insert(pkg.clone(), json!({"new": ver, "old": old}));
        }
        if expected.is_empty() {
            return Ok(StateResult::ok(name, "System is already up-to-date"));
        }
        if self.call.test {
            return Ok(StateResult::would_change(
                name,
                "System update will be performed",
                expected,
            ));
        }
        let upgrade_opts = InstallOptions {
            refresh: false,
            ..list_opts
        };
        let changes = match self
            .provider
            .upgrade(pkgs.as_deref().unwrap_or(&[]), &upgrade_opts)
        {
            Ok(c) => c,
            Err(e @ PkgError::Failed { .. }) => {
                let mut r = StateResult::fail(name, e.to_string());
                r.changes = e.changes();
                return Ok(r);
            }
            Err(e) => {
                return Ok(StateResult::fail(
                    name,
                    format!("An error was encountered while updating packages: {e}"),
                ))
            }
        };
        let missing: Vec<String> = if pkgs.is_some() {
            expected
                .keys()
                .filter(|k| !changes.contains_key(*k))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let mut r = if missing.is_empty() {
            StateResult::ok(name, "Upgrade ran successfully")
        } else {
            StateResult::fail(
                name,
                format!(
                    "The following package(s) failed to update: {}",
                    missing.join(", ")
                ),
            )
        };
        r.changes = changes;
        Ok(r)
    }
}
