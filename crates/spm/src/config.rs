//! The SPM config file: `<config dir>/spm` (plus `spm.d/*.conf`), YAML with
//! Salt's key names, and the defaults that apply when a key is absent.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Result, SpmError};

/// The config dir used when `-c` is not given.
pub const DEFAULT_CONFIG_DIR: &str = "/etc/halite";

/// Every path and switch SPM reads from its config file. Key names are
/// Salt's (`DEFAULT_SPM_OPTS` in `salt/config/__init__.py`) so an existing
/// `/etc/salt/spm` works unchanged; `conf_path` is halite's own (Salt
/// hard-codes its config dir for `-conf` packages).
#[derive(Debug, Clone)]
pub struct SpmConfig {
    /// The `-c` directory the file was read from.
    pub config_dir: PathBuf,
    /// Where formula files (`<tld>/...`, `_modules/...`) are installed: a file root.
    pub formula_path: PathBuf,
    /// Where `pillar.example` lands as `<name>.sls`.
    pub pillar_path: PathBuf,
    /// Where `*-reactor` packages are installed.
    pub reactor_path: PathBuf,
    /// Where `*-conf` packages are installed (halite's config dir by default).
    pub conf_path: PathBuf,
    /// Where files tagged `c| d| g| l| r|` (and README/LICENSE) go.
    pub spm_share_dir: PathBuf,
    /// The repository list (`<spm_repos_config>.d/*.repo` are read too).
    pub spm_repos_config: PathBuf,
    /// Downloaded repository metadata and packages.
    pub spm_cache_dir: PathBuf,
    /// Where `build` writes `.spm` files.
    pub spm_build_dir: PathBuf,
    /// Names left out of a build wherever they appear (`.git`, ...).
    pub spm_build_exclude: Vec<String>,
    /// The SQLite package database.
    pub spm_db: PathBuf,
    /// Owner given to installed files; `None` keeps the running user.
    pub spm_uid: Option<u32>,
    /// Group given to installed files; `None` keeps the running group.
    pub spm_gid: Option<u32>,
    /// The default renderer of pre/post states when a FORMULA names none.
    pub renderer: String,
}

/// The keys as they appear in the file; absent ones take the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SpmConfigFile {
    formula_path: Option<PathBuf>,
    pillar_path: Option<PathBuf>,
    reactor_path: Option<PathBuf>,
    conf_path: Option<PathBuf>,
    spm_share_dir: Option<PathBuf>,
    spm_repos_config: Option<PathBuf>,
    spm_cache_dir: Option<PathBuf>,
    spm_build_dir: Option<PathBuf>,
    spm_build_exclude: Option<Vec<String>>,
    spm_db: Option<PathBuf>,
    spm_uid: Option<u32>,
    spm_gid: Option<u32>,
    renderer: Option<String>,
}

impl SpmConfigFile {
    /// Keys set in `later` win over the ones already here.
    fn overlay(&mut self, later: SpmConfigFile) {
        macro_rules! take {
            ($($field:ident),*) => {$(if later.$field.is_some() { self.$field = later.$field; })*};
        }
        take!(
            formula_path,
            pillar_path,
            reactor_path,
            conf_path,
            spm_share_dir,
            spm_repos_config,
            spm_cache_dir,
            spm_build_dir,
            spm_build_exclude,
            spm_db,
            spm_uid,
            spm_gid,
            renderer
        );
    }
}

impl SpmConfig {
    /// Salt's defaults, re-rooted for halite, with `config_dir` as the config dir.
    pub fn defaults(config_dir: &Path) -> Self {
        SpmConfig::from_file(config_dir, SpmConfigFile::default())
    }

    /// Reads `<config_dir>/spm` and `<config_dir>/spm.d/*.conf` (in name
    /// order, later files win). Missing files mean defaults.
    pub fn load(config_dir: &Path) -> Result<Self> {
        let mut merged = SpmConfigFile::default();
        let main = config_dir.join("spm");
        if let Some(file) = read_config_file(&main)? {
            merged.overlay(file);
        }
        let include_dir = config_dir.join("spm.d");
        if include_dir.is_dir() {
            let mut includes: Vec<PathBuf> = std::fs::read_dir(&include_dir)
                .map_err(|e| SpmError::io("cannot list", &include_dir, e))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|ext| ext == "conf"))
                .collect();
            includes.sort();
            for path in includes {
                if let Some(file) = read_config_file(&path)? {
                    merged.overlay(file);
                }
            }
        }
        Ok(SpmConfig::from_file(config_dir, merged))
    }

    fn from_file(config_dir: &Path, file: SpmConfigFile) -> Self {
        let cache_dir = file
            .spm_cache_dir
            .unwrap_or_else(|| PathBuf::from("/var/cache/halite/spm"));
        SpmConfig {
            config_dir: config_dir.to_path_buf(),
            formula_path: file
                .formula_path
                .unwrap_or_else(|| PathBuf::from("/srv/spm/salt")),
            pillar_path: file
                .pillar_path
                .unwrap_or_else(|| PathBuf::from("/srv/spm/pillar")),
            reactor_path: file
                .reactor_path
                .unwrap_or_else(|| PathBuf::from("/srv/spm/reactor")),
            conf_path: file.conf_path.unwrap_or_else(|| config_dir.to_path_buf()),
            spm_share_dir: file
                .spm_share_dir
                .unwrap_or_else(|| PathBuf::from("/usr/share/halite/spm")),
            spm_repos_config: file
                .spm_repos_config
                .unwrap_or_else(|| config_dir.join("spm.repos")),
            spm_db: file.spm_db.unwrap_or_else(|| cache_dir.join("packages.db")),
            spm_cache_dir: cache_dir,
            spm_build_dir: file
                .spm_build_dir
                .unwrap_or_else(|| PathBuf::from("/srv/spm_build")),
            spm_build_exclude: file.spm_build_exclude.unwrap_or_else(|| {
                ["CVS", ".hg", ".git", ".svn"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            }),
            spm_uid: file.spm_uid,
            spm_gid: file.spm_gid,
            renderer: file.renderer.unwrap_or_else(|| "jinja|yaml".to_string()),
        }
    }

    /// The settings as template variables (`opts` in pre/post states).
    pub fn as_value(&self) -> serde_json::Value {
        serde_json::json!({
            "formula_path": self.formula_path,
            "pillar_path": self.pillar_path,
            "reactor_path": self.reactor_path,
            "conf_path": self.conf_path,
            "spm_share_dir": self.spm_share_dir,
            "spm_repos_config": self.spm_repos_config,
            "spm_cache_dir": self.spm_cache_dir,
            "spm_build_dir": self.spm_build_dir,
            "spm_build_exclude": self.spm_build_exclude,
            "spm_db": self.spm_db,
            "renderer": self.renderer,
        })
    }
}

/// One YAML config file; `None` when it does not exist.
fn read_config_file(path: &Path) -> Result<Option<SpmConfigFile>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SpmError::io("cannot read", path, e)),
    };
    let bad = |message: String| SpmError::Config {
        path: path.to_path_buf(),
        message,
    };
    let value = crate::yaml::load(&text).map_err(bad)?;
    if value.is_null() {
        return Ok(Some(SpmConfigFile::default()));
    }
    if !value.is_object() {
        return Err(bad(
            "the top level must be a mapping of key: value".to_string()
        ));
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salt_defaults_apply_when_the_file_is_absent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = SpmConfig::load(dir.path()).expect("load");
        assert_eq!(config.formula_path, PathBuf::from("/srv/spm/salt"));
        assert_eq!(config.pillar_path, PathBuf::from("/srv/spm/pillar"));
        assert_eq!(config.reactor_path, PathBuf::from("/srv/spm/reactor"));
        assert_eq!(config.spm_repos_config, dir.path().join("spm.repos"));
        assert_eq!(config.conf_path, dir.path());
        assert_eq!(
            config.spm_db,
            PathBuf::from("/var/cache/halite/spm/packages.db")
        );
        assert_eq!(config.spm_build_exclude, ["CVS", ".hg", ".git", ".svn"]);
    }

    #[test]
    fn spm_d_files_override_the_main_file_and_unknown_keys_are_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("spm"),
            "formula_path: /a\nspm_cache_dir: /cache\nfile_roots: {base: [/srv/salt]}\nspm_uid: 1000\n",
        )
        .expect("write");
        std::fs::create_dir(dir.path().join("spm.d")).expect("mkdir");
        std::fs::write(dir.path().join("spm.d/10-paths.conf"), "formula_path: /b\n")
            .expect("write");
        std::fs::write(dir.path().join("spm.d/ignored.txt"), "formula_path: /c\n").expect("write");
        let config = SpmConfig::load(dir.path()).expect("load");
        assert_eq!(config.formula_path, PathBuf::from("/b"));
        assert_eq!(
            config.spm_db,
            PathBuf::from("/cache/packages.db"),
            "spm_db follows spm_cache_dir"
        );
        assert_eq!(config.spm_uid, Some(1000));
    }

    #[test]
    fn a_config_that_is_not_a_mapping_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("spm"), "- just\n- a list\n").expect("write");
        let err = SpmConfig::load(dir.path()).expect_err("refused");
        assert!(
            err.to_string()
                .contains(&dir.path().join("spm").display().to_string()),
            "{err}"
        );
    }
}
