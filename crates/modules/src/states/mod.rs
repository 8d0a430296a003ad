//! State modules, one file each; registered in [`crate::table`].

pub mod archive;
pub mod cmd;
pub mod file;
pub mod group;
pub mod module;
pub mod pkg;
pub mod pkgrepo;
pub mod service;
pub mod test;
pub mod user;
