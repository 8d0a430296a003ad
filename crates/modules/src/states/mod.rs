//! State modules, one file each; registered in [`crate::table`].

pub mod test;
