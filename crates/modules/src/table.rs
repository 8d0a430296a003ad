//! The one table of modules: adding a module is one file and one line here.

use std::sync::Arc;

use halite_state::StateModules;

use crate::exec::ExecModules;

/// Every state module halite ships.
pub fn state_modules() -> StateModules {
    let mut t = StateModules::new();
    t.register(Arc::new(crate::states::test::TestState));
    t.register(Arc::new(crate::states::cmd::CmdState));
    t.register(Arc::new(crate::states::module::ModuleState));
    t.register(Arc::new(crate::states::file::FileState));
    t.register(Arc::new(crate::states::pkg::PkgState));
    t.register(Arc::new(crate::states::pkgrepo::PkgrepoState));
    t.register(Arc::new(crate::states::user::UserState));
    t.register(Arc::new(crate::states::group::GroupState));
    t.register(Arc::new(crate::states::service::ServiceState));
    t.register(Arc::new(crate::states::archive::ArchiveState));
    t
}

/// Every execution module halite ships.
pub fn exec_modules() -> ExecModules {
    let mut t = ExecModules::default();
    t.register(Arc::new(crate::exec::test::TestExec));
    t.register(Arc::new(crate::exec::cmd::CmdExec));
    t.register(Arc::new(crate::exec::pillar::PillarExec));
    t.register(Arc::new(crate::exec::sys::SysExec));
    t.register(Arc::new(crate::exec::state::StateExec));
    t.register(Arc::new(crate::grains::exec::GrainsExec));
    t.register(Arc::new(crate::exec::file::FileExec));
    t.register(Arc::new(crate::exec::pkg::PkgExec));
    t.register(Arc::new(crate::exec::lowpkg::LowpkgExec));
    t.register(Arc::new(crate::exec::user::UserExec));
    t.register(Arc::new(crate::exec::group::GroupExec));
    t.register(Arc::new(crate::exec::service::ServiceExec));
    t.register(Arc::new(crate::exec::cp::CpExec));
    t.register(Arc::new(crate::exec::status::StatusExec));
    t.register(Arc::new(crate::exec::alternatives::AlternativesExec));
    t
}
