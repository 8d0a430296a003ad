//! A bundle whose chunks come from an id form (issue 25), packed
//! without building them: the body `halite_proto::bundle::pack` writes,
//! with the chunks' msgpack written by
//! `halite_state::id_memo::IdChunks::write_msgpack` (the id form encoded
//! once, the minion's id written into it). Every other field is encoded
//! by `rmp-serde` as `pack` does, and the map headers and keys with
//! `rmp`, the encoder `rmp-serde` is built on; the module's test and
//! `crates/master/tests/compile_id_form.rs` check the bytes against
//! `pack`'s for the same bundle.

use halite_proto::bundle::{digest, BundleError, Packed};
use halite_proto::msg::{Bundle, BundleAction};
use halite_state::id_memo::IdChunks;

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
                memo.compile(id, high, Default::default(), &StateModules::new(), &[])
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
}
