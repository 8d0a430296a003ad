//! Salt's `gem` execution module: Ruby gems installed, uninstalled and
//! listed by the `gem` CLI (`gem_bin` for another one), as another user
//! (`runas`). Salt 3008 no longer ships it; this follows Salt 3007's,
//! without its RVM/rbenv hand-off (`ruby` is accepted and ignored, with a
//! warning, when neither is used through `gem_bin`).
//!
//! Beyond Salt, a gem may be named by the path of a `.gem` file: it is
//! installed from that file with `--local` (no network), and the state
//! checks the name and version the file declares.

use std::collections::BTreeMap;

use halite_state::{CmdOptions, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "gem",
    functions: &[
        ExecFunction::new("install", install_fn),
        ExecFunction::new("uninstall", uninstall_fn),
        ExecFunction::new("list", list_fn),
        ExecFunction::new("update", update_fn),
        ExecFunction::new("sources_list", sources_list_fn),
    ],
};

/// Which `gem` and as whom: Salt's `gem_bin` and `runas`.
#[derive(Debug, Clone, Default)]
pub struct Gem {
    /// The `gem` binary (`gem` on `PATH` by default).
    pub gem_bin: Option<String>,
    /// The user to run it as.
    pub runas: Option<String>,
}

/// What `gem.install` may pass on: Salt's options.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// `--version <v>`.
    pub version: Option<String>,
    /// Keep the rdoc documentation (else `--no-document`).
    pub rdoc: bool,
    /// Keep the ri documentation (else `--no-document`).
    pub ri: bool,
    /// `--pre`.
    pub pre_releases: bool,
    /// `-p <proxy>`.
    pub proxy: Option<String>,
    /// `--source <url>`.
    pub source: Option<String>,
}

impl Gem {
    /// Salt's `_gem`: runs `gem <words>`; stdout, or the error text when
    /// it fails.
    fn run(&self, words: &[String]) -> Result<String, ExecError> {
        let bin = self.gem_bin.clone().unwrap_or_else(|| "gem".into());
        let resolved = crate::exec::cmd::which(&bin).ok_or_else(|| {
            ExecError::Execution(format!(
                "{bin} cannot be found: install Ruby (the ruby package) or set gem_bin"
            ))
        })?;
        let cmd = std::iter::once(resolved.as_str())
            .chain(words.iter().map(String::as_str))
            .map(crate::host::shell_quote)
            .collect::<Vec<_>>()
            .join(" ");
        let opts = CmdOptions {
            runas: self.runas.clone(),
            ..CmdOptions::default()
        };
        tracing::debug!(%cmd, "running gem");
        let out = crate::command::run_command(&cmd, &opts)
            .map_err(|e| ExecError::Execution(format!("Unable to run {cmd}: {e}")))?;
        if out.retcode == 0 {
            Ok(out.stdout)
        } else {
            Err(ExecError::Execution(if out.stderr.is_empty() {
                out.stdout
            } else {
                out.stderr
            }))
        }
    }

    /// Salt's `gem.install` of `gems` (names, or paths of `.gem` files,
    /// installed with `--local`): gem's output.
    pub fn install(&self, gems: &[String], opts: &InstallOptions) -> Result<String, ExecError> {
        let mut words: Vec<String> = vec!["install".into()];
        words.extend(gems.iter().cloned());
        if gems.iter().any(|g| is_gem_file(g)) {
            words.push("--local".into());
        }
        if let Some(v) = &opts.version {
            words.push("--version".into());
            words.push(v.clone());
        }
        if !opts.rdoc || !opts.ri {
            words.push("--no-document".into());
        }
        if opts.pre_releases {
            words.push("--pre".into());
        }
        if let Some(p) = &opts.proxy {
            words.push("-p".into());
            words.push(p.clone());
        }
        if let Some(s) = &opts.source {
            words.push("--source".into());
            words.push(s.clone());
        }
        self.run(&words)
    }

    /// Salt's `gem.uninstall`: every version, executables too (`-a -x`).
    pub fn uninstall(&self, gems: &[String]) -> Result<String, ExecError> {
        let mut words: Vec<String> = vec!["uninstall".into()];
        words.extend(gems.iter().cloned());
        words.push("-a".into());
        words.push("-x".into());
        self.run(&words)
    }

    /// Salt's `gem.list`: each gem (matching `prefix`) and its versions
    /// as `gem list` prints them (`default: 0.1.0` kept, as in Salt).
    pub fn list(&self, prefix: Option<&str>) -> Result<BTreeMap<String, Vec<String>>, ExecError> {
        let mut words: Vec<String> = vec!["list".into()];
        words.extend(prefix.filter(|p| !p.is_empty()).map(str::to_string));
        let out = self.run(&words)?;
        Ok(out.lines().filter_map(parse_list_line).collect())
    }

    /// The name and version a `.gem` file declares (`gem specification`).
    pub fn file_spec(&self, path: &str) -> Result<(String, String), ExecError> {
        let field = |f: &str| -> Result<String, ExecError> {
            let out = self.run(&["specification".into(), path.into(), f.into()])?;
            Ok(out
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("--- ")
                        .or_else(|| l.strip_prefix("version: "))
                        .map(str::trim)
                })
                .rfind(|v| !v.starts_with('!'))
                .unwrap_or_default()
                .to_string())
        };
        Ok((field("name")?, field("version")?))
    }
}

/// Whether a gem argument names a `.gem` file rather than a gem.
pub fn is_gem_file(name: &str) -> bool {
    name.ends_with(".gem") && (name.contains('/') || std::path::Path::new(name).is_file())
}

/// `name (1.0, default: 0.9)` -> (`name`, [`1.0`, `default: 0.9`]).
fn parse_list_line(line: &str) -> Option<(String, Vec<String>)> {
    let (name, rest) = line.split_once(" (")?;
    if name.contains(' ') {
        return None;
    }
    let versions = rest.strip_suffix(')')?;
    Some((
        name.to_string(),
        versions.split(", ").map(str::to_string).collect(),
    ))
}

/// Under `test=True` the functions that change gems say what they would
/// run (Salt runs them; halite's dispatch probe calls `gem.update` with
/// no arguments, which would update every gem of the host).
fn dry(host: &Host, what: &str) -> Option<Value> {
    host.test_mode()
        .then(|| Value::from(format!("test=True: would run gem {what}")))
}

/// `gems` as Salt takes it: a string split on whitespace, or a list.
fn gems_arg(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(crate::exec::user::scalar_text)
            .collect(),
        Some(v) => crate::exec::user::scalar_text(v)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    }
}

fn warn_ruby(args: &Args, i: usize) {
    if args.get_str(i, "ruby").is_some() {
        tracing::warn!("gem: ruby= is for RVM/rbenv, which halite does not drive; set gem_bin to that ruby's gem instead");
    }
}

/// `gem.install <gems> [ruby] [gem_bin] [runas] [version] [rdoc] [ri] [pre_releases] [proxy] [source]`.
fn install_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let gems = gems_arg(args.get(0, "gems"));
    if gems.is_empty() {
        return Err(ExecError::Invocation(
            "install() missing 1 required positional argument: 'gems'".into(),
        ));
    }
    if let Some(said) = dry(host, &format!("install {}", gems.join(" "))) {
        return Ok(said);
    }
    warn_ruby(args, 1);
    let gem = Gem {
        gem_bin: args.get_str(2, "gem_bin"),
        runas: args.get_str(3, "runas"),
    };
    let opts = InstallOptions {
        version: args.get_str(4, "version"),
        rdoc: args.get_bool(5, "rdoc", false),
        ri: args.get_bool(6, "ri", false),
        pre_releases: args.get_bool(7, "pre_releases", false),
        proxy: args.get_str(8, "proxy"),
        source: args.get_str(9, "source"),
    };
    Ok(Value::from(gem.install(&gems, &opts)?))
}

/// `gem.uninstall <gems> [ruby] [runas] [gem_bin]`.
fn uninstall_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let gems = gems_arg(args.get(0, "gems"));
    if gems.is_empty() {
        return Err(ExecError::Invocation(
            "uninstall() missing 1 required positional argument: 'gems'".into(),
        ));
    }
    if let Some(said) = dry(host, &format!("uninstall {}", gems.join(" "))) {
        return Ok(said);
    }
    warn_ruby(args, 1);
    let gem = Gem {
        runas: args.get_str(2, "runas"),
        gem_bin: args.get_str(3, "gem_bin"),
    };
    Ok(Value::from(gem.uninstall(&gems)?))
}

/// `gem.list [prefix] [ruby] [runas] [gem_bin]`.
fn list_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    warn_ruby(args, 1);
    let gem = Gem {
        runas: args.get_str(2, "runas"),
        gem_bin: args.get_str(3, "gem_bin"),
    };
    let listed = gem.list(args.get_str(0, "prefix").as_deref())?;
    Ok(Value::Object(
        listed
            .into_iter()
            .map(|(k, v)| (k, Value::Array(v.into_iter().map(Value::from).collect())))
            .collect(),
    ))
}

/// `gem.update <gems> [ruby] [runas] [gem_bin]`.
fn update_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let gems = gems_arg(args.get(0, "gems"));
    if gems.is_empty() {
        return Err(ExecError::Invocation(
            "update() missing 1 required positional argument: 'gems'".into(),
        ));
    }
    if let Some(said) = dry(host, &format!("update {}", gems.join(" "))) {
        return Ok(said);
    }
    warn_ruby(args, 1);
    let gem = Gem {
        runas: args.get_str(2, "runas"),
        gem_bin: args.get_str(3, "gem_bin"),
    };
    let mut words: Vec<String> = vec!["update".into()];
    words.extend(gems);
    Ok(Value::from(gem.run(&words)?))
}

/// `gem.sources_list [ruby] [runas] [gem_bin]`: the gem sources.
fn sources_list_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    warn_ruby(args, 0);
    let gem = Gem {
        runas: args.get_str(1, "runas"),
        gem_bin: args.get_str(2, "gem_bin"),
    };
    let out = gem.run(&["sources".into()])?;
    Ok(Value::Array(
        out.lines()
            .skip(2)
            .filter(|l| !l.trim().is_empty())
            .map(|l| Value::from(l.trim()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_lines_are_parsed_as_salt_does() {
        assert_eq!(
            parse_list_line("bigdecimal (default: 3.1.1)"),
            Some(("bigdecimal".into(), vec!["default: 3.1.1".into()]))
        );
        assert_eq!(
            parse_list_line("rake (13.0.6, 12.3.3)"),
            Some(("rake".into(), vec!["13.0.6".into(), "12.3.3".into()]))
        );
        assert_eq!(parse_list_line("*** LOCAL GEMS ***"), None);
    }
}
