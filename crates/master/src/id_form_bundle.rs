//! A bundle whose chunks come from an id form (issue 25), packed
//! without building them: the body `halite_proto::bundle::pack` writes,
//! with the chunks' msgpack written by
//! `halite_state::id_memo::IdChunks::write_msgpack` (the id form encoded
//! once, the minion's id written into it). Every other field is encoded
//! by `rmp-serde` as `pack` does, and the map headers and keys with
//! `rmp`, the encoder `rmp-serde` is built on; the module's test and
//! `crates/master/tests/compile_id_form.rs` check the bytes against
//! `pack`'s for the same bundle.
//!
//! What else a bundle reads from its chunks (the `salt://` sources of
//! its manifest, its saltenvs) is read from an id form once
//! ([`FormReads`]), and put back per minion.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use halite_proto::bundle::{digest, BundleError, Packed};
use halite_proto::msg::{Bundle, BundleAction};
use halite_state::id_memo::{IdChunks, PLACEHOLDER};
use serde_json::Value;

use crate::fileserver::SourceRefs;

/// `pack(bundle, None)` of `bundle` with its `Run` action's chunks being
/// `chunks` (the action's own `chunks` are ignored: empty).
pub fn pack_id_form(bundle: &Bundle, chunks: &IdChunks) -> Result<Packed, BundleError> {
    let BundleAction::Run { files, yamlex, .. } = &bundle.action else {
        return Err(BundleError::Encode(
            "an id form's chunks in a bundle that runs nothing".into(),
        ));
    };
    let encode = |e: rmp_serde::encode::Error| BundleError::Encode(e.to_string());
    let mut out = Vec::with_capacity(chunks.encoded_len() + chunks.encoded_len() / 8 + 256);
    let fields =
        3 + usize::from(bundle.saltenvs.is_some()) + usize::from(!bundle.secrets.is_empty());
    // The body's fields in `BodyRef`'s order (halite_proto::bundle).
    map_len(&mut out, fields);
    key(&mut out, "pillar");
    rmp_serde::encode::write_named(&mut out, &bundle.pillar).map_err(encode)?;
    key(&mut out, "action");
    // An externally tagged struct variant: `{"Run": {fields}}`.
    map_len(&mut out, 1);
    key(&mut out, "Run");
    map_len(&mut out, 2 + usize::from(!yamlex.is_empty()));
    key(&mut out, "chunks");
    chunks.write_msgpack(&mut out);
    key(&mut out, "files");
    rmp_serde::encode::write_named(&mut out, files).map_err(encode)?;
    if !yamlex.is_empty() {
        key(&mut out, "yamlex");
        rmp_serde::encode::write_named(&mut out, yamlex).map_err(encode)?;
    }
    key(&mut out, "commits");
    rmp_serde::encode::write_named(&mut out, &bundle.commits).map_err(encode)?;
    if let Some(saltenvs) = &bundle.saltenvs {
        key(&mut out, "saltenvs");
        rmp_serde::encode::write_named(&mut out, saltenvs).map_err(encode)?;
    }
    if !bundle.secrets.is_empty() {
        key(&mut out, "secrets");
        rmp_serde::encode::write_named(&mut out, &bundle.secrets).map_err(encode)?;
    }
    Ok(Packed {
        digest: digest(&out),
        zstd: false,
        plain_len: out.len(),
        bytes: out,
    })
}

/// How many id forms' reads are kept (the id form memo keeps 16; a
/// fleet's job has one or a few).
const KEPT: usize = 4;

/// The strings of an id form's chunks a bundle reads besides the chunks
/// ([`FormReads::of`]), with [`PLACEHOLDER`] where the id goes: read
/// them through [`IdChunks::put_back`].
#[derive(Debug)]
pub struct FormStrings {
    /// The strings the `salt://` manifest reads: every one that may put
    /// back to a `salt://` URL for some id ([`may_put_back_to_url`]).
    pub sources: SourceRefs,
    /// The chunks' distinct `__env__` strings.
    pub envs: BTreeSet<String>,
}

impl FormStrings {
    /// The strings `chunks` (an id form's) are read for.
    pub fn new(chunks: &[Value]) -> Self {
        Self {
            sources: SourceRefs::new(chunks, &may_put_back_to_url),
            envs: chunks
                .iter()
                .filter_map(|c| c.get("__env__").and_then(Value::as_str))
                .map(str::to_string)
                .collect(),
        }
    }
}

/// [`FormStrings`] of the last few id forms, read once per form instead
/// of once per minion: the walk of a 1,000-state form's chunks for its
/// sources and saltenvs was ~5% of the cold master (issue
/// 25, session 22). A form is known by its chunks' address, which cannot
/// be another form's while the entry holds the form (its `IdChunks`).
#[derive(Default)]
pub struct FormReads {
    kept: Mutex<VecDeque<(IdChunks, Arc<FormStrings>)>>,
}

impl FormReads {
    /// The strings of `form`'s chunks, read now if its form is not kept.
    pub fn of(&self, form: &IdChunks) -> Arc<FormStrings> {
        let same = |kept: &IdChunks| std::ptr::eq(kept.form_chunks(), form.form_chunks());
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, strings)) = kept.iter().find(|(k, _)| same(k)) {
            return strings.clone();
        }
        let strings = Arc::new(FormStrings::new(form.form_chunks()));
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back((form.clone(), strings.clone()));
        strings
    }
}

/// Whether `s`, a string of an id form, puts back to a `salt://` URL for
/// some id: it starts with `salt://`, or what comes before its first
/// placeholder is a start of `salt://` (an id can complete the prefix).
/// Every other string puts back to a string starting with neither.
pub fn may_put_back_to_url(s: &str) -> bool {
    const PREFIX: &str = "salt://";
    if s.starts_with(PREFIX) {
        return true;
    }
    s.find(PLACEHOLDER)
        .is_some_and(|at| PREFIX.starts_with(&s[..at]))
}

// Writing to a `Vec` cannot fail: the `rmp` results below are `Ok`.

fn map_len(out: &mut Vec<u8>, len: usize) {
    let _ = rmp::encode::write_map_len(out, len as u32);
}

fn key(out: &mut Vec<u8>, key: &str) {
    let _ = rmp::encode::write_str(out, key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use halite_proto::bundle::pack;
    use halite_state::id_memo::{Compiled, IdFormMemo};
    use halite_state::StateModules;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    /// web2's chunks from the id form web1 compiled (its second sight).
    fn web2_chunks() -> IdChunks {
        let memo = IdFormMemo::new();
        let mut last = None;
        for id in ["web1", "web2"] {
            let Value::Object(high) = json!({
                format!("{id}_x"): {"test": ["nop", {"name": format!("/srv/{id}/{}", "y".repeat(30))}],
                                     "__sls__": "s", "__env__": "base"},
                "plain": {"test": ["nop"], "__sls__": "s", "__env__": "base"},
            }) else {
                unreachable!()
            };
            last = Some(
                memo.compile(
                    id,
                    high,
                    Default::default(),
                    &StateModules::new(),
                    &[],
                    None,
                )
                .0
                .unwrap(),
            );
        }
        match last {
            Some(Compiled::Form(chunks)) => chunks,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_bytes_are_pack_s_for_every_shape_of_the_body() {
        let chunks = web2_chunks();
        for shape in 0..16u8 {
            let mut bundle = Bundle {
                jid: "j".into(),
                pillar: json!({"role": "web", "n": [1, -2, 3.5]}),
                action: BundleAction::Run {
                    chunks: Vec::new(),
                    files: BTreeMap::from([(
                        "base".to_string(),
                        BTreeMap::from([("f".to_string(), "ab".repeat(32))]),
                    )]),
                    yamlex: if shape & 1 == 1 {
                        vec![(1, 3)]
                    } else {
                        Vec::new()
                    },
                },
                commits: if shape & 2 == 2 {
                    BTreeMap::from([("r base".to_string(), "c0ffee".to_string())])
                } else {
                    BTreeMap::new()
                },
                saltenvs: (shape & 4 == 4).then(|| vec!["base".to_string()]),
                secrets: if shape & 8 == 8 {
                    vec!["s3cret".into()]
                } else {
                    Vec::new()
                },
            };
            let ours = pack_id_form(&bundle, &chunks).unwrap();
            if let BundleAction::Run { chunks: c, .. } = &mut bundle.action {
                *c = chunks.values();
            }
            assert!(
                String::from_utf8_lossy(&ours.bytes).contains("/srv/web2/"),
                "{shape}"
            );
            assert_eq!(ours, pack(&bundle, None).unwrap(), "shape {shape}");
        }
    }

    #[test]
    fn a_string_is_a_url_candidate_when_some_id_can_make_it_one() {
        let p = PLACEHOLDER;
        for s in [
            "salt://x".to_string(),
            format!("salt://{p}"),
            format!("{p}//x"),
            format!("sal{p}//x"),
            format!("salt:/{p}x"),
        ] {
            assert!(may_put_back_to_url(&s), "{s}");
        }
        for s in [
            "/srv/x".to_string(),
            "salt:/x".to_string(),
            format!("x{p}"),
            format!("salx{p}"),
            format!("/salt://{p}"),
        ] {
            assert!(!may_put_back_to_url(&s), "{s}");
        }
    }
}
