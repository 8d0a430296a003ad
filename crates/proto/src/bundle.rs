//! A bundle packed once on the master for the wire (issue 25): encoded,
//! named by its digest, zstd-compressed when large, and unpacked on the
//! minion with every check a peer's bytes need.
//!
//! The digest covers what the minion is to do (pillar, action, commits,
//! the secrets to mask),
//! not the job id: two jobs whose compile gives the same bundle give the
//! same digest, so a minion that holds it is told "you have it" instead
//! of being sent it again.

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::msg::{Bundle, BundleAction};

/// The largest bundle a minion unpacks (after decompression): a bound on
/// what a compressed frame may expand to. Compression lets a bundle over
/// the frame limit through; this keeps a hostile one from filling memory.
pub const MAX_UNPACKED_BUNDLE_BYTES: usize = 8 * crate::frame::MAX_FRAME_BYTES;

/// The zstd level bundles are compressed at: level 3 (zstd's default)
/// shrinks a 1000-chunk bundle about tenfold in about a millisecond.
const ZSTD_LEVEL: i32 = 3;

/// What a bundle carries besides its job id, as packed on the wire.
#[derive(Serialize)]
struct BodyRef<'a> {
    pillar: &'a Value,
    action: &'a BundleAction,
    commits: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    saltenvs: &'a Option<Vec<String>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    secrets: &'a [String],
}

/// The owned form of [`BodyRef`], decoded on the minion (its chunks as `C`).
#[derive(Deserialize)]
struct Body<C> {
    pillar: Value,
    action: BundleAction<C>,
    #[serde(default)]
    commits: BTreeMap<String, String>,
    #[serde(default)]
    saltenvs: Option<Vec<String>>,
    #[serde(default)]
    secrets: Vec<String>,
}

/// A bundle encoded for the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    /// The sha256 (hex) of the encoded bundle before compression.
    pub digest: String,
    /// Whether [`Packed::bytes`] are zstd-compressed.
    pub zstd: bool,
    /// The encoded bundle (msgpack), compressed when `zstd`.
    pub bytes: Vec<u8>,
    /// The encoded size before compression.
    pub plain_len: usize,
}

/// Why a packed bundle could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The bundle could not be encoded (a value msgpack cannot carry).
    #[error("the bundle could not be encoded: {0}")]
    Encode(String),
    /// zstd failed to compress (out of memory, most likely).
    #[error("the bundle could not be compressed: {0}")]
    Compress(String),
    /// The compressed bytes are not a zstd frame, or expand past the limit.
    #[error("the bundle could not be decompressed: {0}")]
    Decompress(String),
    /// The bytes do not hash to the digest they came with.
    #[error(
        "the bundle's bytes do not match its digest {expected} (got {actual}); it was discarded"
    )]
    Digest {
        /// The digest announced.
        expected: String,
        /// The digest of the bytes received.
        actual: String,
    },
    /// The bytes are not a bundle of this protocol.
    #[error("the bundle is not valid: {0}")]
    Malformed(String),
}

impl Packed {
    /// This bundle zstd-compressed when its encoding is larger than
    /// `compress_above` bytes; as is when it is small, when compression
    /// does not shrink it, or when zstd fails (the plain bundle is as
    /// good, only larger).
    pub fn compressed_above(self, compress_above: usize) -> Packed {
        if self.zstd || self.plain_len <= compress_above {
            return self;
        }
        match compress(&self.bytes) {
            Ok(bytes) if bytes.len() < self.plain_len => Packed {
                bytes,
                zstd: true,
                ..self
            },
            _ => self,
        }
    }
}

/// The sha256 of `bytes`, as lowercase hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// Encodes `bundle` (without its job id) and names it by its digest;
/// compressed with zstd when the encoding is larger than `compress_above`
/// bytes (`None`: never).
pub fn pack(bundle: &Bundle, compress_above: Option<usize>) -> Result<Packed, BundleError> {
    let body = BodyRef {
        pillar: &bundle.pillar,
        action: &bundle.action,
        commits: &bundle.commits,
        saltenvs: &bundle.saltenvs,
        secrets: &bundle.secrets,
    };
    let plain = rmp_serde::to_vec_named(&body).map_err(|e| BundleError::Encode(e.to_string()))?;
    let packed = Packed {
        digest: digest(&plain),
        zstd: false,
        plain_len: plain.len(),
        bytes: plain,
    };
    Ok(match compress_above {
        Some(limit) => packed.compressed_above(limit),
        None => packed,
    })
}

/// The encoded bundle inside `bytes` (decompressed when `zstd`), checked
/// against `expected` digest and bounded by [`MAX_UNPACKED_BUNDLE_BYTES`].
pub fn plain_bytes(bytes: &[u8], zstd: bool, expected: &str) -> Result<Vec<u8>, BundleError> {
    let plain = if zstd {
        decompress(bytes)?
    } else {
        bytes.to_vec()
    };
    let actual = digest(&plain);
    if actual != expected {
        return Err(BundleError::Digest {
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(plain)
}

/// `plain` compressed as [`pack`] compresses bundles (a minion keeps the
/// bundles it holds this way).
pub fn compress(plain: &[u8]) -> Result<Vec<u8>, BundleError> {
    zstd::bulk::compress(plain, ZSTD_LEVEL).map_err(|e| BundleError::Compress(e.to_string()))
}

/// The bytes of a zstd frame, refused past [`MAX_UNPACKED_BUNDLE_BYTES`].
/// A frame that names its size (every bundle [`compress`] made) is
/// decompressed in one call into a buffer of that size, refused if it
/// expands past it (issue 25: a warm minion's kept bundle grew its buffer
/// by doubling, a copy per doubling); any other is read in a stream, so a
/// small hostile frame cannot make a large allocation.
pub fn decompress(bytes: &[u8]) -> Result<Vec<u8>, BundleError> {
    let named = zstd::zstd_safe::get_frame_content_size(bytes)
        .ok()
        .flatten()
        .and_then(|size| usize::try_from(size).ok());
    match named {
        Some(size) if size <= MAX_UNPACKED_BUNDLE_BYTES => {
            zstd::bulk::decompress(bytes, size).map_err(|e| BundleError::Decompress(e.to_string()))
        }
        Some(_) => Err(BundleError::Decompress(format!(
            "it expands past the {MAX_UNPACKED_BUNDLE_BYTES}-byte limit"
        ))),
        None => decompress_stream(bytes),
    }
}

/// [`decompress`] of a frame that does not name its size.
fn decompress_stream(bytes: &[u8]) -> Result<Vec<u8>, BundleError> {
    let decoder = zstd::stream::read::Decoder::new(bytes)
        .map_err(|e| BundleError::Decompress(e.to_string()))?;
    let mut out = Vec::new();
    decoder
        .take(MAX_UNPACKED_BUNDLE_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| BundleError::Decompress(e.to_string()))?;
    if out.len() > MAX_UNPACKED_BUNDLE_BYTES {
        return Err(BundleError::Decompress(format!(
            "it expands past the {MAX_UNPACKED_BUNDLE_BYTES}-byte limit"
        )));
    }
    Ok(out)
}

/// The bundle of job `jid` from its encoded bytes (as [`plain_bytes`]
/// gives them), decoded with the frame decoder's depth bound, each low
/// chunk straight into `C` (`Value`, or the engine's own chunk type: the
/// bytes are read once whichever it is).
pub fn decode_plain<C: serde::de::DeserializeOwned>(
    jid: &str,
    plain: &[u8],
) -> Result<Bundle<C>, BundleError> {
    let mut de = rmp_serde::Deserializer::from_read_ref(plain);
    de.set_max_depth(crate::frame::MAX_DECODE_DEPTH);
    let body =
        Body::<C>::deserialize(&mut de).map_err(|e| BundleError::Malformed(e.to_string()))?;
    Ok(Bundle {
        jid: jid.to_string(),
        pillar: body.pillar,
        action: body.action,
        commits: body.commits,
        saltenvs: body.saltenvs,
        secrets: body.secrets,
    })
}

/// Unpacks a bundle the master packed for job `jid`: decompressed, its
/// digest checked, decoded.
pub fn unpack(jid: &str, bytes: &[u8], zstd: bool, expected: &str) -> Result<Bundle, BundleError> {
    decode_plain(jid, &plain_bytes(bytes, zstd, expected)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bundle(jid: &str, n: usize) -> Bundle {
        let chunks = (0..n)
            .map(|i| json!({"state": "test", "__id__": format!("s{i}"), "fun": "succeed_without_changes", "name": format!("/srv/out/web1/file{i}")}))
            .collect();
        Bundle {
            jid: jid.into(),
            pillar: json!({"role": "web"}),
            action: BundleAction::Run {
                chunks,
                files: BTreeMap::new(),
                yamlex: Vec::new(),
            },
            commits: BTreeMap::new(),
            saltenvs: None,
            secrets: Vec::new(),
        }
    }

    #[test]
    fn the_digest_ignores_the_job_and_follows_the_content() {
        let a = pack(&bundle("20260101000000000001", 10), None).unwrap();
        let b = pack(&bundle("20260101000000000002", 10), None).unwrap();
        let c = pack(&bundle("20260101000000000002", 11), None).unwrap();
        assert_eq!(a.digest, b.digest);
        assert_ne!(a.digest, c.digest);
        assert!(!a.zstd);
    }

    #[test]
    fn a_large_bundle_is_compressed_and_round_trips() {
        let original = bundle("20260101000000000001", 1000);
        let packed = pack(&original, Some(4096)).unwrap();
        assert!(packed.zstd);
        assert!(packed.bytes.len() * 4 < packed.plain_len, "{packed:?}");
        let back = unpack(&original.jid, &packed.bytes, true, &packed.digest).unwrap();
        assert_eq!(back, original);
        // Below the threshold it stays plain.
        assert!(!pack(&original, Some(packed.plain_len)).unwrap().zstd);
    }

    /// `RequestBody::Bundle` as peers before issue 25 encode and decode it.
    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    enum OldRequestBody {
        Bundle { jid: String },
    }

    #[test]
    fn the_bundle_request_stays_readable_by_and_from_older_peers() {
        use crate::msg::RequestBody;
        use crate::{decode, encode};
        // An older minion's request: read as "holds nothing, reads only
        // the plain bundle", so the master answers it as before.
        let old = encode(&OldRequestBody::Bundle { jid: "j1".into() }).unwrap();
        assert_eq!(
            decode::<RequestBody>(&old).unwrap(),
            RequestBody::Bundle {
                jid: "j1".into(),
                have: None,
                packed: false,
                kept_calls: false,
            }
        );
        // A newer minion's request, read by an older master: the new
        // fields are ignored and the plain bundle comes back.
        let new = encode(&RequestBody::Bundle {
            jid: "j2".into(),
            have: Some("ab".repeat(32)),
            packed: true,
            kept_calls: true,
        })
        .unwrap();
        assert_eq!(
            decode::<OldRequestBody>(&new).unwrap(),
            OldRequestBody::Bundle { jid: "j2".into() }
        );
    }

    /// The packed body as masters before the `secrets` field wrote and
    /// read it.
    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct OldBody {
        pillar: Value,
        action: BundleAction,
        #[serde(default)]
        commits: BTreeMap<String, String>,
    }

    #[test]
    fn the_saltenvs_a_highstate_matched_travel_and_older_peers_read_around_them() {
        let mut highstate = bundle("j", 3);
        highstate.saltenvs = Some(vec!["base".into(), "dev".into()]);
        let packed = pack(&highstate, None).unwrap();
        let back = unpack("j", &packed.bytes, false, &packed.digest).unwrap();
        assert_eq!(back.saltenvs, highstate.saltenvs);
        // They are part of what the minion is to do: another digest.
        assert_ne!(packed.digest, pack(&bundle("j", 3), None).unwrap().digest);
        // An older minion reads the body and ignores the field.
        let old: OldBody = rmp_serde::from_slice(&packed.bytes).unwrap();
        assert_eq!(old.pillar, highstate.pillar);
        // An older master's body says nothing: None, so the minion reads
        // the top file itself.
        let plain = rmp_serde::to_vec_named(&OldBody {
            pillar: json!({}),
            action: BundleAction::Call,
            commits: BTreeMap::new(),
        })
        .unwrap();
        assert_eq!(decode_plain::<Value>("j", &plain).unwrap().saltenvs, None);
        // The unpacked reply of older minions carries it the same way.
        let framed = crate::encode(&crate::msg::ReplyBody::Bundle(highstate.clone())).unwrap();
        match crate::decode::<crate::msg::ReplyBody>(&framed).unwrap() {
            crate::msg::ReplyBody::Bundle(b) => assert_eq!(b.saltenvs, highstate.saltenvs),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn secrets_travel_in_the_bundle_and_older_peers_ignore_them() {
        let mut with = bundle("j", 2);
        with.secrets = vec!["Secret-77".into()];
        let packed = pack(&with, None).unwrap();
        // A new minion reads them; they count in the digest.
        assert_eq!(
            unpack("j", &packed.bytes, false, &packed.digest).unwrap(),
            with
        );
        assert_ne!(packed.digest, pack(&bundle("j", 2), None).unwrap().digest);
        // An older minion decodes the same bytes and ignores them.
        let old: OldBody = rmp_serde::from_slice(&packed.bytes).unwrap();
        assert_eq!(old.pillar, with.pillar);
        // An older master's body (and a bundle without secrets) has none,
        // and packs exactly as before.
        let old_bytes = rmp_serde::to_vec_named(&OldBody {
            pillar: with.pillar.clone(),
            action: with.action.clone(),
            commits: BTreeMap::new(),
        })
        .unwrap();
        assert!(decode_plain::<Value>("j", &old_bytes)
            .unwrap()
            .secrets
            .is_empty());
        assert_eq!(old_bytes, pack(&bundle("j", 2), None).unwrap().bytes);
        // The plain message form tolerates both directions too.
        let plain = crate::encode(&with).unwrap();
        let back: crate::msg::Bundle = crate::decode(&plain).unwrap();
        assert_eq!(back.secrets, with.secrets);
        let without = crate::encode(&bundle("j", 2)).unwrap();
        assert!(!String::from_utf8_lossy(&without).contains("secrets"));
    }

    #[test]
    fn frames_with_and_without_their_size_decompress_alike() {
        use std::io::Write;
        let plain = pack(&bundle("j", 300), None).unwrap().bytes;
        // As bundles are compressed: the frame names its size.
        let sized = compress(&plain).unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&sized).unwrap(),
            Some(plain.len() as u64)
        );
        assert_eq!(decompress(&sized).unwrap(), plain);
        // A streamed frame does not: read in a stream, the same bytes.
        let mut streamed = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        streamed.write_all(&plain).unwrap();
        let streamed = streamed.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&streamed).unwrap(),
            None
        );
        assert_eq!(decompress(&streamed).unwrap(), plain);
        // A frame that expands past the size it names is refused.
        let mut longer = sized.clone();
        longer.extend_from_slice(&compress(b"more").unwrap());
        assert!(matches!(
            decompress(&longer),
            Err(BundleError::Decompress(_))
        ));
    }

    #[test]
    fn tampered_or_hostile_bytes_are_errors() {
        let packed = pack(&bundle("j", 100), Some(0)).unwrap();
        let mut bad = packed.bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(unpack("j", &bad, true, &packed.digest).is_err());
        assert!(matches!(
            unpack("j", &packed.bytes, true, "00"),
            Err(BundleError::Digest { .. })
        ));
        assert!(unpack("j", b"not zstd", true, &packed.digest).is_err());
        // A small frame that expands past the bound is refused, not read.
        let bomb = zstd::bulk::compress(&vec![0u8; MAX_UNPACKED_BUNDLE_BYTES + 1], 3).unwrap();
        assert!(bomb.len() < 1 << 20);
        assert!(matches!(
            plain_bytes(&bomb, true, "00"),
            Err(BundleError::Decompress(_))
        ));
    }
}
