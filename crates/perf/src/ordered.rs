//! Pieces of a text made on two threads and written out in order: how a
//! large run's JSON is printed (`halite-call`'s json outputter), so that
//! the output is the same whichever thread made which piece.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::options::JSON_AHEAD as AHEAD;
use crate::second_core;

/// What the two threads of [`in_order_on_two_threads`] share.
struct Board {
    /// The next piece nobody has taken yet.
    next: AtomicUsize,
    state: Mutex<BoardState>,
    /// Signalled when a piece is finished, written, or the helper is gone.
    changed: Condvar,
}

struct BoardState {
    /// Pieces the helper finished (or the calling thread finished out of
    /// turn), waiting to be written.
    finished: Vec<Option<io::Result<Vec<u8>>>>,
    /// How many pieces have been written.
    written: usize,
    /// The calling thread is done (finished, failed or panicked): the
    /// helper takes no more pieces.
    stop: bool,
    /// The helper thread ended (normally or by a panic).
    helper_gone: bool,
}

impl Board {
    fn lock(&self) -> MutexGuard<'_, BoardState> {
        // A panic while holding the lock leaves the state consistent (each
        // change is a single assignment): go on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Marks the helper gone when it ends, even by a panic, so that the
/// calling thread never waits for a piece that will not come.
struct HelperGone<'a>(&'a Board);

impl Drop for HelperGone<'_> {
    fn drop(&mut self) {
        self.0.lock().helper_gone = true;
        self.0.changed.notify_all();
    }
}

/// Tells the helper to take no more pieces once the calling thread is
/// done writing, by any way out.
struct StopHelper<'a>(&'a Board);

impl Drop for StopHelper<'_> {
    fn drop(&mut self) {
        self.0.lock().stop = true;
        self.0.changed.notify_all();
    }
}

/// Runs `work(p, text)` for the pieces `0..n` on the calling thread and
/// a helper thread, each taking the next piece nobody has taken, and
/// passes each piece's text to `sink` on the calling thread, in piece
/// order. With one piece, or when the helper cannot start, the calling
/// thread does everything. A panic in the helper is passed on once the
/// calling thread is done (it redoes the piece the helper was on).
pub fn in_order_on_two_threads(
    n: usize,
    work: impl Fn(usize, &mut Vec<u8>) -> io::Result<()> + Sync,
    mut sink: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let mut own = Vec::new();
    if n < 2 || !second_core() {
        for p in 0..n {
            own.clear();
            work(p, &mut own)?;
            sink(&own)?;
        }
        return Ok(());
    }
    let board = Board {
        next: AtomicUsize::new(0),
        state: Mutex::new(BoardState {
            finished: (0..n).map(|_| None).collect(),
            written: 0,
            stop: false,
            helper_gone: false,
        }),
        changed: Condvar::new(),
    };
    let helper = |board: &Board| {
        let _gone = HelperGone(board);
        loop {
            let p = board.next.fetch_add(1, Ordering::Relaxed);
            if p >= n {
                return;
            }
            {
                let mut state = board.lock();
                while !state.stop && p >= state.written + AHEAD {
                    state = board.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                if state.stop {
                    return;
                }
            }
            let mut text = Vec::new();
            let done = work(p, &mut text).map(|()| text);
            board.lock().finished[p] = Some(done);
            board.changed.notify_all();
        }
    };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("json-pieces".into())
            .spawn_scoped(scope, || helper(&board));
        if spawned.is_err() {
            board.lock().helper_gone = true;
        }
        // However the calling thread leaves (done, an error, a panic), the
        // helper must not wait for it to write more.
        let _stop = StopHelper(&board);
        write_pieces_in_order(n, &board, &work, &mut sink, &mut own)
    })
}

/// The calling thread's side of [`in_order_on_two_threads`].
fn write_pieces_in_order(
    n: usize,
    board: &Board,
    work: &(impl Fn(usize, &mut Vec<u8>) -> io::Result<()> + Sync),
    sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    own: &mut Vec<u8>,
) -> io::Result<()> {
    let mut written = 0;
    let wrote = |written: &mut usize| {
        *written += 1;
        board.lock().written = *written;
        board.changed.notify_all();
    };
    while written < n {
        // The next piece to write, if the helper finished it.
        let ready = board.lock().finished[written].take();
        if let Some(text) = ready {
            sink(&text?)?;
            wrote(&mut written);
            continue;
        }
        let p = board.next.fetch_add(1, Ordering::Relaxed);
        if p < n {
            own.clear();
            work(p, own)?;
            if p == written {
                sink(own)?;
                wrote(&mut written);
            } else {
                board.lock().finished[p] = Some(Ok(std::mem::take(own)));
            }
            continue;
        }
        // Every piece is taken: wait for the helper's, or do it here if
        // the helper is gone without finishing it.
        let mut state = board.lock();
        while state.finished[written].is_none() && !state.helper_gone {
            state = board.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.finished[written].is_none() {
            drop(state);
            own.clear();
            work(written, own)?;
            sink(own)?;
            wrote(&mut written);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces finished out of turn wait for their turn; a failing write
    /// stops both threads and is returned.
    #[test]
    fn pieces_reach_the_sink_in_order_and_a_write_error_stops_the_work() {
        let mut seen = Vec::new();
        in_order_on_two_threads(
            40,
            |p, text| {
                // Odd pieces take longer, so the threads overtake each other.
                if p % 2 == 1 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                text.extend_from_slice(p.to_string().as_bytes());
                Ok(())
            },
            |text| {
                seen.push(String::from_utf8_lossy(text).into_owned());
                Ok(())
            },
        )
        .expect("in order");
        let expected: Vec<String> = (0..40).map(|p| p.to_string()).collect();
        assert_eq!(seen, expected);

        let worked = AtomicUsize::new(0);
        let err = in_order_on_two_threads(
            1000,
            |_, text| {
                worked.fetch_add(1, Ordering::Relaxed);
                text.push(b'x');
                Ok(())
            },
            |_| Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed")),
        )
        .expect_err("the sink fails");
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert!(
            worked.load(Ordering::Relaxed) < 1000,
            "work went on after the write failed"
        );
    }

    /// A panic in a piece is not swallowed, whichever thread ran it.
    #[test]
    fn a_panicking_piece_is_passed_on() {
        let outcome = std::panic::catch_unwind(|| {
            in_order_on_two_threads(
                16,
                |p, text| {
                    if p == 9 {
                        panic!("piece 9");
                    }
                    text.push(b'x');
                    Ok(())
                },
                |_| Ok(()),
            )
        });
        assert!(outcome.is_err());
    }
}
