//! Running a command the way Salt's `cmdmod` does: through the shell or
//! split into words, as another user, in a directory, with an environment
//! and stdin, and killed when it outlives its `timeout=`.
//!
//! `runas=` is Salt's: the user's login environment read once, `env=`
//! over it, and the command started as that user (see [`runas`]).
//!
//! Why one module: `cmd.run`, `cmd.script`, the `cmd` states, `unless`,
//! `onlyif` and every module that shells out come through here, so a rule
//! (the timeout, how output is trimmed) is enforced once.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use halite_state::{CmdOptions, CmdOutput, CmdTimeout, Value};

mod runas;

/// Runs a command the way Salt's `cmd.run` does: through `/bin/sh -c` when
/// `python_shell` (or a `shell`) is set, else split like a shell would.
///
/// With a `timeout`, the command runs in its own process group and the
/// whole group (the shell and everything it started) is killed when the
/// time is up; the result is then Salt's: stdout
/// `"<command> : Timed out after N seconds"`, empty stderr, retcode 1.
pub fn run_command(cmd: &str, opts: &CmdOptions) -> std::io::Result<CmdOutput> {
    run_command_shown_as(cmd, None, opts)
}

/// [`run_command`], naming the command `shown` in the timed-out message
/// (`cmd.script` names the script's argument list there, as Salt does).
pub fn run_command_shown_as(
    cmd: &str,
    shown: Option<&str>,
    opts: &CmdOptions,
) -> std::io::Result<CmdOutput> {
    let shown = shown.map_or_else(|| shown_command(cmd, opts), String::from);
    run_prepared(prepare(command_of(cmd, opts)?, opts)?, &shown, opts)
}

/// Runs the program `argv[0]` with the arguments `argv[1..]` as they are
/// (no shell, no splitting, nothing to quote), under `opts` (`runas`,
/// `cwd`, `env`, `stdin`, `timeout`; `python_shell` and `shell` do not
/// apply): for modules that build a command from values, such as a
/// firewalld zone or a service name.
pub fn run_argv(argv: &[String], opts: &CmdOptions) -> std::io::Result<CmdOutput> {
    let command = program(argv)?;
    let words = argv.iter().map(|w| Value::from(w.as_str())).collect();
    let shown = halite_state::requisite::py_repr(&Value::Array(words));
    run_prepared(prepare(command, opts)?, &shown, opts)
}

/// Starts `command` (built by [`prepare`]) and collects its output,
/// killing its process group after `opts.timeout` (`shown` names it then).
fn run_prepared(
    mut command: Command,
    shown: &str,
    opts: &CmdOptions,
) -> std::io::Result<CmdOutput> {
    if opts.timeout.is_some() || crate::job_procs::in_job() {
        // Its own group, so the timeout (or saltutil.kill_job) reaches
        // the grandchildren too.
        command.process_group(0);
    }
    let mut child = command.spawn()?;
    let pid = child.id();
    let _tracked = crate::job_procs::in_job().then(|| crate::job_procs::track_child(pid));
    // Armed before stdin is written: a command that never reads its
    // stdin cannot block us past the timeout.
    let watchdog = opts
        .timeout
        .as_ref()
        .map(|t| Watchdog::start(pid, t.duration));
    let output = collect(&mut child, opts.stdin.as_deref());
    let timed_out = watchdog.is_some_and(Watchdog::finish);
    let (status, stdout, stderr) = output?;
    if let (true, Some(timeout)) = (timed_out, opts.timeout.as_ref()) {
        return Ok(timed_out_output(shown, timeout, pid));
    }
    let retcode = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        status.signal().map(|s| 128 + s).unwrap_or(1)
    });
    Ok(CmdOutput {
        retcode,
        stdout: trim_newline(String::from_utf8_lossy(&stdout).into_owned()),
        stderr: trim_newline(String::from_utf8_lossy(&stderr).into_owned()),
        pid,
        timed_out: false,
    })
}

/// The process to start for the command line `cmd`: its shell, or its
/// words split as a shell would.
fn command_of(cmd: &str, opts: &CmdOptions) -> std::io::Result<Command> {
    Ok(if opts.python_shell || opts.shell.is_some() {
        let shell = opts.shell.as_deref().unwrap_or("/bin/sh");
        let mut c = Command::new(shell);
        c.arg("-c").arg(cmd);
        c
    } else {
        program(&shell_words(cmd))?
    })
}

/// `words[0]` with the arguments `words[1..]`; an empty list is an error.
fn program(words: &[String]) -> std::io::Result<Command> {
    let Some((prog, rest)) = words.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty command",
        ));
    };
    let mut command = Command::new(prog);
    command.args(rest);
    Ok(command)
}

/// `command` set up under `opts`: directory, user, environment, pipes.
fn prepare(mut command: Command, opts: &CmdOptions) -> std::io::Result<Command> {
    if let Some(cwd) = &opts.cwd {
        command.current_dir(cwd);
    }
    match &opts.runas {
        Some(user) => runas::apply(
            &mut command,
            runas::resolve(user, opts)?,
            opts.cwd.is_some(),
        ),
        None => {
            command.envs(opts.env.iter().map(|(k, v)| (k, v)));
        }
    }
    command
        .stdin(if opts.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(command)
}

/// Feeds `stdin`, then waits for the child and for both of its pipes to
/// close: the exit status, stdout and stderr.
fn collect(
    child: &mut Child,
    stdin: Option<&str>,
) -> std::io::Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>)> {
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A command that exits without reading its input is not an error.
        let _ = pipe.write_all(input.as_bytes());
    }
    // Read both pipes on threads so a chatty stderr cannot block stdout.
    let out_t = drain(child.stdout.take());
    let err_t = drain(child.stderr.take());
    let status = child.wait()?;
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}

/// Reads a pipe to its end on a thread of its own.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut s);
        }
        s
    })
}

/// Kills a command's process group when its time is up.
///
/// A thread waits on a channel for at most the timeout: the run ending
/// first disarms it, the timeout passing first kills the group. The time
/// covers reading the output too, as Salt's does: a background process
/// holding stdout open is killed with the rest.
struct Watchdog {
    done: mpsc::Sender<()>,
    thread: JoinHandle<bool>,
}

impl Watchdog {
    fn start(pgid: u32, limit: Duration) -> Self {
        let (done, wait) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || match wait.recv_timeout(limit) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                kill_group(pgid);
                true
            }
            _ => false,
        });
        Self { done, thread }
    }

    /// Disarms the watchdog; whether it had already killed the command.
    fn finish(self) -> bool {
        let _ = self.done.send(());
        self.thread.join().unwrap_or(false)
    }
}

/// SIGKILL to every process of group `pgid` (Salt kills with SIGKILL too).
fn kill_group(pgid: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(pgid) else {
        return;
    };
    if let Err(e) = killpg(Pid::from_raw(raw), Signal::SIGKILL) {
        // ESRCH: everything had exited in the meantime.
        tracing::debug!("killing process group {pgid} after its timeout: {e}");
    }
}

/// What Salt's `cmdmod._run` returns for a command killed by its timeout.
fn timed_out_output(shown: &str, timeout: &CmdTimeout, pid: u32) -> CmdOutput {
    CmdOutput {
        retcode: 1,
        stdout: format!("{shown} : Timed out after {} seconds", timeout.shown),
        stderr: String::new(),
        pid,
        timed_out: true,
    }
}

/// The command as Salt's timeout message shows it: the string given to
/// the shell, or the Python list of words with `python_shell=False`.
fn shown_command(cmd: &str, opts: &CmdOptions) -> String {
    if opts.python_shell {
        cmd.to_string()
    } else {
        let words = shell_words(cmd).into_iter().map(Value::from).collect();
        halite_state::requisite::py_repr(&Value::Array(words))
    }
}

fn trim_newline(mut s: String) -> String {
    // Salt strips trailing whitespace-newlines from cmd output.
    while s.ends_with('\n') || s.ends_with('\r') {
        s.pop();
    }
    s
}

/// Quotes `s` for a POSIX shell, always in single quotes (the shared rule).
pub use halite_salt_rules::shell::single_quote as shell_quote;
/// Splits a command line into words like a POSIX shell (the shared rule).
pub use halite_salt_rules::shell::split_words as shell_words;
