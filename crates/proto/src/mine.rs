//! The Salt mine on the wire: what a minion asks its master about the
//! mine (Salt's `_mine`, `_mine_get`, `_mine_delete` and `_mine_flush`
//! loads), carried by [`crate::msg::RequestBody::Mine`] and answered with
//! [`crate::msg::ReplyBody::Value`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One mine request of a minion; the master knows who asks from the
/// session, so no request names a minion id.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum MineRequest {
    /// Salt's `_mine`: store `data` (`{function or alias: result}`) as this
    /// minion's mine, merged into what is there, or replacing it all with
    /// `clear`. Answered `true`.
    Store {
        /// `{function or alias: result}`; a result with `allow_tgt` is
        /// wrapped as Salt's `wrap_acl_structure` wraps it.
        data: Map<String, Value>,
        /// Replace the whole mine of this minion instead of merging.
        clear: bool,
    },
    /// Salt's `_mine_get`: `{minion: data}` (or `{fun: {minion: data}}`
    /// for several functions) of the minions `tgt` selects.
    Get {
        /// The target expression.
        tgt: String,
        /// A function name, a comma separated list, or a list.
        fun: Value,
        /// How `tgt` is read (`glob`, `list`, `grain`, `compound`...).
        tgt_type: String,
    },
    /// Salt's `_mine_delete`: forget `fun` in this minion's mine. Answered `true`.
    Delete {
        /// The function (or alias) to forget.
        fun: String,
    },
    /// Salt's `_mine_flush`: forget this minion's whole mine. Answered `true`.
    Flush,
    /// The `mine_functions` of this minion's pillar, compiled by the master
    /// (the minion merges them over its config's); `{}` when none.
    PillarFunctions,
}
