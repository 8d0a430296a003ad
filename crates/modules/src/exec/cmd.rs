//! Salt's `cmd` execution module: run commands and scripts.

use std::path::Path;

use halite_state::{strip_salt_url, CmdOptions, CmdOutput, CmdTimeout, Map, StateEnv, Value};

use crate::command::{run_command, run_command_shown_as, shell_quote, shell_words};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "cmd",
    functions: &[
        ExecFunction::new("run", |a, h| run_fn("run", a, h)),
        ExecFunction::new("run_all", |a, h| run_fn("run_all", a, h)),
        ExecFunction::new("run_stdout", |a, h| run_fn("run_stdout", a, h)),
        ExecFunction::new("run_stderr", |a, h| run_fn("run_stderr", a, h)),
        ExecFunction::new("retcode", |a, h| run_fn("retcode", a, h)),
        ExecFunction::new("script", |a, h| script_fn("script", a, h)),
        ExecFunction::new("script_retcode", |a, h| script_fn("script_retcode", a, h)),
        ExecFunction::new("has_exec", |a, _| which_fn("has_exec", a)),
        ExecFunction::new("which", |a, _| which_fn("which", a)),
        ExecFunction::new("shell", |a, h| run_fn("shell", a, h)),
        ExecFunction::new("exec_code", exec_code_fn),
        ExecFunction::new("run_bg", run_bg_fn),
    ],
};

/// Reads `env` the ways Salt accepts it: a mapping, or a list of one-key mappings.
pub fn env_pairs(v: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    let str_of = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    };
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => Ok(m.iter().map(|(k, v)| (k.clone(), str_of(v))).collect()),
        Some(Value::Array(a)) => {
            let mut out = Vec::new();
            for item in a {
                match item {
                    Value::Object(m) => out.extend(m.iter().map(|(k, v)| (k.clone(), str_of(v)))),
                    _ => {
                        return Err("Invalidly-formatted 'env' parameter. See documentation.".into())
                    }
                }
            }
            Ok(out)
        }
        Some(_) => Err("Invalidly-formatted 'env' parameter. See documentation.".into()),
    }
}

/// Builds [`CmdOptions`] from `cmd.*` keyword arguments (`cwd`, `runas`,
/// `shell`, `env`, `stdin`, `python_shell`, `timeout`).
pub fn cmd_options(
    kwargs: &Map,
    grains: &Value,
    default_python_shell: bool,
) -> Result<CmdOptions, String> {
    let s = |k: &str| {
        kwargs.get(k).and_then(|v| {
            v.as_str()
                .map(String::from)
                .or_else(|| (!v.is_null()).then(|| v.to_string()))
        })
    };
    Ok(CmdOptions {
        cwd: s("cwd"),
        runas: s("runas"),
        shell: s("shell").or_else(|| {
            grains
                .get("shell")
                .and_then(Value::as_str)
                .map(String::from)
        }),
        env: env_pairs(kwargs.get("env"))?,
        stdin: s("stdin"),
        python_shell: kwargs
            .get("python_shell")
            .map(halite_state::truthy)
            .unwrap_or(default_python_shell),
        timeout: CmdTimeout::from_value(kwargs.get("timeout"))?,
    })
}

/// Applies `success_retcodes`: a listed non-zero code counts as success
/// (not for a command killed by its timeout: Salt returns before this).
pub fn apply_success_retcodes(out: &mut CmdOutput, kwargs: &Map) {
    if out.timed_out {
        return;
    }
    if let Some(codes) = kwargs.get("success_retcodes") {
        let codes: Vec<i64> = match codes {
            Value::Array(a) => a.iter().filter_map(Value::as_i64).collect(),
            v => v.as_i64().into_iter().collect(),
        };
        if codes.contains(&(out.retcode as i64)) {
            out.retcode = 0;
        }
    }
}

/// `cmd.run_all`'s return shape.
pub fn run_all_value(out: &CmdOutput) -> Value {
    let mut m = Map::new();
    if out.timed_out {
        // Salt builds the timed-out return in this order.
        m.insert("stdout".into(), Value::from(out.stdout.clone()));
        m.insert("stderr".into(), Value::from(out.stderr.clone()));
        m.insert("retcode".into(), Value::from(out.retcode));
        m.insert("pid".into(), Value::from(out.pid));
        return Value::Object(m);
    }
    m.insert("pid".into(), Value::from(out.pid));
    m.insert("retcode".into(), Value::from(out.retcode));
    m.insert("stdout".into(), Value::from(out.stdout.clone()));
    m.insert("stderr".into(), Value::from(out.stderr.clone()));
    Value::Object(m)
}

/// Runs `cmd` with `kwargs` the way `cmd.run_all` does.
pub fn run_all(cmd: &str, kwargs: &Map, grains: &Value) -> Result<CmdOutput, ExecError> {
    run_all_shown_as(cmd, None, kwargs, grains)
}

/// [`run_all`], naming the command `shown` if it times out.
fn run_all_shown_as(
    cmd: &str,
    shown: Option<&str>,
    kwargs: &Map,
    grains: &Value,
) -> Result<CmdOutput, ExecError> {
    let opts = cmd_options(kwargs, grains, true).map_err(ExecError::Invocation)?;
    if let Some(cwd) = &opts.cwd {
        if !Path::new(cwd).is_dir() {
            return Err(ExecError::Execution(format!(
                "Specified cwd '{cwd}' either not absolute or does not exist"
            )));
        }
    }
    let level = output_loglevel(kwargs);
    if level.is_some() {
        let runas = opts
            .runas
            .as_ref()
            .map(|u| format!(" as user '{u}'"))
            .unwrap_or_default();
        let cwd = opts
            .cwd
            .as_ref()
            .map(|d| format!(" in directory '{d}'"))
            .unwrap_or_default();
        tracing::info!("Executing command '{cmd}'{runas}{cwd}");
    }
    let mut out = run_command_shown_as(cmd, shown, &opts)
        .map_err(|e| ExecError::Execution(format!("Unable to run command '{cmd}': {e}")))?;
    apply_success_retcodes(&mut out, kwargs);
    match level {
        Some(tracing::Level::TRACE) => tracing::trace!("output: {}", out.stdout),
        Some(tracing::Level::DEBUG) => tracing::debug!("output: {}", out.stdout),
        Some(tracing::Level::INFO) => tracing::info!("output: {}", out.stdout),
        Some(tracing::Level::WARN) => tracing::warn!("output: {}", out.stdout),
        Some(_) => tracing::error!("output: {}", out.stdout),
        None => {}
    }
    Ok(out)
}

/// Salt's `output_loglevel=` of the `cmd` functions: the command is
/// logged at info and its output at this level (default `debug`, Salt's
/// cmdmod default); `quiet` logs neither (a command line holding a
/// password). Known gpg secrets are masked in every log line anyway
/// (`halite_logging::redact`).
fn output_loglevel(kwargs: &Map) -> Option<tracing::Level> {
    let level = kwargs
        .get("output_loglevel")
        .and_then(Value::as_str)
        .unwrap_or("debug");
    // Salt's level names (salt.log.setup.LOG_LEVELS); an unknown one is
    // info, as Salt falls back.
    match level.to_ascii_lowercase().as_str() {
        "quiet" => None,
        "all" | "garbage" | "trace" | "profile" => Some(tracing::Level::TRACE),
        "debug" => Some(tracing::Level::DEBUG),
        "warning" | "warn" => Some(tracing::Level::WARN),
        "error" | "critical" => Some(tracing::Level::ERROR),
        _ => Some(tracing::Level::INFO),
    }
}

/// Sets the job's retcode to the command's, as Salt's `cmd` functions do
/// (`ignore_retcode=True` keeps it 0). A command killed by its timeout
/// leaves it alone: Salt returns before setting it, so `salt-call` exits 0.
fn context_retcode(kwargs: &Map, out: &CmdOutput) {
    if out.timed_out {
        return;
    }
    let retcode = out.retcode;
    let ignore = kwargs
        .get("ignore_retcode")
        .is_some_and(halite_state::truthy);
    super::set_retcode(if ignore { 0 } else { retcode });
}

/// Caches a `salt://`, `http(s)://` or `ftp://` (or local) script, renders it when `template` is
/// set, and returns the local path to run.
pub fn prepare_script(
    host: &Host,
    source: &str,
    kwargs: &Map,
    saltenv: &str,
) -> Result<std::path::PathBuf, ExecError> {
    let path = match strip_salt_url(source) {
        Some((p, env)) => host
            .files
            .cache_file(p, env.unwrap_or(saltenv))
            .map_err(|e| ExecError::Execution(e.to_string()))?
            .ok_or_else(|| {
                ExecError::Execution(format!(
                    "Unable to cache script {source} from saltenv '{saltenv}'"
                ))
            })?,
        None if crate::fetch::is_remote(source) => {
            let cfg = crate::fetch::FetchConfig::from_opts(&host.opts);
            crate::fetch::cache_url(&cfg, source, saltenv, None).map_err(|e| {
                ExecError::Execution(format!("Unable to cache script {source}: {e}"))
            })?
        }
        None => std::path::PathBuf::from(source),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ExecError::Execution(format!("Unable to read script {}: {e}", path.display()))
    })?;
    let text = match kwargs.get("template").and_then(Value::as_str) {
        Some(engine) => {
            let ctx = kwargs
                .get("context")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            host.render_template(&text, engine, &ctx, saltenv)
                .map_err(ExecError::Execution)?
        }
        None => text,
    };
    let dir = std::env::temp_dir().join("halite-scripts");
    std::fs::create_dir_all(&dir).map_err(|e| ExecError::Execution(e.to_string()))?;
    let file = tempfile_in(&dir)?;
    std::fs::write(&file, text).map_err(|e| ExecError::Execution(e.to_string()))?;
    use std::os::unix::fs::PermissionsExt;
    // As Salt: 0500, owned by the user it runs as, run directly (so its
    // shebang picks the interpreter).
    let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o500));
    if let Some(user) = kwargs.get("runas").and_then(Value::as_str) {
        let uid = crate::exec::file::meta::user_to_uid(user)
            .map_err(|e| ExecError::Execution(e.to_string()))?;
        std::os::unix::fs::chown(&file, Some(uid), None).map_err(|e| {
            ExecError::Execution(format!("Unable to give the script to {user}: {e}"))
        })?;
    }
    Ok(file)
}

fn tempfile_in(dir: &Path) -> Result<std::path::PathBuf, ExecError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Ok(dir.join(format!("script-{}-{nanos}", std::process::id())))
}

/// `cmd.script`: runs a (possibly `salt://`) script with arguments.
pub fn run_script(
    host: &Host,
    source: &str,
    kwargs: &Map,
    saltenv: &str,
) -> Result<CmdOutput, ExecError> {
    let file = prepare_script(host, source, kwargs, saltenv)?;
    let args = kwargs.get("args").map(|a| match a {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(String::from)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    });
    let path = file.to_string_lossy();
    // Salt runs the script as the list [path, *args]; its timeout message
    // shows that list.
    let mut argv = vec![Value::from(path.as_ref())];
    let cmd = match args {
        Some(a) if !a.is_empty() => {
            argv.extend(shell_words(&a).into_iter().map(Value::from));
            format!("{} {a}", shell_quote(&path))
        }
        _ => shell_quote(&path),
    };
    let shown = halite_state::requisite::py_repr(&Value::Array(argv));
    // The shell (`shell=`, else the grain) starts the script as Salt's
    // python_shell does; the kernel runs it by its shebang, and a script
    // without one is read by that shell.
    let mut kw = kwargs.clone();
    kw.insert("python_shell".into(), Value::Bool(true));
    let result = run_all_shown_as(&cmd, Some(&shown), &kw, &host.grains);
    let _ = std::fs::remove_file(&file);
    result
}

/// The command of a `cmd.*` call: a string as given, or a list of words
/// (Salt's cmdmod takes both; public modules pass `["opm", "list"]`),
/// quoted word by word as Python's `shlex.join`, so the shell or the word
/// split sees the same words.
fn command_arg(args: &Args, fun: &str) -> Result<String, ExecError> {
    match args.get(0, "cmd") {
        Some(Value::Array(words)) => Ok(words
            .iter()
            .map(|w| halite_salt_rules::shell::shlex_quote(&crate::exec::py_str(w)))
            .collect::<Vec<_>>()
            .join(" ")),
        _ => args.require_str(0, "cmd", fun),
    }
}

/// `cmd.run`, `shell`, `run_all`, `run_stdout`, `run_stderr` and
/// `retcode` (`fun`) `<cmd>`: runs the command and returns what `fun` asks for.
fn run_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut kwargs = args.kwargs.clone();
    let cmd = command_arg(args, &format!("cmd.{fun}"))?;
    if fun != "retcode" && fun != "run_all" && !kwargs.contains_key("python_shell") {
        kwargs.insert("python_shell".into(), Value::Bool(true));
    }
    if fun == "retcode" && !kwargs.contains_key("python_shell") {
        kwargs.insert("python_shell".into(), Value::Bool(true));
    }
    let out = run_all(&cmd, &kwargs, &host.grains)?;
    context_retcode(&kwargs, &out);
    Ok(match fun {
        "run" | "shell" => {
            let mut s = out.stdout.clone();
            if !out.stderr.is_empty() {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(&out.stderr);
            }
            Value::from(s)
        }
        "run_stdout" => Value::from(out.stdout),
        "run_stderr" => Value::from(out.stderr),
        "retcode" => Value::from(out.retcode),
        _ => run_all_value(&out),
    })
}

/// `cmd.script` and `cmd.script_retcode` (`fun`) `<source> [args]`: runs
/// a script fetched from the file server.
fn script_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut kwargs = args.kwargs.clone();
    let saltenv = kwargs
        .get("saltenv")
        .and_then(Value::as_str)
        .unwrap_or("base")
        .to_string();
    let source = args.require_str(0, "source", &format!("cmd.{fun}"))?;
    if let Some(a) = args.positional.get(1) {
        kwargs.entry("args").or_insert_with(|| a.clone());
    }
    let out = run_script(host, &source, &kwargs, &saltenv)?;
    context_retcode(&kwargs, &out);
    Ok(if fun == "script" {
        run_all_value(&out)
    } else {
        Value::from(out.retcode)
    })
}

/// `cmd.has_exec` and `cmd.which` (`fun`) `<cmd>`: whether / where the
/// command is on `PATH`.
fn which_fn(fun: &str, args: &Args) -> Result<Value, ExecError> {
    let cmd = args.require_str(0, "cmd", &format!("cmd.{fun}"))?;
    let found = which(&cmd);
    Ok(if fun == "has_exec" {
        Value::Bool(found.is_some())
    } else {
        found.map(Value::from).unwrap_or(Value::Null)
    })
}

/// `cmd.exec_code <lang> <code>`: runs code through an interpreter.
fn exec_code_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let lang = args.require_str(0, "lang", "cmd.exec_code")?;
    let code = args.require_str(1, "code", "cmd.exec_code")?;
    let out = run_command(
        &format!("{lang} -c {}", shell_quote(&code)),
        &CmdOptions {
            python_shell: true,
            ..Default::default()
        },
    )
    .map_err(|e| ExecError::Execution(e.to_string()))?;
    Ok(Value::from(out.stdout))
}

/// Finds an executable on `PATH` (or checks an absolute path).
pub fn which(cmd: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if cmd.contains('/') {
        return is_exec(Path::new(cmd)).then(|| cmd.to_string());
    }
    let path = std::env::var("PATH")
        .unwrap_or_else(|_| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    path.split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| is_exec(p))
        .map(|p| p.to_string_lossy().into_owned())
}

/// `cmd.run_bg <cmd>`: starts the command in the background and returns
/// `{"pid": pid}` at once (Salt's `run_bg`). It goes through the same
/// runner as `cmd.run` (cwd, runas, env, shell): a shell starts the
/// command detached, its output to /dev/null, and prints its pid.
fn run_bg_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cmd = command_arg(args, "cmd.run_bg")?;
    let mut kwargs = args.kwargs.clone();
    let python_shell = kwargs
        .get("python_shell")
        .map(halite_state::truthy)
        .unwrap_or(true);
    let inner = if python_shell {
        cmd.clone()
    } else {
        let words = crate::host::shell_words(&cmd);
        if words.is_empty() {
            return Err(ExecError::Invocation("cmd.run_bg: empty command".into()));
        }
        let quoted: Vec<String> = words.iter().map(|w| crate::host::shell_quote(w)).collect();
        format!("exec {}", quoted.join(" "))
    };
    let wrapper = format!("( {inner}\n) </dev/null >/dev/null 2>&1 & echo $!");
    kwargs.insert("python_shell".into(), Value::Bool(true));
    kwargs.remove("timeout");
    let out = run_all(&wrapper, &kwargs, &host.grains)?;
    let pid = out
        .stdout
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            ExecError::Execution(format!(
                "Unable to run command '{cmd}' in the background: {}",
                out.stderr
            ))
        })?;
    let mut ret = Map::new();
    ret.insert("pid".into(), Value::from(pid));
    Ok(Value::Object(ret))
}
