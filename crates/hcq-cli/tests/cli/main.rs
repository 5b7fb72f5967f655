//! The `hcq` binary as a user runs it.

mod common;
#[path = "../kept_objects/mod.rs"]
mod kept_objects;

mod bench;
mod demo;
mod devices;
mod help_and_logging;
mod run;
mod trace;
