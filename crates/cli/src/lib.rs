//! Shared pieces of halite's command-line tools: configuration, argument
//! parsing and Salt's outputters.

pub mod args;
pub mod config;
pub mod output;
pub mod remote;
pub mod returner_args;
