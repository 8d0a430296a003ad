//! Identities, the handshake, session ciphers and signed publications.
//!
//! Handshake (DESIGN "Wire and trust"): the minion sends [`Hello`] (id,
//! Ed25519 identity key, X25519 ephemeral key, nonce); the master answers
//! [`Welcome`] (its identity and ephemeral keys, nonce, session id) signed
//! over the transcript; the minion checks that signature against the master
//! key it trusts and answers [`Confirm`], its own signature over the same
//! transcript. Both derive two AES-256-GCM keys (one per direction) from the
//! X25519 secret with HKDF-SHA256 salted by the transcript hash.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use ring::agreement::{self, EphemeralPrivateKey, UnparsedPublicKey as AgreePublic, X25519};
use ring::digest::{digest, Context, SHA256};
use ring::hkdf::{Salt, HKDF_SHA256};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};

use crate::msg::{Confirm, Hello, Publication, PublishKey, Sealed, Welcome};

/// Why a cryptographic step failed. Every variant means "drop the message".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// The system's random generator failed.
    #[error("the system random generator failed")]
    Random,
    /// A key has the wrong length or encoding (named here).
    #[error("key material is malformed: {0}")]
    BadKey(&'static str),
    /// A signature does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// A message does not decrypt (tampered, or the wrong key).
    #[error("message does not decrypt (tampered, or sealed with another key)")]
    Decrypt,
    #[error("message counter {got} is not above {last}: replay refused")]
    /// A counter that does not grow: a replayed message.
    Replay {
        /// The counter received.
        got: u64,
        /// The last counter accepted.
        last: u64,
    },
    #[error("session mismatch: expected {expected}, got {got}")]
    /// A message for another session.
    WrongSession {
        /// The session this side holds.
        expected: u64,
        /// The session the message names.
        got: u64,
    },
    /// A publication sealed with a publish key this side does not hold.
    #[error("no publish key for epoch {0}")]
    UnknownEpoch(u32),
}

fn random_bytes<const N: usize>(rng: &SystemRandom) -> Result<[u8; N], CryptoError> {
    let mut out = [0u8; N];
    rng.fill(&mut out).map_err(|_| CryptoError::Random)?;
    Ok(out)
}

/// A random u64 (session ids, epochs, jitter).
pub fn random_u64() -> Result<u64, CryptoError> {
    Ok(u64::from_le_bytes(random_bytes::<8>(&SystemRandom::new())?))
}

/// An Ed25519 public key: a master's or a minion's identity.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl PublicKey {
    /// From the 32 raw bytes; anything else is refused.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CryptoError> {
        let raw: [u8; 32] = bytes
            .try_into()
            .map_err(|_| CryptoError::BadKey("an Ed25519 public key is 32 bytes"))?;
        Ok(Self(raw))
    }
    /// From the hex text stored in key files.
    pub fn from_hex(text: &str) -> Result<Self, CryptoError> {
        let bytes = hex::decode(text.trim())
            .map_err(|_| CryptoError::BadKey("public key file is not hex"))?;
        Self::from_slice(&bytes)
    }
    /// The hex text stored in key files.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
    /// SHA-256 of the key as colon-separated hex (`halite-key -f`, `master_finger`).
    pub fn fingerprint(&self) -> String {
        let d = digest(&SHA256, &self.0);
        d.as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    }
    /// Checks `signature` over `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), CryptoError> {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(message, signature)
            .map_err(|_| CryptoError::BadSignature)
    }
}

/// An Ed25519 key pair: who a master or minion is. Stored as PKCS#8.
pub struct Identity {
    pair: Ed25519KeyPair,
    pkcs8: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({})", self.public().fingerprint())
    }
}

impl Identity {
    /// A fresh random identity.
    pub fn generate() -> Result<Self, CryptoError> {
        let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| CryptoError::Random)?;
        Self::from_pkcs8(doc.as_ref())
    }
    /// Loads a PKCS#8 document (the private key file).
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, CryptoError> {
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8)
            .map_err(|_| CryptoError::BadKey("private key is not Ed25519 PKCS#8"))?;
        Ok(Self {
            pair,
            pkcs8: pkcs8.to_vec(),
        })
    }
    /// The PKCS#8 document, for the private key file.
    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }
    /// The public half.
    pub fn public(&self) -> PublicKey {
        let mut raw = [0u8; 32];
        raw.copy_from_slice(self.pair.public_key().as_ref());
        PublicKey(raw)
    }
    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.pair.sign(message).as_ref().to_vec()
    }
}

/// The bytes a session seal appends to a message (AES-256-GCM's tag):
/// spare capacity for it lets [`SessionCipher::seal_owned`] seal in the
/// message's own buffer.
pub const SEAL_TAG_BYTES: usize = 16;

const MASTER_SIGNS: &[u8] = b"halite/1 master signs transcript";
const MINION_SIGNS: &[u8] = b"halite/1 minion signs transcript";
const PUBLICATION_SIGNS: &[u8] = b"halite/1 publication";

fn transcript(
    hello: &Hello,
    session: u64,
    master_key: &[u8],
    master_eph: &[u8],
    master_nonce: &[u8],
) -> [u8; 32] {
    let mut ctx = Context::new(&SHA256);
    ctx.update(b"halite/1 handshake");
    for part in [
        hello.id.as_bytes(),
        &hello.minion_key,
        &hello.ephemeral,
        &hello.nonce,
    ] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    ctx.update(&session.to_be_bytes());
    for part in [master_key, master_eph, master_nonce] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

fn signed_payload(role: &[u8], transcript: &[u8; 32]) -> Vec<u8> {
    let mut m = role.to_vec();
    m.extend_from_slice(transcript);
    m
}

fn aes_key(raw: &[u8]) -> Result<LessSafeKey, CryptoError> {
    Ok(LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, raw)
            .map_err(|_| CryptoError::BadKey("AES-256 keys are 32 bytes"))?,
    ))
}

/// Derives (minion->master, master->minion) keys from the shared secret.
fn derive_keys(shared: &[u8], transcript: &[u8; 32]) -> Result<([u8; 32], [u8; 32]), CryptoError> {
    let prk = Salt::new(HKDF_SHA256, transcript).extract(shared);
    let mut up = [0u8; 32];
    let mut down = [0u8; 32];
    prk.expand(&[b"halite/1 minion->master"], HKDF_SHA256)
        .and_then(|okm| okm.fill(&mut up))
        .map_err(|_| CryptoError::BadKey("hkdf"))?;
    prk.expand(&[b"halite/1 master->minion"], HKDF_SHA256)
        .and_then(|okm| okm.fill(&mut down))
        .map_err(|_| CryptoError::BadKey("hkdf"))?;
    Ok((up, down))
}

fn x25519_shared(private: EphemeralPrivateKey, peer: &[u8]) -> Result<Vec<u8>, CryptoError> {
    if peer.len() != 32 {
        return Err(CryptoError::BadKey("an X25519 public key is 32 bytes"));
    }
    agreement::agree_ephemeral(private, &AgreePublic::new(&X25519, peer), |s| s.to_vec())
        .map_err(|_| CryptoError::BadKey("X25519 agreement failed"))
}

/// The minion's half of a handshake in progress.
pub struct MinionHandshake {
    hello: Hello,
    ephemeral: EphemeralPrivateKey,
}

impl MinionHandshake {
    /// Starts a handshake for `id`: returns the state and the [`Hello`] to send.
    pub fn start(identity: &Identity, id: &str) -> Result<(Self, Hello), CryptoError> {
        let rng = SystemRandom::new();
        let ephemeral =
            EphemeralPrivateKey::generate(&X25519, &rng).map_err(|_| CryptoError::Random)?;
        let eph_pub = ephemeral
            .compute_public_key()
            .map_err(|_| CryptoError::Random)?;
        let hello = Hello {
            id: id.to_string(),
            minion_key: identity.public().as_bytes().to_vec(),
            ephemeral: eph_pub.as_ref().to_vec(),
            nonce: random_bytes::<32>(&rng)?.to_vec(),
        };
        Ok((
            Self {
                hello: hello.clone(),
                ephemeral,
            },
            hello,
        ))
    }

    /// The master key presented in `welcome`, to check against the pinned
    /// one before [`MinionHandshake::finish`].
    pub fn master_key(welcome: &Welcome) -> Result<PublicKey, CryptoError> {
        PublicKey::from_slice(&welcome.master_key)
    }

    /// Whether `welcome` answers this hello (its signature covers this
    /// handshake's transcript). A stale welcome, for an earlier hello,
    /// fails here and leaves the handshake usable.
    pub fn verify(&self, welcome: &Welcome) -> Result<(), CryptoError> {
        let master = PublicKey::from_slice(&welcome.master_key)?;
        let t = transcript(
            &self.hello,
            welcome.session,
            &welcome.master_key,
            &welcome.ephemeral,
            &welcome.nonce,
        );
        master.verify(&signed_payload(MASTER_SIGNS, &t), &welcome.signature)
    }

    /// Verifies the master's signature and derives the session: returns the
    /// minion's cipher and the [`Confirm`] to send.
    pub fn finish(
        self,
        identity: &Identity,
        welcome: &Welcome,
    ) -> Result<(SessionCipher, Confirm), CryptoError> {
        let master = PublicKey::from_slice(&welcome.master_key)?;
        let t = transcript(
            &self.hello,
            welcome.session,
            &welcome.master_key,
            &welcome.ephemeral,
            &welcome.nonce,
        );
        master.verify(&signed_payload(MASTER_SIGNS, &t), &welcome.signature)?;
        let shared = x25519_shared(self.ephemeral, &welcome.ephemeral)?;
        let (up, down) = derive_keys(&shared, &t)?;
        let confirm = Confirm {
            session: welcome.session,
            signature: identity.sign(&signed_payload(MINION_SIGNS, &t)),
        };
        Ok((SessionCipher::new(welcome.session, &up, &down)?, confirm))
    }
}

/// The master's half of a handshake waiting for the minion's [`Confirm`].
pub struct PendingSession {
    /// The minion id the hello claimed.
    pub id: String,
    /// The minion's identity key.
    pub minion_key: PublicKey,
    transcript: [u8; 32],
    cipher: SessionCipher,
}

impl PendingSession {
    /// Answers a [`Hello`] whose key the master has accepted.
    pub fn respond(
        identity: &Identity,
        hello: &Hello,
        session: u64,
    ) -> Result<(Self, Welcome), CryptoError> {
        let minion_key = PublicKey::from_slice(&hello.minion_key)?;
        if hello.nonce.len() != 32 {
            return Err(CryptoError::BadKey("handshake nonce must be 32 bytes"));
        }
        let rng = SystemRandom::new();
        let ephemeral =
            EphemeralPrivateKey::generate(&X25519, &rng).map_err(|_| CryptoError::Random)?;
        let eph_pub = ephemeral
            .compute_public_key()
            .map_err(|_| CryptoError::Random)?
            .as_ref()
            .to_vec();
        let nonce = random_bytes::<32>(&rng)?.to_vec();
        let master_key = identity.public().as_bytes().to_vec();
        let t = transcript(hello, session, &master_key, &eph_pub, &nonce);
        let shared = x25519_shared(ephemeral, &hello.ephemeral)?;
        let (up, down) = derive_keys(&shared, &t)?;
        let welcome = Welcome {
            id: hello.id.clone(),
            session,
            master_key,
            ephemeral: eph_pub,
            nonce,
            signature: identity.sign(&signed_payload(MASTER_SIGNS, &t)),
        };
        // The master sends with the down key and receives with the up key.
        let cipher = SessionCipher::new(session, &down, &up)?;
        Ok((
            Self {
                id: hello.id.clone(),
                minion_key,
                transcript: t,
                cipher,
            },
            welcome,
        ))
    }

    /// Checks the minion's signature: only then is the session usable.
    pub fn confirm(self, confirm: &Confirm) -> Result<SessionCipher, CryptoError> {
        if confirm.session != self.cipher.session {
            return Err(CryptoError::WrongSession {
                expected: self.cipher.session,
                got: confirm.session,
            });
        }
        self.minion_key.verify(
            &signed_payload(MINION_SIGNS, &self.transcript),
            &confirm.signature,
        )?;
        Ok(self.cipher)
    }
}

fn nonce_for(prefix: u32, counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&prefix.to_be_bytes());
    n[4..].copy_from_slice(&counter.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

fn aad_for(session: u64, counter: u64) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&session.to_be_bytes());
    a[8..].copy_from_slice(&counter.to_be_bytes());
    a
}

/// One side of an open session: seals what it sends, opens what it
/// receives, and refuses any counter that does not grow (replays).
pub struct SessionCipher {
    /// The session number both sides use.
    pub session: u64,
    send: LessSafeKey,
    recv: LessSafeKey,
    sent: u64,
    received: u64,
}

impl SessionCipher {
    fn new(session: u64, send: &[u8], recv: &[u8]) -> Result<Self, CryptoError> {
        Ok(Self {
            session,
            send: aes_key(send)?,
            recv: aes_key(recv)?,
            sent: 0,
            received: 0,
        })
    }

    /// Encrypts `plaintext` with the next counter.
    pub fn seal(&mut self, plaintext: &[u8]) -> Result<Sealed, CryptoError> {
        self.seal_owned(plaintext.to_vec())
    }

    /// As [`SessionCipher::seal`], encrypting in `plaintext`'s own buffer
    /// (the tag appended to it): no copy of the message (issue 25: every
    /// batch of a minion's progress events and every return was copied
    /// once here; give it [`SEAL_TAG_BYTES`] of spare capacity for the tag).
    pub fn seal_owned(&mut self, plaintext: Vec<u8>) -> Result<Sealed, CryptoError> {
        self.sent += 1;
        let mut buf = plaintext;
        self.send
            .seal_in_place_append_tag(
                nonce_for(0, self.sent),
                Aad::from(aad_for(self.session, self.sent)),
                &mut buf,
            )
            .map_err(|_| CryptoError::Decrypt)?;
        Ok(Sealed {
            session: self.session,
            counter: self.sent,
            ciphertext: buf,
        })
    }

    /// Decrypts `sealed`; a wrong session, a replayed or old counter, or a
    /// tampered byte is an error and changes nothing.
    pub fn open(&mut self, sealed: &Sealed) -> Result<Vec<u8>, CryptoError> {
        self.open_owned(sealed.clone())
    }

    /// As [`SessionCipher::open`], decrypting in the ciphertext's own
    /// buffer: the plaintext is that buffer, without its tag (issue 25: a
    /// fleet's ~0.3 MB returns were copied twice more on the master's main
    /// task, once to decrypt and once out of the decrypted slice).
    pub fn open_owned(&mut self, sealed: Sealed) -> Result<Vec<u8>, CryptoError> {
        if sealed.session != self.session {
            return Err(CryptoError::WrongSession {
                expected: self.session,
                got: sealed.session,
            });
        }
        if sealed.counter <= self.received {
            return Err(CryptoError::Replay {
                got: sealed.counter,
                last: self.received,
            });
        }
        let mut buf = sealed.ciphertext;
        let len = self
            .recv
            .open_in_place(
                nonce_for(0, sealed.counter),
                Aad::from(aad_for(self.session, sealed.counter)),
                &mut buf,
            )
            .map_err(|_| CryptoError::Decrypt)?
            .len();
        // `open_in_place` leaves the plaintext at the buffer's start.
        buf.truncate(len);
        self.received = sealed.counter;
        Ok(buf)
    }
}

/// A key that lives only in this process's memory, for data it keeps on
/// its own disk and reads back while it runs (a minion's kept bundle that
/// holds gpg-decrypted pillar): once the process ends, nothing can read
/// those files, which is the point. AES-256-GCM, a random 96-bit nonce
/// per sealing stored before the ciphertext.
pub struct MemoryKey {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl MemoryKey {
    /// A fresh random key.
    pub fn new() -> Result<Self, CryptoError> {
        let rng = SystemRandom::new();
        let raw = random_bytes::<32>(&rng)?;
        Ok(Self {
            key: aes_key(&raw)?,
            rng,
        })
    }

    /// `plain` sealed: nonce, then ciphertext and tag.
    pub fn seal(&self, plain: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let nonce = random_bytes::<12>(&self.rng)?;
        let mut body = plain.to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut body)
            .map_err(|_| CryptoError::Decrypt)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// What [`MemoryKey::seal`] sealed with this key; an error for bytes
    /// sealed by another process (or changed).
    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < 12 {
            return Err(CryptoError::Decrypt);
        }
        let (nonce, body) = sealed.split_at(12);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::Decrypt)?;
        let mut body = body.to_vec();
        let plain_len = self
            .key
            .open_in_place(nonce, Aad::empty(), &mut body)
            .map_err(|_| CryptoError::Decrypt)?
            .len();
        // The plaintext is the buffer's start: kept there, not copied out.
        body.truncate(plain_len);
        Ok(body)
    }
}

/// The master's publish key: encrypts and signs every publication.
pub struct Publisher {
    key: PublishKey,
    cipher: LessSafeKey,
    counter: u64,
}

impl Publisher {
    /// A new random publish key; its epoch is random too, so a restarted
    /// master never reuses an (epoch, counter) nonce.
    pub fn generate() -> Result<Self, CryptoError> {
        let rng = SystemRandom::new();
        let raw = random_bytes::<32>(&rng)?;
        let epoch = u32::from_le_bytes(random_bytes::<4>(&rng)?);
        Ok(Self {
            cipher: aes_key(&raw)?,
            key: PublishKey {
                epoch,
                key: raw.to_vec(),
                sealed: 0,
            },
            counter: 0,
        })
    }
    /// The key to hand to authenticated minions.
    pub fn key(&self) -> &PublishKey {
        &self.key
    }
    /// The key with the number of publications sealed so far: what a
    /// minion authenticating now receives, so it refuses every earlier one.
    pub fn key_now(&self) -> PublishKey {
        PublishKey {
            sealed: self.counter,
            ..self.key.clone()
        }
    }
    /// Encrypts `payload` and signs the result with `identity`.
    pub fn seal(
        &mut self,
        identity: &Identity,
        payload: &[u8],
    ) -> Result<Publication, CryptoError> {
        self.counter += 1;
        let mut buf = payload.to_vec();
        let epoch = self.key.epoch;
        self.cipher
            .seal_in_place_append_tag(
                nonce_for(epoch, self.counter),
                Aad::from(publication_aad(epoch, self.counter)),
                &mut buf,
            )
            .map_err(|_| CryptoError::Decrypt)?;
        let signature = identity.sign(&publication_signed(epoch, self.counter, &buf));
        Ok(Publication {
            epoch,
            counter: self.counter,
            ciphertext: buf,
            signature,
        })
    }
}

fn publication_aad(epoch: u32, counter: u64) -> [u8; 12] {
    let mut a = [0u8; 12];
    a[..4].copy_from_slice(&epoch.to_be_bytes());
    a[4..].copy_from_slice(&counter.to_be_bytes());
    a
}

fn publication_signed(epoch: u32, counter: u64, ciphertext: &[u8]) -> Vec<u8> {
    let mut m = PUBLICATION_SIGNS.to_vec();
    m.extend_from_slice(&publication_aad(epoch, counter));
    m.extend_from_slice(ciphertext);
    m
}

/// Checks only the master's signature on a publication (for one held
/// until its key arrives).
pub fn verify_publication(
    master: &PublicKey,
    publication: &Publication,
) -> Result<(), CryptoError> {
    master.verify(
        &publication_signed(
            publication.epoch,
            publication.counter,
            &publication.ciphertext,
        ),
        &publication.signature,
    )
}

/// The minion's side of publications: checks the master's signature
/// first, then decrypts with the publish key of that epoch, then refuses
/// counters it has already seen.
pub struct PublicationOpener {
    master: PublicKey,
    epoch: u32,
    cipher: LessSafeKey,
    last_counter: u64,
}

impl PublicationOpener {
    /// An opener for publications from `master` under `key`.
    pub fn new(master: PublicKey, key: &PublishKey) -> Result<Self, CryptoError> {
        Ok(Self {
            master,
            epoch: key.epoch,
            cipher: aes_key(&key.key)?,
            last_counter: 0,
        })
    }
    /// An opener that refuses every counter up to `seen` as well: the
    /// highest counter of this epoch a minion already ran, kept on disk so
    /// a publication replayed after a restart is still refused.
    pub fn resume(master: PublicKey, key: &PublishKey, seen: u64) -> Result<Self, CryptoError> {
        let mut opener = Self::new(master, key)?;
        opener.last_counter = seen;
        Ok(opener)
    }
    /// The epoch of the key held.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    /// Verifies, decrypts and replay-checks one publication.
    pub fn open(&mut self, publication: &Publication) -> Result<Vec<u8>, CryptoError> {
        self.master.verify(
            &publication_signed(
                publication.epoch,
                publication.counter,
                &publication.ciphertext,
            ),
            &publication.signature,
        )?;
        if publication.epoch != self.epoch {
            return Err(CryptoError::UnknownEpoch(publication.epoch));
        }
        if publication.counter <= self.last_counter {
            return Err(CryptoError::Replay {
                got: publication.counter,
                last: self.last_counter,
            });
        }
        let mut buf = publication.ciphertext.clone();
        let plain = self
            .cipher
            .open_in_place(
                nonce_for(publication.epoch, publication.counter),
                Aad::from(publication_aad(publication.epoch, publication.counter)),
                &mut buf,
            )
            .map_err(|_| CryptoError::Decrypt)?;
        let out = plain.to_vec();
        self.last_counter = publication.counter;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_memory_key_opens_only_what_it_sealed() {
        let key = super::MemoryKey::new().unwrap();
        let sealed = key.seal(b"pillar with Secret-77").unwrap();
        assert!(!sealed.windows(9).any(|w| w == b"Secret-77"));
        assert_eq!(key.open(&sealed).unwrap(), b"pillar with Secret-77");
        // Another process's key (a restarted minion) cannot read it.
        assert!(super::MemoryKey::new().unwrap().open(&sealed).is_err());
        let mut bad = sealed.clone();
        bad[20] ^= 1;
        assert!(key.open(&bad).is_err());
        assert!(key.open(b"short").is_err());
    }

    use super::*;

    fn handshake() -> (SessionCipher, SessionCipher, Identity, Identity) {
        let master = Identity::generate().unwrap();
        let minion = Identity::generate().unwrap();
        let (state, hello) = MinionHandshake::start(&minion, "web1").unwrap();
        let (pending, welcome) = PendingSession::respond(&master, &hello, 7).unwrap();
        assert_eq!(
            MinionHandshake::master_key(&welcome).unwrap(),
            master.public()
        );
        let (minion_cipher, confirm) = state.finish(&minion, &welcome).unwrap();
        let master_cipher = pending.confirm(&confirm).unwrap();
        (minion_cipher, master_cipher, master, minion)
    }

    #[test]
    fn both_sides_derive_the_same_session() {
        let (mut minion, mut master, _, _) = handshake();
        let up = minion.seal(b"return").unwrap();
        assert_eq!(master.open(&up).unwrap(), b"return");
        let down = master.seal(b"ack").unwrap();
        assert_eq!(minion.open(&down).unwrap(), b"ack");
    }

    #[test]
    fn the_seal_tag_bytes_are_the_cipher_s_tag() {
        assert_eq!(SEAL_TAG_BYTES, AES_256_GCM.tag_len());
    }

    /// Sealing in the message's own buffer gives the bytes sealing a
    /// copy gives, counter for counter.
    #[test]
    fn sealing_in_place_seals_as_a_copy_did() {
        let (send, recv) = ([3u8; 32], [5u8; 32]);
        let mut copying = SessionCipher::new(9, &send, &recv).unwrap();
        let mut in_place = SessionCipher::new(9, &send, &recv).unwrap();
        for message in [&b""[..], b"x", &[7u8; 70_000]] {
            let mut spare = Vec::with_capacity(message.len() + 16);
            spare.extend_from_slice(message);
            assert_eq!(
                copying.seal(message).unwrap(),
                in_place.seal_owned(spare).unwrap()
            );
            assert_eq!(
                copying.seal(message).unwrap(),
                in_place.seal_owned(message.to_vec()).unwrap()
            );
        }
    }

    #[test]
    fn a_welcome_for_an_earlier_hello_does_not_verify() {
        let master = Identity::generate().unwrap();
        let minion = Identity::generate().unwrap();
        let (first, hello1) = MinionHandshake::start(&minion, "web1").unwrap();
        let (retry, _) = MinionHandshake::start(&minion, "web1").unwrap();
        let (_, welcome1) = PendingSession::respond(&master, &hello1, 3).unwrap();
        assert_eq!(retry.verify(&welcome1), Err(CryptoError::BadSignature));
        assert_eq!(first.verify(&welcome1), Ok(()));
    }

    #[test]
    fn replayed_and_tampered_messages_are_refused() {
        let (mut minion, mut master, _, _) = handshake();
        let first = minion.seal(b"one").unwrap();
        master.open(&first).unwrap();
        assert!(matches!(
            master.open(&first),
            Err(CryptoError::Replay { .. })
        ));
        let mut second = minion.seal(b"two").unwrap();
        second.ciphertext[0] ^= 1;
        assert_eq!(master.open(&second), Err(CryptoError::Decrypt));
        let mut third = minion.seal(b"three").unwrap();
        third.session += 1;
        assert!(matches!(
            master.open(&third),
            Err(CryptoError::WrongSession { .. })
        ));
    }

    #[test]
    fn a_forged_welcome_or_confirm_is_refused() {
        let master = Identity::generate().unwrap();
        let impostor = Identity::generate().unwrap();
        let minion = Identity::generate().unwrap();
        let (state, hello) = MinionHandshake::start(&minion, "web1").unwrap();
        let (_, mut welcome) = PendingSession::respond(&master, &hello, 1).unwrap();
        // An impostor replaces the master key but cannot re-sign the transcript.
        welcome.master_key = impostor.public().as_bytes().to_vec();
        assert!(state.finish(&minion, &welcome).is_err());

        // A peer that copied a minion's public key cannot produce its signature.
        let (mut state, mut hello) = MinionHandshake::start(&impostor, "web1").unwrap();
        hello.minion_key = minion.public().as_bytes().to_vec();
        state.hello.minion_key = hello.minion_key.clone();
        let (pending, welcome) = PendingSession::respond(&master, &hello, 2).unwrap();
        let (_, confirm) = state.finish(&impostor, &welcome).unwrap();
        assert_eq!(
            pending.confirm(&confirm).err(),
            Some(CryptoError::BadSignature)
        );
    }

    #[test]
    fn publications_are_signed_by_the_master_only() {
        let master = Identity::generate().unwrap();
        let rogue = Identity::generate().unwrap();
        let mut publisher = Publisher::generate().unwrap();
        let mut opener = PublicationOpener::new(master.public(), publisher.key()).unwrap();
        let publication = publisher.seal(&master, b"job").unwrap();
        assert_eq!(opener.open(&publication).unwrap(), b"job");
        assert!(matches!(
            opener.open(&publication),
            Err(CryptoError::Replay { .. })
        ));

        // A minion holding the publish key can encrypt, but not sign as the master.
        let mut forger = Publisher {
            key: publisher.key().clone(),
            cipher: aes_key(&publisher.key().key).unwrap(),
            counter: 100,
        };
        let forged = forger.seal(&rogue, b"rm -rf").unwrap();
        assert_eq!(opener.open(&forged), Err(CryptoError::BadSignature));

        // After rotation the old key opens nothing new.
        let mut rotated = Publisher::generate().unwrap();
        let next = rotated.seal(&master, b"job2").unwrap();
        assert!(opener.open(&next).is_err());
    }

    #[test]
    fn keys_round_trip_through_their_file_forms() {
        let id = Identity::generate().unwrap();
        let again = Identity::from_pkcs8(id.pkcs8()).unwrap();
        assert_eq!(id.public(), again.public());
        assert_eq!(
            PublicKey::from_hex(&id.public().to_hex()).unwrap(),
            id.public()
        );
        assert_eq!(id.public().fingerprint().len(), 32 * 3 - 1);
        assert!(PublicKey::from_hex("zz").is_err());
        assert!(Identity::from_pkcs8(b"not a key").is_err());
    }
}
