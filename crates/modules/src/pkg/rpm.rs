//! `lowpkg` for the rpm family: the rpm database through `rpm` itself,
//! optionally of another `--root` (chroots, tests).

use std::path::PathBuf;

use halite_state::{Map, Value};
use serde_json::json;

use super::dpkg::parse_verify_output;
use super::error::{PkgError, PkgResult};
use super::provider::{LowPkg, PkgVersions};
use super::run::{argv, run};

/// The rpm database of this host, or of the system rooted at `root`.
#[derive(Debug, Clone, Default)]
pub struct Rpm {
    root: Option<PathBuf>,
}

/// Files per package, and the errors rpm reported.
type FilesAndErrors = (indexmap::IndexMap<String, Vec<String>>, Vec<String>);

/// Separates query-format fields: never part of a name or version.
const SEP: &str = "_|-";

impl Rpm {
    /// The database of the system rooted at `root` (rpm's `--root`).
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Rpm {
            root: Some(root.into()),
        }
    }

    /// The table's constructor: the host's database.
    pub fn boxed() -> Box<dyn LowPkg> {
        Box::new(Rpm::default())
    }

    /// `rpm` with the root option.
    pub fn rpm(&self) -> Vec<String> {
        let mut cmd = argv(["rpm"]);
        if let Some(root) = &self.root {
            cmd.push("--root".into());
            cmd.push(root.display().to_string());
        }
        cmd
    }

    /// Installed packages with full `[epoch:]version-release` versions, for
    /// the dnf/yum provider (one `rpm -qa`).
    pub fn packages_full(&self) -> PkgResult<PkgVersions> {
        let mut cmd = self.rpm();
        cmd.extend(argv([
            "-qa",
            "--queryformat",
            &format!("%{{NAME}}{SEP}%{{EPOCH}}{SEP}%{{VERSION}}{SEP}%{{RELEASE}}\\n"),
        ]));
        let out = run(&cmd, &[])?;
        if !out.success() {
            return Err(PkgError::failed("rpm -qa failed", out.message()));
        }
        let mut ret = PkgVersions::new();
        for line in out.stdout.lines() {
            let cols: Vec<&str> = line.split(SEP).collect();
            if cols.len() != 4 {
                continue;
            }
            let epoch = if cols[1] == "(none)" || cols[1] == "0" {
                String::new()
            } else {
                format!("{}:", cols[1])
            };
            ret.entry(cols[0].to_string())
                .or_default()
                .push(format!("{epoch}{}-{}", cols[2], cols[3]));
        }
        ret.sort_keys();
        Ok(ret)
    }

    /// name -> files, one rpm query for all `names` (all packages when empty).
    fn files_by_package(&self, names: &[String]) -> PkgResult<FilesAndErrors> {
        let mut cmd = self.rpm();
        cmd.push(if names.is_empty() { "-qa" } else { "-q" }.into());
        cmd.push("--queryformat".into());
        cmd.push(format!("[%{{=NAME}}{SEP}%{{FILENAMES}}\\n]"));
        cmd.extend(names.iter().cloned());
        let out = run(&cmd, &[])?;
        let mut files: indexmap::IndexMap<String, Vec<String>> = indexmap::IndexMap::new();
        let mut errors = Vec::new();
        for line in out.stdout.lines() {
            match line.split_once(SEP) {
                Some((name, file)) if !file.is_empty() && file != "(none)" => {
                    files
                        .entry(name.to_string())
                        .or_default()
                        .push(file.to_string());
                }
                Some((name, _)) => {
                    files.entry(name.to_string()).or_default();
                }
                None if line.contains("is not installed") => errors.push(line.trim().to_string()),
                None => {}
            }
        }
        Ok((files, errors))
    }
}

impl LowPkg for Rpm {
    fn name(&self) -> &'static str {
        "rpm"
    }

    fn list_pkgs(&self, names: &[String]) -> PkgResult<PkgVersions> {
        let mut cmd = self.rpm();
        cmd.push(if names.is_empty() { "-qa" } else { "-q" }.into());
        cmd.push("--queryformat".into());
        cmd.push(format!("%{{NAME}}{SEP}%{{VERSION}}\\n"));
        cmd.extend(names.iter().cloned());
        let out = run(&cmd, &[])?;
        let mut ret = PkgVersions::new();
        for line in out.stdout.lines() {
            if let Some((name, version)) = line.split_once(SEP) {
                ret.entry(name.to_string())
                    .or_default()
                    .push(version.to_string());
            }
        }
        ret.sort_keys();
        Ok(ret)
    }

    fn verify(&self, names: &[String]) -> PkgResult<Map> {
        let mut cmd = self.rpm();
        if names.is_empty() {
            cmd.push("-Va".into());
        } else {
            cmd.push("-V".into());
            cmd.extend(names.iter().cloned());
        }
        let out = run(&cmd, &[])?;
        // rpm -V exits 1 when something differs; only stderr means failure.
        if !out.success() && out.stdout.trim().is_empty() {
            return Err(PkgError::failed("rpm -V failed", out.message()));
        }
        let lines: String = out
            .stdout
            .lines()
            .filter(|l| !l.contains("is not installed"))
            .map(|l| format!("{l}\n"))
            .collect();
        Ok(parse_verify_output(&lines))
    }

    fn file_list(&self, names: &[String]) -> PkgResult<Map> {
        let (files, errors) = self.files_by_package(names)?;
        let mut all: Vec<String> = files.into_values().flatten().collect();
        all.sort();
        all.dedup();
        let mut m = Map::new();
        m.insert("errors".into(), json!(errors));
        m.insert("files".into(), json!(all));
        Ok(m)
    }

    fn file_dict(&self, names: &[String]) -> PkgResult<Map> {
        let (files, errors) = self.files_by_package(names)?;
        let mut packages = Map::new();
        for (name, list) in files {
            packages.insert(name, json!(list));
        }
        let mut m = Map::new();
        m.insert("errors".into(), json!(errors));
        m.insert("packages".into(), Value::Object(packages));
        Ok(m)
    }

    fn bin_pkg_info(&self, path: &str) -> PkgResult<Map> {
        let mut cmd = self.rpm();
        cmd.extend(argv([
            "-qp",
            "--nosignature",
            "--nodigest",
            "--queryformat",
            &format!("%{{NAME}}{SEP}%{{EPOCH}}{SEP}%{{VERSION}}{SEP}%{{RELEASE}}{SEP}%{{ARCH}}"),
            path,
        ]));
        let out = run(&cmd, &[])?;
        let cols: Vec<&str> = out.stdout.trim().split(SEP).collect();
        if !out.success() || cols.len() != 5 {
            return Err(PkgError::failed(
                format!("{path} is not a valid .rpm package"),
                out.message(),
            ));
        }
        let epoch = if cols[1] == "(none)" || cols[1] == "0" {
            String::new()
        } else {
            format!("{}:", cols[1])
        };
        let mut m = Map::new();
        m.insert("name".into(), json!(cols[0]));
        m.insert(
            "version".into(),
            json!(format!("{epoch}{}-{}", cols[2], cols[3])),
        );
        m.insert("arch".into(), json!(cols[4]));
        Ok(m)
    }
}
