//! Isolation: cases run in a child process (the binary itself, `finch-difftest worker`),
//! since a compiled kernel may crash its process or loop forever. The parent sends a
//! request on the child's standard input and reads its replies, one line each:
//!
//! ```text
//! parent: gen SEED INDEX MASK            (generate case INDEX of SEED, run configs MASK)
//! parent: case MASK N, then N lines      (run a given case, in its text form)
//! worker: step NAME                      (before each step: reference, a config, run CONFIG)
//! worker: attempt K | invalid MSG | outcome CONFIG KIND MSG ... then done
//! ```
//!
//! A reply that does not come within the time limit of its step is a hang, and a worker
//! that dies is a crash, of the configuration under way; either way the worker is
//! replaced. Workers are also replaced every few hundred cases, since the C engine keeps
//! every kernel it loads.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::Duration;

use crate::case::Case;
use crate::gen::generate;
use crate::run::{run_case, Config, Kind, Outcome, Verdict};

/// Attempts at drawing a case the reference runs before counting it invalid.
pub const ATTEMPTS: u32 = 8;

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => {}
            },
            (c, false) => out.push(c),
        }
    }
    out
}

/// The worker's side: serves requests from `input` until it ends.
pub fn serve(input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    // A panic is reported as an outcome; its default message would only add noise.
    std::panic::set_hook(Box::new(|_| {}));
    let mut lines = input.lines();
    while let Some(line) = lines.next() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let step = |out: &mut dyn Write, s: &str| {
            let _ = writeln!(out, "step {s}");
            let _ = out.flush();
        };
        let verdict = match words.as_slice() {
            ["gen", seed, index, mask] => {
                let (Ok(seed), Ok(index), Ok(mask)) = (seed.parse(), index.parse(), mask.parse())
                else {
                    continue;
                };
                let mut last = Verdict::default();
                for attempt in 0..ATTEMPTS {
                    let case = generate(seed, index, attempt);
                    last = run_case(&case, &Config::set(mask), &mut |s| step(&mut output, s));
                    last.attempt = attempt;
                    if last.invalid.is_none() {
                        break;
                    }
                }
                last
            }
            ["case", mask, count] => {
                let (Ok(mask), Ok(count)) = (mask.parse(), count.parse::<usize>()) else {
                    continue;
                };
                // The case's own lines (its program has `end` lines of its own).
                let mut text = String::new();
                for l in lines.by_ref().take(count) {
                    text.push_str(&l?);
                    text.push('\n');
                }
                match Case::from_text(&text) {
                    Ok(case) => run_case(&case, &Config::set(mask), &mut |s| step(&mut output, s)),
                    Err(e) => Verdict {
                        invalid: Some(e.to_string()),
                        ..Verdict::default()
                    },
                }
            }
            _ => continue,
        };
        writeln!(output, "attempt {}", verdict.attempt)?;
        if let Some(m) = &verdict.invalid {
            writeln!(output, "invalid {}", escape(m))?;
        }
        for o in &verdict.outcomes {
            writeln!(
                output,
                "outcome {} {} {}",
                o.config.name(),
                o.kind.name(),
                escape(&o.message)
            )?;
        }
        writeln!(output, "done")?;
        output.flush()?;
    }
    Ok(())
}

/// How workers are started.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The `finch-difftest` executable.
    pub exe: PathBuf,
    /// The time limit of the reference, or of compiling one configuration.
    pub compile_timeout: Duration,
    /// The time limit of running one compiled kernel.
    pub timeout: Duration,
    /// Environment for the worker (the kernel cache, C flags).
    pub env: Vec<(String, String)>,
    /// Cases a worker serves before it is replaced.
    pub recycle_after: usize,
}

/// A running worker process.
pub struct Worker {
    options: WorkerOptions,
    child: Option<(Child, ChildStdin, Receiver<String>)>,
    served: usize,
}

impl Worker {
    /// A worker (started on its first request).
    pub fn new(options: WorkerOptions) -> Worker {
        Worker {
            options,
            child: None,
            served: 0,
        }
    }

    fn start(&mut self) -> std::io::Result<()> {
        let mut cmd = Command::new(&self.options.exe);
        // A group of its own, so that a worker stopped while its C compiler runs takes
        // the compiler with it (which would otherwise write into the removed cache).
        cmd.arg("worker")
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in &self.options.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        self.child = Some((child, stdin, rx));
        self.served = 0;
        Ok(())
    }

    /// Stops the worker process and its children.
    pub fn stop(&mut self) {
        if let Some((mut child, stdin, _)) = self.child.take() {
            drop(stdin);
            kill_group(&mut child);
            let _ = child.wait();
        }
    }

    /// Generates and runs case `index` of `seed` in `configs`.
    pub fn generated(&mut self, seed: u64, index: u64, configs: &[Config]) -> Verdict {
        let mask: u8 = configs.iter().map(|c| c.bit()).sum();
        self.request(&format!("gen {seed} {index} {mask}\n"))
    }

    /// Runs a given case in `configs`.
    pub fn given(&mut self, case: &Case, configs: &[Config]) -> Verdict {
        let mask: u8 = configs.iter().map(|c| c.bit()).sum();
        let text = case.to_text();
        self.request(&format!("case {mask} {}\n{text}", text.lines().count()))
    }

    fn request(&mut self, text: &str) -> Verdict {
        if self.served >= self.options.recycle_after {
            self.stop();
        }
        if self.child.is_none() {
            if let Err(e) = self.start() {
                return Verdict {
                    invalid: Some(format!("cannot start a worker: {e}")),
                    ..Verdict::default()
                };
            }
        }
        self.served += 1;
        let Some((_, stdin, _)) = self.child.as_mut() else {
            return Verdict::default();
        };
        let sent = stdin.write_all(text.as_bytes()).and_then(|_| stdin.flush());
        let mut verdict = Verdict::default();
        let mut step = String::from("reference");
        loop {
            let Some((child, _, rx)) = self.child.as_mut() else {
                return verdict;
            };
            let limit = if step.starts_with("run ") {
                self.options.timeout
            } else {
                self.options.compile_timeout
            };
            let line = if sent.is_ok() {
                rx.recv_timeout(limit)
            } else {
                Err(RecvTimeoutError::Disconnected)
            };
            match line {
                Ok(l) => {
                    let (word, rest) = l.split_once(' ').unwrap_or((l.as_str(), ""));
                    match word {
                        "step" => step = rest.to_string(),
                        "attempt" => verdict.attempt = rest.parse().unwrap_or(0),
                        "invalid" => verdict.invalid = Some(unescape(rest)),
                        "outcome" => {
                            let mut parts = rest.splitn(3, ' ');
                            let config = parts.next().and_then(Config::from_name);
                            let kind = parts.next().and_then(Kind::from_name);
                            if let (Some(config), Some(kind)) = (config, kind) {
                                verdict.outcomes.push(Outcome {
                                    config,
                                    kind,
                                    message: unescape(parts.next().unwrap_or("")),
                                });
                            }
                        }
                        "done" => return verdict,
                        _ => {}
                    }
                }
                Err(e) => {
                    let hung = e == RecvTimeoutError::Timeout;
                    if hung {
                        kill_group(child);
                    }
                    let status = child.wait().ok();
                    self.child = None;
                    let message = match (hung, status) {
                        (true, _) => format!("no answer within {limit:?} in step {step}"),
                        (false, Some(s)) => match s.signal() {
                            Some(sig) => format!(
                                "killed by signal {sig} ({}) in step {step}",
                                signal_name(sig)
                            ),
                            None => format!("exited with {s} in step {step}"),
                        },
                        (false, None) => format!("the worker vanished in step {step}"),
                    };
                    let config = Config::from_name(step.strip_prefix("run ").unwrap_or(&step));
                    match config {
                        Some(config) => verdict.outcomes.push(Outcome {
                            config,
                            kind: if hung { Kind::Hang } else { Kind::Crash },
                            message,
                        }),
                        None => verdict.invalid = Some(format!("reference: {message}")),
                    }
                    return verdict;
                }
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Kills a worker's process group (the worker and a C compiler it runs), by its id.
fn kill_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    let killed = Command::new("kill")
        .args(["-KILL", "--", &group])
        .stderr(Stdio::null())
        .status();
    if !killed.is_ok_and(|s| s.success()) {
        let _ = child.kill();
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip() {
        for s in ["a\nb", "back\\slash\\n", ""] {
            assert_eq!(unescape(&escape(s)), s);
        }
    }
}
