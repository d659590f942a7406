//! The Finch language front end: every construct parses, errors point at the right
//! line:column, and `parse ∘ print = id` on random programs (proptest).

use finch::algebra::{Op, ScalarType, Value};
use finch::notation::{
    parse_expr, parse_program, print_expr, print_program, Access, AssignOp, Decl, DeclKind, Expr,
    Extent, Program, Protocol, Span, Stmt,
};
use finch::Error;
use proptest::prelude::*;

fn round_trip(text: &str) -> Program {
    let p = parse_program(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let printed = print_program(&p);
    let q = parse_program(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(p, q, "printed:\n{printed}");
    p
}

fn err(text: &str) -> (usize, usize, String) {
    match parse_program(text) {
        Err(Error::Parse(e)) => (e.line, e.col, e.message.clone()),
        other => panic!("expected a parse error for {text:?}, got {other:?}"),
    }
}

const SPMV: &str = "
input  A :: Dense(SparseList(Element(0.0)))
input  x :: Dense(Element(0.0))
output y :: Dense(Element(0.0))
temp   w :: SparseByteMap(Element(0.0))
y .= 0
for j = _, i = _
  y[i] += A[i, j] * x[j]
end
";

#[test]
fn spmv_parses_with_declarations_and_nested_loops() {
    let p = round_trip(SPMV);
    assert_eq!(p.decls.len(), 4);
    assert_eq!(p.decls[0].kind, DeclKind::Input);
    assert_eq!(p.decls[0].format, "Dense(SparseList(Element(0.0)))");
    assert_eq!(p.decls[3].kind, DeclKind::Temp);
    let Stmt::Block(v) = &p.body else { panic!() };
    let Stmt::Loop {
        index,
        extent,
        body,
    } = &v[1]
    else {
        panic!()
    };
    assert_eq!((index.as_str(), extent), ("j", &Extent::Auto));
    let Stmt::Loop { index, body, .. } = &**body else {
        panic!()
    };
    assert_eq!(index, "i");
    let Stmt::Assign { lhs, op, rhs } = &**body else {
        panic!()
    };
    assert_eq!(lhs.tensor, "y");
    assert_eq!(op, &AssignOp::Reduce(Op::Add));
    assert!(matches!(rhs, Expr::Call { op: Op::Mul, .. }));
}

#[test]
fn every_statement_form_round_trips() {
    round_trip(
        "
input A :: Dense(SparseList(Element(0.0)))
input I :: Dense(Element(0))
output s :: Scalar(0.0)
output B :: Dense(Element(0.0))
output P :: Dense(Element(0))
temp p :: ShortCircuitScalar(0)
s .= 0; B .= 0.0
for i = 1:3, j = _
  if i <= j && !(i == 2)
    s[] += A[i, j]
  elseif i > j
    s[] <<min>>= A[~(i - 1), j]
  else
    s[] <<max>>= coalesce(A[~i, j], -1.5)
  end
  let a = A[walk(i), j], b = a * 2
    B[I[i]] -= b ^ 2 ^ 3
    B[j] *= -a
    P[j] <<choose(0)>>= i
    P[j] |= i
    P[j] &= xor(i, j)
    P[j] <<overwrite>>= ifelse(a < b, i, j)
  end
end
begin
  @freeze(s)
end
@thaw(s)
p[] <<choose(-1)>>= 3u8 % 2
for i = _; B[gallop(i)] = 0; end   # comment
return s, B
",
    );
}

#[test]
fn precedence_and_negative_literals() {
    let cases = [
        ("-2 ^ 2", "-2 ^ 2"),
        ("(-2) ^ 2", "(-2) ^ 2"),
        ("-(2)", "-(2)"),
        ("2 ^ -1", "2 ^ (-1)"),
        ("a - -1", "a - -1"),
        ("a + b * c", "a + b * c"),
        ("(a + b) * c", "(a + b) * c"),
        ("a - (b - c)", "a - (b - c)"),
        ("a ^ b ^ c", "a ^ b ^ c"),
        ("(a ^ b) ^ c", "(a ^ b) ^ c"),
        ("+(a, b, c)", "+(a, b, c)"),
        ("!(a < b) || a == b", "!(a < b) || a == b"),
        ("a << 1 | b & c", "a << 1 | b & c"),
        ("u8(a) + f64(b)", "u8(a) + f64(b)"),
        ("choose(0)(a, b)", "choose(0)(a, b)"),
        ("-Inf", "-Inf"),
        ("1e-300", "1e-300"),
        ("NaNf32", "NaNf32"),
        ("-128i8", "-128i8"),
    ];
    for (text, printed) in cases {
        let e =
            parse_expr(text, &[], &[], &["a", "b", "c"]).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(print_expr(&e), printed, "{text}");
        let again = parse_expr(&print_expr(&e), &[], &[], &["a", "b", "c"]).unwrap();
        assert_eq!(again, e, "{text}");
    }
    assert_eq!(
        parse_expr("-2", &[], &[], &[]).unwrap(),
        Expr::Literal(Value::I64(-2))
    );
    assert!(matches!(
        parse_expr("-2 ^ 2", &[], &[], &[]).unwrap(),
        Expr::Call { op: Op::Neg, .. }
    ));
}

#[test]
fn errors_point_at_the_problem() {
    let cases: [(&str, usize, usize, &str); 16] = [
        // One name for two nested loops' indices (the reference summed 6 here where the
        // compiled engines summed 48), even under a `let` of that name.
        (
            "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  if x[i] > 0.0\n    for i = _\n      s[] += x[i]\n    end\n  end\nend\n",
            6,
            9,
            "the loop index `i` is already the index of an enclosing `for`",
        ),
        (
            "output s :: Scalar(0.0)\ns .= 0\nfor i = _\n  let i = 2\n    for j = _, i = _\n      s[] += 1\n    end\n  end\nend\n",
            5,
            16,
            "already the index of an enclosing `for`",
        ),
        (
            "output s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += \nend\n",
            4,
            10,
            "expected an expression, found end of line",
        ),
        (
            "output s :: Scalar(0.0)\nfor i = _\n  s[] += 1\n",
            4,
            1,
            "expected `end` to close `for` at 2:1",
        ),
        (
            "output s :: Scalar(0.0)\ns[] += q\n",
            2,
            8,
            "unknown name `q`",
        ),
        (
            "output s :: Scalar(0.0)\nB[1] = 1\n",
            2,
            1,
            "cannot assign to `B`",
        ),
        ("output s :: Scalar(0.0)\ns = 1\n", 2, 3, "`[` or `.=`"),
        (
            "output s :: Scalar(0.0)\ns[] += s\n",
            2,
            8,
            "must be read with brackets",
        ),
        (
            "input A :: Dense(Element(0.0))\ninput A :: Dense(Element(0.0))\n",
            2,
            1,
            "declared twice",
        ),
        ("input A :: \ns .= 0\n", 1, 12, "missing format"),
        (
            "output s :: Scalar(0.0)\ns[] <<foo>>= 1\n",
            2,
            7,
            "not a binary operator",
        ),
        (
            "output s :: Scalar(0.0)\nfor i = _\n  s[] += ~i\nend\n",
            3,
            10,
            "only allowed inside",
        ),
        (
            "output s :: Scalar(0.0)\ns[] += frob(1)\n",
            2,
            8,
            "unknown function `frob`",
        ),
        (
            "output s :: Scalar(0.0)\ns[] += 300u8\n",
            2,
            8,
            "not a valid literal",
        ),
        ("output s :: Scalar(0.0)\nend\n", 2, 1, "without a matching"),
        (
            "output s :: Scalar(0.0)\nfor s = _\nend\n",
            2,
            5,
            "is a tensor",
        ),
    ];
    for (text, line, col, msg) in cases {
        let (l, c, m) = err(text);
        assert!(m.contains(msg), "{text:?}: {m}");
        assert_eq!((l, c), (line, col), "{text:?}: {m}");
    }
    // The rendered error shows the offending source line and a caret.
    let e = parse_program("output s :: Scalar(0.0)\ns[] += q\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 | s[] += q") && e.contains("^"), "{e}");
}

// ---- random ASTs ----

fn literal() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::I64),
        any::<f64>().prop_map(Value::F64),
        any::<f32>().prop_map(Value::F32),
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u64>().prop_map(Value::U64),
        any::<i32>().prop_map(Value::I32),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Missing),
    ]
}

const INDICES: [&str; 3] = ["i", "j", "k"];
const TENSORS: [&str; 3] = ["A", "B", "s"];

fn expr_in(indices: Vec<String>, vars: Vec<String>, in_index: bool) -> BoxedStrategy<Expr> {
    let mut leaves: Vec<BoxedStrategy<Expr>> = vec![literal().prop_map(Expr::Literal).boxed()];
    if !indices.is_empty() {
        leaves.push(
            prop::sample::select(indices.clone())
                .prop_map(Expr::Index)
                .boxed(),
        );
    }
    if !vars.is_empty() {
        leaves.push(
            prop::sample::select(vars.clone())
                .prop_map(Expr::Variable)
                .boxed(),
        );
    }
    let leaf = prop::strategy::Union::new(leaves).boxed();
    let indices2 = indices.clone();
    leaf.prop_recursive(3, 16, 3, move |inner| {
        let binary: Vec<Op> = vec![
            Op::Add,
            Op::Sub,
            Op::Mul,
            Op::Div,
            Op::Rem,
            Op::Pow,
            Op::BitAnd,
            Op::BitOr,
            Op::Shl,
            Op::Shr,
            Op::Eq,
            Op::Ne,
            Op::Lt,
            Op::Le,
            Op::Gt,
            Op::Ge,
            Op::And,
            Op::Or,
            Op::Min,
            Op::Max,
            Op::Xor,
            Op::IntDiv,
            Op::RemFn,
            Op::Mod,
            Op::Fld,
            Op::Coalesce,
            Op::Overwrite,
            Op::Choose(Value::I64(0)),
            Op::Choose(Value::F64(-1.5)),
        ];
        let unary: Vec<Op> = vec![
            Op::Neg,
            Op::Not,
            Op::Abs,
            Op::Sqrt,
            Op::Exp,
            Op::Log,
            Op::Sin,
            Op::Cos,
            Op::Cast(ScalarType::U8),
            Op::Cast(ScalarType::F32),
        ];
        let mut options: Vec<BoxedStrategy<Expr>> = vec![
            (prop::sample::select(binary), inner.clone(), inner.clone())
                .prop_map(|(op, a, b)| Expr::Call {
                    op,
                    args: vec![a, b],
                })
                .boxed(),
            (prop::sample::select(unary), inner.clone())
                .prop_map(|(op, a)| Expr::Call { op, args: vec![a] })
                .boxed(),
            inner
                .clone()
                .prop_map(|a| Expr::Call {
                    op: Op::Add,
                    args: vec![a],
                })
                .boxed(),
            (
                prop::sample::select(vec![Op::Add, Op::Mul, Op::Max, Op::Coalesce]),
                prop::collection::vec(inner.clone(), 3),
            )
                .prop_map(|(op, args)| Expr::Call { op, args })
                .boxed(),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| Expr::Call {
                    op: Op::IfElse,
                    args: vec![c, a, b],
                })
                .boxed(),
            (
                prop::sample::select(TENSORS.to_vec()),
                prop::collection::vec(inner.clone(), 0..3),
            )
                .prop_map(|(t, indices)| {
                    Expr::Access(Access {
                        tensor: t.to_string(),
                        indices,
                    })
                })
                .boxed(),
        ];
        if in_index {
            options.push(
                inner
                    .clone()
                    .prop_map(|e| Expr::Permissive(Box::new(e)))
                    .boxed(),
            );
            // Windows `(lo:hi)(i)`.
            options.push(
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(lo, hi, i)| Expr::Window {
                        lo: Box::new(lo),
                        hi: Box::new(hi),
                        index: Box::new(i),
                    })
                    .boxed(),
            );
        }
        if in_index && !indices2.is_empty() {
            options.push(
                (
                    prop::sample::select(Protocol::ALL.to_vec()),
                    prop::sample::select(indices2.clone()),
                )
                    .prop_map(|(p, i)| Expr::Protocol(p, Box::new(Expr::Index(i))))
                    .boxed(),
            );
        }
        prop::strategy::Union::new(options)
    })
    .boxed()
}

fn access_in(indices: Vec<String>, vars: Vec<String>) -> BoxedStrategy<Access> {
    (
        prop::sample::select(TENSORS.to_vec()),
        prop::collection::vec(expr_in(indices, vars, true), 0..3),
    )
        .prop_map(|(t, indices)| Access {
            tensor: t.to_string(),
            indices,
        })
        .boxed()
}

fn stmt_in(depth: u32, indices: Vec<String>, vars: Vec<String>) -> BoxedStrategy<Stmt> {
    let reduce_ops = vec![
        AssignOp::Store,
        AssignOp::Reduce(Op::Add),
        AssignOp::Reduce(Op::Sub),
        AssignOp::Reduce(Op::Mul),
        AssignOp::Reduce(Op::BitOr),
        AssignOp::Reduce(Op::BitAnd),
        AssignOp::Reduce(Op::Min),
        AssignOp::Reduce(Op::Choose(Value::I64(0))),
        AssignOp::Reduce(Op::Shl),
        AssignOp::Reduce(Op::Lt),
    ];
    let simple = prop_oneof![
        (
            access_in(indices.clone(), vars.clone()),
            prop::sample::select(reduce_ops),
            expr_in(indices.clone(), vars.clone(), false)
        )
            .prop_map(|(lhs, op, rhs)| Stmt::Assign { lhs, op, rhs }),
        (
            prop::sample::select(TENSORS.to_vec()),
            expr_in(indices.clone(), vars.clone(), false)
        )
            .prop_map(|(t, init)| Stmt::Declare {
                tensor: t.to_string(),
                init
            }),
        prop::sample::select(TENSORS.to_vec()).prop_map(|t| Stmt::Freeze(t.to_string())),
        prop::sample::select(TENSORS.to_vec()).prop_map(|t| Stmt::Thaw(t.to_string())),
    ]
    .boxed();
    if depth == 0 {
        return simple;
    }
    let i = INDICES[(depth as usize) % 3].to_string();
    let mut inner_indices = indices.clone();
    inner_indices.push(i.clone());
    let v = format!("v{depth}");
    let mut inner_vars = vars.clone();
    inner_vars.push(v.clone());
    let body_in = |ix: Vec<String>, vs: Vec<String>| {
        prop_oneof![
            stmt_in(depth - 1, ix.clone(), vs.clone()),
            prop::collection::vec(stmt_in(depth - 1, ix, vs), 0..4).prop_map(Stmt::Block),
        ]
    };
    let i2 = i.clone();
    prop_oneof![
        3 => simple,
        1 => (body_in(inner_indices.clone(), vars.clone()), prop::option::of((expr_in(indices.clone(), vars.clone(), false), expr_in(indices.clone(), vars.clone(), false))))
            .prop_map(move |(body, range)| Stmt::Loop {
                index: i2.clone(),
                extent: range.map_or(Extent::Auto, |(a, b)| Extent::Range(a, b)),
                body: Box::new(body),
            }),
        1 => (expr_in(indices.clone(), vars.clone(), false), body_in(indices.clone(), vars.clone()), prop::option::of(body_in(indices.clone(), vars.clone())))
            .prop_map(|(cond, then, otherwise)| Stmt::Sieve { cond, then: Box::new(then), otherwise: otherwise.map(Box::new) }),
        1 => (expr_in(indices.clone(), vars.clone(), false), body_in(indices.clone(), inner_vars.clone()))
            .prop_map(move |(value, body)| Stmt::Define { var: v.clone(), value, body: Box::new(body) }),
        1 => prop::collection::vec(stmt_in(depth - 1, indices.clone(), vars.clone()), 0..3).prop_map(Stmt::Block),
    ]
    .boxed()
}

fn program() -> impl Strategy<Value = Program> {
    (
        prop::collection::vec(stmt_in(3, vec![], vec![]), 0..4),
        prop::option::of(prop::collection::vec(
            prop::sample::select(TENSORS.to_vec()),
            1..3,
        )),
    )
        .prop_map(|(mut stmts, ret)| {
            if let Some(r) = ret {
                stmts.push(Stmt::Return(r.into_iter().map(String::from).collect()));
            }
            let body = if stmts.len() == 1 {
                stmts.pop().unwrap()
            } else {
                Stmt::Block(stmts)
            };
            Program {
                decls: vec![
                    Decl {
                        kind: DeclKind::Input,
                        name: "A".into(),
                        format: "Dense(SparseList(Element(0.0)))".into(),
                        span: Span::default(),
                    },
                    Decl {
                        kind: DeclKind::Output,
                        name: "B".into(),
                        format: "SparseCOO{2}(Element(-1))".into(),
                        span: Span::default(),
                    },
                    Decl {
                        kind: DeclKind::Temp,
                        name: "s".into(),
                        format: "Scalar(0.0f32)".into(),
                        span: Span::default(),
                    },
                ],
                body,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn print_then_parse_is_identity(p in program()) {
        let text = print_program(&p);
        let q = parse_program(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(q, p, "{}", text);
    }

    #[test]
    fn parser_never_panics_on_mutations(p in program(), cut in any::<prop::sample::Index>(), junk in "[ -~\n]{0,5}") {
        let text = print_program(&p);
        let at = cut.index(text.len() + 1);
        let at = (0..=at).rev().find(|&k| text.is_char_boundary(k)).unwrap_or(0);
        let mutated = format!("{}{}{}", &text[..at], junk, &text[at..]);
        let _ = parse_program(&mutated);
    }

    #[test]
    fn parser_never_panics_on_noise(s in "[a-z0-9_\\[\\](){}<>=+*/%^&|!~:;,.@# \n-]{0,60}") {
        let _ = parse_program(&s);
    }
}

/// `swizzle(A, σ)[idx...]` reads mode `σ[k]` of `A` at `idx[k]` (applied when parsed, as the
/// paper's wrapperization does); a non-permutation or a missing index list is an error at
/// the swizzle.
#[test]
fn swizzle_permutes_the_access() {
    let decls = "input A :: Dense(Dense(Dense(Element(0.0))))\ninput M :: Dense(Dense(Element(0.0)))\noutput s :: Scalar(0.0)\n";
    let body = |e: &str| format!("{decls}s .= 0\nfor k = _, j = _, i = _\n  s[] += {e}\nend\n");
    let parsed = |text: &str| finch::Program::parse(text).map(|p| p.to_string());
    assert_eq!(
        parsed(&body(
            "swizzle(A, 3, 1, 2)[i, j, k] + swizzle(M, 2, 1)[i, j]"
        ))
        .unwrap(),
        parsed(&body("A[j, k, i] + M[j, i]")).unwrap()
    );
    assert_eq!(
        parsed(&body("swizzle(A, 1, 2, 3)[i, j, k]")).unwrap(),
        parsed(&body("A[i, j, k]")).unwrap()
    );
    // Written through a swizzle too.
    let w = "input M :: Dense(Dense(Element(0.0)))\noutput C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor i = _, j = _\n  swizzle(C, 2, 1)[i, j] = M[j, i]\nend\n";
    assert!(parsed(w).unwrap().contains("C[j, i] = M[j, i]"));
    for (e, needle) in [
        ("swizzle(M, 1, 1)[i, j]", "must be a permutation of 1:2"),
        ("swizzle(M, 2, 1, 3)[i, j]", "must be a permutation of 1:2"),
        ("swizzle(M, 0, 1)[i, j]", "mode numbers"),
        ("swizzle(M, 2, 1)", "`[` after `swizzle(M, ...)`"),
    ] {
        let err = parsed(&body(e)).expect_err(e).to_string();
        assert!(err.contains(needle), "{e}: {err}");
    }
}

/// Found by the `program_text` fuzz target: a declaration's format of two numbers in a
/// row (`0.5 1`) was printed as one (`0.51`), so print then parse changed the program.
#[test]
fn a_format_with_adjacent_numbers_round_trips() {
    let p = round_trip("input A :: SparseList(Element(0.5 1.0))\n");
    assert_eq!(p.decls[0].format, "SparseList(Element(0.5 1.0))");
    // The checker refuses it, naming the format.
    let e = finch::Program::parse("input A :: SparseList(Element(0.5 1.0))\n").unwrap_err();
    assert!(e.to_string().contains("format"), "{e}");
}

/// Found by the `program_text` fuzz target: a format with an unclosed `(` ended by `;`
/// parsed, but printed on a line of its own it ran on into the next declaration (a
/// newline inside brackets is a space), so the printed program did not parse. Brackets
/// in a format must pair up.
#[test]
fn a_format_with_unpaired_brackets_is_an_error_at_the_bracket() {
    let (line, col, message) = err("input x :: Dense(Element(0.0) ;\ninput y :: Scalar(0.0)\n");
    assert_eq!((line, col), (1, 17), "{message}");
    assert!(
        message.contains("not closed") && message.contains("`x`"),
        "{message}"
    );
    let paired = |m: &str| m.contains("unmatched") || m.contains("without its opening bracket");
    let (line, col, message) = err("input x :: Dense)Element(0.0)\n");
    assert_eq!((line, col), (1, 17), "{message}");
    assert!(paired(&message), "{message}");
    let (_, _, message) = err("input x :: SparseCOO{2)(Element(0.0))\n");
    assert!(paired(&message), "{message}");
    round_trip("input x :: SparseCOO{2}(Element(0.0)) ; input y :: Scalar(0.0)\n");
}

/// Found by the `program_text` fuzz target (a 79 s timeout): printing a unary operator
/// whose operand prints with a sign printed the operand twice, and the parser parsed
/// the printed `+(+(...))` twice per level (once as a call's first argument), so a chain
/// of `n` unary operators took time 2^n (50 `+` in a row never finished). A chain of 300
/// prints and reads back.
#[test]
fn a_chain_of_unary_operators_prints_once_per_operator() {
    let text = format!(
        "output s :: Scalar(0.0)\ns[] = 1.0 {} 2.0\n",
        "+".repeat(300)
    );
    let p = round_trip(&text);
    assert!(print_program(&p).matches('+').count() == 300);
    round_trip(
        &format!("output s :: Scalar(0.0)\ns[] = {}x\n", "-".repeat(300)).replace("x", "2.0"),
    );
}
