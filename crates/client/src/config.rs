//! The master's configuration: Salt's key names and defaults, layered
//! built-in defaults < `<config_dir>/master` (YAML) < `master.d/*.conf` <
//! `HALITE_*` environment < command-line flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Yaml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// Every master option halite reads (names as in Salt's master config).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MasterConfig {
    /// Address both sockets bind to.
    pub interface: String,
    /// PUB socket port (publications).
    pub publish_port: u16,
    /// ROUTER socket port (auth, returns, events).
    pub ret_port: u16,
    /// Where the master's key and the minion keys live.
    pub pki_dir: PathBuf,
    /// Where the job cache (SQLite) and the CLI's root key live.
    pub cachedir: PathBuf,
    /// Where the local CLI / event-bus socket lives.
    pub sock_dir: PathBuf,
    /// Accept every new minion key without `halite-key -a`.
    pub auto_accept: bool,
    /// Hours a job stays in the job cache.
    pub keep_jobs: u64,
    /// Default `halite` timeout in seconds.
    pub timeout: u64,
    /// Seconds `halite` waits for `saltutil.find_job` answers when `timeout`
    /// ran out: minions still running the job are waited for again.
    pub gather_job_timeout: u64,
    /// `trace`, `debug`, `info`, `warning`, `error`, `critical`, `quiet`.
    pub log_level: String,
    /// Log file; empty logs to stderr.
    pub log_file: String,
    /// Named compound targets for `-N`.
    pub nodegroups: BTreeMap<String, serde_json::Value>,
    /// Tokio worker threads.
    pub worker_threads: usize,
    /// Seconds between checks that the key directories changed (so
    /// `halite-key` run while the master is down still takes effect).
    pub key_rescan_interval: u64,
    /// saltenv -> directories: the state tree the master compiles and serves.
    pub file_roots: BTreeMap<String, Vec<PathBuf>>,
    /// saltenv -> directories: the pillar tree (with its own top.sls).
    pub pillar_roots: BTreeMap<String, Vec<PathBuf>>,
    /// Bytes per fileserver chunk sent to a minion.
    pub file_buffer_size: usize,
    /// Seconds a render-time call on a minion may take before the compile
    /// of that minion's job fails.
    pub render_call_timeout: u64,
    /// Seconds after which a render-time call with no answer is sent
    /// again (same number; a minion that keeps its answers never runs it
    /// twice), until `render_call_timeout`. Salt's key and default, which
    /// Salt's minion applies to its requests: a lost message costs this
    /// long, not the whole `render_call_timeout`. At least 1.
    pub request_channel_timeout: u64,
    /// Seconds between rotations of the publish key (Salt's
    /// `publish_session`): a publication captured under an old key cannot
    /// be opened once its epoch is retired. 0 never rotates on a schedule.
    pub publish_session: u64,
    /// Most keys waiting in `minions_pre` (halite's own; Salt has no cap).
    /// Hellos from new ids beyond it are refused with a log line until
    /// keys are accepted, rejected or deleted. 0: no cap.
    pub max_pending_keys: usize,
    /// Key files (new pending keys, denied keys) written per second at
    /// most, overall; the rest of a flood is dropped. 0: no limit.
    pub pending_key_rate: u32,
    /// Hellos handled per second at most, overall. 0: no limit.
    pub hello_rate: u32,
    /// Hellos handled per second at most from one connection (a swarm
    /// carries many identities on one). 0: no limit.
    pub hello_rate_per_peer: u32,
    /// Replies the master prepares at once (compiled bundles, file chunks
    /// read), from the start of their work until their frame is handed to
    /// the socket: bounds the master's memory during a fleet highstate
    /// (halite's own; Salt's minions compile their own). 0 is read as 1.
    pub max_bundles_in_flight: usize,
    /// Bundles whose encoding is larger than this many bytes travel
    /// zstd-compressed to minions that read packed bundles (halite's own).
    pub bundle_compress_threshold: usize,
    /// The soft open-file limit (`ulimit -n`) the master raises itself to
    /// at start, capped by the hard limit (Salt's key and default): each
    /// minion holds two connections, so 1,024 would cap a fleet at ~500.
    pub max_open_files: u64,
    /// The directory the configuration was read from (Salt's opts carry
    /// it: the gpg renderer's default `gpg_keydir` is `<config_dir>/gpgkeys`).
    /// Set by [`MasterConfig::load`], never read from a file.
    #[serde(skip_deserializing)]
    pub config_dir: PathBuf,
    /// Everything else, passed to the renderer as `opts` (Salt's keys).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Default for MasterConfig {
    fn default() -> Self {
        Self {
            interface: "0.0.0.0".into(),
            publish_port: 4505,
            ret_port: 4506,
            pki_dir: "/etc/halite/pki/master".into(),
            cachedir: "/var/cache/halite/master".into(),
            sock_dir: "/var/run/halite/master".into(),
            auto_accept: false,
            keep_jobs: 24,
            timeout: 5,
            gather_job_timeout: 10,
            log_level: "warning".into(),
            log_file: "/var/log/halite/master".into(),
            nodegroups: BTreeMap::new(),
            worker_threads: 2,
            key_rescan_interval: 1,
            file_roots: BTreeMap::from([("base".into(), vec!["/srv/salt".into()])]),
            pillar_roots: BTreeMap::from([("base".into(), vec!["/srv/pillar".into()])]),
            file_buffer_size: 1_048_576,
            render_call_timeout: 120,
            request_channel_timeout: 60,
            publish_session: 86400,
            max_pending_keys: 1000,
            pending_key_rate: 100,
            hello_rate: 5000,
            hello_rate_per_peer: 2000,
            max_bundles_in_flight: 64,
            bundle_compress_threshold: 32 * 1024,
            max_open_files: 100_000,
            config_dir: DEFAULT_CONFIG_DIR.into(),
            extra: serde_json::Map::new(),
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config value is wrong (the text says which and how to fix it).
    #[error("invalid configuration: {0}; fix the key named above in the config file, master.d/*.conf or HALITE_* variables")]
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

/// The layered providers for `<config_dir>/<name>`: file, `<name>.d/*.conf`, env.
pub fn layered(
    config_dir: &Path,
    name: &str,
    defaults: impl Serialize,
) -> Result<Figment, ConfigError> {
    let mut fig = Figment::from(Serialized::defaults(defaults));
    let main = config_dir.join(name);
    if main.is_file() {
        fig = fig.merge(Yaml::file(&main));
    }
    let dropins = config_dir.join(format!("{name}.d"));
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
    Ok(fig.merge(Env::prefixed("HALITE_").lowercase(true)))
}

impl MasterConfig {
    /// Loads the configuration from `config_dir`, then applies `overrides`
    /// (the command-line flags, as a partial map).
    pub fn load(
        config_dir: &Path,
        overrides: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, ConfigError> {
        let mut cfg: Self = layered(config_dir, "master", MasterConfig::default())?
            .merge(Serialized::defaults(overrides))
            .extract()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        // Where it was read from, whatever a file says (as Salt's opts).
        if cfg.extra.remove("config_dir").is_some() {
            tracing::warn!(dir = %config_dir.display(), "config_dir in the master config is ignored: it is the directory the config is read from (-c)");
        }
        cfg.config_dir = config_dir.to_path_buf();
        Ok(cfg)
    }

    /// The local socket the CLI and event-bus clients connect to.
    pub fn local_socket(&self) -> PathBuf {
        self.sock_dir.join("master.sock")
    }
    /// The key file that authorises local clients (root-only).
    pub fn root_key_path(&self) -> PathBuf {
        self.cachedir.join(".root_key")
    }
    /// The options templates see as `opts` while the master compiles for a
    /// minion: every key, Salt-style.
    pub fn opts(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
    /// The SQLite job cache.
    pub fn job_cache_path(&self) -> PathBuf {
        self.cachedir.join("jobs.sqlite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The master compiles states and pillar for its minions: its
    /// `renderer` option (a file's default pipeline) reaches the
    /// templates' `opts`, which the renderer reads.
    #[test]
    fn the_renderer_option_reaches_the_compile_opts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("master"), "renderer: jinja|yamlex\n").unwrap();
        let cfg = MasterConfig::load(dir.path(), &serde_json::Map::new()).unwrap();
        assert_eq!(cfg.opts()["renderer"], "jinja|yamlex");
    }

    #[test]
    fn layers_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("master"),
            "publish_port: 5505\nret_port: 5506\nauto_accept: True\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("master.d")).unwrap();
        std::fs::write(
            dir.path().join("master.d/10-ports.conf"),
            "ret_port: 6506\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("master.d/ignored.txt"), "ret_port: 1\n").unwrap();
        let mut flags = serde_json::Map::new();
        flags.insert("log_level".into(), "debug".into());
        let cfg = MasterConfig::load(dir.path(), &flags).unwrap();
        assert_eq!(cfg.publish_port, 5505);
        assert_eq!(cfg.ret_port, 6506);
        assert!(cfg.auto_accept);
        assert_eq!(cfg.log_level, "debug");
        assert_eq!(cfg.keep_jobs, 24);
    }

    #[test]
    fn config_dir_is_where_the_config_was_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("master"), "config_dir: /elsewhere\n").unwrap();
        let cfg = MasterConfig::load(dir.path(), &serde_json::Map::new()).unwrap();
        assert_eq!(cfg.config_dir, dir.path());
        assert!(!cfg.extra.contains_key("config_dir"), "{:?}", cfg.extra);
        assert_eq!(
            cfg.opts()["config_dir"],
            serde_json::Value::from(dir.path().display().to_string())
        );
    }

    #[test]
    fn a_bad_value_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("master"), "publish_port: lots\n").unwrap();
        let err = MasterConfig::load(dir.path(), &serde_json::Map::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("publish_port"), "{err}");
    }
}
