//! `halite '<target>' <fun> [args]`: publish through the master, print
//! each return as it arrives, name the minions that did not return.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};

use halite_client::local::{LocalBody, LocalReply, PackedReturn, Streamed};
use halite_client::MasterConfig;
use halite_proto::cursor::{Cursor, Token};
use serde_json::{json, Map, Value};

use super::progress::{self, Progress};
use crate::output::json::NotTranscoded;
use crate::output::{self, OutputOptions, Outputter};

/// One `halite` invocation.
#[derive(Debug, Clone)]
pub struct Command {
    /// The target expression.
    pub tgt: String,
    /// How the target is read (`-G`, `-L`, `-C`... as `glob`, `grain`, `list`).
    pub tgt_type: String,
    /// The function to run (`mod.fun`).
    pub fun: String,
    /// Its arguments as typed (`key=value` for keyword ones).
    pub args: Vec<String>,
    /// `--out`: the outputter (default: the function's).
    pub out: Option<String>,
    /// `-t`: how long to wait for the minions' returns.
    pub timeout: Duration,
    /// How long to wait for `saltutil.find_job` answers once `timeout` ran out.
    pub gather_job_timeout: Duration,
    /// `--async`: print the jid and return without waiting.
    pub asynchronous: bool,
    /// `-v`: say which job was published and which minions did not answer.
    pub verbose: bool,
    /// `-b`: run on this many (or this percent) of the minions at a time.
    pub batch: Option<String>,
    /// `--progress` (`Some(true)`), `--no-progress` (`Some(false)`), or
    /// neither: live progress when stderr and stdout are terminals.
    pub progress: Option<bool>,
}

/// Salt's text for a minion that did not answer in time.
pub fn no_response(jid: &str) -> String {
    format!(
        "Minion did not return. [No response]\nThe minions may not have all finished running and any remaining \
         minions will return upon completion. To look up the return data for this job later, run the following \
         command:\n\nsalt-run jobs.lookup_jid {jid}"
    )
}

/// The batch size for `-b N` or `-b N%` over `total` minions (at least 1).
pub fn batch_size(spec: &str, total: usize) -> anyhow::Result<usize> {
    halite_client::job::batch_size(spec, total).map_err(anyhow::Error::msg)
}

fn print_return(
    out: &mut dyn Write,
    cmd: &Command,
    id: &str,
    ret: Value,
    retcode: i32,
) -> std::io::Result<()> {
    let outputter = cmd
        .out
        .as_deref()
        .and_then(Outputter::parse)
        .unwrap_or_else(|| Outputter::default_for(&cmd.fun, &ret));
    let mut data = Map::new();
    data.insert(id.to_string(), ret);
    writeln!(
        out,
        "{}",
        output::render(outputter, &data, &OutputOptions::default(), retcode)
    )
}

/// `ret` printed as [`print_return`] prints it, into `text` (cleared
/// first), when that can be done from its packed bytes (issue 25): the
/// `highstate` outputter (`state.apply`'s default) from each state's few
/// printed keys, without a `Value` (`--out json` is printed as the
/// frame is parsed, [`json_text`]). `false`: print it decoded.
fn packed_text(cmd: &Command, ret: &PackedReturn, text: &mut Vec<u8>) -> bool {
    let Some(packed) = ret.packed() else {
        return false;
    };
    let container = matches!(
        Cursor::new(packed).token(),
        Ok(Token::Map(_) | Token::Array(_))
    );
    let outputter = cmd
        .out
        .as_deref()
        .and_then(Outputter::parse)
        .unwrap_or_else(|| Outputter::default_for_shape(&cmd.fun, container));
    text.clear();
    let opts = OutputOptions::default();
    let printed = match outputter {
        Outputter::Highstate => output::highstate::format_host_packed(&ret.id, packed, &opts)
            .map(|host| text.extend_from_slice(host.as_bytes())),
        _ => return false,
    };
    printed_line(&ret.id, printed, text)
}

/// `--out json` of minion `id`'s return, whose value is at `cur`, into
/// `text` (cleared first) as [`print_return`] prints it, read where the
/// frame's parse comes to it ([`Streamed::parse_printing`]); `false`
/// when it cannot be printed from its bytes (then it is printed decoded).
fn json_text(id: &str, cur: &mut Cursor<'_>, indent: usize, text: &mut Vec<u8>) -> bool {
    text.clear();
    let printed = output::json::write_packed_keyed_at(text, id, cur, indent);
    printed_line(id, printed, text)
}

/// Ends minion `id`'s return printed from its bytes into `text` with its
/// newline; `false` (noted at debug level) when it could not be, and is
/// then printed from its decoded value.
fn printed_line(id: &str, printed: Result<(), NotTranscoded>, text: &mut Vec<u8>) -> bool {
    match printed {
        Ok(()) => {
            text.push(b'\n');
            true
        }
        Err(why) => {
            tracing::debug!(minion = %id, why = why.0, "a return printed from its decoded value");
            false
        }
    }
}

/// A return's exit code and whether it failed, from its event's
/// `retcode` and `success`.
fn return_status(retcode: Option<&Value>, success: Option<&Value>) -> (i64, bool) {
    let retcode = retcode.and_then(Value::as_i64).unwrap_or(0);
    (
        retcode,
        retcode != 0 || success == Some(&Value::Bool(false)),
    )
}

/// Writes minion `id`'s return with `print` and flushes it, its
/// progress bar finished first and the bars held off the terminal while
/// the text goes out.
fn show_return(
    bars: Option<&mut Progress>,
    id: &str,
    out: &mut dyn Write,
    print: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let write = |out: &mut dyn Write| {
        print(&mut *out)?;
        out.flush()
    };
    match bars {
        Some(bars) => {
            bars.finish(id);
            bars.suspend(|| write(out))
        }
        None => write(out),
    }
}

/// Frames the CLI's reader thread holds ahead of the printing (~0.2 MB
/// each for a 1,000-state return): enough to read while the last is
/// written, few enough that a CLI writing into a slow pipe leaves the
/// rest of a fleet's returns to the master's bound (`event_return_bytes`,
/// then the job cache) instead of its own memory.
const FRAMES_AHEAD: usize = 4;

/// The master refused the publication under `publisher_acl` (Salt's
/// message, which `halite` prints as Salt's `salt` does).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Publishes one job to `tgt`/`tgt_type` and prints its returns; the
/// set of minions that failed or did not return.
fn run_one(
    cfg: &MasterConfig,
    cmd: &Command,
    tgt: &str,
    tgt_type: &str,
    out: &mut dyn Write,
) -> anyhow::Result<(Option<String>, BTreeSet<String>, usize)> {
    let parsed = crate::args::parse_args(&cmd.args);
    let mut client = super::connect(cfg)?;
    let draw = progress::wanted(
        cmd.progress,
        &cmd.fun,
        cmd.asynchronous,
        progress::terminals(),
    );
    client.send(LocalBody::Publish {
        tgt: tgt.to_string(),
        tgt_type: tgt_type.to_string(),
        fun: cmd.fun.clone(),
        arg: parsed.positional,
        kwarg: parsed.kwargs,
        user: std::env::var("SUDO_USER")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "root".into()),
        watch: !cmd.asynchronous,
        // Progress events only when bars are drawn from them.
        progress: draw,
    })?;
    let (jid, minions) = match client.next(None)? {
        Some(LocalReply::Started { jid, minions }) => (jid, minions),
        Some(LocalReply::Error(e)) if halite_acl::is_acl_refusal(&e) => {
            return Err(Refused(e).into())
        }
        Some(LocalReply::Error(e)) => anyhow::bail!("{e}"),
        _ => anyhow::bail!("the master closed the connection without publishing"),
    };
    if minions.is_empty() {
        writeln!(
            out,
            "No minions matched the target. No command was sent, no jid was assigned."
        )?;
        return Ok((None, BTreeSet::new(), 0));
    }
    if cmd.asynchronous {
        writeln!(out, "Executed command with job ID: {jid}")?;
        return Ok((Some(jid), BTreeSet::new(), minions.len()));
    }
    if cmd.verbose {
        let msg = format!("Executing job with jid {jid}");
        writeln!(out, "{msg}\n{}\n", "-".repeat(msg.len()))?;
    }
    let mut waiting: BTreeSet<String> = minions.iter().cloned().collect();
    let mut failed = BTreeSet::new();
    let mut bars = draw.then(|| Progress::stderr(&jid, &minions, cmd.progress == Some(true)));
    let mut deadline = Instant::now() + cmd.timeout;
    let mut last_round = false;
    // Frames are read ahead while the last return is written out.
    let mut frames = client.into_frames(FRAMES_AHEAD)?;
    let mut text = Vec::new();
    let json = cmd.out.as_deref().and_then(Outputter::parse) == Some(Outputter::Json);
    let indent = OutputOptions::default().json_indent;
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            if last_round {
                break;
            }
            // Salt's find_job: minions still running the job get another
            // `timeout`; the others are named as not returning (after a
            // moment for a return already on its way).
            let busy = still_running(cfg, &jid, &waiting, cmd.gather_job_timeout)?;
            last_round = busy.is_empty();
            deadline = Instant::now()
                + if last_round {
                    Duration::from_millis(300)
                } else {
                    cmd.timeout
                };
            continue;
        }
        let reply = match frames.next(Some(left))? {
            Some(frame) => match Streamed::parse_printing(frame, |id, cur| {
                json && waiting.contains(id) && json_text(id, cur, indent, &mut text)
            })? {
                (Streamed::Return(ret), _) if !waiting.contains(&ret.id) => continue,
                (Streamed::Return(ret), printed)
                    if printed || (!json && packed_text(cmd, &ret, &mut text)) =>
                {
                    waiting.remove(&ret.id);
                    let (retcode, success) = (ret.decoded("retcode"), ret.decoded("success"));
                    if return_status(retcode.as_ref(), success.as_ref()).1 {
                        failed.insert(ret.id.clone());
                    }
                    show_return(bars.as_mut(), &ret.id, out, |out| out.write_all(&text))?;
                    continue;
                }
                (Streamed::Return(ret), _) => Some(ret.into_reply()?),
                (Streamed::Reply(reply), _) => Some(reply),
            },
            None => None,
        };
        match reply {
            Some(LocalReply::Return { id, mut data }) => {
                if !waiting.remove(&id) {
                    continue;
                }
                let (retcode, fails) = match data.as_object() {
                    Some(map) => return_status(map.get("retcode"), map.get("success")),
                    None => (0, false),
                };
                let ret = data
                    .as_object_mut()
                    .and_then(|map| map.remove("return"))
                    .unwrap_or(Value::Null);
                if fails {
                    failed.insert(id.clone());
                }
                show_return(bars.as_mut(), &id, out, |out| {
                    print_return(out, cmd, &id, ret, retcode as i32)
                })?;
            }
            Some(LocalReply::Event { tag, data }) => {
                if let Some(bars) = bars.as_mut() {
                    bars.event(&tag, &data);
                }
            }
            Some(_) => {}
            // Before the deadline: the master closed the stream.
            None if Instant::now() < deadline => break,
            // The wait ran out: find_job decides at the top of the loop.
            None => {}
        }
    }
    // The bars of the minions that did not return go before their text.
    drop(bars);
    for id in &waiting {
        print_return(out, cmd, id, json!(no_response(&jid)), 1)?;
        failed.insert(id.clone());
    }
    Ok((Some(jid), failed, minions.len()))
}

/// The minions of `ids` that say they still run job `jid`.
fn still_running(
    cfg: &MasterConfig,
    jid: &str,
    ids: &BTreeSet<String>,
    wait: Duration,
) -> anyhow::Result<BTreeSet<String>> {
    Ok(halite_client::job::still_running(cfg, jid, ids, wait)?)
}

/// Salt's batch mode: at most `size` minions run the job at once, and the
/// next one starts as soon as one returns (a sliding window, not fixed
/// groups). Each minion gets its own job; outputs print as they finish.
fn run_sliding(
    cfg: &MasterConfig,
    cmd: &Command,
    targets: Vec<String>,
    size: usize,
    out: &mut dyn Write,
) -> anyhow::Result<BTreeSet<String>> {
    type Finished = (Vec<u8>, anyhow::Result<BTreeSet<String>>);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Finished>();
    // Bars from several jobs at once would fight over the terminal.
    let quiet = Command {
        progress: Some(false),
        ..cmd.clone()
    };
    let mut queue = targets.into_iter();
    let mut running = 0usize;
    let mut failed = BTreeSet::new();
    loop {
        let mut started = Vec::new();
        while running < size {
            let Some(id) = queue.next() else { break };
            let (cfg, cmd, tx) = (cfg.clone(), quiet.clone(), done_tx.clone());
            started.push(format!("'{id}'"));
            running += 1;
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let result = run_one(&cfg, &cmd, &id, "list", &mut buf).map(|(_, f, _)| f);
                let _ = tx.send((buf, result));
            });
        }
        if !started.is_empty() {
            writeln!(out, "\nExecuting run on [{}]\n", started.join(", "))?;
            out.flush()?;
        }
        if running == 0 {
            return Ok(failed);
        }
        let (text, result) = done_rx
            .recv()
            .map_err(|_| anyhow::anyhow!("a batch worker stopped without reporting"))?;
        running -= 1;
        out.write_all(&text)?;
        out.flush()?;
        failed.extend(result?);
    }
}

/// Runs the command; the exit code Salt's `salt` would give.
pub fn run(
    cfg: &MasterConfig,
    cmd: &Command,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let (failed, any) = if let Some(spec) = &cmd.batch {
        let mut client = super::connect(cfg)?;
        let targets: Vec<String> = match client.call(LocalBody::Resolve {
            tgt: cmd.tgt.clone(),
            tgt_type: cmd.tgt_type.clone(),
        })? {
            LocalReply::Value(v) => serde_json::from_value(v)?,
            _ => Vec::new(),
        };
        if targets.is_empty() {
            writeln!(err, "ERROR: No return received")?;
            return Ok(2);
        }
        let size = batch_size(spec, targets.len())?;
        (run_sliding(cfg, cmd, targets, size, out)?, true)
    } else {
        let (_, f, n) = run_one(cfg, cmd, &cmd.tgt, &cmd.tgt_type, out)?;
        (f, n > 0)
    };
    if !any {
        writeln!(err, "ERROR: No return received")?;
        return Ok(2);
    }
    if !failed.is_empty() {
        writeln!(err, "ERROR: Minions returned with non-zero exit code")?;
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes_follow_salt() {
        assert_eq!(batch_size("3", 10).unwrap(), 3);
        assert_eq!(batch_size("10%", 10).unwrap(), 1);
        assert_eq!(batch_size("50%", 10).unwrap(), 5);
        assert_eq!(batch_size("%25", 8).unwrap(), 2);
        assert_eq!(batch_size("1%", 10).unwrap(), 1);
        assert!(batch_size("lots", 10).is_err());
    }
}
