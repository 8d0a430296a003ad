//! The reactor (Salt's Reactor System) inside the master: every event on
//! the master's bus whose tag matches a `reactor:` glob is handed, with
//! the SLS files it names, to a bounded queue (`reactor_worker_hwm`; when
//! full the reaction is dropped with a log line, never stalling the
//! master); `reactor_worker_threads` workers render those files (Jinja +
//! YAML, with `tag` and `data`) and run their reactions. A file that does
//! not render, or a reaction that fails, is logged and fires
//! `salt/reactor/error`; the master keeps serving.
//!
//! - [`config`]: the settings and the tag → SLS map;
//! - [`render`]: the SLS files of an event into reactions;
//! - [`compile`]: a rendered SLS into reactions and their arguments;
//! - [`act`]: one reaction through its client;
//! - [`wheel`]: the `key.*` wheel functions.

pub mod act;
pub mod compile;
pub mod config;
pub mod render;
pub mod wheel;

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use halite_modules::host::EventSink;
use halite_modules::Host;
use halite_transport::Shutdown;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::config::MasterConfig;
use crate::events::{BusEvent, EventBus, Interest, Subscription};
pub use act::{Clients, LocalCall, REACTOR_USER};
use config::{MapSource, ReactorSettings, Rule};

/// The tag of the event fired when a reactor SLS fails to render or a
/// reaction fails (Salt only logs these; halite also fires this, so an
/// operator can watch or react to it).
pub const ERROR_TAG: &str = "salt/reactor/error";

/// How often dropped reactions are summed up in the log at most.
const DROP_REPORT: Duration = Duration::from_secs(10);

/// An event and the reactor SLS files its tag selected.
struct Work {
    event: Arc<BusEvent>,
    sls: Vec<String>,
}

/// Fires straight onto the master's bus (the reactor lives in the master).
struct BusSink(EventBus);

impl EventSink for BusSink {
    fn fire(&self, tag: &str, data: &Value) {
        self.0.fire(tag, data.clone());
    }
}

/// Starts the reactor when `reactor:` is configured: the dispatcher task
/// (subscribed to `bus` now, so no event fired after this returns is
/// missed) and the worker threads. Nothing runs without a `reactor` key.
pub fn start(cfg: &MasterConfig, bus: &EventBus, local: LocalCall, shutdown: Shutdown) {
    let Some(settings) = ReactorSettings::from_config(cfg) else {
        return;
    };
    let (tx, rx) = sync_channel::<Work>(settings.hwm);
    let rx = Arc::new(Mutex::new(rx));
    let clients = Arc::new(Clients {
        cfg: cfg.clone(),
        local,
    });
    for n in 0..settings.threads {
        let rx = rx.clone();
        let clients = clients.clone();
        let bus = bus.clone();
        let refresh = settings.refresh;
        let spawned = std::thread::Builder::new()
            .name(format!("reactor-{n}"))
            .spawn(move || worker(&rx, &clients, &bus, refresh));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a reactor worker thread");
        }
    }
    tracing::info!(
        threads = settings.threads,
        hwm = settings.hwm,
        "reactor started"
    );
    // Subscribed now (no event fired after this returns is missed), to
    // the tags its map names: the bus builds no event for it otherwise.
    let rules = Rules::new(settings.map.clone(), settings.refresh);
    let events = bus.subscribe(rules.interest());
    tokio::spawn(dispatch(settings, rules, events, tx, shutdown));
}

/// The current rules, reread from the map file every refresh interval.
struct Rules {
    source: MapSource,
    rules: Vec<Rule>,
    read_at: Instant,
    refresh: Duration,
}

impl Rules {
    fn new(source: MapSource, refresh: Duration) -> Self {
        let rules = match &source {
            MapSource::Inline(rules) => rules.clone(),
            MapSource::File(path) => config::read_map_file(path),
        };
        Self {
            source,
            rules,
            read_at: Instant::now(),
            refresh,
        }
    }

    /// Rereads the map file when the refresh interval has passed; whether
    /// it did.
    fn reread(&mut self) -> bool {
        if let MapSource::File(path) = &self.source {
            if self.read_at.elapsed() >= self.refresh {
                self.rules = config::read_map_file(path);
                self.read_at = Instant::now();
                return true;
            }
        }
        false
    }

    /// The tags these rules react to, as the bus's interest.
    fn interest(&self) -> Interest {
        Interest::Globs(self.rules.iter().map(|r| r.glob.clone()).collect())
    }
}

/// Matches every bus event against the map and queues what matched; a
/// full queue drops the reaction (logged, summed every ten seconds).
async fn dispatch(
    settings: ReactorSettings,
    mut rules: Rules,
    mut events: Subscription,
    queue: SyncSender<Work>,
    shutdown: Shutdown,
) {
    let mut dropped: u64 = 0;
    let mut reported = Instant::now() - DROP_REPORT;
    // The map is reread on this tick too, not only when an event comes:
    // the bus sends only what the current map wants.
    // (At least a second: `interval` refuses a zero period.)
    let mut reread = tokio::time::interval(settings.refresh.max(Duration::from_secs(1)));
    reread.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            _ = shutdown.triggered() => return,
            _ = reread.tick() => {
                if rules.reread() {
                    events.set_interest(rules.interest());
                }
                continue;
            }
            event = events.recv() => event,
        };
        let event = match event {
            Ok(e) => e,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "the reactor fell behind the event bus; {n} events were not reacted to"
                );
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        // Salt skips the events of its own calls (no reaction loops).
        if event.head().get("user").and_then(Value::as_str) == Some(REACTOR_USER) {
            continue;
        }
        if rules.reread() {
            events.set_interest(rules.interest());
        }
        if !events.wants(&event.tag) {
            // Another subscriber's event.
            continue;
        }
        let sls = config::reactors_for(&rules.rules, &event.tag);
        if sls.is_empty() {
            continue;
        }
        match queue.try_send(Work { event, sls }) {
            Ok(()) => {}
            Err(TrySendError::Full(work)) => {
                dropped += 1;
                if reported.elapsed() >= DROP_REPORT {
                    tracing::error!(
                        tag = %work.event.tag,
                        dropped,
                        "Reactor failed to queue the reaction to this event: the queue is full ({} waiting). Consider tuning reactor_worker_threads and/or reactor_worker_hwm",
                        settings.hwm
                    );
                    dropped = 0;
                    reported = Instant::now();
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                tracing::error!("every reactor worker has stopped; no more reactions run");
                return;
            }
        }
    }
}

/// A worker: takes queued events one at a time and reacts to them, with
/// a master host (modules, grains) rebuilt every refresh interval.
fn worker(rx: &Mutex<Receiver<Work>>, clients: &Clients, bus: &EventBus, refresh: Duration) {
    let mut host: Option<(Host, Instant)> = None;
    loop {
        let work = {
            let guard = match rx.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            match guard.recv() {
                Ok(w) => w,
                Err(_) => return,
            }
        };
        let current = match host.take() {
            Some((h, at)) if at.elapsed() < refresh => (h, at),
            _ => (
                halite_runners::orchestrate::master_host(
                    &clients.cfg,
                    Arc::new(BusSink(bus.clone())),
                ),
                Instant::now(),
            ),
        };
        let reacted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            react(clients, &current.0, bus, &work)
        }));
        if reacted.is_err() {
            let tag = &work.event.tag;
            tracing::error!(%tag, "a reaction panicked; the reactor goes on");
            fire_error(
                bus,
                tag,
                None,
                None,
                "call",
                "the reaction panicked (a halite bug: please report it)",
            );
        }
        host = Some(current);
    }
}

/// Renders the event's SLS files and runs their reactions in order.
fn react(clients: &Clients, host: &Host, bus: &EventBus, work: &Work) {
    let tag = &work.event.tag;
    // A packed return is decoded here, for a rule that matched it.
    let data = work.event.data();
    let data = &*data;
    let rendered = render::reactions(host, &work.sls, tag, data);
    for failure in &rendered.errors {
        tracing::error!(%tag, sls = %failure.sls, "{}", failure.error);
        fire_error(
            bus,
            tag,
            Some(&failure.sls),
            None,
            failure.stage,
            &failure.error,
        );
    }
    for reaction in &rendered.reactions {
        let fun = format!("{}.{}", reaction.form.name(), reaction.fun);
        match act::run(clients, host, reaction) {
            Ok(ret) => {
                tracing::info!(%tag, reaction = %reaction.id, %fun, ret = %ret, "reaction ran")
            }
            Err(e) => {
                let text = format!(
                    "Reactor '{}' failed to execute {} '{}': {e}",
                    reaction.id,
                    reaction.form.name(),
                    reaction.fun
                );
                tracing::error!(%tag, sls = %reaction.sls, "{text}");
                fire_error(
                    bus,
                    tag,
                    Some(&reaction.sls),
                    Some((&reaction.id, &fun)),
                    "call",
                    &text,
                );
            }
        }
    }
}

/// Fires [`ERROR_TAG`] for a failure while reacting to `tag`.
fn fire_error(
    bus: &EventBus,
    tag: &str,
    sls: Option<&str>,
    reaction: Option<(&str, &str)>,
    stage: &str,
    error: &str,
) {
    bus.fire(
        ERROR_TAG,
        json!({
            "tag": tag,
            "sls": sls,
            "id": reaction.map(|r| r.0),
            "fun": reaction.map(|r| r.1),
            "stage": stage,
            "error": error,
            "user": REACTOR_USER,
        }),
    );
}
