//! Independent pieces on threads of their own, results in order: how a
//! large YAML text's top-level entries are read.

/// `work` applied to every piece, the first on the calling thread and
/// each other one on a scoped thread of its own; the results come back in
/// the pieces' order. A piece whose thread cannot start is done on the
/// calling thread; one whose thread panicked gives `None`.
pub fn map_on_threads<T: Sync, R: Send>(
    pieces: &[T],
    work: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    let Some((first, rest)) = pieces.split_first() else {
        return Vec::new();
    };
    let work = &work;
    std::thread::scope(|scope| {
        let workers: Vec<_> = rest
            .iter()
            .map(|piece| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || work(piece))
                    .map_err(|_| piece)
            })
            .collect();
        let first = Some(work(first));
        std::iter::once(first)
            .chain(workers.into_iter().map(|worker| match worker {
                Ok(thread) => thread.join().ok(),
                Err(piece) => Some(work(piece)),
            }))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::map_on_threads;

    #[test]
    fn results_keep_the_pieces_order() {
        let pieces: Vec<usize> = (0..9).collect();
        let out = map_on_threads(&pieces, |p| p * 10);
        assert_eq!(out, (0..9).map(|p| Some(p * 10)).collect::<Vec<_>>());
        assert!(map_on_threads(&[] as &[usize], |p| *p).is_empty());
    }

    #[test]
    fn a_panicking_piece_gives_none() {
        let out = map_on_threads(&[1, 2, 3], |p| {
            if *p == 3 {
                panic!("piece 3");
            }
            *p
        });
        assert_eq!(out, vec![Some(1), Some(2), None]);
    }
}
