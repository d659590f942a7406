//! The differential tester of Finch-RS: random well-typed programs over random formats
//! and data, run on the dense reference engine and on the compiled engines (the kernel
//! interpreter and generated C, strict and reassociated, specialized and compact), which
//! must agree in values and stored entries; failures are minimised to small reproducers.
//! See `docs/difftest.md`.

pub mod case;
pub mod data;
pub mod driver;
pub mod formats;
pub mod gen;
pub mod report;
pub mod rng;
pub mod run;
pub mod scan;
pub mod shrink;
pub mod worker;
