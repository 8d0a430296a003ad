//! Salt's `sysctl` execution module on Linux (`linux_sysctl`): kernel
//! parameters read and set with the real `sysctl` binary, and persisted
//! in a `key = value` config file (`/etc/sysctl.d/99-salt.conf` under
//! systemd, `/etc/sysctl.conf` otherwise, as Salt picks).

use std::path::Path;

use halite_state::{Map, Value};

use crate::exec::signature::{self, Signature};
use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "sysctl",
    functions: &[
        ExecFunction::new("default_config", default_config_fn),
        ExecFunction::new("show", show_fn),
        ExecFunction::new("get", get_fn),
        ExecFunction::new("assign", assign_fn),
        ExecFunction::new("persist", persist_fn),
    ],
};

/// The Python signatures of the functions, for Salt's argument errors.
const SIGNATURES: &[Signature] = &[
    Signature::new("default_config", &[], &[]),
    Signature::new("show", &[], &["config_file"]),
    Signature::new("get", &["name"], &[]),
    Signature::new("assign", &["name", "value"], &[]),
    Signature::new("persist", &["name", "value"], &["config"]),
];

/// Salt's `sysctl.default_config`: the drop-in file when systemd runs the
/// host (systemd reads `/etc/sysctl.d`), else `/etc/sysctl.conf`.
pub fn default_config() -> &'static str {
    if Path::new("/run/systemd/system").is_dir() {
        "/etc/sysctl.d/99-salt.conf"
    } else {
        "/etc/sysctl.conf"
    }
}

fn sysctl(args: &[&str]) -> Result<std::process::Output, ExecError> {
    tracing::debug!(?args, "running sysctl");
    std::process::Command::new("sysctl")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            ExecError::Execution(format!(
                "Command 'sysctl' cannot be run: {e}; install procps"
            ))
        })
}

/// The `key = value` pairs of a sysctl config file (Salt's `show
/// config_file=`); `None` when it does not exist (Salt returns `[]`).
pub fn show_config(config: &str) -> Result<Option<Map>, ExecError> {
    if !Path::new(config).exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(config)
        .map_err(|e| ExecError::Execution(format!("Could not open sysctl file {config}: {e}")))?;
    let mut ret = Map::new();
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with('#') {
            if let Some((key, value)) = line.split_once('=') {
                ret.insert(key.trim_end().to_string(), Value::from(value.trim_start()));
            }
        }
    }
    Ok(Some(ret))
}

/// Every running kernel parameter (`sysctl -a`).
pub fn show_running() -> Result<Map, ExecError> {
    let out = sysctl(&["-a"])?;
    let mut ret = Map::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((k, v)) = line.split_once(" = ") {
            ret.insert(k.to_string(), Value::from(v));
        }
    }
    Ok(ret)
}

/// Salt's `sysctl.get`: `sysctl -n name`, its error text included (Salt's
/// `cmd.run` merges stderr into the output), trailing whitespace stripped.
pub fn get(name: &str) -> Result<String, ExecError> {
    let out = sysctl(&["-n", name])?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(text.trim_end().to_string())
}

/// Salt's `sysctl.assign`: sets a running parameter with `sysctl -w` and
/// returns `{name: value}` as sysctl echoed it.
pub fn assign(name: &str, value: &str) -> Result<Map, ExecError> {
    let proc_path: String = name
        .chars()
        .map(|c| match c {
            '.' => '/',
            '/' => '.',
            c => c,
        })
        .collect();
    if !Path::new("/proc/sys").join(&proc_path).exists() {
        return Err(ExecError::Execution(format!(
            "sysctl {name} does not exist"
        )));
    }
    let out = sysctl(&["-w", &format!("{name}={value}")])?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    let pattern = format!(
        r"^{}\s+=\s+{}\n?$",
        regex::escape(name),
        regex::escape(value)
    );
    let matched = regex::Regex::new(&pattern)
        .map(|re| re.is_match(&stdout))
        .unwrap_or(false);
    if !matched || stderr.contains("Invalid argument") {
        let error = if !out.status.success() && !stderr.is_empty() {
            stderr
        } else {
            stdout
        };
        return Err(ExecError::Execution(format!("sysctl -w failed: {error}")));
    }
    let mut ret = Map::new();
    if let Some((k, v)) = stdout.split_once(" = ") {
        ret.insert(k.to_string(), Value::from(v));
    }
    Ok(ret)
}

/// Salt's `_sanitize_sysctl_value`: each run of whitespace as one tab.
fn sanitize(value: &str) -> String {
    static WS: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\s+").ok());
    match WS.as_ref() {
        Some(re) => re.replace_all(value, "\t").into_owned(),
        None => value.to_string(),
    }
}

/// Salt's `sysctl.persist`: writes `name = value` into `config` (made
/// with Salt's header when missing) and sets the running value; returns
/// `Updated` or `Already set`.
pub fn persist(name: &str, value: &str, config: Option<&str>) -> Result<&'static str, ExecError> {
    let config: &str = match config {
        Some(c) => c,
        None => default_config(),
    };
    let path = Path::new(config);
    if !path.is_file() {
        if let Some(dir) = path.parent().filter(|d| !d.exists()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                ExecError::Execution(format!("Could not create directory {}: {e}", dir.display()))
            })?;
        }
        std::fs::write(path, "#\n# Kernel sysctl configuration\n#\n").map_err(|e| {
            ExecError::Execution(format!("Could not write to file: {config} ({e})"))
        })?;
    }
    let data = std::fs::read_to_string(path)
        .map_err(|e| ExecError::Execution(format!("Could not read from file: {config} ({e})")))?;
    let mut nlines: Vec<String> = Vec::new();
    let mut edited = false;
    let wanted = sanitize(value);
    for line in data.split_inclusive('\n') {
        let Some((key, val)) = line.split_once('=') else {
            nlines.push(line.to_string());
            continue;
        };
        let key = key.trim();
        if key.starts_with('#') || key != name {
            nlines.push(line.to_string());
            continue;
        }
        if sanitize(val.trim()) == wanted {
            if sanitize(&get(name)?) != wanted {
                assign(name, value)?;
                return Ok("Updated");
            }
            return Ok("Already set");
        }
        nlines.push(format!("{name} = {value}\n"));
        edited = true;
    }
    if !edited {
        nlines.push(format!("{name} = {value}\n"));
    }
    std::fs::write(path, nlines.concat())
        .map_err(|e| ExecError::Execution(format!("Could not write to file: {config} ({e})")))?;
    assign(name, value)?;
    Ok("Updated")
}

fn default_config_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "default_config", args)?;
    Ok(Value::from(default_config()))
}

fn show_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "show", args)?;
    match args
        .get_str(0, "config_file")
        .filter(|c| !c.is_empty() && c != "False")
    {
        Some(config) => Ok(show_config(&config)?
            .map(Value::Object)
            .unwrap_or_else(|| Value::Array(Vec::new()))),
        None => show_running().map(Value::Object),
    }
}

fn value_arg(args: &Args, i: usize, fun: &str) -> Result<String, ExecError> {
    args.get(i, "value").map(py_str).ok_or_else(|| {
        ExecError::Invocation(format!(
            "{fun}() missing 1 required positional argument: 'value'"
        ))
    })
}

fn get_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "get", args)?;
    get(&args.require_str(0, "name", "get")?).map(Value::from)
}

fn assign_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "assign", args)?;
    let name = args.require_str(0, "name", "assign")?;
    let value = value_arg(args, 1, "assign")?;
    assign(&name, &value).map(Value::Object)
}

fn persist_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "persist", args)?;
    let name = args.require_str(0, "name", "persist")?;
    let value = value_arg(args, 1, "persist")?;
    let config = args.get_str(2, "config");
    persist(&name, &value, config.as_deref()).map(Value::from)
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn sanitize_joins_whitespace_runs_with_tabs() {
        assert_eq!(sanitize("4096  87380\t6291456"), "4096\t87380\t6291456");
        assert_eq!(sanitize("1"), "1");
        assert_eq!(sanitize(" 1 "), "\t1\t");
    }
}
