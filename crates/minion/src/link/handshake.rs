//! The handshake side of a link: Hello, Welcome and Confirm for each
//! identity, the master key checked against `master_finger` and the pin,
//! and the publish key that opens publications.

use super::*;

impl Link<'_> {
    pub(super) async fn start_handshake(&mut self, idx: usize) {
        let agent = &mut self.agents[idx];
        let Ok((state, hello)) = MinionHandshake::start(&agent.identity, &agent.id) else {
            return;
        };
        agent.phase = Phase::Handshaking {
            state: Some(state),
            since: Instant::now(),
        };
        let hello = if self.settings.caller {
            ToMaster::CallerHello(hello)
        } else {
            ToMaster::Hello(hello)
        };
        if let Ok(bytes) = encode(&hello) {
            self.send(bytes).await;
        }
    }

    /// The agent holding `session` (indexed: a swarm gets 10 000 acks at once).
    pub(super) fn agent_by_session(&self, session: u64) -> Option<usize> {
        self.sessions
            .get(&session)
            .copied()
            .filter(|&idx| self.agents[idx].session() == Some(session))
    }

    /// Checks the master key against `master_finger` and the pinned key;
    /// pins it on first contact.
    pub(super) fn trust_master(&mut self, key: &PublicKey) -> bool {
        if !self.settings.master_finger.is_empty()
            && key.fingerprint() != self.settings.master_finger.to_lowercase()
        {
            tracing::error!(got = %key.fingerprint(), "master key does not match master_finger; refusing it");
            return false;
        }
        match self.trusted_master {
            Some(trusted) if trusted != *key => {
                tracing::error!("the master's key changed since it was first trusted; remove minion_master.pub to trust the new one");
                false
            }
            Some(_) => true,
            None => {
                if let Some(path) = &self.settings.pinned_master_path {
                    if let Err(e) = halite_proto::keyfile::write_private(
                        path,
                        format!("{}\n", key.to_hex()).as_bytes(),
                    ) {
                        tracing::warn!(error = %e, "cannot pin the master key");
                    }
                }
                self.trusted_master = Some(*key);
                true
            }
        }
    }

    pub(super) async fn on_master_frame(&mut self, frame: &[u8]) -> Result<(), LinkEnd> {
        let msg: ToMinion = match decode(frame) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, "undecodable frame from the master dropped");
                return Ok(());
            }
        };
        match msg {
            ToMinion::Welcome(welcome) => {
                let Some(&idx) = self.by_id.get(&welcome.id) else {
                    return Ok(());
                };
                let Ok(master_key) = MinionHandshake::master_key(&welcome) else {
                    return Ok(());
                };
                if !self.trust_master(&master_key) {
                    return Err(LinkEnd::MasterLost("untrusted master key".into()));
                }
                let agent = &mut self.agents[idx];
                let Phase::Handshaking { state, .. } = &mut agent.phase else {
                    return Ok(());
                };
                // A welcome for an earlier hello (this one is a retry) is ignored.
                if state.as_ref().is_none_or(|st| st.verify(&welcome).is_err()) {
                    return Ok(());
                }
                let Some(state) = state.take() else {
                    return Ok(());
                };
                match state.finish(&agent.identity, &welcome) {
                    Ok((cipher, confirm)) => {
                        self.sessions.insert(cipher.session, idx);
                        agent.phase = Phase::Confirming {
                            cipher,
                            since: Instant::now(),
                        };
                        self.last_heard_any = Instant::now();
                        if let Ok(bytes) = encode(&ToMaster::Confirm(confirm)) {
                            self.send(bytes).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "master handshake failed verification");
                        agent.phase = Phase::Idle {
                            next_try: Instant::now() + self.settings.acceptance_wait_time,
                        };
                    }
                }
            }
            ToMinion::Refused { id, status, reason } => {
                let Some(&idx) = self.by_id.get(&id) else {
                    return Ok(());
                };
                // Only a minion waiting for an answer takes a refusal.
                if !matches!(self.agents[idx].phase, Phase::Handshaking { .. }) {
                    return Ok(());
                }
                self.last_heard_any = Instant::now();
                match status {
                    Some(KeyStatus::Pending) => {
                        tracing::info!(%id, "key pending acceptance on the master (halite-key -a {id})")
                    }
                    _ => tracing::error!(%id, ?status, %reason, "master refused authentication"),
                }
                if self.settings.caller {
                    self.refused = Some(match status {
                        Some(KeyStatus::Pending) => format!(
                            "the master has not accepted this minion's key yet: run `halite-key -a {id}` on the master"
                        ),
                        _ => format!("the master refused minion {id}: {reason}"),
                    });
                }
                self.agents[idx].phase = Phase::Idle {
                    next_try: Instant::now() + self.settings.acceptance_wait_time,
                };
            }
            ToMinion::UnknownSession { session } => {
                if self.agent_by_session(session).is_some() {
                    return Err(LinkEnd::MasterLost(
                        "master forgot the session (restarted?)".into(),
                    ));
                }
            }
            ToMinion::Sealed(sealed) => {
                let Some(idx) = self.agent_by_session(sealed.session) else {
                    return Ok(());
                };
                let agent = &mut self.agents[idx];
                let plain = match &mut agent.phase {
                    Phase::Confirming { cipher, .. } | Phase::Ready { cipher, .. } => {
                        cipher.open(&sealed)
                    }
                    _ => return Ok(()),
                };
                let Ok(plain) = plain else {
                    tracing::debug!("sealed message from the master refused");
                    return Ok(());
                };
                let Ok(message) = decode::<MasterMessage>(&plain) else {
                    return Ok(());
                };
                self.last_heard_any = Instant::now();
                self.on_master_message(idx, message).await?;
            }
        }
        Ok(())
    }

    pub(super) fn install_publish_key(&mut self, key: &halite_proto::msg::PublishKey) {
        let Some(master) = self.trusted_master else {
            return;
        };
        if self.openers.iter().any(|o| o.epoch() == key.epoch) {
            return;
        }
        // Counters this minion already ran under this epoch stay refused, and
        // so do publications sealed before it joined (a job it missed comes
        // again from the master, redelivered; an old frame is a replay).
        let seen = self.replay.floor(key.epoch).max(key.sealed);
        if let Ok(opener) = PublicationOpener::resume(master, key, seen) {
            // Only the newest key opens publications: a rotated-out key opens nothing.
            self.openers = vec![opener];
            let held: Vec<Publication> = self.held.drain(..).map(|(_, p)| p).collect();
            for publication in held {
                self.open_publication(publication);
            }
        }
    }
}
