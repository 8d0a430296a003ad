//! The minion's configuration: Salt's key names and defaults, layered
//! built-in defaults < `<config_dir>/minion` (YAML) < `minion.d/*.conf` <
//! `HALITE_*` environment < command-line flags. Keys halite does not
//! interpret stay in `extra` and reach the modules as `opts`.

use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Yaml};
use figment::Figment;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Every minion option halite reads (names as in Salt's minion config).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MinionConfig {
    /// The master(s): `host` or `host:port`, or a list: every one at once
    /// (`master_type: str`) or one at a time (`master_type: failover`).
    #[serde(deserialize_with = "one_or_many")]
    pub master: Vec<String>,
    /// How a list of masters is used (Salt's key): `str` (default, every
    /// master at once), `failover`, `disable` (no master).
    pub master_type: String,
    /// `master_type: failover` starts from a random master of the list.
    pub random_master: bool,
    /// `master_type: failover`: go back to the first master of the list
    /// as soon as it answers again.
    pub master_failback: bool,
    /// Seconds between checks that the first master is back
    /// (`master_failback`); 0: `master_alive_interval`.
    pub master_failback_interval: u64,
    /// The master's ROUTER port.
    pub master_port: u16,
    /// The master's PUB port.
    pub publish_port: u16,
    /// This minion's id; empty means the host's FQDN.
    pub id: String,
    /// Where the minion's keys live (`pki_dir`).
    pub pki_dir: PathBuf,
    /// Where it caches files and returns (`cachedir`).
    pub cachedir: PathBuf,
    /// Where its local sockets live (`sock_dir`).
    pub sock_dir: PathBuf,
    /// `log_level`: `debug`, `info`, `warning`, `error`...
    pub log_level: String,
    /// `log_file`: a path, or empty for standard error.
    pub log_file: String,
    /// The master key fingerprint to insist on (`halite-key -F master`).
    pub master_finger: String,
    /// Seconds between authentication attempts while the key is pending.
    pub acceptance_wait_time: u64,
    /// Seconds to wait for the master to answer a handshake.
    pub auth_timeout: u64,
    /// Milliseconds before the first reconnection attempt.
    pub recon_default: u64,
    /// Largest reconnection delay in milliseconds.
    pub recon_max: u64,
    /// Randomise the reconnection delay (jitter).
    pub recon_randomize: bool,
    /// Seconds between liveness pings to the master; three missed answers
    /// mean the master is gone and the minion reconnects (or fails over).
    pub master_alive_interval: u64,
    /// Jobs run at once; 0 or less: no limit.
    pub process_count_max: i64,
    /// Seconds a stopping minion (SIGTERM) waits for its running jobs
    /// before it abandons them with a failed return kept for the master
    /// (halite's own key: Salt's minion has no drain).
    pub shutdown_grace: u64,
    /// The soft open-file limit (`ulimit -n`) the minion raises itself to
    /// at start, capped by the hard limit (the master's key of Salt, taken
    /// by halite's minion too: its jobs run as threads of one process, and
    /// a swarm carries many identities in it).
    pub max_open_files: u64,
    /// Static grains merged over the detected ones.
    pub grains: Map<String, Value>,
    /// Everything else, passed to the modules as opts.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

impl Default for MinionConfig {
    fn default() -> Self {
        Self {
            master: vec!["salt".into()],
            master_type: "str".into(),
            random_master: false,
            master_failback: false,
            master_failback_interval: 0,
            master_port: 4506,
            publish_port: 4505,
            id: String::new(),
            pki_dir: "/etc/halite/pki/minion".into(),
            cachedir: "/var/cache/halite/minion".into(),
            sock_dir: "/var/run/halite/minion".into(),
            log_level: "warning".into(),
            log_file: "/var/log/halite/minion".into(),
            master_finger: String::new(),
            acceptance_wait_time: 10,
            auth_timeout: 5,
            recon_default: 1000,
            recon_max: 10000,
            recon_randomize: true,
            master_alive_interval: 30,
            process_count_max: -1,
            shutdown_grace: 30,
            max_open_files: 100_000,
            grains: Map::new(),
            extra: Map::new(),
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config value is wrong (the text says which and how to fix it).
    #[error("invalid minion configuration: {0}; fix the key named above in the config file, minion.d/*.conf or HALITE_* variables")]
    Invalid(String),
    /// A config directory could not be listed.
    #[error("cannot list {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}

/// The default config directory.
pub const DEFAULT_CONFIG_DIR: &str = "/etc/halite";

impl MinionConfig {
    /// Loads the configuration from `config_dir`, then applies `overrides`.
    pub fn load(config_dir: &Path, overrides: &Map<String, Value>) -> Result<Self, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(MinionConfig::default()));
        let main = config_dir.join("minion");
        if main.is_file() {
            fig = fig.merge(Yaml::file(&main));
        }
        let dropins = config_dir.join("minion.d");
        if dropins.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dropins)
                .map_err(|source| ConfigError::Io {
                    path: dropins.clone(),
                    source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect();
            files.sort();
            for f in files {
                fig = fig.merge(Yaml::file(f));
            }
        }
        let mut cfg: MinionConfig = fig
            .merge(Env::prefixed("HALITE_").lowercase(true))
            .merge(Serialized::defaults(overrides))
            .extract()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if cfg.id.is_empty() {
            cfg.id = default_id();
        }
        // Salt's `conf_file`: where `schedule.save` finds `minion.d/`.
        cfg.extra
            .entry("conf_file")
            .or_insert_with(|| Value::String(main.display().to_string()));
        Ok(cfg)
    }

    /// The opts the modules see: every key, Salt-style.
    pub fn opts(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The host's name, as Salt's default minion id (its FQDN when known).
pub fn default_id() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_may_be_one_or_many_and_extra_keys_survive() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("minion"),
            "master: [m1, m2]\nid: web1\nfile_roots: {base: [/srv/salt]}\n",
        )
        .unwrap();
        let cfg = MinionConfig::load(dir.path(), &Map::new()).unwrap();
        assert_eq!(cfg.master, ["m1", "m2"]);
        assert_eq!(cfg.id, "web1");
        assert!(cfg.extra.contains_key("file_roots"));
        assert_eq!(cfg.opts()["id"], "web1");
        std::fs::write(dir.path().join("minion"), "master: m3\n").unwrap();
        assert_eq!(
            MinionConfig::load(dir.path(), &Map::new()).unwrap().master,
            ["m3"]
        );
    }
}
