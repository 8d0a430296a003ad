//! The master's compile threads (issue 25): one per core, so a fleet
//! highstate uses every core, each at a lower scheduling priority than
//! the task that serves the sockets, so job returns, events and pings are
//! handled first while the compiles take whatever CPU is left.

use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc, Mutex};

use tokio::sync::oneshot;

/// How much lower than the daemon's own the compile threads' priority is
/// (Linux `nice` steps, per thread): enough that a runnable socket task
/// always wins a core, not so much that compiles stall on a busy host.
const COMPILE_NICE: libc::c_int = 10;

type Work = Box<dyn FnOnce() + Send>;

/// A fixed pool of compile threads fed by one queue.
pub struct Workers {
    queue: Mutex<mpsc::Sender<Work>>,
}

impl Workers {
    /// Starts `threads` compile threads (at least one), niced below the
    /// daemon's other threads; a failure to lower the priority is logged
    /// and the thread runs at the normal one.
    pub fn start(threads: usize) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Work>();
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("compile-{n}"))
                .spawn(move || {
                    lower_priority();
                    loop {
                        // The lock is held only to take the next job.
                        let next = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok(work) = next else { return };
                        work();
                    }
                })?;
        }
        Ok(Self {
            queue: Mutex::new(tx),
        })
    }

    /// Runs `work` on a compile thread; its result, or why it did not
    /// finish (it panicked, or the pool is gone).
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = oneshot::channel();
        let job: Work = Box::new(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(work))
                .map_err(|_| "the compile thread panicked; see the master's log".to_string());
            let _ = tx.send(result);
        });
        let sent = match self.queue.lock() {
            Ok(queue) => queue.send(job).is_ok(),
            Err(_) => false,
        };
        if !sent {
            return Err("the master's compile threads are gone".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the master's compile threads are gone".into()))
    }
}

/// Lowers the calling thread's scheduling priority by [`COMPILE_NICE`].
fn lower_priority() {
    // SAFETY: gettid and setpriority take and return plain integers; on
    // Linux a thread id names one thread for PRIO_PROCESS.
    let result = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let current = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, current + COMPILE_NICE)
    };
    if result != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "cannot lower a compile thread's priority; compiles compete with the sockets"
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use super::*;

    #[test]
    fn work_runs_on_niced_threads_and_a_panic_is_an_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let workers = Workers::start(2).unwrap();
        rt.block_on(async {
            // SAFETY: as in lower_priority.
            let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            let theirs = workers
                .run(|| unsafe {
                    libc::getpriority(
                        libc::PRIO_PROCESS,
                        libc::syscall(libc::SYS_gettid) as libc::id_t,
                    )
                })
                .await
                .unwrap();
            assert_eq!(theirs, (own + COMPILE_NICE).min(19));
            let failed = workers.run(|| -> u32 { panic!("boom") }).await;
            assert!(failed.is_err());
            // The pool still runs work after a panic.
            assert_eq!(workers.run(|| 2 + 2).await.unwrap(), 4);
        });
    }
}
