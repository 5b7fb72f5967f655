//! The `hcq` binary as a user runs it.

mod common;

mod bench;
mod demo;
mod devices;
mod help_and_logging;
mod run;
mod trace;
