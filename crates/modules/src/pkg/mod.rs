//! Package management: the provider contract Salt documents for `pkg` and
//! `lowpkg`, and the providers that implement it.
//!
//! A package manager is one file here implementing [`PkgProvider`] (apt,
//! dnf/yum) and one implementing [`LowPkg`] (dpkg, rpm), plus one line in
//! [`select::PROVIDERS`]. `pkg` may call `lowpkg`, never the reverse. The
//! `pkg` and `lowpkg` execution modules and the `pkg` / `pkgrepo` states only
//! ever talk to these traits.

pub mod apt;
pub mod aptsources;
pub mod dpkg;
pub mod rpm;
pub mod run;
pub mod select;
pub mod targets;
pub mod version;
pub mod yum;

pub mod error;
pub mod provider;

pub use error::{PkgError, PkgResult};
pub use provider::*;
pub use select::{lowpkg_for, provider_for, ProviderEntry, PROVIDERS};
pub use targets::{parse_targets, TargetKind, Targets};
