//! Minion options for `halite-call`: Salt's key names and defaults, read
//! with figment (defaults < `<config_dir>/minion` and `minion.d/*.conf`
//! < `HALITE_*` environment < flags).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use figment::providers::{Env, Serialized};
use figment::Figment;
use serde_json::{json, Map, Value};

/// Salt's minion defaults that halite reads (paths moved to halite's).
pub fn minion_defaults() -> Value {
    json!({
        "master": "salt",
        "file_client": "remote",
        "file_roots": {"base": ["/srv/salt"]},
        "pillar_roots": {"base": ["/srv/pillar"]},
        "cachedir": "/var/cache/halite/minion",
        "pki_dir": "/etc/halite/pki/minion",
        "sock_dir": "/var/run/halite/minion",
        "log_level": "warning",
        "renderer": "jinja|yaml",
        "state_auto_order": true,
        "state_verbose": true,
        "state_output": "full",
        "state_output_profile": true,
        "state_output_pct": false,
        "failhard": false,
        "test": false,
        "grains": {},
        "grains_blacklist": [],
    })
}

/// Reads one YAML config file with Salt's YAML rules; a missing file is empty.
pub fn read_yaml_file(path: &Path) -> Result<Map<String, Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read config file {}", path.display()))
        }
    };
    match halite_render::yaml::load(&text)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("config file {} is not valid YAML", path.display()))?
    {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        _ => anyhow::bail!("config file {} must be a YAML mapping", path.display()),
    }
}

/// Loads the minion options from `config_dir` (`minion`, then
/// `minion.d/*.conf` in name order), the environment and `flags`.
pub fn load_minion_opts(config_dir: &Path, flags: Map<String, Value>) -> Result<Value> {
    let mut file = read_yaml_file(&config_dir.join("minion"))?;
    let dropins = config_dir.join("minion.d");
    if let Ok(rd) = std::fs::read_dir(&dropins) {
        let mut paths: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        paths.sort();
        for p in paths {
            file.extend(read_yaml_file(&p)?);
        }
    }
    let fig = Figment::new()
        .merge(Serialized::defaults(minion_defaults()))
        .merge(Serialized::globals(Value::Object(file)))
        .merge(Env::prefixed("HALITE_"))
        .merge(Serialized::globals(Value::Object(flags)));
    let mut opts: Value = fig.extract().context("invalid minion configuration")?;
    // Salt's `conf_file`: where `schedule.* offline=True` finds `minion.d/`.
    if let Value::Object(map) = &mut opts {
        map.entry("conf_file")
            .or_insert_with(|| Value::String(config_dir.join("minion").display().to_string()));
    }
    Ok(opts)
}
