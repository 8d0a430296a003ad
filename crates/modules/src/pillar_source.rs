//! Pillar sources beside `pillar_roots` (Salt's `ext_pillar` entries):
//! each one gives the pillar of one minion from somewhere else (a git
//! repository, a command, a directory tree). The master's compiler holds
//! a list of them and merges what each gives into the pillar it compiled
//! from `pillar_roots`; how it merges (Salt's
//! `pillar_source_merging_strategy`, `ext_pillar_first`) is the
//! compiler's business, not the source's.

use halite_state::Value;

use crate::Host;

/// What one source gave for one minion: its data and the errors met
/// while producing it (Salt lists them under `_errors`; a state run
/// refuses to start with them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PillarPart {
    /// The pillar data of this source (a mapping; empty when nothing matched).
    pub data: Value,
    /// Errors, each naming the source and what to fix; never pillar data.
    pub errors: Vec<String>,
}

/// One `ext_pillar` entry, compiled per minion.
pub trait PillarSource: Send + Sync {
    /// The source's name for logs and errors (Salt's `ext_pillar` key, e.g. `git`).
    fn name(&self) -> &str;

    /// The pillar this source gives the minion `host` is for: `host` has
    /// the minion's id (`opts["id"]`), grains, the master's options, and
    /// in `host.pillar` the pillar compiled so far (Salt passes it to
    /// every ext_pillar as `pillar`).
    fn compile(&self, host: &Host) -> PillarPart;

    /// The index of this source's entry in `ext_pillar`: sources are
    /// merged in that order, whichever crate built them.
    fn position(&self) -> usize {
        usize::MAX
    }
}
