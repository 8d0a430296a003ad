//! Building the [`Host`] for a run on this machine from minion options:
//! grains, the file roots, and the pillar compiled from `pillar_roots`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use halite_state::Value;

use crate::host::EventSink;
use crate::{Host, LocalFileClient};

/// `file_roots`/`pillar_roots` of `opts` as saltenv -> directories.
pub fn roots_of(opts: &Value, key: &str) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = opts.get(key) {
        for (env, dirs) in m {
            let dirs: Vec<PathBuf> = match dirs {
                Value::Array(a) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .map(PathBuf::from)
                    .collect(),
                Value::String(s) => vec![PathBuf::from(s)],
                _ => Vec::new(),
            };
            out.insert(env.clone(), dirs);
        }
    }
    out
}

/// A host over the local file roots with real grains and the pillar
/// rendered from `pillar_roots`. Pillar render errors are returned too
/// (Salt refuses to run states when the pillar failed).
pub fn local_host(opts: Value, events: Arc<dyn EventSink>) -> (Host, Vec<String>) {
    let grains = Value::Object(crate::grains::grains_for(&opts));
    let files = Arc::new(LocalFileClient::new(roots_of(&opts, "file_roots")));
    let mut host = Host {
        opts: opts.clone(),
        grains,
        pillar: Value::Object(Default::default()),
        files,
        exec: crate::table::exec_modules(),
        states: crate::table::state_modules(),
        events,
    };
    // Custom Python modules and grains before the pillar: its top file
    // and templates may use them, as in Salt.
    crate::python::add_custom_modules(&mut host);
    crate::python::refresh_custom_grains(&mut host);
    let mut errors = Vec::new();
    if let Some((mut pillar, errs)) = local_pillar(&host) {
        // Salt's compile_pillar lists them in the pillar itself, last.
        if !errs.is_empty() {
            if let Value::Object(m) = &mut pillar {
                m.insert("_errors".into(), Value::from(errs.clone()));
            }
        }
        host.pillar = pillar;
        errors = errs;
    }
    (host, errors)
}

/// The pillar of `host` compiled from the `pillar_roots` of its options,
/// and the render errors; `None` when none of those directories exists.
pub fn local_pillar(host: &Host) -> Option<(Value, Vec<String>)> {
    let pillar_roots = roots_of(&host.opts, "pillar_roots");
    let sources = crate::ext_pillar::sources_from_opts(&host.opts);
    let has_roots = pillar_roots.values().flatten().any(|d| d.is_dir());
    if !has_roots && sources.is_empty() {
        return None;
    }
    let files = has_roots
        .then(|| Arc::new(LocalFileClient::new(pillar_roots)) as Arc<dyn halite_state::FileClient>);
    Some(crate::pillar_render::compile_full(host, files, &sources))
}
