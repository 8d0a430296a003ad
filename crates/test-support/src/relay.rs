//! A TCP relay in front of the master's request port that a test
//! controls: it cuts every connection and refuses new ones until restored
//! (a minion's link going down), or holds back what the master sends
//! while the minion's requests still pass (replies and acknowledgements
//! late, the connection alive).

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A relay to one port on 127.0.0.1; minions connect to [`Relay::port`].
pub struct Relay {
    /// The port the relay listens on.
    pub port: u16,
    up: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    /// A relay to `target` on 127.0.0.1, passing everything.
    pub fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let held = Arc::new(AtomicBool::new(false));
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (up2, held2, live2) = (up.clone(), held.clone(), live.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !up2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let mut kept = live2.lock().unwrap();
                kept.push(client.try_clone().unwrap());
                kept.push(server.try_clone().unwrap());
                let never = Arc::new(AtomicBool::new(false));
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    never,
                );
                pipe(server, client, held2.clone());
            }
        });
        Relay {
            port,
            up,
            held,
            live,
        }
    }

    /// Cuts every connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for stream in self.live.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// While `held`, what the master sends waits in the relay (delivered
    /// in order once released); the minion's side still passes.
    pub fn hold_from_master(&self, held: bool) {
        self.held.store(held, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` on a thread of its own, each read waiting while
/// `held`; shuts `to` down when `from` ends.
fn pipe(mut from: TcpStream, mut to: TcpStream, held: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            while held.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.flush();
        let _ = to.shutdown(Shutdown::Both);
    });
}
