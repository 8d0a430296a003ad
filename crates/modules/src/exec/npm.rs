//! Salt's `npm` execution module: packages installed, uninstalled and
//! listed by the `npm` CLI, in a project directory (`dir`) or globally,
//! as another user (`runas`), with extra environment (`env`, where
//! `npm_config_*` variables set any npm option, `npm_config_offline`
//! included), and npm's cache listed, cleaned and located.

use halite_state::{CmdOptions, Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "npm",
    functions: &[
        ExecFunction::new("install", install_fn),
        ExecFunction::new("uninstall", uninstall_fn),
        ExecFunction::new("list", list_fn),
        ExecFunction::new("cache_clean", cache_clean_fn),
        ExecFunction::new("cache_list", cache_list_fn),
        ExecFunction::new("cache_path", cache_path_fn),
    ],
};

/// Where and as whom npm runs: Salt's `dir`, `runas` and `env`.
#[derive(Debug, Clone, Default)]
pub struct Npm {
    /// The project directory; `None` works on the global packages.
    pub dir: Option<String>,
    /// The user to run npm as.
    pub runas: Option<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
}

/// A finished npm command.
struct Ran {
    retcode: i32,
    stdout: String,
    stderr: String,
}

impl Npm {
    /// Runs `npm <words>` in `dir` (or `cwd`), as `runas`, with `env`;
    /// Salt also sets `SUDO_UID` to the user's uid so npm does not drop
    /// privileges to the wrong user.
    fn run(&self, words: &[String], cwd: Option<String>) -> Result<Ran, ExecError> {
        let npm = crate::exec::cmd::which("npm").ok_or_else(|| {
            ExecError::Execution(
                "npm is not installed: install Node.js with npm (or the npm package)".into(),
            )
        })?;
        let mut env = self.env.clone();
        if let Some(user) = &self.runas {
            if let Ok(Some(u)) = nix::unistd::User::from_name(user) {
                env.push(("SUDO_UID".into(), u.uid.to_string()));
                env.push(("SUDO_USER".into(), String::new()));
            }
        }
        let cmd = std::iter::once(npm.as_str())
            .chain(words.iter().map(String::as_str))
            .map(crate::host::shell_quote)
            .collect::<Vec<_>>()
            .join(" ");
        let opts = CmdOptions {
            cwd,
            runas: self.runas.clone(),
            env,
            ..CmdOptions::default()
        };
        tracing::debug!(%cmd, "running npm");
        let out = crate::command::run_command(&cmd, &opts)
            .map_err(|e| ExecError::Execution(format!("Unable to run {cmd}: {e}")))?;
        Ok(Ran {
            retcode: out.retcode,
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }

    /// Salt's `npm.install` of `pkgs` (none: the project's own
    /// dependencies, `npm install` in `dir`): npm's JSON report, or its
    /// text when that is not JSON. `dry_run` only says what would change.
    ///
    /// Salt passes `--silent`, which makes npm 7 and later print nothing
    /// at all (so Salt's `bootstrap` can never tell what happened);
    /// halite keeps npm quiet with `--loglevel=error` instead, which
    /// still prints the JSON report.
    pub fn install(
        &self,
        pkgs: &[String],
        registry: Option<&str>,
        dry_run: bool,
        silent: bool,
    ) -> Result<Value, ExecError> {
        let mut words: Vec<String> = vec!["install".into(), "--json".into()];
        if silent {
            words.push("--loglevel=error".into());
        }
        let cwd = match &self.dir {
            Some(d) => d.clone(),
            None => {
                words.push("--global".into());
                std::env::temp_dir().to_string_lossy().into_owned()
            }
        };
        if let Some(r) = registry {
            words.push(format!("--registry={r}"));
        }
        if dry_run {
            words.push("--dry-run".into());
        }
        words.extend(pkgs.iter().cloned());
        let out = self.run(&words, Some(cwd))?;
        if out.retcode != 0 {
            return Err(ExecError::Execution(if out.stderr.is_empty() {
                out.stdout
            } else {
                out.stderr
            }));
        }
        let text = if out.stdout.is_empty() {
            out.stderr
        } else {
            out.stdout
        };
        Ok(find_json(&text).unwrap_or(Value::from(text)))
    }

    /// Salt's `npm.uninstall`: whether npm succeeded.
    pub fn uninstall(&self, pkg: &str) -> Result<bool, ExecError> {
        let mut words: Vec<String> = vec!["uninstall".into(), pkg.into()];
        if self.dir.is_none() {
            words.push("--global".into());
        }
        let out = self.run(&words, self.dir.clone())?;
        if out.retcode != 0 {
            tracing::error!("npm uninstall {pkg}: {}", out.stderr);
        }
        Ok(out.retcode == 0)
    }

    /// Salt's `npm.list`: the `dependencies` of `npm list --json`.
    pub fn list(&self, pkg: Option<&str>, depth: Option<i64>) -> Result<Map, ExecError> {
        let mut words: Vec<String> = vec!["list".into(), "--json".into(), "--silent".into()];
        if self.dir.is_none() {
            words.push("--global".into());
        }
        if let Some(d) = depth {
            words.push(format!("--depth={d}"));
        }
        if let Some(p) = pkg {
            words.push(p.into());
        }
        let out = self.run(&words, self.dir.clone())?;
        if out.retcode != 0 && !out.stderr.is_empty() {
            return Err(ExecError::Execution(out.stderr));
        }
        let parsed: Value = serde_json::from_str(&out.stdout).map_err(|e| {
            ExecError::Execution(format!("npm list did not print JSON ({e}): {}", out.stdout))
        })?;
        Ok(parsed
            .get("dependencies")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default())
    }
}

/// Salt's `salt.utils.json.find_json`: the JSON document in npm's output,
/// after any lines of text before it.
pub fn find_json(text: &str) -> Option<Value> {
    let lines: Vec<&str> = text.lines().collect();
    (0..lines.len())
        .filter(|&i| lines[i].starts_with('{') || lines[i].starts_with('['))
        .find_map(|i| serde_json::from_str(&lines[i..].join("\n")).ok())
}

/// `dir`, `runas`, `env` of an execution call, at their positions in
/// the function's Python signature (`dir` absent from the cache ones).
fn npm_of(args: &Args, dir: Option<usize>, runas: usize, env: usize) -> Result<Npm, ExecError> {
    Ok(Npm {
        dir: dir.and_then(|i| args.get_str(i, "dir")),
        runas: args.get_str(runas, "runas"),
        env: crate::exec::cmd::env_pairs(args.get(env, "env")).map_err(ExecError::Invocation)?,
    })
}

/// `npm.install [pkg] [pkgs=[...]] [dir] [runas] [registry] [env] [dry_run] [silent]`.
fn install_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let npm = npm_of(args, Some(2), 3, 5)?;
    let pkgs: Vec<String> = match (args.get_str(0, "pkg"), args.get(1, "pkgs")) {
        (Some(p), _) => vec![p],
        (None, Some(Value::Array(items))) => items
            .iter()
            .filter_map(crate::exec::user::scalar_text)
            .collect(),
        (None, Some(v)) => crate::exec::user::scalar_text(v).into_iter().collect(),
        (None, None) => Vec::new(),
    };
    npm.install(
        &pkgs,
        args.get_str(4, "registry").as_deref(),
        // test=True only asks npm what it would do.
        args.get_bool(6, "dry_run", false) || host.test_mode(),
        args.get_bool(7, "silent", true),
    )
}

/// `npm.uninstall <pkg> [dir] [runas] [env]`.
fn uninstall_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let pkg = args.require_str(0, "pkg", "uninstall")?;
    let npm = npm_of(args, Some(1), 2, 3)?;
    if host.test_mode() {
        return Ok(Value::from(format!(
            "test=True: would run npm uninstall {pkg}"
        )));
    }
    Ok(Value::Bool(npm.uninstall(&pkg)?))
}

/// `npm.list [pkg] [dir] [runas] [env] [depth]`.
fn list_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let npm = npm_of(args, Some(1), 2, 3)?;
    let depth = match args.get(4, "depth") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64().map(|f| f as i64),
        Some(other) => {
            return Err(ExecError::Invocation(format!(
                "Error: depth {} must be a number",
                halite_salt_rules::pyfmt::python_str(other)
            )))
        }
    };
    Ok(Value::Object(
        npm.list(args.get_str(0, "pkg").as_deref(), depth)?,
    ))
}

/// `npm.cache_clean [path] [runas] [env] [force]`.
fn cache_clean_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let npm = npm_of(args, None, 1, 2)?;
    if host.test_mode() {
        return Ok(Value::from("test=True: would run npm cache clean"));
    }
    let mut words: Vec<String> = vec!["cache".into(), "clean".into()];
    words.extend(args.get_str(0, "path"));
    if args.get_bool(3, "force", false) {
        words.push("--force".into());
    }
    let out = npm.run(&words, None)?;
    if out.retcode != 0 {
        tracing::error!("npm cache clean: {}", out.stderr);
    }
    Ok(Value::Bool(out.retcode == 0))
}

/// `npm.cache_list [path] [runas] [env]`.
fn cache_list_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let npm = npm_of(args, None, 1, 2)?;
    let mut words: Vec<String> = vec!["cache".into(), "ls".into()];
    words.extend(args.get_str(0, "path"));
    let out = npm.run(&words, None)?;
    if out.retcode != 0 && !out.stderr.is_empty() {
        return Err(ExecError::Execution(out.stderr));
    }
    Ok(Value::from(out.stdout))
}

/// `npm.cache_path [runas] [env]`.
fn cache_path_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let npm = npm_of(args, None, 0, 1)?;
    let out = npm.run(&["config".into(), "get".into(), "cache".into()], None)?;
    Ok(Value::from(if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_found_after_text() {
        assert_eq!(
            find_json("add x 1.0.0\n{\n  \"added\": 1\n}"),
            Some(json!({"added": 1}))
        );
        assert_eq!(find_json(""), None);
        assert_eq!(find_json("no json here"), None);
    }
}
