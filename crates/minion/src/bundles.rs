//! The last bundle each minion identity received, kept so the master need
//! not send it again (issue 25): the request names its digest, and a
//! master whose compile gives the same answers "you have it".
//!
//! Kept on disk, zstd-compressed, one file per identity under
//! `cachedir/bundles/`, and checked against its digest whenever it is
//! read: a file damaged or changed on disk is dropped and the bundle
//! asked for in full. The last bundles decoded are also kept in memory,
//! within a bound over all identities ([`crate::decoded`]: a real
//! minion's one bundle; a swarm of 10,000 identities holds a few).
//!
//! Every kept bundle is sealed with a key held in this process's memory
//! only ([`MemoryKey`]): a bundle holds the minion's pillar, plain values
//! as well as gpg-decrypted ones (`Bundle::secrets`), and Salt's minion
//! never writes its pillar to disk. After a restart the files cannot be
//! read, so each identity's first job asks for its bundle in full.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::RwLock;

use halite_modules::exec::file::meta::FileStamp;
use halite_proto::bundle::{compress, decode_plain, decompress, digest, plain_bytes, BundleError};
use halite_proto::crypto::MemoryKey;
use halite_proto::msg::Bundle;
use halite_state::LowChunk;

use crate::decoded::{DecodedBundles, DEFAULT_BOUND_BYTES};

/// How a sealed bundle file starts (a plain one is a zstd frame).
const SEALED: &[u8] = b"halite sealed bundle 1\n";

/// The bundles this minion's identities hold, by identity.
pub struct BundleStore {
    dir: PathBuf,
    /// The digest of each identity's file, once read or written.
    digests: RwLock<HashMap<String, String>>,
    /// Seals every kept bundle (`None` when the system's random
    /// generator failed: bundles are then not kept at all).
    key: Option<MemoryKey>,
    /// The last bundles decoded, kept in memory within a bound: a warm
    /// job whose bundle is unchanged copies it instead of decoding its file.
    decoded: DecodedBundles,
}

impl BundleStore {
    /// A store in `dir` (created when the first bundle is kept).
    pub fn new(dir: PathBuf) -> Self {
        Self::with_decoded_bound(dir, DEFAULT_BOUND_BYTES)
    }

    /// A store in `dir` keeping at most `bound` bytes of decoded bundles
    /// in memory over all identities ([`DecodedBundles`]; 0: none).
    pub fn with_decoded_bound(dir: PathBuf, bound: usize) -> Self {
        Self {
            dir,
            decoded: DecodedBundles::new(bound),
            digests: RwLock::new(HashMap::new()),
            key: MemoryKey::new()
                .map_err(|e| tracing::warn!(error = %e, "no in-memory key: bundles will not be kept (every job fetches its bundle in full)"))
                .ok(),
        }
    }

    /// The compressed bundle in `id`'s file, opened when it is sealed.
    fn read(&self, id: &str) -> Result<Vec<u8>, String> {
        let path = self
            .path(id)
            .ok_or_else(|| format!("minion id {id:?} cannot name a file"))?;
        let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
        match bytes.strip_prefix(SEALED) {
            None => Err("it was kept unsealed by an older halite".to_string()),
            Some(sealed) => self
                .key
                .as_ref()
                .ok_or_else(|| "no key to open it".to_string())?
                .open(sealed)
                .map_err(|_| {
                    "it was sealed by an earlier run of this minion (its key is gone)".to_string()
                }),
        }
    }

    /// The file of identity `id`; `None` for an id unsafe as a file name.
    fn path(&self, id: &str) -> Option<PathBuf> {
        halite_proto::validate_minion_id(id).ok()?;
        Some(self.dir.join(format!("{id}.bundle")))
    }

    /// The digest of the bundle `id` holds, to send with its request.
    pub fn digest(&self, id: &str) -> Option<String> {
        if let Some(d) = self.digests.read().ok().and_then(|m| m.get(id).cloned()) {
            return Some(d);
        }
        let plain = decompress(&self.read(id).ok()?).ok()?;
        let d = digest(&plain);
        if let Ok(mut m) = self.digests.write() {
            m.insert(id.to_string(), d.clone());
        }
        Some(d)
    }

    /// The bundle `id` holds, for job `jid`, if its digest is `expected`
    /// (the master said "you have it"); `None` when it is gone or differs.
    /// A copy of the one decoded for the last job when it is kept in
    /// memory under the same digest and its file is unchanged; else its
    /// file's chunks are decoded straight into the engine's.
    pub fn load(&self, id: &str, jid: &str, expected: &str) -> Option<Bundle<LowChunk>> {
        let path = self.path(id)?;
        let stamp = FileStamp::of(&path);
        if let Some(bundle) = stamp
            .as_ref()
            .and_then(|stamp| self.decoded.get(id, jid, expected, stamp))
        {
            return Some(bundle);
        }
        let read = self.read(id).and_then(|bytes| {
            let plain = plain_bytes(&bytes, true, expected).map_err(|e| e.to_string())?;
            let bundle = decode_plain(jid, &plain).map_err(|e| e.to_string())?;
            Ok((bundle, plain.len()))
        });
        match read {
            Ok((bundle, len)) => {
                if let Some(stamp) = stamp {
                    self.decoded.keep(id, expected, stamp, len, &bundle);
                }
                Some(bundle)
            }
            Err(e) => {
                tracing::warn!(%id, path = %path.display(), error = %e, "the bundle kept for this minion cannot be used; asking the master for it in full");
                self.forget(id);
                None
            }
        }
    }

    /// Reads a bundle the master packed for job `jid` and keeps it for
    /// identity `id` (a failure to keep it is logged: the job runs anyway).
    pub fn receive(
        &self,
        id: &str,
        jid: &str,
        expected: &str,
        zstd: bool,
        bytes: Vec<u8>,
    ) -> Result<Bundle<LowChunk>, BundleError> {
        let plain = plain_bytes(&bytes, zstd, expected)?;
        let bundle = decode_plain(jid, &plain)?;
        let stored = if zstd { Ok(bytes) } else { compress(&plain) };
        match stored
            .map_err(|e| e.to_string())
            .and_then(|b| self.sealed(b))
            .and_then(|b| self.write(id, &b))
        {
            Ok(()) => {
                if let Ok(mut m) = self.digests.write() {
                    m.insert(id.to_string(), expected.to_string());
                }
                match self.path(id).as_deref().and_then(FileStamp::of) {
                    Some(stamp) => self.decoded.keep(id, expected, stamp, plain.len(), &bundle),
                    None => self.decoded.forget(id),
                }
            }
            Err(e) => {
                tracing::warn!(%id, dir = %self.dir.display(), error = %e, "cannot keep the bundle; the next job asks for it in full");
                self.forget(id);
            }
        }
        Ok(bundle)
    }

    /// `compressed` as it goes on disk: sealed, since it holds the pillar.
    fn sealed(&self, compressed: Vec<u8>) -> Result<Vec<u8>, String> {
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| "there is no in-memory key to seal it".to_string())?;
        let mut out = SEALED.to_vec();
        out.extend(key.seal(&compressed).map_err(|e| e.to_string())?);
        Ok(out)
    }

    /// Writes `bytes` as `id`'s file, whole or not at all (temp file, rename).
    fn write(&self, id: &str, bytes: &[u8]) -> Result<(), String> {
        let path = self
            .path(id)
            .ok_or_else(|| format!("minion id {id:?} cannot name a file"))?;
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(|e| e.to_string())?;
        std::io::Write::write_all(&mut tmp, bytes).map_err(|e| e.to_string())?;
        tmp.persist(&path).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Drops what `id` holds (its next request asks for the bundle in full).
    pub fn forget(&self, id: &str) {
        self.decoded.forget(id);
        if let Ok(mut m) = self.digests.write() {
            m.remove(id);
        }
        if let Some(path) = self.path(id) {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use super::*;
    use halite_proto::bundle::{pack, Packed};
    use halite_proto::msg::BundleAction;
    use serde_json::{json, Value};

    #[test]
    fn a_kept_bundle_is_found_by_digest_and_a_damaged_one_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = BundleStore::new(dir.path().join("bundles"));
        let bundle = Bundle {
            jid: "1".into(),
            pillar: json!({"a": 1}),
            action: BundleAction::Call,
            commits: Default::default(),
            saltenvs: None,
            secrets: Vec::new(),
        };
        let packed = pack(&bundle, None).unwrap();
        assert_eq!(store.digest("web1"), None);
        let got = store
            .receive("web1", "1", &packed.digest, false, packed.bytes.clone())
            .unwrap();
        assert_eq!(got.map_chunks(|c: LowChunk| c.to_value()), bundle);
        // On disk it is sealed: no pillar in clear.
        let raw = std::fs::read(dir.path().join("bundles/web1.bundle")).unwrap();
        assert!(raw.starts_with(SEALED));
        assert!(decompress(&raw).is_err());
        // A restarted minion (another key) cannot read it.
        assert_eq!(
            BundleStore::new(dir.path().join("bundles")).digest("web1"),
            None
        );
        // The same run finds it on disk by digest.
        store.digests.write().unwrap().clear();
        let again = &store;
        assert_eq!(
            again.digest("web1").as_deref(),
            Some(packed.digest.as_str())
        );
        let loaded = again.load("web1", "2", &packed.digest).unwrap();
        assert_eq!(loaded.jid, "2");
        assert_eq!(loaded.pillar, bundle.pillar);
        // Another digest is not what it holds; a damaged file is dropped.
        assert!(again.load("web1", "3", &"0".repeat(64)).is_none());
        assert_eq!(again.digest("web1"), None);
        std::fs::write(dir.path().join("bundles/web1.bundle"), b"junk").unwrap();
        assert_eq!(again.digest("web1"), None);
        // A plain zstd file (kept by an older halite) is not used either.
        let plain = compress(&packed.bytes).unwrap();
        std::fs::write(dir.path().join("bundles/web1.bundle"), plain).unwrap();
        assert!(again.load("web1", "5", &packed.digest).is_none());
        assert!(!dir.path().join("bundles/web1.bundle").exists());
        // A bundle whose bytes do not match the digest is refused.
        assert!(store
            .receive("web1", "4", "00", false, packed.bytes)
            .is_err());
    }

    /// Chunks of the bench tree's shapes, with keys the engine does not
    /// know, nested values, unicode and numbers of every width.
    fn run_bundle(n: usize) -> Bundle {
        let chunks = (0..n)
            .map(|i| {
                let mut c = json!({
                    "state": if i % 20 == 0 { "file" } else { "test" },
                    "name": format!("/srv/out/web1/file{i}"),
                    "__sls__": "bench",
                    "__env__": "base",
                    "__id__": format!("s{i}"),
                });
                let m = c.as_object_mut().unwrap();
                if i % 20 == 0 {
                    m.insert("source".into(), json!(format!("salt://files/f{i}.txt")));
                    m.insert("mode".into(), json!("0644"));
                    m.insert(
                        "zzz_own_arg".into(),
                        json!({"nested": [1, -2, 3.5, u64::MAX, i64::MIN, null, "é✓"]}),
                    );
                } else {
                    m.insert(
                        "require".into(),
                        json!([{"test": format!("s{}", i.saturating_sub(1))}]),
                    );
                    m.insert("aaa_own_arg".into(), json!(true));
                }
                m.insert("order".into(), json!(10000 + i));
                m.insert(
                    "fun".into(),
                    json!(if i % 20 == 0 {
                        "managed"
                    } else {
                        "succeed_without_changes"
                    }),
                );
                c
            })
            .collect();
        Bundle {
            jid: "1".into(),
            pillar: json!({"role": "web", "list": [1, 2]}),
            action: BundleAction::Run {
                chunks,
                files: [(
                    "base".to_string(),
                    [("files/f0.txt".to_string(), "ab".repeat(32))].into(),
                )]
                .into(),
                yamlex: vec![(3, 1)],
            },
            commits: Default::default(),
            saltenvs: Some(vec!["base".into()]),
            secrets: Vec::new(),
        }
    }

    /// A store in a temporary directory, and `run_bundle(1000)` packed
    /// as the master packs it.
    fn store_and_bundle() -> (tempfile::TempDir, BundleStore, Bundle, Packed) {
        let dir = tempfile::tempdir().unwrap();
        let store = BundleStore::new(dir.path().join("bundles"));
        let bundle = run_bundle(1000);
        let packed = pack(&bundle, Some(4096)).unwrap();
        (dir, store, bundle, packed)
    }

    #[test]
    fn a_bundle_decodes_into_the_engines_chunks_as_its_values_would() {
        let (_dir, store, bundle, packed) = store_and_bundle();
        let expected = engine_bundle(&bundle);
        let received = store
            .receive("web1", "1", &packed.digest, packed.zstd, packed.bytes)
            .unwrap();
        let loaded = store.load("web1", "1", &packed.digest).unwrap();
        for got in [received, loaded] {
            assert!(got == expected, "the chunks differ");
            let (BundleAction::Run { chunks: got, .. }, BundleAction::Run { chunks: want, .. }) =
                (&got.action, &expected.action)
            else {
                panic!("not a run: {got:?}");
            };
            // Equal dicts may differ in order: their encodings may not.
            assert_eq!(
                halite_proto::encode(got).unwrap(),
                halite_proto::encode(want).unwrap()
            );
            assert_eq!(got[20].get("zzz_own_arg"), want[20].get("zzz_own_arg"));
            assert_eq!(got[20].tag(), "file_|-s20_|-/srv/out/web1/file20_|-managed");
        }
    }

    #[test]
    fn a_bundle_with_secrets_is_kept_sealed_for_this_run_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = BundleStore::new(dir.path().join("bundles"));
        let secret = "Sealed-Secret-4242";
        let bundle = Bundle {
            jid: "1".into(),
            pillar: json!({"db": {"password": secret}}),
            action: BundleAction::Call,
            commits: Default::default(),
            saltenvs: None,
            secrets: vec![secret.into()],
        };
        let packed = pack(&bundle, None).unwrap();
        store
            .receive("web1", "1", &packed.digest, false, packed.bytes)
            .unwrap();
        // On disk: neither the cleartext nor a zstd frame that holds it.
        let raw = std::fs::read(dir.path().join("bundles/web1.bundle")).unwrap();
        assert!(raw.starts_with(SEALED));
        assert!(decompress(&raw).is_err());
        assert!(!raw.windows(secret.len()).any(|w| w == secret.as_bytes()));
        // This run reads it back by digest.
        let fresh = BundleStore {
            dir: dir.path().join("bundles"),
            digests: RwLock::new(HashMap::new()),
            key: store.key,
            decoded: DecodedBundles::new(0),
        };
        assert_eq!(
            fresh.digest("web1").as_deref(),
            Some(packed.digest.as_str())
        );
        assert_eq!(
            fresh.load("web1", "2", &packed.digest).unwrap().pillar,
            bundle.pillar
        );
        // A restarted minion (another key) cannot, and asks in full.
        let restarted = BundleStore::new(dir.path().join("bundles"));
        assert_eq!(restarted.digest("web1"), None);
        assert!(restarted.load("web1", "3", &packed.digest).is_none());
        assert!(!dir.path().join("bundles/web1.bundle").exists());
    }

    /// The bundle `run_bundle(n)` with its chunks as the engine's.
    fn engine_bundle(bundle: &Bundle) -> Bundle<LowChunk> {
        bundle.clone().map_chunks(|c| match c {
            Value::Object(m) => LowChunk::from(m),
            _ => LowChunk::new(),
        })
    }

    /// `bundle`'s chunks encoded, to compare bundles byte for byte.
    fn chunk_bytes(bundle: &Bundle<LowChunk>) -> Vec<u8> {
        let BundleAction::Run { chunks, .. } = &bundle.action else {
            panic!("not a run");
        };
        halite_proto::encode(chunks).unwrap()
    }

    #[test]
    fn a_changed_bundle_is_never_served_from_the_decoded_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = BundleStore::new(dir.path().join("bundles"));
        let first = run_bundle(200);
        let mut changed = run_bundle(200);
        changed.pillar = json!({"role": "db"});
        let (a, b) = (
            pack(&first, Some(4096)).unwrap(),
            pack(&changed, Some(4096)).unwrap(),
        );
        assert_ne!(a.digest, b.digest);
        store
            .receive("web1", "1", &a.digest, a.zstd, a.bytes.clone())
            .unwrap();
        assert!(store.decoded.has("web1"));
        // Served from memory, for the new job, as decoded.
        let kept = store.load("web1", "2", &a.digest).unwrap();
        assert_eq!(kept.jid, "2");
        let want = engine_bundle(&first);
        assert!(kept.pillar == want.pillar && kept.secrets == want.secrets);
        assert_eq!(chunk_bytes(&kept), chunk_bytes(&want));
        // A file rewritten with its size and mtime put back is read
        // again (its ctime moved): here it is junk, so it is dropped and
        // the bundle asked for in full, never served from memory.
        let file = dir.path().join("bundles/web1.bundle");
        let (len, mtime) = {
            let m = std::fs::metadata(&file).unwrap();
            (m.len() as usize, m.modified().unwrap())
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&file, vec![b'x'; len]).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().len() as usize, len);
        assert!(store.load("web1", "2", &a.digest).is_none());
        assert!(!store.decoded.has("web1"));
        assert!(!file.exists());
        store
            .receive("web1", "1", &a.digest, a.zstd, a.bytes.clone())
            .unwrap();
        assert!(store.decoded.has("web1"));
        // Another identity, or another digest, is never served from it.
        assert!(store.load("web2", "2", &a.digest).is_none());
        assert!(store.load("web1", "3", &b.digest).is_none());
        // A file removed under it is not served from memory either.
        store
            .receive("web1", "1", &a.digest, a.zstd, a.bytes.clone())
            .unwrap();
        assert!(store.decoded.has("web1"));
        std::fs::remove_file(&file).unwrap();
        assert!(store.load("web1", "2", &a.digest).is_none());
        assert!(!store.decoded.has("web1"));
        store
            .receive("web1", "1", &a.digest, a.zstd, a.bytes.clone())
            .unwrap();
        // The changed bundle replaces it: the old digest is refused (the
        // file holds the new one), the new one is the changed bundle.
        store
            .receive("web1", "4", &b.digest, b.zstd, b.bytes.clone())
            .unwrap();
        assert!(store.load("web1", "5", &a.digest).is_none());
        assert!(!store.decoded.has("web1"));
        store
            .receive("web1", "6", &b.digest, b.zstd, b.bytes.clone())
            .unwrap();
        let got = store.load("web1", "7", &b.digest).unwrap();
        assert_eq!(got.pillar, json!({"role": "db"}));
        assert_eq!(chunk_bytes(&got), chunk_bytes(&engine_bundle(&changed)));
    }

    #[test]
    fn a_kept_copy_is_the_bundle_its_file_decodes_to() {
        let (_dir, store, _, packed) = store_and_bundle();
        store
            .receive(
                "web1",
                "1",
                &packed.digest,
                packed.zstd,
                packed.bytes.clone(),
            )
            .unwrap();
        let plain = plain_bytes(&packed.bytes, packed.zstd, &packed.digest).unwrap();
        let fresh: Bundle<LowChunk> = decode_plain("2", &plain).unwrap();
        for _ in 0..2 {
            let kept = store.load("web1", "2", &packed.digest).unwrap();
            assert!(kept == fresh, "the kept copy differs from a fresh decode");
            assert_eq!(chunk_bytes(&kept), chunk_bytes(&fresh));
            assert_eq!(
                halite_proto::encode(&kept.map_chunks(|c| c.to_value())).unwrap(),
                halite_proto::encode(&fresh.clone().map_chunks(|c| c.to_value())).unwrap()
            );
        }
    }

    #[test]
    fn decoded_bundles_stay_within_their_bound_and_evict_none_for_another() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = run_bundle(100);
        let packed = pack(&bundle, None).unwrap();
        // Room for one such bundle, not two.
        let one = packed.plain_len * 5;
        let store = BundleStore::with_decoded_bound(dir.path().join("bundles"), one + one / 2);
        for (id, jid) in [("web1", "1"), ("web2", "2")] {
            store
                .receive(id, jid, &packed.digest, false, packed.bytes.clone())
                .unwrap();
        }
        assert!(store.decoded.has("web1"));
        assert!(!store.decoded.has("web2"));
        assert!(store.decoded.bytes() <= one + one / 2);
        // web2 reads its file as before.
        let got = store.load("web2", "3", &packed.digest).unwrap();
        assert_eq!(chunk_bytes(&got), chunk_bytes(&engine_bundle(&bundle)));
        assert!(!store.decoded.has("web2"));
        // Forgotten, web1's room goes to the next identity decoded.
        store.forget("web1");
        assert!(!store.decoded.has("web1"));
        store.load("web2", "4", &packed.digest).unwrap();
        assert!(store.decoded.has("web2"));
        // No bound: nothing kept.
        let none = BundleStore::with_decoded_bound(dir.path().join("other"), 0);
        none.receive("web1", "1", &packed.digest, false, packed.bytes)
            .unwrap();
        assert!(!none.decoded.has("web1"));
    }
}
