//! State modules, one file each; registered in [`crate::table`].

pub mod pkg;
pub mod pkgrepo;
pub mod file;
pub mod cmd;
pub mod test;
pub mod user;
pub mod service;
pub mod group;
