//! `Dense(child)`: every index of the mode is stored.
//!
//! Buffers: none; only the size `shape`. Child position of `(p, i)` is `p·shape + i`
//! (0-based). Invariants (checked by `validate`):
//! * **I1** `P·shape` (the child position count) does not overflow.
//!
//! Properties: ordered, unique, full, locate. Protocols (compiler, issue #3): read
//! default/follow (Lookup); update extrude/laminate.

use super::format::Capabilities;
use super::level::LevelStorage;
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (a lookup either way; written at any index).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: true,
    accept_run: false,
};

/// Storage of a Dense level.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseStorage {
    /// Size of the mode.
    pub shape: usize,
    /// The child level.
    pub child: Box<LevelStorage>,
}

impl DenseStorage {
    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        parents.checked_mul(self.shape).ok_or(Error::Invalid {
            depth,
            level: "Dense",
            invariant: "I1 position count fits",
            detail: format!("{parents} × {} overflows", self.shape),
        })
    }

    /// The child position of index `i` in fiber `p`.
    pub fn locate(&self, p: usize, i: usize) -> Option<usize> {
        (i < self.shape).then(|| p * self.shape + i)
    }

    /// Every index of fiber `p` as `(index, index, child position)`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        (0..self.shape)
            .map(|i| (i, i, p * self.shape + i))
            .collect()
    }
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    let size = at.size();
    let BuildAt { m, e, groups, .. } = *at;
    let mut child_groups = Vec::new();
    let total = positions(groups.len(), size, "Dense")?;
    reserve(&mut child_groups, total, "Dense")?;
    for &(lo, hi) in groups {
        let mut k = lo;
        for i in 0..size {
            let start = k;
            while k < hi && e.key(k, m) == i {
                k += 1;
            }
            child_groups.push((start, k));
        }
    }
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::Dense(DenseStorage {
        shape: size,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    Ok(LevelStorage::Dense(DenseStorage {
        shape: at.size(),
        child: Box::new(super::output::assemble(at.child, at.above(), bufs)?),
    }))
}

impl registry::StoredLevel for DenseStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::Dense
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(DenseStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        DenseStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        vec![]
    }

    fn positions(&self, parents: usize) -> usize {
        parents.saturating_mul(self.shape)
    }

    fn get(&self, p: usize, coords: &[usize]) -> Option<registry::Value> {
        let q = DenseStorage::locate(self, p, *coords.first()?)?;
        self.child.get(q, &coords[1..])
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct Dense;

impl registry::Level for Dense {
    fn name(&self) -> &'static str {
        "Dense"
    }

    fn capabilities(&self) -> registry::Capabilities {
        CAPABILITIES
    }

    fn build(&self, _: registry::LevelKind, at: &registry::BuildAt) -> Result<LevelStorage> {
        build(at)
    }

    fn assemble_output(
        &self,
        _: registry::LevelKind,
        at: &registry::OutputAt,
        bufs: registry::OutBufs,
    ) -> Result<LevelStorage> {
        from_output(at, bufs)
    }

    fn read_params(
        &self,
        _: registry::LevelKind,
        _: &mut registry::Kernel,
        at: &registry::LevelAt,
        _: registry::IndexWidth,
    ) -> Vec<registry::LevelParams> {
        vec![lowering::read_params(at)]
    }

    /// Written in place, through the same parameters as read.
    fn written_params(
        &self,
        _: registry::LevelKind,
        _: &mut registry::Kernel,
        at: &registry::LevelAt,
        _: &registry::LevelFormat,
    ) -> Option<Vec<registry::LevelParams>> {
        Some(vec![lowering::read_params(at)])
    }
}

/// The level's kernel parameters: how the lowerer reads and writes it.
pub mod lowering {
    use crate::lower::kit::*;

    /// A Dense level read or written by a kernel: its size (positions are
    /// `parent · shape + index`).
    pub(crate) fn read_params(at: &LevelAt) -> LevelParams {
        LevelParams::Dense { shape: at.shape }
    }
}
