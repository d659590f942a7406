//! Structured levels read: what every level's read rule (in its module's `lowering`)
//! starts from, and the search that follows into runs or blocks.

use super::*;

impl Lowerer {
    /// Follow (random access) into runs or blocks: a binary search over the sorted ends
    /// `ends` of the fiber's entries `ptr[p] .. ptr[p+1]`; `start(r)` is where entry `r`
    /// starts (0-based; `None` where the previous one ends), and `block_ofs` the offsets of
    /// a block's consecutive values. A miss reads fill.
    pub(crate) fn follow_by_search(
        &mut self,
        cx: &StructuredFiber,
        ends: crate::kernel::BufId,
        start: Rc<dyn Fn(KExpr) -> Option<KExpr>>,
        block_ofs: Option<crate::kernel::BufId>,
    ) -> Result<Looplet> {
        let (t, depth, pos, fill) = (cx.tensor, cx.depth, cx.pos.clone(), cx.fill);
        let ptr = cx.buf(0)?;
        let l = KExpr::Local;
        let child = cx.child();
        let r = self.level_local(t, depth, "r");
        let hi = self.level_local(t, depth, "r_stop");
        let found = self.kernel.local(
            format!("{}_lvl{depth}_found", self.tensors[t].name),
            ScalarType::Bool,
        );
        // The 0-based target is `i - 1`.
        Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
            let target = i - 1;
            let hit = match start(l(r)) {
                Some(s) => KExpr::bin(Op::Le, s, target.clone()),
                None => KExpr::Lit(Value::Bool(true)),
            };
            // A block's values are consecutive, ending at `ofs[r+1]`.
            let at = match block_ofs {
                Some(ofs) => {
                    (KExpr::load(ofs, plus1(l(r))) - 1) - (KExpr::load(ends, l(r)) - target.clone())
                }
                None => l(r),
            };
            Tensor::Switch {
                pre: vec![
                    KStmt::Assign(hi, KExpr::load(ptr, plus1(pos.clone()))),
                    KStmt::Assign(
                        r,
                        KExpr::Search {
                            buf: ends,
                            value: Box::new(target),
                            lo: Box::new(KExpr::load(ptr, pos.clone())),
                            hi: Box::new(l(hi)),
                        },
                    ),
                    KStmt::Assign(found, KExpr::Lit(Value::Bool(false))),
                    KStmt::If {
                        cond: KExpr::bin(Op::Lt, l(r), l(hi)),
                        then: vec![KStmt::Assign(found, hit)],
                        otherwise: vec![],
                    },
                ],
                cond: l(found),
                then: Box::new(child(at)),
                otherwise: Box::new(Tensor::FillLeaf(fill)),
            }
        })))
    }

    /// The looplets of the structured levels (finch-language-and-levels.md §4).
    pub(crate) fn unfurl_structured(
        &mut self,
        f: &Fiber,
        kind: LevelKind,
        shape: crate::kernel::LocalId,
        bufs: &[crate::kernel::BufId],
        present: Option<&KExpr>,
    ) -> Result<Looplet> {
        let cx = StructuredFiber {
            fiber: f,
            tensor: f.tensor,
            depth: f.depth + 1,
            pos: f.pos.clone(),
            fill: self.fill_of(f.tensor),
            kind,
            shape,
            bufs,
            present,
            gallop: f.protocols.gallops(f.depth),
            follow: f.protocols.follows(f.depth),
        };
        kind.unfurl_structured(self, &cx)
    }
}

/// One fiber of a structured level being unfurled, with what every level's rule needs.
pub(crate) struct StructuredFiber<'a> {
    pub(crate) fiber: &'a Fiber,
    pub(crate) tensor: usize,
    /// The depth of the fiber's children.
    pub(crate) depth: usize,
    pub(crate) pos: KExpr,
    pub(crate) fill: Value,
    pub(crate) kind: LevelKind,
    pub(crate) shape: crate::kernel::LocalId,
    pub(crate) bufs: &'a [crate::kernel::BufId],
    /// Where the fiber is present (see `unfurl_present`); elsewhere it has no entries.
    pub(crate) present: Option<&'a KExpr>,
    pub(crate) gallop: bool,
    /// Read by random access (`follow`) rather than walked.
    pub(crate) follow: bool,
}

impl StructuredFiber<'_> {
    /// The child fiber at a position.
    pub(crate) fn child(&self) -> impl Fn(KExpr) -> Tensor + Copy + 'static {
        let (tensor, depth, protocols) = (self.tensor, self.depth, self.fiber.protocols);
        move |pos: KExpr| {
            Tensor::Fiber(Fiber {
                tensor,
                depth,
                pos,
                end: None,
                hollow: None,
                protocols,
            })
        }
    }

    /// A run of the fill.
    pub(crate) fn fill_run(&self) -> Looplet {
        Looplet::Run(Box::new(Tensor::FillLeaf(self.fill)))
    }

    /// `preamble` where the fiber is present (see `unfurl_present`), `empty` (bounds of a
    /// fiber with no entries) where it is not.
    pub(crate) fn bounds_where(&self, preamble: Vec<KStmt>, empty: Vec<KStmt>) -> Vec<KStmt> {
        where_present(self.present, preamble, empty)
    }

    /// The level's `k`-th buffer.
    pub(crate) fn buf(&self, k: usize) -> Result<crate::kernel::BufId> {
        self.bufs.get(k).copied().ok_or_else(|| {
            Error::Program(format!(
                "internal: {} level without buffer {k}",
                self.kind.name()
            ))
        })
    }
}

pub(crate) fn plus1(e: KExpr) -> KExpr {
    e + 1
}

pub(crate) fn minus1(e: KExpr) -> KExpr {
    e - 1
}

/// `lo <= x <= hi`.
pub(crate) fn within(lo: KExpr, x: KExpr, hi: KExpr) -> KExpr {
    KExpr::Op(
        Op::And,
        vec![KExpr::bin(Op::Le, lo, x.clone()), KExpr::bin(Op::Le, x, hi)],
    )
}
