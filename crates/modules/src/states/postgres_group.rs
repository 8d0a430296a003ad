//! Salt's `postgres_group` state: a role that does not log in by default,
//! managed by the same logic as `postgres_user` (Salt's two modules are
//! one apart from their words and defaults).

use halite_state::{StateFunction, StateTable};

use crate::exec::postgres::role::RoleKind;
use crate::states::postgres_user::{absent, present};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "postgres_group",
    functions: &[
        StateFunction::new("present", |c| present(RoleKind::Group, c)),
        StateFunction::new("absent", |c| absent(RoleKind::Group, c)),
    ],
};
