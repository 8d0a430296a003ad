//! The depth limit on values a minion sends, applied where they arrive
//! (before they are cached, stored or fired): whatever the master keeps
//! it can read back on its next start, and the CLI can show.

use halite_proto::msg::{JobReturn, MinionRequest};
use halite_proto::{value_depth, MAX_VALUE_DEPTH};
use serde_json::Value;

use crate::return_writer::Received;

/// `request` with its values within [`MAX_VALUE_DEPTH`], or `None` when it
/// is dropped (logged). A return too deep is kept as an error return, so
/// the minion's job is not lost and not resent forever; grains or event
/// data too deep are dropped. A packed return's arguments too deep make it
/// an error return too; its bytes are checked by [`checked_return`], on
/// the job cache's writer thread (issue 25: the walk was a quarter of the
/// master's main task in a fleet highstate), before anything stores,
/// acknowledges or fires them.
pub fn bound_request(id: &str, request: MinionRequest) -> Option<MinionRequest> {
    match request {
        MinionRequest::Start { grains } if value_depth(&grains) > MAX_VALUE_DEPTH => {
            tracing::warn!(%id, max = MAX_VALUE_DEPTH, "grains nested too deeply; not cached (the previous grains stay)");
            None
        }
        MinionRequest::Event { tag, data } if value_depth(&data) > MAX_VALUE_DEPTH => {
            tracing::warn!(%id, tag = %clip_tag(&tag), max = MAX_VALUE_DEPTH, "event data nested too deeply; event dropped");
            None
        }
        MinionRequest::Events { mut events }
            if events
                .iter()
                .any(|e| value_depth(&e.data) > MAX_VALUE_DEPTH) =>
        {
            events.retain(|e| {
                let deep = value_depth(&e.data) > MAX_VALUE_DEPTH;
                if deep {
                    tracing::warn!(%id, tag = %clip_tag(&e.tag), max = MAX_VALUE_DEPTH, "event data nested too deeply; event dropped");
                }
                !deep
            });
            Some(MinionRequest::Events { events })
        }
        MinionRequest::Return(mut ret)
            if value_depth(&ret.ret) > MAX_VALUE_DEPTH
                || ret
                    .fun_args
                    .iter()
                    .any(|a| value_depth(a) >= MAX_VALUE_DEPTH) =>
        {
            tracing::warn!(%id, jid = %ret.jid, max = MAX_VALUE_DEPTH, "return nested too deeply; stored as an error");
            ret.ret = Value::String(format!(
                "The return of {} from minion {id} was nested more than {MAX_VALUE_DEPTH} levels deep and was refused by the master",
                ret.fun
            ));
            ret.fun_args.clear();
            ret.success = false;
            if ret.retcode == 0 {
                ret.retcode = 1;
            }
            Some(MinionRequest::Return(ret))
        }
        MinionRequest::PackedReturn(p)
            if p.fun_args.iter().any(|a| value_depth(a) >= MAX_VALUE_DEPTH) =>
        {
            let why = format!("had arguments nested more than {MAX_VALUE_DEPTH} levels deep");
            let ret = JobReturn {
                jid: p.jid,
                id: p.id,
                fun: p.fun,
                fun_args: Vec::new(),
                ret: Value::Null,
                retcode: p.retcode,
                success: p.success,
            };
            Some(MinionRequest::Return(refused(id, ret, &why)))
        }
        other => Some(other),
    }
}

/// `received` as it may be stored, acknowledged and fired: a framed
/// return is expanded first ([`halite_proto::packed::unframe`], within
/// [`halite_proto::packed::MAX_RETURN_BYTES`]); a packed return whose
/// frame cannot be expanded, or whose bytes are no value a minion may
/// send ([`halite_proto::packed::check`]: too deep, binary, bytes after
/// the value), becomes an error return, as a return too deep does.
pub fn checked_return(id: &str, mut received: Received) -> Received {
    if let (Some(frame), None) = (&received.frame, &received.packed) {
        match halite_proto::packed::unframe(frame, halite_proto::packed::MAX_RETURN_BYTES) {
            Ok(plain) => received.packed = Some(std::sync::Arc::new(plain)),
            Err(e) => return refused_received(id, received, &e.to_string()),
        }
    }
    let Some(bytes) = &received.packed else {
        return received;
    };
    let Err(e) = halite_proto::packed::check(bytes) else {
        return received;
    };
    refused_received(id, received, &e.to_string())
}

/// The error return that stands for `received`, refused for `error`.
fn refused_received(id: &str, received: Received, error: &str) -> Received {
    let Received { ret, arrived, .. } = received;
    Received {
        arrived,
        ..Received::plain(refused(id, ret, &format!("could not be read ({error})")))
    }
}

/// The error return that stands for packed return `ret` (its value not
/// decoded), refused for `why`: kept, so the job is not lost and the
/// minion does not resend it forever.
fn refused(id: &str, ret: JobReturn, why: &str) -> JobReturn {
    tracing::warn!(%id, jid = %ret.jid, "packed return refused: {why}; stored as an error");
    JobReturn {
        ret: Value::String(format!(
            "The return of {} from minion {id} {why} and was refused by the master",
            ret.fun
        )),
        fun_args: Vec::new(),
        success: false,
        retcode: if ret.retcode == 0 { 1 } else { ret.retcode },
        ..ret
    }
}

/// A tag for a log line: at most 200 bytes of it.
fn clip_tag(tag: &str) -> &str {
    let mut end = tag.len().min(200);
    while !tag.is_char_boundary(end) {
        end -= 1;
    }
    &tag[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use halite_proto::testing::nested;
    use serde_json::json;

    #[test]
    fn deep_values_are_refused_and_deep_returns_become_errors() {
        assert!(bound_request("m", MinionRequest::Start { grains: nested(65) }).is_none());
        assert!(bound_request("m", MinionRequest::Start { grains: nested(64) }).is_some());
        let event = MinionRequest::Event {
            tag: "my/tag".into(),
            data: nested(100),
        };
        assert!(bound_request("m", event).is_none());
        // In a batch, only the deep event goes; the others keep their order.
        let ev = |tag: &str, data: Value| halite_proto::msg::MinionEvent::plain(tag.into(), data);
        let batch = MinionRequest::Events {
            events: vec![
                ev("a", json!(1)),
                ev("deep", nested(100)),
                ev("b", nested(64)),
            ],
        };
        match bound_request("m", batch) {
            Some(MinionRequest::Events { events }) => {
                let tags: Vec<&str> = events.iter().map(|e| e.tag.as_str()).collect();
                assert_eq!(tags, ["a", "b"]);
            }
            other => panic!("{other:?}"),
        }
        let ret = JobReturn {
            jid: "20260101000000000001".into(),
            id: "m".into(),
            fun: "test.arg".into(),
            fun_args: vec![],
            ret: nested(100),
            retcode: 0,
            success: true,
        };
        match bound_request("m", MinionRequest::Return(ret)) {
            Some(MinionRequest::Return(r)) => {
                assert!(r
                    .ret
                    .as_str()
                    .is_some_and(|s| s.contains("nested more than 64")));
                assert_eq!((r.retcode, r.success), (1, false));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_packed_returns_become_error_returns() {
        let good = JobReturn {
            jid: "20260101000000000001".into(),
            id: "m".into(),
            fun: "state.apply".into(),
            fun_args: vec![json!("bench")],
            ret: json!({"a": 1}),
            retcode: 0,
            success: true,
        };
        let packed = halite_proto::msg::PackedReturn::pack(good.clone()).unwrap();
        assert_eq!(
            bound_request("m", MinionRequest::PackedReturn(packed.clone())),
            Some(MinionRequest::PackedReturn(packed.clone()))
        );
        let kept = checked_return("m", Received::packed(packed.clone()));
        assert_eq!(kept.packed.as_deref(), Some(&packed.ret.to_vec()));
        // Framed: expanded to the same bytes, the frame kept to be stored.
        let framed = packed.framed().unwrap();
        let kept = checked_return("m", Received::packed(framed.clone()));
        assert_eq!(kept.packed.as_deref(), Some(&packed.ret.to_vec()));
        assert_eq!(kept.frame.as_deref(), Some(&framed.ret.to_vec()));
        assert_eq!(kept.ret.retcode, 0);
        let frame = |bytes: &[u8]| halite_proto::packed::frame(bytes).unwrap();
        let bad_values = [
            (vec![0x92, 0x01], false),
            (vec![0xc4, 0x01, 0x00], false),
            (halite_proto::packed::pack(&nested(65)).unwrap(), false),
            // Frames: of bytes the check refuses, past the limit, not zstd.
            (frame(&[0xc4, 0x01, 0x00]), true),
            (
                frame(&vec![0xc0; halite_proto::packed::MAX_RETURN_BYTES + 1]),
                true,
            ),
            (vec![0x92, 0x01], true),
        ];
        for (bytes, zstd) in bad_values {
            let mut bad = packed.clone();
            bad.ret = serde_bytes::ByteBuf::from(bytes);
            bad.zstd = zstd;
            match checked_return("m", Received::packed(bad)) {
                Received {
                    ret: r,
                    packed: None,
                    frame: None,
                    ..
                } => {
                    assert!(r
                        .ret
                        .as_str()
                        .is_some_and(|s| s.contains("refused by the master")));
                    assert_eq!(
                        (r.retcode, r.success, r.jid.as_str()),
                        (1, false, good.jid.as_str())
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
