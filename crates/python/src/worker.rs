//! One `python3` worker process: started with `-I` (no `PYTHON*`
//! variables, no user site) and `-B` (no `__pycache__` in the file roots), fed [`crate::protocol`] frames on its stdin,
//! answering on its stdout; its stderr goes to the log. Answers are read
//! on the calling thread after `poll(2)` says they are there, so a hung
//! call can be given up on at its deadline (the whole process group is
//! then killed) without a thread hop on every frame.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::protocol::{read_frame, write_frame, write_raw_frame};
use crate::{Callback, PythonError};

/// The worker's source: standard library only, run as `python3 -I -c`.
pub const WORKER_SOURCE: &str = include_str!("worker.py");

/// How many of the worker's last stderr lines an error quotes.
const STDERR_TAIL: usize = 20;

/// A running worker and the pipes to it.
pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The `opts`, `grains` and `pillar` this worker holds: a request with
    /// the same ones leaves them out (they are most of a request's bytes).
    pub(crate) held: Option<[String; 3]>,
    /// The host's load generation when this worker loaded its modules
    /// (`PythonHost::reload` starts a new one; an older worker is stopped).
    pub(crate) generation: u64,
}

impl Worker {
    /// Starts `python` on the worker source in its own process group.
    pub fn spawn(python: &Path) -> Result<Self, PythonError> {
        let mut child = Command::new(python)
            .arg("-I")
            // No __pycache__ written into the user's file roots.
            .arg("-B")
            .arg("-c")
            .arg(WORKER_SOURCE)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| PythonError::Spawn(python.display().to_string(), e))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(PythonError::Protocol(
                "the worker's pipes were not set up".into(),
            ));
        };
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let sink = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                tracing::info!(target: "halite_python::worker", "{line}");
                if let Ok(mut t) = sink.lock() {
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
        tracing::debug!(pid = child.id(), python = %python.display(), "started the Python worker");
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr: tail,
            held: None,
            generation: 0,
        })
    }

    /// The worker's last stderr lines, for an error message.
    fn stderr_tail(&self) -> String {
        self.stderr
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    fn send(&mut self, frame: &Value) -> Result<(), PythonError> {
        write_frame(&mut self.stdin, frame).map_err(|e| self.died(&e.to_string()))
    }

    fn died(&mut self, why: &str) -> PythonError {
        // Give the stderr reader a moment's chance: the exit is what matters.
        let status = self.child.try_wait().ok().flatten();
        PythonError::Died(format!(
            "{why}{}{}",
            status.map(|s| format!(" ({s})")).unwrap_or_default(),
            match self.stderr_tail() {
                t if t.is_empty() => String::new(),
                t => format!("; its last output:\n{t}"),
            }
        ))
    }

    fn recv(&mut self, deadline: Option<Instant>) -> Result<Value, PythonError> {
        if let Some(d) = deadline {
            if self.stdout.buffer().is_empty() && !self.readable_before(d) {
                self.kill();
                return Err(PythonError::Timeout);
            }
        }
        match read_frame(&mut self.stdout) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => {
                let _ = self.child.wait();
                Err(self.died("the Python worker exited"))
            }
            Err(e) => Err(self.died(&e.to_string())),
        }
    }

    /// Waits until the worker's stdout has data (or closed) or `deadline`
    /// passed; `false` on the deadline.
    fn readable_before(&self, deadline: Instant) -> bool {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            let mut fd = libc::pollfd {
                fd: self.stdout.get_ref().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd on the stack, for the call's duration.
            let n = unsafe { libc::poll(&mut fd, 1, ms) };
            match n {
                0 => return false,
                n if n > 0 => return true,
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                // poll itself failed: let the read report what is wrong.
                _ => return true,
            }
        }
    }

    /// Sends `request` and serves the worker's `salt_call`s (and its
    /// `salt_has`, `state_call` and `running` questions) through
    /// `callback` until it returns or raises.
    pub fn request(
        &mut self,
        request: &Value,
        callback: &dyn Callback,
        deadline: Option<Instant>,
    ) -> Result<Value, PythonError> {
        let body = serde_json::to_vec(request)
            .map_err(|e| PythonError::Protocol(format!("cannot encode the request: {e}")))?;
        self.request_raw(&body, callback, deadline)
    }

    /// [`Worker::request`] of an already serialized request.
    pub fn request_raw(
        &mut self,
        body: &[u8],
        callback: &dyn Callback,
        deadline: Option<Instant>,
    ) -> Result<Value, PythonError> {
        write_raw_frame(&mut self.stdin, body).map_err(|e| self.died(&e.to_string()))?;
        loop {
            let mut msg = self.recv(deadline)?;
            let op = msg
                .get("op")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            match op.as_str() {
                "return" => return Ok(msg.get_mut("ret").map(Value::take).unwrap_or(Value::Null)),
                "raise" => {
                    let field =
                        |k: &str| msg.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    return Err(PythonError::Raised {
                        kind: field("type"),
                        message: field("message"),
                        traceback: field("traceback"),
                    });
                }
                "salt_call" => {
                    let fun = msg.get("fun").and_then(Value::as_str).unwrap_or("");
                    let args = msg
                        .get("args")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    let kwargs = match msg.get("kwargs") {
                        Some(Value::Object(m)) => m.clone(),
                        _ => Map::new(),
                    };
                    let answer = match callback.salt_call(fun, &args, &kwargs) {
                        Ok(ret) => json!({"op": "salt_return", "ret": ret}),
                        Err(message) => json!({"op": "salt_error", "message": message}),
                    };
                    self.send(&answer)?;
                }
                "salt_has" => {
                    let fun = msg.get("fun").and_then(Value::as_str).unwrap_or("");
                    let answer = json!({"op": "salt_return", "ret": callback.has(fun)});
                    self.send(&answer)?;
                }
                "state_call" => {
                    let fun = msg.get("fun").and_then(Value::as_str).unwrap_or("");
                    let kwargs = match msg.get("kwargs") {
                        Some(Value::Object(m)) => m.clone(),
                        _ => Map::new(),
                    };
                    let answer = match callback.state_call(fun, &kwargs) {
                        Ok(ret) => json!({"op": "salt_return", "ret": ret}),
                        Err(message) => json!({"op": "salt_error", "message": message}),
                    };
                    self.send(&answer)?;
                }
                "running" => {
                    let answer = json!({"op": "salt_return", "ret": callback.running()});
                    self.send(&answer)?;
                }
                other => {
                    self.kill();
                    return Err(PythonError::Protocol(format!(
                        "the Python worker sent an unknown frame '{other}'"
                    )));
                }
            }
        }
    }

    /// Kills the worker's whole process group (it may have started commands).
    pub fn kill(&mut self) {
        let running = self.alive();
        if let (true, Ok(pid)) = (running, i32::try_from(self.child.id())) {
            // SAFETY: kill(2) on the group this worker leads; no memory involved.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}
