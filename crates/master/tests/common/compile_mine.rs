//! The master's own mine store as its compile threads read it, for tests
//! that compile in-process (no daemon): the state task's part played by a
//! thread of the test.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use halite_master::compiler::MineFactory;
use halite_master::mine::{CompileMine, MineQuestion, MineStore};
use halite_proto::mine::MineRequest;
use serde_json::json;

/// The master's own mine store (SQLite in `dir`), answering the compile
/// threads' `mine.get` on a thread of its own as the state task does;
/// `ips` is each minion's `network.ip_addrs`.
pub fn mine(dir: &Path, ips: &[(&str, &str)]) -> MineFactory {
    mine_with_store(dir, ips).0
}

/// [`mine`], with the store itself, to change a minion's data later
/// ([`set_ip`]).
pub fn mine_with_store(dir: &Path, ips: &[(&str, &str)]) -> (MineFactory, Arc<Mutex<MineStore>>) {
    let store = Arc::new(Mutex::new(
        MineStore::open(&dir.join("mine.sqlite")).unwrap(),
    ));
    for (id, ip) in ips {
        set_ip(&store, id, ip);
    }
    let known: Vec<String> = ips.iter().map(|(id, _)| id.to_string()).collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<MineQuestion>();
    let answering = store.clone();
    std::thread::spawn(move || {
        while let Some(question) = rx.blocking_recv() {
            let answer = answering.lock().unwrap().answer(
                &question.requester,
                question.request,
                |tgt, _| {
                    Ok(known
                        .iter()
                        .filter(|id| tgt == "*" || tgt == *id)
                        .cloned()
                        .collect())
                },
            );
            let _ = question
                .reply
                .send(answer.unwrap_or_else(|| Err("not a mine.get".into())));
        }
    });
    let factory: MineFactory =
        Arc::new(move |id: &str| CompileMine::link(id, tx.clone(), Duration::from_secs(30)));
    (factory, store)
}

/// Stores `ip` as minion `id`'s `network.ip_addrs` in the mine.
pub fn set_ip(store: &Mutex<MineStore>, id: &str, ip: &str) {
    let data = json!({"network.ip_addrs": [ip]});
    let request = MineRequest::Store {
        data: data.as_object().unwrap().clone(),
        clear: true,
    };
    store
        .lock()
        .unwrap()
        .answer(id, request, |_, _| Ok(Vec::new()));
}
