//! Per-state work of a large run spread over the machine's cores.
//!
//! Turning declarations into chunks is independent from one ID to the
//! next; for a tree of thousands of states, doing it in a few pieces on
//! scoped threads takes a good part of the compile off the critical path.
//! Results come back in the pieces' order, so what a run sees does not
//! depend on how many cores did the work.

use std::sync::{Mutex, OnceLock};

/// From this many items the work is split: below it, starting a thread
/// (~50 µs) costs more than it saves.
pub(crate) const SPLIT_MIN: usize = 2048;

/// How many pieces large work is cut into: the machine's cores (looked
/// up once), at most four.
pub(crate) fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}

/// How many pieces [`stream_pieces`] gets for `len` items: one below
/// [`SPLIT_MIN`] (no helper thread), else small enough that the calling
/// thread waits little for the first.
pub(crate) fn stream_piece_count(len: usize) -> usize {
    if len < SPLIT_MIN || threads() < 2 {
        1
    } else {
        16
    }
}

/// `items` cut into `n` runs of consecutive items of about equal length
/// (fewer when there are fewer items), in order.
pub(crate) fn split_vec<T>(mut items: Vec<T>, n: usize) -> Vec<Vec<T>> {
    let n = n.clamp(1, items.len().max(1));
    let (size, longer) = (items.len() / n, items.len() % n);
    // Cut from the end: the first `longer` pieces have one item more.
    let mut pieces: Vec<Vec<T>> = (1..n)
        .rev()
        .map(|i| items.split_off(i * size + i.min(longer)))
        .collect();
    pieces.push(items);
    pieces.reverse();
    pieces
}

/// `work` applied to each piece in order on a helper thread, while the
/// calling thread hands each result to `take` as soon as it is ready: a
/// two-stage pipeline, for work whose results must then be consumed in
/// order on one thread (chunks joining the graph). Without a helper
/// thread everything runs on the calling thread, in the same order. A
/// panic inside `work` is passed on as if the calling thread had run it.
pub(crate) fn stream_pieces<P: Send, R: Send>(
    pieces: Vec<P>,
    work: impl Fn(P) -> R + Sync,
    mut take: impl FnMut(R),
) {
    if pieces.len() < 2 {
        pieces.into_iter().map(&work).for_each(take);
        return;
    }
    let slot = Mutex::new(Some(pieces));
    let take_all = || {
        slot.lock()
            .ok()
            .and_then(|mut s| s.take())
            .unwrap_or_default()
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<R>(4);
    std::thread::scope(|scope| {
        let (work, take_all) = (&work, &take_all);
        let producer = std::thread::Builder::new().spawn_scoped(scope, move || {
            for piece in take_all() {
                if tx.send(work(piece)).is_err() {
                    break;
                }
            }
        });
        match producer {
            Ok(thread) => {
                for r in rx {
                    take(r);
                }
                if let Err(panic) = thread.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            Err(_) => take_all().into_iter().map(work).for_each(take),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_vec_keeps_order_and_sizes_close() {
        for (len, n) in [(0, 2), (1, 4), (5, 2), (10, 3), (10, 4), (7, 7), (3, 8)] {
            let items: Vec<usize> = (0..len).collect();
            let pieces = split_vec(items.clone(), n);
            assert!(pieces.len() <= n.max(1), "{len} items in {n}: {pieces:?}");
            assert!(pieces.iter().all(|p| !p.is_empty()) || len == 0);
            let max = pieces.iter().map(Vec::len).max().unwrap_or(0);
            let min = pieces.iter().map(Vec::len).min().unwrap_or(0);
            assert!(max - min <= 1 || len == 0, "{len} in {n}: {pieces:?}");
            assert_eq!(pieces.concat(), items);
        }
    }

    #[test]
    fn stream_pieces_hands_results_over_in_order() {
        for n in [1, 2, 16] {
            let pieces = split_vec((0..5000).collect::<Vec<u32>>(), n);
            let mut seen = Vec::new();
            stream_pieces(
                pieces,
                |p| p.iter().map(|i| i * 2).collect::<Vec<_>>(),
                |r| seen.extend(r),
            );
            assert_eq!(
                seen,
                (0..5000).map(|i| i * 2).collect::<Vec<_>>(),
                "{n} pieces"
            );
        }
    }

    #[test]
    fn stream_pieces_passes_a_workers_panic_on() {
        let pieces = split_vec((0..8).collect::<Vec<u32>>(), 4);
        let caught = std::panic::catch_unwind(|| {
            stream_pieces(pieces, |p| assert!(!p.contains(&7), "piece with 7"), |_| {})
        });
        assert!(caught.is_err());
    }
}
