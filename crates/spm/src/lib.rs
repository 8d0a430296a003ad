//! halite's formula package manager, the counterpart of Salt's `spm`:
//! builds FORMULA trees into `.spm` packages (bzip2 tarballs), installs
//! them from files or repositories with their dependencies first, records
//! every installed file in a SQLite database, and removes them again.
//!
//! The library does the work; `halite-spm` (src/bin) is the command line.

pub mod archive;
pub mod build;
pub mod config;
pub mod db;
pub mod error;
pub mod formula;
pub mod install;
pub mod layout;
pub mod owner;
pub mod remove;
pub mod repo;
pub mod states;
pub mod transaction;
pub mod yaml;

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

pub use archive::{read_package, Package};
pub use build::{build, BuiltPackage};
pub use config::SpmConfig;
pub use db::PackageDb;
pub use error::{Result, SpmError};
pub use formula::Formula;
pub use install::{install_package, InstallReport};
pub use remove::{remove_package, RemoveReport};
pub use states::{HaliteCallRunner, LocalStateRunner, StateRunOutcome};

use repo::RepoPackage;

/// Where a package of an install plan comes from.
#[derive(Debug, Clone)]
pub enum InstallSource {
    /// A `.spm` given on the command line.
    File(PathBuf),
    /// A package offered by a configured repository.
    Repo(RepoPackage),
}

/// What `install` will do, shown to the user before it is done.
#[derive(Debug, Clone, Default)]
pub struct InstallPlan {
    /// Packages in install order: every dependency before its dependents.
    pub order: Vec<(String, InstallSource)>,
    /// `optional` entries of the planned packages (`name [Installed]` when present).
    pub optional: Vec<String>,
    /// `recommended` entries of the planned packages.
    pub recommended: Vec<String>,
}

/// Resolves `requests` (package names or `.spm` paths) and their
/// dependencies against the installed packages and the repositories.
pub fn plan_install(
    config: &SpmConfig,
    db: &PackageDb,
    requests: &[String],
    force: bool,
) -> Result<InstallPlan> {
    let mut local: HashMap<String, (PathBuf, Map<String, Value>)> = HashMap::new();
    let mut wanted = Vec::new();
    for request in requests {
        if request.ends_with(".spm") {
            let path = PathBuf::from(request);
            let package = read_package(&path)?;
            wanted.push(package.formula.name.clone());
            local.insert(
                package.formula.name.clone(),
                (path, package.formula.variables),
            );
        } else {
            wanted.push(request.clone());
        }
    }
    let mut planner = Planner {
        db,
        local,
        offers: None,
        config,
        plan: InstallPlan::default(),
        visiting: Vec::new(),
    };
    for name in &wanted {
        if db.package(name)?.is_some() && !force {
            return Err(SpmError::AlreadyInstalled(name.clone()));
        }
        let mut missing = Vec::new();
        planner.visit(name, true, &mut missing)?;
        if !missing.is_empty() {
            if !planner.local.contains_key(name) && planner.offer(name)?.is_none() {
                return Err(SpmError::NotInRepos(name.clone()));
            }
            missing.sort();
            missing.dedup();
            return Err(SpmError::MissingDependencies {
                package: name.clone(),
                missing: missing.join("\n"),
            });
        }
    }
    let mut plan = planner.plan;
    for list in [&mut plan.optional, &mut plan.recommended] {
        list.sort();
        list.dedup();
        for entry in list.iter_mut() {
            if db.package(entry)?.is_some() {
                entry.push_str(" [Installed]");
            }
        }
    }
    Ok(plan)
}

/// Walks dependencies depth-first so each lands in the order before its dependents.
struct Planner<'a> {
    db: &'a PackageDb,
    config: &'a SpmConfig,
    local: HashMap<String, (PathBuf, Map<String, Value>)>,
    offers: Option<Vec<RepoPackage>>,
    plan: InstallPlan,
    visiting: Vec<String>,
}

impl Planner<'_> {
    fn offer(&mut self, name: &str) -> Result<Option<RepoPackage>> {
        if self.offers.is_none() {
            self.offers = Some(repo::available_packages(self.config)?);
        }
        Ok(self
            .offers
            .as_deref()
            .and_then(|offers| repo::best_offer(offers, name))
            .cloned())
    }

    fn visit(&mut self, name: &str, requested: bool, missing: &mut Vec<String>) -> Result<()> {
        if self.plan.order.iter().any(|(n, _)| n == name) || self.visiting.iter().any(|n| n == name)
        {
            return Ok(());
        }
        if !requested && self.db.package(name)?.is_some() {
            return Ok(());
        }
        let (source, info) = if let Some((path, info)) = self.local.get(name) {
            (InstallSource::File(path.clone()), info.clone())
        } else if let Some(offer) = self.offer(name)? {
            let info = offer.info.clone();
            (InstallSource::Repo(offer), info)
        } else {
            missing.push(name.to_string());
            return Ok(());
        };
        let list = |key: &str| formula::name_list(info.get(key));
        self.plan.optional.extend(list("optional"));
        self.plan.recommended.extend(list("recommended"));
        self.visiting.push(name.to_string());
        for dep in list("dependencies") {
            self.visit(&dep, false, missing)?;
        }
        self.visiting.pop();
        self.plan.order.push((name.to_string(), source));
        Ok(())
    }
}

/// Downloads and checks every package of `plan` (so a bad one stops the
/// install before anything is written), then installs them in order.
pub fn execute_plan(
    config: &SpmConfig,
    db: &mut PackageDb,
    plan: &InstallPlan,
    force: bool,
    runner: &dyn LocalStateRunner,
) -> Result<Vec<InstallReport>> {
    let mut packages = Vec::with_capacity(plan.order.len());
    for (name, source) in &plan.order {
        let path = match source {
            InstallSource::File(path) => path.clone(),
            InstallSource::Repo(offer) => repo::download(config, offer)?,
        };
        let package = read_package(&path)?;
        if &package.formula.name != name {
            return Err(SpmError::UnsafePackage {
                path: path.display().to_string(),
                reason: format!("expected package {name}, found {}", package.formula.name),
            });
        }
        packages.push(package);
    }
    let mut reports = Vec::with_capacity(packages.len());
    for package in &packages {
        reports.push(install_package(config, db, package, force, runner)?);
    }
    Ok(reports)
}

/// Salt's `spm info` text for an installed package.
pub fn describe(package: &db::InstalledPackage) -> String {
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "None".to_string());
    let deps = if package.dependencies.is_empty() {
        "None".to_string()
    } else {
        package.dependencies.join(",")
    };
    format!(
        "Name: {}\nVersion: {}\nRelease: {}\nInstall Date: {}\nSupported OSes: {}\nSupported OS families: {}\n\
         Dependencies: {}\nSummary: {}\nDescription:\n{}",
        package.name,
        package.version,
        package.release,
        package.installed,
        or_none(&package.os),
        or_none(&package.os_family),
        deps,
        package.summary,
        package.description
    )
}
