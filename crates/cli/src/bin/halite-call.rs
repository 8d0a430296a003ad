//! `halite-call`: run a function on this host, like `salt-call`.
//!
//! `halite-call --local --file-root DIR state.apply SLS` runs a state tree
//! masterless and prints what `salt-call` prints; without `--local` the
//! call runs against the minion's master (its states, pillar and files),
//! and the master keeps its return in the job cache, as salt-call does.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Parser;
use halite_cli::args::parse_args;
use halite_cli::config::load_minion_opts;
use halite_cli::output::{self, Colors, OutputOptions, Outputter};
use halite_modules::exec::state::StateOutput;
use halite_modules::host::EventSink;
use halite_modules::ExecError;
use serde_json::{json, Map, Value};

halite_perf::fast_allocator!(short_lived);

/// Run a function on this host (salt-call).
#[derive(Parser, Debug)]
#[command(
    name = "halite-call",
    version,
    about = "Run a halite (Salt-compatible) function on this host"
)]
struct Cli {
    /// Run masterless: states and files come from the local file roots.
    #[arg(long)]
    local: bool,
    /// Directory holding the `minion` config file.
    #[arg(short = 'c', long = "config-dir", default_value = "/etc/halite")]
    config_dir: PathBuf,
    /// Use this directory as the `base` file root.
    #[arg(long = "file-root")]
    file_root: Option<PathBuf>,
    /// Use this directory as the `base` pillar root.
    #[arg(long = "pillar-root")]
    pillar_root: Option<PathBuf>,
    /// Minion id to use instead of the configured or detected one.
    #[arg(long)]
    id: Option<String>,
    /// Outputter: json, yaml, highstate, nested, txt, raw.
    #[arg(long = "out", alias = "output")]
    out: Option<String>,
    /// Indentation of JSON output.
    #[arg(long = "out-indent", alias = "output-indent")]
    out_indent: Option<usize>,
    /// Exit with the function's return code (2 for a failed state).
    #[arg(long = "retcode-passthrough")]
    retcode_passthrough: bool,
    /// Highstate output: full, terse, mixed, changes (and *_id forms).
    #[arg(long = "state-output")]
    state_output: Option<String>,
    /// Show states that succeeded without changes (True/False).
    #[arg(long = "state-verbose")]
    state_verbose: Option<String>,
    /// Never use colour.
    #[arg(long = "no-color", alias = "no-colour")]
    no_color: bool,
    /// Always use colour.
    #[arg(long = "force-color", alias = "force-colour")]
    force_color: bool,
    /// Append fired events (fire_event, progress) to this file as JSON lines.
    #[arg(long)]
    events: Option<PathBuf>,
    /// Log level on stderr: quiet, error, warning, info, debug, trace.
    #[arg(short = 'l', long = "log-level")]
    log_level: Option<String>,
    #[command(flatten)]
    returners: halite_cli::returner_args::ReturnerArgs,
    /// The function, e.g. state.apply.
    fun: String,
    /// Its arguments: positional words and key=value pairs. Options may
    /// come before or after them, as with salt-call.
    #[arg(allow_negative_numbers = true)]
    args: Vec<String>,
}

/// Events of a masterless run: logged, and appended to `--events FILE`.
struct LocalEvents {
    file: Option<Mutex<std::fs::File>>,
}

impl EventSink for LocalEvents {
    fn fire(&self, tag: &str, data: &Value) {
        tracing::info!(tag, "event fired");
        if let Some(f) = &self.file {
            let line = json!({"tag": tag, "data": data}).to_string();
            if let Ok(mut f) = f.lock() {
                let _ = writeln!(f, "{line}");
            }
        }
    }
}

fn main() {
    // One run, then exit: the system reclaims the run's memory faster
    // than freeing it piece by piece.
    halite_state::run::leave_graphs_to_exit();
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(1);
        }
    }
}

fn run() -> Result<i32> {
    let cli = Cli::parse();
    let mut flags = Map::new();
    if let Some(root) = &cli.file_root {
        flags.insert("file_roots".into(), json!({"base": [root]}));
    }
    if let Some(root) = &cli.pillar_root {
        flags.insert("pillar_roots".into(), json!({"base": [root]}));
    }
    if cli.local {
        flags.insert("file_client".into(), json!("local"));
        flags.insert("local".into(), json!(true));
    }
    flags.insert("config_dir".into(), json!(cli.config_dir));
    flags.insert("conf_file".into(), json!(cli.config_dir.join("minion")));
    if let Some(id) = &cli.id {
        flags.insert("id".into(), json!(id));
    }
    if let Some(l) = &cli.log_level {
        flags.insert("log_level".into(), json!(l));
    }
    if let Some(s) = &cli.state_output {
        flags.insert("state_output".into(), json!(s));
    }
    if let Some(v) = &cli.state_verbose {
        flags.insert(
            "state_verbose".into(),
            json!(halite_state::truthy(&json!(v))),
        );
    }
    let opts = load_minion_opts(&cli.config_dir, flags)?;
    halite_logging::init(
        opts.get("log_level")
            .and_then(Value::as_str)
            .unwrap_or("warning"),
        "",
    );
    if opts.get("file_client").and_then(Value::as_str) != Some("local") {
        let (ret, retcode) = through_master(&cli)?;
        return print_return(&cli, &opts, ret, retcode);
    }
    let events_file = match &cli.events {
        Some(p) => Some(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("cannot open events file {}", p.display()))?,
        )),
        None => None,
    };
    let (mut host, pillar_errors) = halite_modules::local::local_host(
        opts.clone(),
        Arc::new(LocalEvents { file: events_file }),
    );
    let id = host
        .grains
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("local")
        .to_string();
    if let Value::Object(o) = &mut host.opts {
        o.entry("id").or_insert_with(|| json!(id));
    }
    // What the local pillar compile decrypted is masked in this process's
    // log lines and in what its returners store, as on a minion.
    halite_logging::redact::add_secrets(&id, &halite_modules::gpg::take_decrypted());
    let args = parse_args(&cli.args);
    // A state run printed as JSON is serialized straight from the
    // executor's records (the same text, without a map per state first).
    let returners = return_spec(&cli);
    if cli.out.as_deref() == Some("json") && pillar_errors.is_empty() && returners.is_none() {
        if let Some(run) = halite_modules::exec::state::StateExec::run(&host, &cli.fun, &args) {
            let run = match run {
                Ok(run) => run,
                Err(e) => {
                    eprintln!("Error running '{}': {e}", cli.fun);
                    return Ok(1);
                }
            };
            let retcode = run.retcode(&cli.fun);
            print_state_json(&run, cli.out_indent.unwrap_or(4));
            // As below: the process ends, the OS reclaims the return at once.
            std::mem::forget(run);
            std::mem::forget(host);
            return Ok(exit_code(retcode, cli.retcode_passthrough));
        }
    }
    let (ret, retcode) = if !pillar_errors.is_empty() && cli.fun.starts_with("state.") {
        let mut errs = vec![Value::from(
            "Pillar failed to render with the following messages:",
        )];
        errs.extend(pillar_errors.into_iter().map(Value::from));
        (Value::Array(errs), 5)
    } else {
        match host.call(&cli.fun, &args) {
            Ok(v) => {
                let rc = halite_modules::exec::retcode(&cli.fun, &v);
                (v, rc)
            }
            Err(ExecError::NotAvailable(f)) => {
                eprintln!("{}", halite_modules::python::missing_text(&host.opts, &f));
                return Ok(255);
            }
            // As salt-call: a call Python itself rejects (TypeError) is
            // "Passed invalid arguments", a SaltInvocationError ends the
            // process with its message, a CommandExecutionError is
            // "Error running".
            Err(ExecError::Invocation(msg))
                if halite_modules::exec::signature::is_python_type_error(&msg) =>
            {
                eprintln!("\nPassed invalid arguments: {msg}.\n\nUsage:\n");
                return Ok(1);
            }
            Err(ExecError::Invocation(msg)) => {
                eprintln!("{msg}");
                return Ok(1);
            }
            Err(e) => {
                eprintln!("Error running '{}': {e}", cli.fun);
                return Ok(1);
            }
        }
    };

    if let Some(spec) = &returners {
        let jid = halite_modules::exec::state::new_jid();
        let dict = halite_modules::returners::return_dict(
            &jid,
            &id,
            &cli.fun,
            &args.positional,
            &ret,
            i64::from(retcode),
            retcode == 0,
        );
        let dict = halite_modules::returners::masked(
            dict,
            halite_logging::redact::secrets_of(&id).as_deref(),
        );
        // Each failure is logged; the call's own output is unchanged.
        let _ = halite_modules::returners::send(&host, spec, dict);
    }
    let code = print_return(&cli, &opts, ret, retcode)?;
    std::mem::forget(host);
    Ok(code)
}

/// The returners `--return` names, with `--return_config` and
/// `--return_kwargs` (a mapping, in YAML or JSON).
fn return_spec(cli: &Cli) -> Option<halite_modules::returners::ReturnSpec> {
    let mut spec = halite_modules::returners::ReturnSpec::from_names(&Value::from(
        cli.returners.returner.clone()?,
    ))?;
    spec.ret_config = cli
        .returners
        .return_config
        .clone()
        .filter(|c| !c.is_empty());
    if let Some(k) = &cli.returners.return_kwargs {
        match parse_args(&[format!("k={k}")]).kwargs.remove("k") {
            Some(Value::Object(m)) => spec.ret_kwargs = m,
            _ => tracing::warn!(return_kwargs = %k, "--return_kwargs is not a mapping; ignored"),
        }
    }
    Some(spec)
}

/// Salt's salt-call without `--local`: the call runs on this host as a
/// job of its minion (states, pillar and `salt://` from the master the
/// minion config names, authenticated with the minion's key), and its
/// return goes to the master's job cache under a jid the master gives it.
fn through_master(cli: &Cli) -> Result<(Value, i32)> {
    let mut overrides = Map::new();
    if let Some(id) = &cli.id {
        overrides.insert("id".into(), json!(id));
    }
    if let Some(l) = &cli.log_level {
        overrides.insert("log_level".into(), json!(l));
    }
    let cfg = halite_minion::MinionConfig::load(&cli.config_dir, &overrides)?;
    let mut args = parse_args(&cli.args);
    if let Some(spec) = return_spec(cli) {
        // The minion's runner calls them after the call, as for a job.
        spec.to_kwargs(&mut args.kwargs);
    }
    let outcome = halite_minion::caller::call(&cfg, &cli.fun, args.positional, args.kwargs)?;
    match &outcome.jid {
        Some(jid) => tracing::info!(%jid, "return stored in the master's job cache"),
        None => tracing::info!("return not stored on the master"),
    }
    let retcode = i32::try_from(outcome.ret.retcode).unwrap_or(1);
    Ok((outcome.ret.ret, retcode))
}

/// Prints a function's return as salt-call does (outputter, colours,
/// state output options) and gives the process's exit code.
fn print_return(cli: &Cli, opts: &Value, ret: Value, retcode: i32) -> Result<i32> {
    let stdout_tty = std::io::stdout().is_terminal();
    let colors = if cli.force_color
        || (stdout_tty
            && !cli.no_color
            && opts.get("color").map(halite_state::truthy).unwrap_or(true))
    {
        Colors::ansi()
    } else {
        Colors::none()
    };
    let out_opts = OutputOptions {
        colors,
        state_output: opts
            .get("state_output")
            .and_then(Value::as_str)
            .unwrap_or("full")
            .to_string(),
        state_verbose: opts
            .get("state_verbose")
            .map(halite_state::truthy)
            .unwrap_or(true),
        state_output_profile: opts
            .get("state_output_profile")
            .map(halite_state::truthy)
            .unwrap_or(true),
        state_output_pct: opts
            .get("state_output_pct")
            .map(halite_state::truthy)
            .unwrap_or(false),
        json_indent: cli.out_indent.unwrap_or(4),
    };
    let outputter = match cli.out.as_deref() {
        Some(o) => Outputter::parse(o).with_context(|| {
            format!("unknown outputter '{o}' (json, yaml, highstate, nested, txt, raw)")
        })?,
        None => Outputter::default_for(&cli.fun, &ret),
    };
    // The process ends after printing: freeing a large return value piece
    // by piece would only cost time (the OS reclaims it at once).
    if outputter == Outputter::Json {
        print_local_json(&ret, out_opts.json_indent);
        std::mem::forget(ret);
    } else {
        let mut data = Map::new();
        data.insert("local".into(), ret);
        let text = output::render(outputter, &data, &out_opts, retcode);
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
        let _ = stdout.flush();
        std::mem::forget(data);
        std::mem::forget(text);
    }
    Ok(exit_code(retcode, cli.retcode_passthrough))
}

/// Prints `{"local": ret}` as Salt's json outputter does, serialized
/// straight to stdout (no copy of the return, no text in memory).
fn print_local_json<T: serde::Serialize>(ret: &T, indent: usize) {
    print_json_with(|out| write_local_json(out, ret, indent));
}

/// Writes `{"local": ret}` as Salt's json outputter does.
fn write_local_json<T: serde::Serialize>(
    out: &mut dyn Write,
    ret: &T,
    indent: usize,
) -> std::io::Result<()> {
    let data = std::collections::BTreeMap::from([("local", ret)]);
    output::write_json(out, &data, indent)
}

/// Runs `write` on buffered stdout, then ends the text with a newline
/// (unless writing failed) and flushes.
fn print_json_with(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    if write(&mut stdout).is_ok() {
        let _ = writeln!(stdout);
    }
    let _ = stdout.flush();
}

/// Prints a state function's `{"local": ret}` as Salt's json outputter
/// does; a run's returns or a lowstate's chunks are serialized in pieces
/// on two threads when there are thousands (see
/// [`output::json::write_keyed_collection`]).
fn print_state_json(ret: &StateOutput, indent: usize) {
    use output::json::{write_keyed_collection, Collection};
    let start = std::time::Instant::now();
    print_json_with(|stdout| match ret {
        StateOutput::Ran(running) => {
            let running = running.as_slice();
            write_keyed_collection(
                stdout,
                "local",
                Collection::Map,
                running.len(),
                indent,
                |range, piece| {
                    let entries = running.get_range(range).unwrap_or_default();
                    entries.iter().try_for_each(|(tag, r)| piece.entry(tag, r))
                },
            )
        }
        StateOutput::Low(compiled) => write_keyed_collection(
            stdout,
            "local",
            Collection::List,
            compiled.order.len(),
            indent,
            |range, piece| {
                compiled.order[range]
                    .iter()
                    .try_for_each(|&ci| piece.element(&compiled.graph.chunks[ci]))
            },
        ),
        StateOutput::Data(v) => write_local_json(stdout, v, indent),
    });
    // After the render, prepare, compile and run times the engine logs.
    tracing::debug!(
        target: "halite::timing",
        "print {:.1} ms",
        start.elapsed().as_secs_f64() * 1000.0
    );
}

/// The process's exit code for a function's retcode: itself with
/// `--retcode-passthrough`; without it salt-call folds every failure into 1.
fn exit_code(retcode: i32, passthrough: bool) -> i32 {
    if passthrough {
        retcode
    } else {
        i32::from(retcode != 0)
    }
}
