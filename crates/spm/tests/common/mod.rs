//! Shared fixtures: a temp dir holding an SPM config whose every path points
//! inside it, formula trees written to disk, and snapshots of disk + db.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use halite_spm::states::{LocalStateRunner, StateRunOutcome};
use halite_spm::{PackageDb, SpmConfig};

/// A sandbox: `root` holds the config dir, every install path, the cache and the db.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub config: SpmConfig,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let config_dir = root.join("etc");
        fs::create_dir_all(&config_dir).expect("config dir");
        let spm = format!(
            "formula_path: {r}/srv/spm/salt\n\
             pillar_path: {r}/srv/spm/pillar\n\
             reactor_path: {r}/srv/spm/reactor\n\
             conf_path: {r}/etc/halite\n\
             spm_share_dir: {r}/share/spm\n\
             spm_cache_dir: {r}/cache\n\
             spm_db: {r}/cache/packages.db\n\
             spm_build_dir: {r}/build\n\
             spm_repos_config: {r}/etc/spm.repos\n",
            r = root.display()
        );
        fs::write(config_dir.join("spm"), spm).expect("spm config");
        let config = SpmConfig::load(&config_dir).expect("config loads");
        Sandbox { dir, config }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn config_dir(&self) -> PathBuf {
        self.root().join("etc")
    }

    pub fn db(&self) -> PackageDb {
        PackageDb::open(&self.config.spm_db).expect("db opens")
    }

    /// Every file, dir and link under the install roots with its content,
    /// plus every db row: equal snapshots mean nothing changed.
    pub fn snapshot(&self) -> String {
        let mut out = BTreeMap::new();
        for root in [
            &self.config.formula_path,
            &self.config.pillar_path,
            &self.config.reactor_path,
            &self.config.conf_path,
            &self.config.spm_share_dir,
        ] {
            collect(root, &mut out);
        }
        let mut text: String = out.into_iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        if self.config.spm_db.exists() {
            let db = self.db();
            for package in db.packages().expect("packages") {
                text.push_str(&format!(
                    "pkg {} {}-{}\n",
                    package.name, package.version, package.release
                ));
                for file in db.files(&package.name).expect("files").unwrap_or_default() {
                    text.push_str(&format!("  {} {}\n", file.path.display(), file.sha256));
                }
            }
        }
        text
    }
}

fn collect(path: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    let key = path.display().to_string();
    if meta.file_type().is_symlink() {
        out.insert(
            key,
            format!("-> {}", fs::read_link(path).expect("link").display()),
        );
    } else if meta.is_dir() {
        out.insert(key, "dir".into());
        for entry in fs::read_dir(path).expect("read dir") {
            collect(&entry.expect("entry").path(), out);
        }
    } else {
        out.insert(
            key,
            String::from_utf8_lossy(&fs::read(path).expect("read")).into_owned(),
        );
    }
}

/// Writes `files` (relative path -> content) under `dir`.
pub fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, content).expect("write");
    }
}

/// A formula dir `<parent>/<name>-formula` with a FORMULA and `files`.
pub fn formula_dir(parent: &Path, formula: &str, files: &[(&str, &str)]) -> PathBuf {
    let name = formula
        .lines()
        .find_map(|l| l.strip_prefix("name: "))
        .expect("FORMULA has a name line")
        .trim()
        .to_string();
    let dir = parent.join(format!("{name}-formula"));
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("FORMULA"), formula).expect("FORMULA");
    write_tree(&dir, files);
    dir
}

/// The FORMULA of a plain package called `name`.
pub fn simple_formula(name: &str, extra: &str) -> String {
    format!(
        "name: {name}\nos: Debian, RedHat\nos_family: Debian, RedHat\nversion: 201506\nrelease: 2\n\
         summary: The {name} formula\ndescription: Installs {name}\n{extra}"
    )
}

/// Builds a package for `name` (with `<name>/init.sls`) and returns its path.
pub fn build_simple(sandbox: &Sandbox, name: &str, extra: &str) -> PathBuf {
    let src = sandbox.root().join("src");
    let init = format!("{name}/init.sls");
    let dir = formula_dir(
        &src,
        &simple_formula(name, extra),
        &[(init.as_str(), "pkg: {}\n")],
    );
    halite_spm::build(
        &dir,
        &sandbox.config.spm_build_dir,
        &sandbox.config.spm_build_exclude,
    )
    .expect("build")
    .path
}

/// A state runner that records the SLS it is given and whether the
/// package's files were on disk at that moment; fails when told to.
pub struct RecordingRunner {
    pub calls: Mutex<Vec<(String, bool)>>,
    pub probe: PathBuf,
    pub fail: bool,
}

impl RecordingRunner {
    pub fn new(probe: PathBuf) -> Self {
        RecordingRunner {
            calls: Mutex::new(Vec::new()),
            probe,
            fail: false,
        }
    }
    pub fn calls(&self) -> Vec<(String, bool)> {
        self.calls.lock().expect("lock").clone()
    }
}

impl LocalStateRunner for RecordingRunner {
    fn apply(&self, sls_text: &str, _root: &Path) -> Result<StateRunOutcome, String> {
        self.calls
            .lock()
            .expect("lock")
            .push((sls_text.to_string(), self.probe.exists()));
        Ok(StateRunOutcome {
            success: !self.fail,
            summary: if self.fail {
                "cmd_|-boom_|-false_|-run: Command \"false\" run".into()
            } else {
                "1 state(s) succeeded".into()
            },
        })
    }
}

/// For installs without pre/post states.
pub fn no_states() -> RecordingRunner {
    RecordingRunner::new(PathBuf::from("/nonexistent"))
}
