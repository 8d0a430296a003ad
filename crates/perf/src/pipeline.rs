//! Per-state work of a large run as a two-stage pipeline on two threads.
//!
//! Turning declarations into chunks is independent from one ID to the
//! next, and adding them to the graph is a separate step: for a tree of
//! thousands of states, the two run as a pipeline on two threads, which
//! takes a good part of the compile off the critical path. Results are
//! taken in the pieces' order, so what a run sees does not depend on how
//! many cores did the work.

use std::sync::Mutex;

use crate::options::{COMPILE_PIECES, SPLIT_MIN};
use crate::second_core;

/// How many pieces [`fold_on_helper`] gets for `len` items: one below
/// [`SPLIT_MIN`] or on one core (no helper thread), else small enough
/// that the helper waits little for the first.
pub fn piece_count(len: usize) -> usize {
    if len < SPLIT_MIN || !second_core() {
        1
    } else {
        COMPILE_PIECES
    }
}

/// `items` cut into `n` runs of consecutive items of about equal length
/// (fewer when there are fewer items), in order.
pub fn split_vec<T>(mut items: Vec<T>, n: usize) -> Vec<Vec<T>> {
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

/// `work` applied to each piece in order on the calling thread, while a
/// helper thread folds each result into `acc` with `take` as soon as it
/// is ready; returns `acc`: a two-stage pipeline whose first stage stays
/// on the calling thread, so that what it frees was mostly allocated by
/// that thread (freeing another thread's blocks costs mimalloc several
/// times as much). Without a helper thread everything runs on the
/// calling thread, in the same order. A panic in `take` is passed on as
/// if the calling thread had run it.
pub fn fold_on_helper<P, R: Send, A: Send + Default>(
    pieces: Vec<P>,
    work: impl Fn(P) -> R,
    acc: A,
    take: impl Fn(&mut A, R) + Sync,
) -> A {
    let here = |pieces: Vec<P>, mut acc: A| {
        for p in pieces {
            take(&mut acc, work(p));
        }
        acc
    };
    if pieces.len() < 2 {
        return here(pieces, acc);
    }
    // The accumulator waits in a slot: taken by the helper, or by the
    // calling thread when the helper did not start.
    let slot = Mutex::new(Some(acc));
    let take_acc = || {
        slot.lock()
            .ok()
            .and_then(|mut s| s.take())
            .unwrap_or_default()
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<R>(4);
    std::thread::scope(|scope| {
        let (take_acc, take) = (&take_acc, &take);
        let helper = std::thread::Builder::new().spawn_scoped(scope, move || {
            let mut acc = take_acc();
            for r in rx {
                take(&mut acc, r);
            }
            acc
        });
        let Ok(helper) = helper else {
            return here(pieces, take_acc());
        };
        for p in pieces {
            if tx.send(work(p)).is_err() {
                break;
            }
        }
        drop(tx);
        helper
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
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
    fn fold_on_helper_takes_results_in_order() {
        for n in [1, 2, 16] {
            let pieces = split_vec((0..5000).collect::<Vec<u32>>(), n);
            let seen = fold_on_helper(
                pieces,
                |p| p.iter().map(|i| i * 2).collect::<Vec<_>>(),
                Vec::new(),
                |seen, r| seen.extend(r),
            );
            assert_eq!(
                seen,
                (0..5000).map(|i| i * 2).collect::<Vec<_>>(),
                "{n} pieces"
            );
        }
    }

    #[test]
    fn fold_on_helper_passes_a_helpers_panic_on() {
        let pieces = split_vec((0..8).collect::<Vec<u32>>(), 4);
        let caught = std::panic::catch_unwind(|| {
            fold_on_helper(
                pieces,
                |p| p,
                0usize,
                |n, p| {
                    assert!(!p.contains(&7), "piece with 7");
                    *n += p.len();
                },
            )
        });
        assert!(caught.is_err());
    }
}
