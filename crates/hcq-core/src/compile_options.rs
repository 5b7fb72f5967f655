//! [`CompileOptions`]: what a caller adds to a kernel compile (`-I`, `-D`, `-O`, other flags).

use crate::{Error, Result};
use std::path::PathBuf;

/// Compiler settings beyond a backend's defaults, as `hcq compile|run -I DIR -D NAME[=VALUE]
/// -O N --flag ARG` and `Device::compile_with` take them. They are part of the compile
/// cache's key, and headers found through `include_dirs` are checked like any other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// `-I DIR`: searched for `#include`s after the source file's own directory, in order.
    pub include_dirs: Vec<PathBuf>,
    /// `-D NAME` (`None`: defined as 1) or `-D NAME=VALUE`, in order.
    pub defines: Vec<(String, Option<String>)>,
    /// `-O N`, 0 to 3 (default: 3).
    pub opt_level: Option<u8>,
    /// Any other compiler flags, passed as they are, after the rest.
    pub flags: Vec<String>,
}

/// Flags that would break how hcq runs the compiler (its input, output, dependency list or
/// target), and why.
const RESERVED: [(&str, &str); 12] = [
    ("-o", "hcq reads the object from clang's output"),
    ("-MF", "hcq reads clang's dependency list"),
    ("-MD", "hcq reads clang's dependency list"),
    ("-MMD", "hcq reads clang's dependency list"),
    (
        "-M",
        "it makes clang list dependencies instead of compiling",
    ),
    (
        "-MM",
        "it makes clang list dependencies instead of compiling",
    ),
    ("-E", "it makes clang preprocess instead of compiling"),
    (
        "-S",
        "it makes clang write assembly instead of a code object",
    ),
    ("-fsyntax-only", "it makes clang write no code object"),
    ("-x", "the source language is fixed by the backend"),
    ("--offload-arch", "the target is the device's"),
    ("--cuda-host-only", "hcq compiles device code"),
];

impl CompileOptions {
    /// Parses compiler-style arguments: `-IDIR` or `-I DIR`, `-DNAME[=VALUE]` or `-D ...`,
    /// `-ON`; anything else is a flag passed as it is.
    pub fn from_args<S: AsRef<str>>(args: &[S]) -> Result<CompileOptions> {
        let mut options = CompileOptions::default();
        let mut it = args.iter().map(AsRef::as_ref);
        while let Some(arg) = it.next() {
            let mut value = |flag: &str, attached: &str| -> Result<String> {
                if !attached.is_empty() {
                    return Ok(attached.to_string());
                }
                it.next().map(str::to_string).ok_or_else(|| {
                    Error::InvalidArgument(format!("compiler flag {flag} needs a value"))
                })
            };
            if let Some(rest) = arg.strip_prefix("-I") {
                options.include_dirs.push(PathBuf::from(value("-I", rest)?));
            } else if let Some(rest) = arg.strip_prefix("-D") {
                options
                    .defines
                    .push(parse_define_text(&value("-D", rest)?)?);
            } else if let Some(rest) = arg.strip_prefix("-O") {
                options.opt_level = Some(parse_opt_level(rest)?);
            } else {
                options.flags.push(arg.to_string());
            }
        }
        options.check()?;
        Ok(options)
    }

    /// A `-D` argument: `NAME` or `NAME=VALUE`, the name a C identifier.
    pub fn parse_define(text: &str) -> Result<(String, Option<String>)> {
        parse_define_text(text)
    }

    /// Whether nothing is set.
    pub fn is_default(&self) -> bool {
        *self == CompileOptions::default()
    }

    /// Checks every setting: an include directory that does not exist, a define that is not
    /// an identifier, a level past 3 or a flag that would break the compile is an
    /// [`Error::InvalidArgument`] naming it.
    pub fn check(&self) -> Result<()> {
        for dir in &self.include_dirs {
            if !dir.is_dir() {
                return Err(Error::InvalidArgument(format!(
                    "include directory {} does not exist",
                    dir.display()
                )));
            }
        }
        for (name, _) in &self.defines {
            check_identifier(name)?;
        }
        if let Some(level) = self.opt_level {
            if level > 3 {
                return Err(Error::InvalidArgument(format!(
                    "optimisation level {level}: it is 0 to 3"
                )));
            }
        }
        for flag in &self.flags {
            let name = flag.split('=').next().unwrap_or(flag);
            if let Some((_, why)) = RESERVED.iter().find(|(f, _)| *f == name) {
                return Err(Error::InvalidArgument(format!(
                    "compiler flag {flag} is not allowed: {why}"
                )));
            }
        }
        Ok(())
    }

    /// The settings as compiler arguments, in order: includes, defines, level, flags.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for dir in &self.include_dirs {
            args.push("-I".to_string());
            args.push(dir.to_string_lossy().into_owned());
        }
        for (name, value) in &self.defines {
            args.push(match value {
                Some(v) => format!("-D{name}={v}"),
                None => format!("-D{name}"),
            });
        }
        if let Some(level) = self.opt_level {
            args.push(format!("-O{level}"));
        }
        args.extend(self.flags.iter().cloned());
        args
    }
}

/// `NAME` or `NAME=VALUE`.
fn parse_define_text(text: &str) -> Result<(String, Option<String>)> {
    let (name, value) = match text.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (text, None),
    };
    check_identifier(name)?;
    Ok((name.to_string(), value))
}

/// `0` to `3`.
fn parse_opt_level(text: &str) -> Result<u8> {
    match text.parse::<u8>() {
        Ok(level @ 0..=3) => Ok(level),
        _ => Err(Error::InvalidArgument(format!(
            "optimisation level {text:?}: it is 0, 1, 2 or 3"
        ))),
    }
}

fn check_identifier(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "-D {name:?}: a macro name is a C identifier"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_style_arguments_parse_into_their_settings() {
        let dir = std::env::temp_dir();
        let d = dir.to_string_lossy().into_owned();
        let o = CompileOptions::from_args(&[
            format!("-I{d}"),
            "-I".into(),
            d.clone(),
            "-DN=4".into(),
            "-D".into(),
            "FAST".into(),
            "-O1".into(),
            "-ffast-math".into(),
            "-Wall".into(),
        ])
        .unwrap();
        assert_eq!(o.include_dirs, vec![dir.clone(), dir.clone()]);
        assert_eq!(
            o.defines,
            vec![("N".into(), Some("4".into())), ("FAST".into(), None)]
        );
        assert_eq!(o.opt_level, Some(1));
        assert_eq!(o.flags, vec!["-ffast-math", "-Wall"]);
        assert_eq!(
            o.to_args(),
            vec![
                "-I",
                &d,
                "-I",
                &d,
                "-DN=4",
                "-DFAST",
                "-O1",
                "-ffast-math",
                "-Wall"
            ]
        );
        assert!(CompileOptions::default().is_default() && !o.is_default());
    }

    #[test]
    fn bad_settings_are_errors_naming_them() {
        let bad = |args: &[&str], needle: &str| match CompileOptions::from_args(args) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
            other => panic!("{args:?}: expected InvalidArgument, got {other:?}"),
        };
        bad(&["-I/no/such/dir/anywhere"], "/no/such/dir/anywhere");
        bad(&["-I"], "needs a value");
        bad(&["-D1X"], "1X");
        bad(&["-Dbad-name=3"], "bad-name");
        bad(&["-O4"], "0, 1, 2 or 3");
        bad(&["-Ofast"], "0, 1, 2 or 3");
        bad(&["-o", "x"], "-o");
        bad(&["-MF"], "dependency");
        bad(&["--offload-arch=gfx90a"], "the device's");
        bad(&["-x", "c"], "language");
    }
}
