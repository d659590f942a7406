//! Oracle tests of the compiler: each kernel is compiled for random input formats and run
//! on random data (sizes 0, 1, small, medium; empty, sparse and full) with the interpreter
//! and the C backend; the outputs must equal the dense reference interpreter's.

use std::collections::HashMap;

use finch::engine::{CompileOptions, Engine};
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program, ScalarType, Value};
use proptest::prelude::*;

const VECTORS: [&str; 3] = [
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "SparseList{UInt32}(Element(0.0))",
];
const MATRICES: [&str; 6] = [
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseList(Dense(Element(0.0)))",
    "Dense(SparseList{UInt32}(Element(0.0)))",
    "SparseList{UInt32}(SparseList(Element(0.0)))",
];

/// A kernel template: declarations use `{A}`, `{B}`, `{x}`, `{z}` placeholders for formats.
struct Kernel {
    name: &'static str,
    text: &'static str,
    /// Input name, is a matrix, size roles: (rows, cols) as indices into the sizes.
    inputs: &'static [(&'static str, bool, usize, usize)],
}

const KERNELS: [Kernel; 67] = [
    // A shifted permissive read padded with a value other than the fill: a column the
    // matrix lacks is still `missing` outside its bounds (read as the fill before).
    Kernel { name: "padded_read_of_absent_columns", text: "input A :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[i, j] + coalesce(A[~(i + 1), ~(j + 1)], -1.0) * 2.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "hash_out_overwrite_then_min", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseHash(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] - 1.0\nend\nfor i = _\n  w[i] <<min>>= z[i]\nend\nfor i = _\n  if z[i] > 0.5\n    w[i] = z[i] * 0.0\n  end\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "hash_matrix_scatter_transposed", text: "input A :: {A}\noutput C :: Dense(SparseHash(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[j, i] += A[i, j]\nend\nfor i = _, j = _\n  C[j, i] <<max>>= A[i, j] * 2.0\nend\n", inputs: &[("A", true, 0, 0)] },
    Kernel { name: "hash_under_dense_read_back", text: "input A :: {A}\noutput C :: Dense(SparseList(Element(0.0)))\ntemp w :: Dense(SparseHash(Element(0.0)))\nw .= 0\nfor i = _, j = _\n  w[i, j] += A[i, j]\nend\nfor j = _, i = _\n  w[i, j] += A[i, j] * 3.0\nend\nC .= 0\nfor j = _, i = _\n  C[i, j] = w[i, j] * 2.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "list_workspace_per_column", text: "input A :: {A}\ninput x :: {x}\noutput C :: Dense(SparseList(Element(0.0)))\ntemp w :: SparseList(Element(0.0))\nC .= 0\nfor j = _\n  w .= 0\n  if x[j] > 0.5\n    for i = _\n      w[i] = A[i, j] * 2.0\n    end\n  end\n  for i = _\n    C[i, j] = w[i] * x[j]\n  end\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    // Reads shared by the statements of a loop, in a branch and a `let`, one of them
    // repeated within a statement: each read once, around the loop's body.
    Kernel { name: "shared_reads_across_statements", text: "input x :: {x}\ninput z :: {z}\noutput s :: Scalar(0.0)\noutput w :: Dense(Element(0.0))\noutput m :: Scalar(0.0)\ns .= 0\nw .= 0\nm .= 0\nfor i = _\n  s[] += x[i] * x[i] + z[i]\n  if z[i] > 0.0\n    w[i] = x[i] + s[]\n  else\n    m[] <<max>>= x[i] * z[i]\n  end\n  let t = x[i] * 2.0\n    m[] <<max>>= t + z[i]\n  end\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "pattern_list_out", text: "input x :: {x}\noutput w :: SparseList(Pattern())\nw .= false\nfor i = _\n  w[i] = x[i] > 0.0\nend\n", inputs: &[("x", false, 0, 0)] },
    Kernel { name: "pattern_matrix_out", text: "input A :: {A}\noutput C :: Dense(SparseList(Pattern()))\nC .= false\nfor j = _, i = _\n  C[i, j] = A[i, j] != 0.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "pattern_coo_out", text: "input A :: {A}\noutput C :: SparseCOO{2}(Pattern())\nC .= false\nfor j = _, i = _\n  C[i, j] = A[i, j] < 0.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "pattern_nested_out", text: "input A :: {A}\noutput C :: SparseList(SparseList(Pattern()))\nC .= false\nfor j = _, i = _\n  C[i, j] = A[i, j] != 0.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "strict_lower_triangle_sum", text: "input A :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  if i > j\n    s[] += A[i, j]\n  end\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "diagonal_and_off_diagonal", text: "input A :: {A}\noutput s :: Scalar(0.0)\noutput t :: Scalar(0.0)\ns .= 0\nt .= 0\nfor j = _, i = _\n  if i == j\n    s[] += A[i, j]\n  end\n  if i != j\n    t[] += A[i, j] * 2.0\n  end\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "tridiagonal_band_mask", text: "input A :: {A}\noutput C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  if j - 1 <= i && i <= j + 1\n    C[i, j] = A[i, j]\n  end\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "swizzle_transposed_spmv", text: "input A :: {A}\ninput x :: {x}\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[i] += swizzle(A, 2, 1)[j, i] * x[j]\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    Kernel { name: "hash_out_scatter_sum", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseHash(Element(0.0))\nw .= 0\nfor i = _\n  w[i] += x[i]\nend\nfor i = _\n  w[i] += z[i] * 2.0\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "hash_matrix_out_row_major", text: "input A :: {A}\noutput C :: SparseHash(SparseHash(Element(0.0)))\nC .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] * 3.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "spgemm_outer_hash_fig21", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(SparseList(Element(0.0)))\ntemp w :: SparseHash(SparseHash(Element(0.0)))\nw .= 0\nfor k = _, j = _, i = _\n  w[i, j] += A[i, k] * B[j, k]\nend\nC .= 0\nfor j = _, i = _\n  C[i, j] = w[i, j]\nend\n", inputs: &[("A", true, 0, 2), ("B", true, 1, 2)] },
    Kernel { name: "spgemm_gustavson_hash_workspace", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(SparseList(Element(0.0)))\ntemp w :: SparseHash(Element(0.0))\nC .= 0\nfor j = _\n  w .= 0\n  for k = _, i = _\n    w[i] += A[i, k] * B[k, j]\n  end\n  for i = _\n    C[i, j] = w[i]\n  end\nend\n", inputs: &[("A", true, 0, 2), ("B", true, 2, 1)] },
    Kernel { name: "hash_under_dense_out", text: "input A :: {A}\noutput C :: Dense(SparseHash(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "convert_to_coo", text: "input A :: {A}\noutput C :: SparseCOO{2}(Element(0.0))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "coo_vector_out_mul", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseCOO{1}(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "convolution_padded", text: "input x :: {x}\ninput z :: {z}\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] += x[i]\n  for j = _\n    y[i] += coalesce(x[~(i + j - 2)], 0.5) * z[j]\n  end\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 1, 0)] },
    Kernel { name: "convert_to_interval", text: "input A :: {A}\noutput C :: Dense(SparseInterval(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "interval_out_scale", text: "input x :: {x}\noutput w :: SparseInterval(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * 2.0\nend\n", inputs: &[("x", false, 0, 0)] },
    Kernel { name: "spmv_non_concordant", text: "input A :: {A}\ninput x :: {x}\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    Kernel { name: "transpose_by_non_concordant_read", text: "input A :: {A}\noutput C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor i = _, j = _\n  C[j, i] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "offset_upper_triangle_fig10", text: "input A :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  if i <= j\n    s[] += A[i - 1, j]\n  end\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "permissive_stencil", text: "input x :: {x}\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = coalesce(x[~(i - 1)], 0.5) + coalesce(x[~(i + 2)], -1.0) * x[i]\nend\n", inputs: &[("x", false, 0, 0)] },
    Kernel { name: "offset_dot", text: "input x :: {x}\ninput z :: {z}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i + 1] * z[i + 1]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "permissive_columns", text: "input A :: {A}\noutput C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = coalesce(A[i, ~(j - 1)], 1.0) * A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "convert_to_run_list", text: "input A :: {A}\noutput C :: Dense(RunList(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "convert_to_sparse_run_list", text: "input A :: {A}\noutput C :: Dense(SparseRunList(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "sparse_run_list_out_mul", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseRunList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "run_list_out_add_index", text: "input x :: {x}\ninput z :: {z}\noutput w :: RunList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] += x[i] + z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "convert_to_block_list", text: "input A :: {A}\noutput C :: Dense(SparseBlockList(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "block_list_out_mul", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseBlockList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "convert_to_point", text: "input A :: {A}\noutput C :: Dense(SparsePoint(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "convert_to_band", text: "input A :: {A}\noutput C :: Dense(SparseBand(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "band_out_add", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseBand(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] + z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "band_out_row_sums_by_column", text: "input A :: {A}\noutput C :: Dense(SparseBand(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] += A[i, j] * 2.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "spgemm_gustavson_bytemap_workspace", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(SparseList(Element(0.0)))\ntemp w :: SparseByteMap(Element(0.0))\nC .= 0\nfor j = _\n  w .= 0\n  for k = _, i = _\n    w[i] += A[i, k] * B[k, j]\n  end\n  for i = _\n    C[i, j] = w[i]\n  end\nend\n", inputs: &[("A", true, 0, 2), ("B", true, 2, 1)] },
    Kernel { name: "bytemap_out_mul", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseByteMap(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "bytemap_out_row_sums", text: "input A :: {A}\noutput w :: SparseByteMap(Element(0.0))\nw .= 0\nfor j = _, i = _\n  w[i] += A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "bytemap_matrix_out_add", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(SparseByteMap(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n", inputs: &[("A", true, 0, 1), ("B", true, 0, 1)] },
    Kernel { name: "dot_gallop_both", text: "input x :: {x}\ninput z :: {z}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[gallop(i)] * z[gallop(i)]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "dot_gallop_walk", text: "input x :: {x}\ninput z :: {z}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[gallop(i)] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "first_nonzero_short_circuit", text: "input x :: {x}\noutput p :: ShortCircuitScalar(0)\np .= 0\nfor i = _\n  if x[i] != 0.0\n    p[] <<choose(0)>>= i\n  end\nend\n", inputs: &[("x", false, 0, 0)] },
    Kernel { name: "workspace_per_column", text: "input A :: {A}\ninput x :: {x}\noutput C :: Dense(Dense(Element(0.0)))\ntemp w :: Dense(Element(0.0))\nC .= 0\nfor j = _\n  w .= 0\n  for i = _\n    w[i] = A[i, j] * 2.0\n  end\n  for i = _\n    C[i, j] = w[i] + x[j]\n  end\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    Kernel { name: "dot_follow", text: "input x :: {x}\ninput z :: {z}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i] * z[follow(i)]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "spmv_follow", text: "input A :: {A}\ninput x :: {x}\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[follow(j)]\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    Kernel { name: "add_sparse_out", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] + z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "add_narrow_sparse_out", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseList{UInt32}(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] + z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "mul_sparse_out", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "max_sparse_out", text: "input x :: {x}\ninput z :: {z}\noutput w :: SparseList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] <<max>>= max(x[i], z[i])\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "matrix_mul_sparse_out", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(SparseList(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n", inputs: &[("A", true, 0, 1), ("B", true, 0, 1)] },
    Kernel { name: "spgemm_inner_sparse_out", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(SparseList(Element(0.0)))\nC .= 0\nfor j = _, i = _, k = _\n  C[i, j] += A[k, i] * B[k, j]\nend\n", inputs: &[("A", true, 2, 0), ("B", true, 2, 1)] },
    Kernel { name: "spmv_col", text: "input A :: {A}\ninput x :: {x}\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[j]\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    Kernel { name: "spmv_row", text: "input A :: {A}\ninput x :: {x}\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 0, 0)] },
    Kernel { name: "dot", text: "input x :: {x}\ninput z :: {z}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "square_plus", text: "input x :: {x}\ninput z :: {z}\noutput w :: Dense(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * x[i] + z[i] * x[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "sum", text: "input A :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[i, j]\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "upper_triangle_sum", text: "input A :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  if i <= j\n    s[] += A[i, j]\n  end\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "add", text: "input x :: {x}\ninput z :: {z}\noutput w :: Dense(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] + z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "mul", text: "input x :: {x}\ninput z :: {z}\noutput w :: Dense(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "max", text: "input x :: {x}\ninput z :: {z}\noutput w :: Dense(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = max(x[i], z[i])\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "matrix_mul_elementwise", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n", inputs: &[("A", true, 0, 1), ("B", true, 0, 1)] },
    Kernel { name: "spgemm_inner", text: "input A :: {A}\ninput B :: {B}\noutput C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor j = _, i = _, k = _\n  C[i, j] += A[k, i] * B[k, j]\nend\n", inputs: &[("A", true, 2, 0), ("B", true, 2, 1)] },
];

/// An `i64` vector with the given fill.
fn ints(vals: &[i64], fill: i64) -> DenseArray {
    DenseArray::from_data(
        ScalarType::I64,
        &[vals.len()],
        vals.iter().map(|&v| Value::I64(v)).collect(),
        Value::I64(fill),
    )
    .unwrap()
}

fn data(n: usize, density: f64, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(2862933555777941757)
        .wrapping_add(3037000493);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
            let r = (s >> 33) as f64 / (1u64 << 31) as f64;
            if r < density {
                ((s >> 7) % 19) as f64 - 9.0
            } else {
                0.0
            }
        })
        .collect()
}

/// Data shaped for structured levels: `0` random (`data`), `1` runs of repeated values
/// down each column, `2` one run per column, `3` at most one entry per column.
fn structured_data(shape: &[usize], structure: u8, density: f64, seed: u64) -> Vec<f64> {
    let len: usize = shape.iter().product();
    let rows = shape.first().copied().unwrap_or(1).max(1);
    let noise = data(len * 3 + 3, 1.0, seed);
    let mut pick = noise.into_iter().map(|x| (x + 9.0) as usize);
    let mut next = move || pick.next().unwrap_or(0);
    match structure {
        1 => {
            let mut out = Vec::with_capacity(len);
            while out.len() < len {
                let run = 1 + next() % 4;
                let v = if next() % 2 == 0 {
                    0.0
                } else {
                    (next() % 9) as f64 - 4.0
                };
                let col_left = rows - out.len() % rows;
                out.extend(std::iter::repeat_n(
                    v,
                    run.min(col_left).min(len - out.len()),
                ));
            }
            out
        }
        2 | 3 => {
            let mut out = vec![0.0; len];
            for col in 0..len / rows {
                let start = next() % rows;
                let width = if structure == 3 { 1 } else { next() % 4 };
                let v = (next() % 9) as f64 - 4.0;
                if next() % 3 == 0 {
                    continue;
                }
                for i in start..(start + width).min(rows) {
                    out[col * rows + i] = v;
                }
            }
            out
        }
        _ => data(len, density, seed),
    }
}

/// Stores `a` in `format`; data a single-entry or single-run level cannot hold is
/// replaced by data it can (only the first stored entry kept, then nothing).
fn store(format: &Format, a: DenseArray) -> (Tensor, DenseArray) {
    if let Ok(t) = Tensor::from_dense(format, &a) {
        return (t, a);
    }
    let mut first = vec![0.0; a.data.len()];
    if let Some(k) = a.data.iter().position(|v| v.as_f64() != Some(0.0)) {
        first[k] = a.data[k].as_f64().unwrap_or(0.0);
    }
    for data in [first, vec![0.0; a.data.len()]] {
        let b = DenseArray::from_f64(&a.shape, &data).unwrap();
        if let Ok(t) = Tensor::from_dense(format, &b) {
            return (t, b);
        }
    }
    panic!(
        "{format} cannot store an all-zero array of shape {:?}",
        a.shape
    )
}

fn check(
    k: &Kernel,
    formats: &[&str; 4],
    sizes: [usize; 3],
    density: f64,
    seed: u64,
) -> Result<(), TestCaseError> {
    check_structured(k, formats, sizes, density, seed, 0)
}

fn check_structured(
    k: &Kernel,
    formats: &[&str; 4],
    sizes: [usize; 3],
    density: f64,
    seed: u64,
    structure: u8,
) -> Result<(), TestCaseError> {
    check_engines(
        k,
        formats,
        sizes,
        density,
        seed,
        structure,
        &[Engine::Interp, Engine::C],
    )
}

fn check_engines(
    k: &Kernel,
    formats: &[&str; 4],
    sizes: [usize; 3],
    density: f64,
    seed: u64,
    structure: u8,
    engines: &[Engine],
) -> Result<(), TestCaseError> {
    let text = k
        .text
        .replace("{A}", formats[0])
        .replace("{B}", formats[1])
        .replace("{x}", formats[2])
        .replace("{z}", formats[3]);
    check_program(
        k, &text, sizes, density, seed, structure, engines, false, false,
    )
}

/// [`check_engines`] on `text` (the kernel with its formats filled in). With
/// `refusals_allowed`, a program the compiler refuses ("not supported yet") passes.
#[allow(clippy::too_many_arguments)]
fn check_program(
    k: &Kernel,
    text: &str,
    sizes: [usize; 3],
    density: f64,
    seed: u64,
    structure: u8,
    engines: &[Engine],
    refusals_allowed: bool,
    compact: bool,
) -> Result<(), TestCaseError> {
    let formats = text
        .lines()
        .filter_map(|l| l.split(" :: ").nth(1))
        .collect::<Vec<_>>();
    let program = Program::parse(text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    let mut dense = Bindings::new();
    let mut stored: HashMap<String, Tensor> = HashMap::new();
    for (n, &(name, matrix, r, c)) in k.inputs.iter().enumerate() {
        let shape = if matrix {
            vec![sizes[r], sizes[c]]
        } else {
            vec![sizes[r]]
        };
        let values = structured_data(&shape, structure, density, seed + n as u64);
        let a = DenseArray::from_f64(&shape, &values).unwrap();
        let f = Format::parse(&program.decl(name).unwrap().format.to_string()).unwrap();
        let (t, a) = store(&f, a);
        stored.insert(name.to_string(), t);
        dense.insert(name, a);
    }
    program
        .run_reference(&mut dense, &RunOptions::default())
        .map_err(|e| TestCaseError::fail(format!("reference: {e}")))?;
    // Reassociated C too: the data are small integers, so every summation order gives the
    // same floating-point result.
    for (engine, reassociate) in [
        (Engine::Interp, false),
        (Engine::C, false),
        (Engine::C, true),
    ]
    .into_iter()
    .filter(|(e, _)| engines.contains(e))
    {
        let compiled = match program.compile_with(
            engine,
            &CompileOptions {
                reassociate,
                compact,
            },
        ) {
            Ok(c) => c,
            // A protocol the level lacks is refused by name, never miscompiled.
            Err(e) if e.to_string().contains("does not support the") => return Ok(()),
            Err(finch::Error::Unsupported(_)) if refusals_allowed => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("{}: {e}\n{text}", k.name))),
        };
        // A kernel too large for C runs in the interpreter (with a warning): only where
        // refusals are allowed may C not run what was asked of it.
        if compiled.engine() != engine && finch::backend::c::available() && !refusals_allowed {
            return Err(TestCaseError::fail(format!(
                "{}: asked for {engine:?}, ran {:?}: {:?}\n{text}",
                k.name,
                compiled.engine(),
                compiled.warnings()
            )));
        }
        let mut tensors = stored.clone();
        if let Err(e) = compiled.run(&mut tensors, &HashMap::new()) {
            // A result the output's format cannot hold is refused; then the reference
            // result must not fit that format either.
            let fits = program
                .decls()
                .iter()
                .filter(|d| d.kind == finch::notation::DeclKind::Output)
                .all(|d| {
                    let f = Format::parse(&d.format.to_string()).unwrap();
                    Tensor::from_dense(&f, dense.get(&d.name).unwrap()).is_ok()
                });
            prop_assert!(
                e.to_string().contains("cannot store the result") && !fits,
                "{} {engine:?}: {e}\n{text}\n{}",
                k.name,
                compiled.kernel()
            );
            continue;
        }
        for d in program
            .decls()
            .iter()
            .filter(|d| d.kind == finch::notation::DeclKind::Output)
        {
            let want = dense.get(&d.name).unwrap();
            let got = tensors[&d.name].to_dense().unwrap();
            prop_assert_eq!(&got.shape, &want.shape, "{} {:?}", k.name, engine);
            prop_assert!(
                got.data.iter().zip(&want.data).all(|(a, b)| a.same(b)),
                "{} {:?} formats {:?} sizes {:?}:\n got {:?}\nwant {:?}\n{}",
                k.name,
                engine,
                formats,
                sizes,
                got.data,
                want.data,
                compiled.kernel()
            );
        }
    }
    Ok(())
}

/// Kernels whose output format is `{O}`, in loop orders that write the output in order
/// and out of order, and with loops that do not index it.
const WRITTEN: [Kernel; 9] = [
    Kernel { name: "matrix_out_transposed_write", text: "input A :: {A}\noutput C :: {O}\nC .= 0\nfor j = _, i = _\n  C[j, i] = A[i, j] + 1.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "matrix_out_two_statements_read_back", text: "input A :: {A}\ninput B :: {B}\noutput C :: {O}\noutput s :: Scalar(0.0)\nC .= 0\ns .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\nfor j = _, i = _\n  C[i, j] += B[i, j] * 2.0\nend\nfor j = _, i = _\n  s[] += C[i, j] * C[i, j]\nend\n", inputs: &[("A", true, 0, 1), ("B", true, 0, 1)] },
    Kernel { name: "matrix_out_spgemm_outer_k", text: "input A :: {A}\ninput B :: {B}\noutput C :: {O}\nC .= 0\nfor k = _, j = _, i = _\n  C[i, j] += A[i, k] * B[k, j]\nend\n", inputs: &[("A", true, 0, 2), ("B", true, 2, 1)] },
    Kernel { name: "vector_out_column_major_spmv", text: "input A :: {A}\ninput x :: {x}\noutput y :: {O}\ny .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[j]\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    Kernel { name: "vector_out_row_major_spmv", text: "input A :: {A}\ninput x :: {x}\noutput y :: {O}\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n", inputs: &[("A", true, 1, 0), ("x", false, 1, 0)] },
    Kernel { name: "vector_out_max", text: "input x :: {x}\ninput z :: {z}\noutput y :: {O}\ny .= 0\nfor i = _\n  y[i] = max(x[i], z[i])\nend\n", inputs: &[("x", false, 0, 0), ("z", false, 0, 0)] },
    Kernel { name: "matrix_out_copy_transposed_loops", text: "input A :: {A}\noutput C :: {O}\nC .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * 2.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "matrix_out_add", text: "input A :: {A}\ninput B :: {B}\noutput C :: {O}\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n", inputs: &[("A", true, 0, 1), ("B", true, 0, 1)] },
    Kernel { name: "matrix_out_spgemm_middle_k", text: "input A :: {A}\ninput B :: {B}\noutput C :: {O}\nC .= 0\nfor j = _, k = _, i = _\n  C[i, j] += A[i, k] * B[k, j]\nend\n", inputs: &[("A", true, 0, 2), ("B", true, 2, 1)] },
];

fn sizes() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1), 2usize..7, Just(23)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn compiled_kernels_match_the_reference(
        k in 0usize..KERNELS.len(),
        fa in prop::sample::select(MATRICES.to_vec()),
        fb in prop::sample::select(MATRICES.to_vec()),
        fx in prop::sample::select(VECTORS.to_vec()),
        fz in prop::sample::select(VECTORS.to_vec()),
        m in sizes(), n in sizes(), p in sizes(),
        density in prop::sample::select(vec![0.0, 0.15, 0.5, 1.0]),
        seed in any::<u32>(),
    ) {
        check(&KERNELS[k], &[fa, fb, fx, fz], [m, n, p], density, seed as u64)?;
    }

    #[test]
    fn structured_levels_match_the_reference(
        k in 0usize..KERNELS.len(),
        fa in prop::sample::select(structured_matrices()),
        fb in prop::sample::select(structured_matrices()),
        fx in prop::sample::select(structured_vectors()),
        fz in prop::sample::select(structured_vectors()),
        m in sizes(), n in sizes(), p in sizes(),
        structure in 0u8..4,
        seed in any::<u32>(),
    ) {
        let f = [fa.as_str(), fb.as_str(), fx.as_str(), fz.as_str()];
        check_structured(&KERNELS[k], &f, [m, n, p], 0.3, seed as u64, structure)?;
    }
}

/// Kernels whose output `{O}` has a Pattern leaf (`|=` where an index may be written
/// again), in loop orders that write it in order and out of order.
const WRITTEN_PATTERN: [Kernel; 8] = [
    Kernel { name: "matrix_pattern_transposed_write", text: "input A :: {A}\noutput C :: {O}\nC .= false\nfor j = _, i = _\n  C[j, i] = A[i, j] != 0.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "matrix_pattern_in_order", text: "input A :: {A}\noutput C :: {O}\nC .= false\nfor j = _, i = _\n  C[i, j] = A[i, j] > 0.0\nend\n", inputs: &[("A", true, 0, 1)] },
    Kernel { name: "matrix_pattern_boolean_product_outer_k", text: "input A :: {A}\ninput B :: {B}\noutput C :: {O}\nC .= false\nfor k = _, j = _, i = _\n  C[i, j] |= A[i, k] != 0.0 && B[k, j] != 0.0\nend\n", inputs: &[("A", true, 0, 2), ("B", true, 2, 1)] },
    Kernel { name: "matrix_pattern_two_statements_read_back", text: "input A :: {A}\noutput C :: {O}\noutput s :: Scalar(0.0)\nC .= false\ns .= 0\nfor j = _, i = _\n  C[j, i] = A[i, j] != 0.0\nend\nfor j = _, i = _\n  C[i, j] |= A[i, j] > 2.0\nend\nfor j = _, i = _\n  s[] += C[i, j] * (i + 10 * j)\nend\n", inputs: &[("A", true, 0, 0)] },
    Kernel { name: "matrix_pattern_store_clears", text: "input A :: {A}\ninput B :: {B}\noutput C :: {O}\nC .= false\nfor j = _, i = _\n  C[i, j] = A[i, j] != 0.0\nend\nfor j = _, i = _\n  C[j, i] = B[i, j] > 1.0\nend\n", inputs: &[("A", true, 0, 0), ("B", true, 0, 0)] },
    Kernel { name: "vector_pattern_column_major_reach", text: "input A :: {A}\ninput x :: {x}\noutput y :: {O}\ny .= false\nfor j = _, i = _\n  y[i] |= A[i, j] * x[j] != 0.0\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 1, 0)] },
    Kernel { name: "vector_pattern_store_clears", text: "input A :: {A}\ninput x :: {x}\noutput y :: {O}\ny .= false\nfor i = _\n  y[i] = x[i] != 0.0\nend\nfor j = _, i = _\n  y[i] = A[i, j] > 0.0\nend\n", inputs: &[("A", true, 0, 1), ("x", false, 0, 0)] },
    Kernel { name: "vector_pattern_row_major_reach", text: "input A :: {A}\ninput x :: {x}\noutput y :: {O}\ny .= false\nfor i = _, j = _\n  y[i] |= A[j, i] * x[j] != 0.0\nend\n", inputs: &[("A", true, 1, 0), ("x", false, 1, 0)] },
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    /// Any output format, over an Element or a Pattern leaf, written in any loop order:
    /// the compiled result equals the reference's, or the program is refused by name
    /// (never a wrong value).
    #[test]
    fn written_formats_match_the_reference_or_are_refused(
        pattern in any::<bool>(),
        k in 0usize..64,
        fa in prop::sample::select(structured_matrices()),
        fb in prop::sample::select(MATRICES.to_vec()),
        fx in prop::sample::select(structured_vectors()),
        fv in prop::sample::select(structured_vectors()),
        fm in prop::sample::select(structured_matrices()),
        m in sizes(), n in sizes(), p in sizes(),
        structure in 0u8..4,
        seed in any::<u32>(),
    ) {
        let kernels: &[Kernel] = if pattern { &WRITTEN_PATTERN } else { &WRITTEN };
        let k = &kernels[k % kernels.len()];
        let out = if k.name.starts_with("vector") { &fv } else { &fm };
        let out = if pattern { out.replace("Element(0.0)", "Pattern()") } else { out.clone() };
        let text = k
            .text
            .replace("{A}", &fa)
            .replace("{B}", fb)
            .replace("{x}", &fx)
            .replace("{z}", &fv)
            .replace("{O}", &out);
        check_program(k, &text, [m, n, p], 0.3, seed as u64, structure, &[Engine::Interp, Engine::C], true, false)?;
    }
}

/// Out-of-order writes into Pattern outputs whose levels are written in order (SparseList,
/// SparseCOO) go through a hash table or a bytemap, as valued outputs do: they compile,
/// and give the reference's result, also where a later store of `false` clears an index
/// (through a hash table or bytemap, declared or not).
#[test]
fn pattern_outputs_take_writes_in_any_order() {
    let cases = [
        (&WRITTEN_PATTERN[0], "Dense(SparseList(Pattern()))"),
        (&WRITTEN_PATTERN[0], "SparseCOO{2}(Pattern())"),
        (&WRITTEN_PATTERN[0], "SparseList(SparseList(Pattern()))"),
        (&WRITTEN_PATTERN[0], "SparseHash(SparseHash(Pattern()))"),
        (&WRITTEN_PATTERN[2], "Dense(SparseList(Pattern()))"),
        (&WRITTEN_PATTERN[3], "SparseList(SparseList(Pattern()))"),
        (&WRITTEN_PATTERN[3], "Dense(SparseCOO{1}(Pattern()))"),
        (&WRITTEN_PATTERN[4], "Dense(SparseList(Pattern()))"),
        (&WRITTEN_PATTERN[4], "Dense(SparseByteMap(Pattern()))"),
        (&WRITTEN_PATTERN[4], "SparseHash(SparseHash(Pattern()))"),
        (&WRITTEN_PATTERN[5], "SparseList(Pattern())"),
        (&WRITTEN_PATTERN[5], "SparseCOO{1}(Pattern())"),
        (&WRITTEN_PATTERN[6], "SparseList(Pattern())"),
        (&WRITTEN_PATTERN[6], "SparseByteMap(Pattern())"),
    ];
    for (seed, (k, out)) in cases.into_iter().enumerate() {
        let text = k
            .text
            .replace("{A}", "Dense(SparseList(Element(0.0)))")
            .replace("{B}", "Dense(SparseList(Element(0.0)))")
            .replace("{x}", "Dense(Element(0.0))")
            .replace("{O}", out);
        check_program(
            k,
            &text,
            [7, 6, 5],
            0.3,
            seed as u64,
            0,
            &[Engine::Interp, Engine::C],
            false,
            false,
        )
        .unwrap_or_else(|e| panic!("{} into {out}: {e}", k.name));
    }
    // A Pattern leaf right under a Dense level stores nothing to write (only an all-true
    // result would fit): not compiled, the reference engine runs it.
    let text = WRITTEN_PATTERN[5]
        .text
        .replace("{A}", "Dense(SparseList(Element(0.0)))")
        .replace("{x}", "Dense(Element(0.0))")
        .replace("{O}", "Dense(Pattern())");
    let e = Program::parse(&text)
        .and_then(|p| p.compile(Engine::Interp))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("not supported yet: writing `y` (Dense(Pattern()))")
            && e.contains("stores nothing"),
        "{e}"
    );
}

/// Loops coiterating more sparse operands than the compiler specializes each step for
/// (four): five and six vectors, and five matrices; and galloping over four and five.
/// Three or four matrices whose rows are walked too (`{A}` in `SparseList(..)`): terms
/// of a sum share one loop over their rows, a factor keeps its own; a term searched
/// (`follow`, or read across the storage order) reads its fill where it has no entry.
/// Stencils: one vector read at seven shifts, one matrix at the nine of a 3x3 box.
const MANY_OPERANDS: [Kernel; 13] = [
    Kernel { name: "stencil_of_seven", text: "input a :: {a}\noutput w :: {w}\nw .= 0\nfor i = _\n  w[i] = coalesce(a[~(i - 3)], 0.0) + coalesce(a[~(i - 2)], 0.0) * 2.0 + coalesce(a[~(i - 1)], 1.0) + a[i] + coalesce(a[~(i + 1)], 0.0) + coalesce(a[~(i + 2)], 0.0) - coalesce(a[~(i + 3)], 0.0)\nend\n", inputs: &[("a", false, 0, 0)] },
    Kernel { name: "box_of_nine", text: "input a :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = coalesce(a[~(i - 1), ~(j - 1)], 0.0) + coalesce(a[~(i), ~(j - 1)], 0.0) + coalesce(a[~(i + 1), ~(j - 1)], 0.0) + coalesce(a[~(i - 1), j], 0.0) + a[i, j] * 2.0 + coalesce(a[~(i + 1), j], 0.0) + coalesce(a[~(i - 1), ~(j + 1)], 0.0) + coalesce(a[~(i), ~(j + 1)], 0.0) + coalesce(a[~(i + 1), ~(j + 1)], 0.0)\nend\n", inputs: &[("a", true, 0, 1)] },
    Kernel { name: "gallop_four", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[gallop(i)] * b[gallop(i)] * c[gallop(i)] * d[gallop(i)]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0)] },
    Kernel { name: "gallop_five", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[gallop(i)] * b[gallop(i)] * c[gallop(i)] * (d[gallop(i)] + 1.0) * e[gallop(i)]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "sum_of_five", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[i] + b[i] * 2.0 + c[i] + d[i] * e[i]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "max_of_five_into_format", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput w :: {w}\nw .= 0\nfor i = _\n  w[i] = max(a[i], b[i], c[i], d[i], e[i])\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "shifted_sum_of_five", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += e[i] + coalesce(a[~(i + 1)], 0.0) + coalesce(b[~(i - 1)], 0.0) * 2.0 + coalesce(c[~(i + 2)], 0.0) + coalesce(d[~(i + 3)], 1.0)\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "sum_of_six_products", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\ninput f :: {f}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[i] * b[i] + c[i] * d[i] + e[i] * f[i]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0), ("f", false, 0, 0)] },
    Kernel { name: "three_matrices", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = a[i, j] + b[i, j] * 2.0 + c[i, j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1)] },
    Kernel { name: "sum_of_three_times_one", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\ninput d :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += (a[i, j] + b[i, j] - c[i, j]) * d[i, j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1), ("d", true, 0, 1)] },
    Kernel { name: "three_matrices_two_searched", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = a[follow(i), j] + b[i, j] * 2.0 + c[follow(i), j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1)] },
    Kernel { name: "four_matrices_read_across", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\ninput d :: {A}\noutput C :: {W}\nC .= 0\nfor i = _, j = _\n  C[j, i] = a[i, j] + b[i, j] + c[i, j] - d[i, j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1), ("d", true, 0, 1)] },
    Kernel { name: "csr_sum_of_five", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\ninput d :: {A}\ninput e :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = a[i, j] + b[i, j] - c[i, j] + max(d[i, j], e[i, j])\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1), ("d", true, 0, 1), ("e", true, 0, 1)] },
];

/// Matrices a 3x3 stencil (`box_of_nine`) is compiled over: Dense columns, sparse
/// columns under a Dense level (reads of one column at one shift share one segment walk,
/// and one branch where that column is outside the matrix), and a sparse list of sparse
/// columns (each read where its entry of the outer list is).
const BOX_FORMATS: [&str; 6] = [
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(Dense(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "Dense(SparseByteMap(Element(0.0)))",
    "Dense(SparseHash(Element(0.0)))",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Four to six sparse operands in one loop, in random formats (so any number of them
    /// are walked as lists of single entries, or gallop), lowered as specialized loops or
    /// compactly: the compiled result equals the reference's, or a level without the
    /// gallop protocol is refused by name.
    #[test]
    fn many_sparse_operands_match_the_reference(
        k in 0usize..MANY_OPERANDS.len(),
        v in prop::collection::vec(prop::sample::select(structured_vectors()), 7),
        out in prop::sample::select(vec!["Dense(Element(0.0))", "SparseList(Element(0.0))", "SparseByteMap(Element(0.0))", "SparseRunList(Element(0.0))"]),
        a in prop::sample::select(vec!["Dense(Dense(Element(0.0)))", "Dense(SparseList(Element(0.0)))", "Dense(SparseBlockList(Element(0.0)))", "Dense(RunList(Element(0.0)))", "SparseList(SparseList(Element(0.0)))", "SparseList(Dense(Element(0.0)))", "SparseList(SparseBand(Element(0.0)))", "SparseList(SparseList{UInt32}(Element(0.0)))", "SparseList(SparseBlockList(Element(0.0)))", "SparseList(SparsePoint(Element(0.0)))", "Dense(SparseInterval(Element(0.0)))", "SparseList(SparseRunList(Element(0.0)))"]),
        cw in prop::sample::select(vec!["Dense(SparseList(Element(0.0)))", "Dense(Dense(Element(0.0)))"]),
        n in sizes(), m in sizes(),
        structure in 0u8..4,
        seed in any::<u32>(),
        compact in any::<bool>(),
    ) {
        let k = &MANY_OPERANDS[k];
        // A 2-D stencil over sparse rows of sparse columns, or over structured rows,
        // still splits the loop for each combination of the shifted reads (megabytes of
        // C): over the formats it is made for.
        let a = match k.name {
            "box_of_nine" => BOX_FORMATS[seed as usize % BOX_FORMATS.len()],
            _ => a,
        };
        let mut text = k.text.replace("{w}", out).replace("{A}", a).replace("{W}", cw);
        for (name, f) in ["{a}", "{b}", "{c}", "{d}", "{e}", "{f}"].iter().zip(&v) {
            text = text.replace(name, f);
        }
        // (The interpreter runs the same kernel IR; C, whose kernels here take seconds to
        // compile, is checked on fixed formats below.)
        check_program(k, &text, [n, m, 1], 0.3, seed as u64, structure, &[Engine::Interp], false, compact)?;
    }
}

/// [`MANY_OPERANDS`] compiled to C, over SparseList vectors and CSR matrices, and the
/// matrix kernels over matrices with sparse rows too (`SparseList(SparseList)`); over
/// levels of consecutive indices walked segment by segment (SparseBand vectors, rows of
/// SparseBlockList blocks); and the stencils over Dense vectors and matrices.
#[test]
fn many_sparse_operands_compile_to_c() {
    let matrices = [
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseList(SparseBlockList(Element(0.0)))",
    ];
    let vectors = ["SparseList(Element(0.0))", "SparseBand(Element(0.0))"];
    // Stencils (reads at shifted indices) over Dense operands too.
    let dense = ("Dense(Dense(Element(0.0)))", "Dense(Element(0.0))");
    let cases = MANY_OPERANDS.iter().flat_map(move |k| {
        let shifted = k.text.contains("[~(");
        let mut formats: Vec<(&str, &str)> = if k.text.contains("{A}") {
            matrices.iter().map(|a| (*a, vectors[0])).collect()
        } else {
            vectors.iter().map(|v| (matrices[0], *v)).collect()
        };
        if shifted {
            formats.push(dense);
        }
        if k.name == "box_of_nine" {
            formats = BOX_FORMATS.iter().map(|a| (*a, dense.1)).collect();
        }
        formats.into_iter().map(move |(a, v)| (k, a, v))
    });
    for (n, (k, a, v)) in cases.enumerate() {
        let text = k
            .text
            .replace("{w}", "SparseList(Element(0.0))")
            .replace("{A}", a)
            .replace("{W}", "Dense(SparseList(Element(0.0)))");
        let text = ["{a}", "{b}", "{c}", "{d}", "{e}", "{f}"]
            .iter()
            .fold(text, |t, x| t.replace(x, v));
        for structure in [0, 2] {
            check_program(
                k,
                &text,
                [9, 7, 1],
                0.3,
                n as u64 + 10 * structure as u64,
                structure,
                &[Engine::C],
                false,
                // Compactly lowered (every two terms share a loop) with the second data.
                structure == 2,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", k.name));
        }
    }
}

/// Terms of a sum walked together (sparse vectors, and matrices with sparse rows and
/// columns) share one loop, whose code grows with the number of terms rather than with
/// the combinations of them present at an index (`3^n` before: four `SparseList(SparseList)`
/// terms took 1.4 MB of C, five were refused). Levels of consecutive indices (bands,
/// intervals, points, blocks, sparse runs) are walked segment by segment past four terms,
/// rather than split into their phases (six `SparseBand` vectors took 2 MB, seven were
/// refused, as were six `SparseList(SparseBand)` matrices); a row of runs a term lacks is
/// one run of fill rather than a branch (ten `SparseList(RunList)` terms were refused).
#[test]
fn terms_of_a_sum_lower_to_code_linear_in_their_number() {
    let c_size = |format: &str, n: usize| {
        let (idx, order) = if format.matches('(').count() > 2 {
            ("i, j", "for j = _, i = _")
        } else {
            ("i", "for i = _")
        };
        let decls: String = (0..n)
            .map(|k| format!("input a{k} :: {format}\n"))
            .collect();
        let sum = (0..n)
            .map(|k| format!("a{k}[{idx}]"))
            .collect::<Vec<_>>()
            .join(" + ");
        let text =
            format!("{decls}output s :: Scalar(0.0)\ns .= 0\n{order}\n  s[] += {sum}\nend\n");
        c_bytes(&text)
    };
    let structured = [
        "SparseBand",
        "SparseInterval",
        "SparsePoint",
        "SparseBlockList",
        "SparseRunList",
    ]
    .iter()
    .flat_map(|l| {
        [
            format!("{l}(Element(0.0))"),
            format!("SparseList({l}(Element(0.0)))"),
        ]
    });
    let lists = [
        "SparseList(Element(0.0))",
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "SparseList(SparseHash(Element(0.0)))",
        "SparseList(SparseByteMap(Element(0.0)))",
        "SparseList(RunList(Element(0.0)))",
    ];
    for format in lists.iter().map(|f| f.to_string()).chain(structured) {
        let (five, ten) = (c_size(&format, 5), c_size(&format, 10));
        assert!(
            ten < 3 * five && ten < 100_000,
            "{format}: {five} B of C for 5 terms, {ten} B for 10"
        );
    }
    // Six sparse vectors read at shifted indices (`coalesce` of their padding with their
    // fill): their walks share one loop too (refused before).
    let shifted = c_bytes(&shifted_sum("SparseList(Element(0.0))", 6, "0.0"));
    assert!(shifted < 100_000, "{shifted} B of C for six shifted terms");
    // Dense vectors read at shifted indices (a stencil) step from segment to segment
    // too, where each read is inside or outside its vector (refused before: each padded
    // read's phases split the loop, 3^n loops); one vector at nine shifts, and a 3x3 box
    // over a Dense matrix, at both levels (118 KB of C with a segment walk per read).
    let dense = c_bytes(&shifted_sum("Dense(Element(0.0))", 9, "0.0"));
    assert!(
        dense < 100_000,
        "{dense} B of C for nine shifted Dense terms"
    );
    let at = |c: i64| match c {
        0 => "~(i)".to_string(),
        c if c > 0 => format!("~(i + {c})"),
        c => format!("~(i - {})", -c),
    };
    let nine: Vec<String> = (-4..=4)
        .map(|c| format!("coalesce(x[{}], 0.0)", at(c)))
        .collect();
    let one = format!(
        "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] + {}\nend\n",
        nine.join(" + ")
    );
    let one = c_bytes(&one);
    assert!(one < 100_000, "{one} B of C for one vector at nine shifts");
    let box_of_nine = MANY_OPERANDS
        .iter()
        .find(|k| k.name == "box_of_nine")
        .unwrap()
        .text
        .replace("{A}", "Dense(Dense(Element(0.0)))")
        .replace("{W}", "Dense(Dense(Element(0.0)))");
    let image = c_bytes(&box_of_nine);
    assert!(image < 100_000, "{image} B of C for a 3x3 box");
    // Over sparse columns: the reads of one column at one shift share one segment walk,
    // and one branch where that column is outside the matrix (1 MB of C with one each).
    let sparse = c_bytes(&box_of_nine.replacen(
        "input a :: Dense(Dense(Element(0.0)))",
        "input a :: Dense(SparseList(Element(0.0)))",
        1,
    ));
    assert!(
        sparse < 200_000,
        "{sparse} B of C for a 3x3 box over sparse columns"
    );
    // Over a sparse list of sparse columns: each column is read where its (shifted) entry
    // of the outer list is, with no branch (3.4 MB of C with a branch per read).
    let lists = c_bytes(&box_of_nine.replacen(
        "input a :: Dense(Dense(Element(0.0)))",
        "input a :: SparseList(SparseList(Element(0.0)))",
        1,
    ));
    assert!(
        lists < 100_000,
        "{lists} B of C for a 3x3 box over sparse lists"
    );
    // Two terms with sparse rows among six: the two rows share one loop too (each
    // combination of the two would copy the loop over the six terms' columns).
    let text = "input a :: SparseList(SparseList(Element(0.0)))\ninput b :: SparseList(SparseList(Element(0.0)))\ninput c :: Dense(SparseList(Element(0.0)))\ninput d :: Dense(SparseList(Element(0.0)))\ninput e :: Dense(SparseList(Element(0.0)))\ninput f :: Dense(SparseList(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += a[i, j] + b[i, j] + c[i, j] + d[i, j] + e[i, j] + f[i, j]\nend\n";
    let two_rows = c_bytes(text);
    assert!(
        two_rows < 100_000,
        "{two_rows} B of C for two sparse rows among six terms"
    );
    // Four terms whose levels are all bands: loops specialized for each combination of
    // their phases, at both levels, would be 1.1 MB of C; the kernel is lowered compactly.
    let decls: String = (0..4)
        .map(|k| format!("input a{k} :: SparseBand(SparseBand(Element(0.0)))\n"))
        .collect();
    let text = format!("{decls}output s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += a0[i, j] + a1[i, j] + a2[i, j] + a3[i, j]\nend\n");
    let nested = c_bytes(&text);
    assert!(
        nested < 100_000,
        "{nested} B of C for four band-of-band terms"
    );
}

/// `s[] += y[i] + coalesce(x1[~(i + 1)], pad) + ... + coalesce(xn[~(i + n)], pad)`, the
/// `x`s in `format` (a stencil of sparse or dense vectors).
fn shifted_sum(format: &str, n: usize, pad: &str) -> String {
    let decls: String = (1..=n)
        .map(|k| format!("input x{k} :: {format}\n"))
        .collect();
    let sum: String = (1..=n)
        .map(|k| format!(" + coalesce(x{k}[~(i + {k})], {pad})"))
        .collect();
    format!("input y :: Dense(Element(0.0))\n{decls}output s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += y[i]{sum}\nend\n")
}

/// The size of the C the compiler generates for a program.
fn c_bytes(text: &str) -> usize {
    Program::parse(text)
        .and_then(|p| p.compile(Engine::Interp))
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .c_source(finch::backend::c::CheckMode::Trusted)
        .unwrap()
        .len()
}

/// Eight sparse vectors read at shifted indices and padded with a value other than
/// their fill (`coalesce(x[~(i + k)], 1.0)`) would lower to megabytes of C (each padded
/// read's phases split the loop, for every combination of the operands, compactly or
/// not): refused by name, before the C compiler sees it.
#[test]
fn kernels_past_the_lowering_budget_are_refused() {
    let text = shifted_sum("SparseList(Element(0.0))", 8, "1.0");
    assert!(text.contains("coalesce(x8[~(i + 8)], 1.0)"), "{text}");
    let e = Program::parse(&text)
        .unwrap()
        .compile(Engine::Interp)
        .unwrap_err();
    assert!(
        matches!(e, finch::Error::Unsupported(_))
            && e.to_string().contains("a kernel this large")
            && e.to_string().contains("lowering passed"),
        "{e}"
    );
    // Six such reads: a lowering within its budget that leaves 2.7 MB of C. The
    // interpreter runs it; the C compiler is not given it (the C engine hands it to the
    // interpreter).
    let six = Program::parse(&shifted_sum("SparseList(Element(0.0))", 6, "1.0")).unwrap();
    assert!(six.compile(Engine::Interp).is_ok());
    if finch::backend::c::available() {
        // Too large for the C compiler: it runs in the interpreter, and says so.
        let compiled = six.compile(Engine::C).unwrap();
        assert_eq!(compiled.engine(), Engine::Interp);
        let w = compiled.warnings().join("\n");
        assert!(
            w.contains("a kernel this large in C") && w.contains("kernel interpreter"),
            "{w}"
        );
    }
    // Eight matrices in mixed formats read across their storage order (each row searched
    // at a bound index) lower within the budget: each read into a local of its own, their
    // code is the sum of theirs (it was 1.3 MB of C while each copied the others).
    let formats = [
        "SparseHash(SparseCOO{1}(Element(0.0)))",
        "SparseList(SparseInterval(Element(0.0)))",
        "SparseHash(SparsePoint(Element(0.0)))",
        "Dense(SparseHash(Element(0.0)))",
        "SparseHash(SparseCOO{1}(Element(0.0)))",
        "SparseList(SparseRunList(Element(0.0)))",
        "Dense(SparsePoint(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
    ];
    let decls: String = formats
        .iter()
        .enumerate()
        .map(|(k, f)| format!("input a{k} :: {f}\n"))
        .collect();
    let sum = (0..8)
        .map(|k| format!("a{k}[i, j]"))
        .collect::<Vec<_>>()
        .join(" + ");
    let across = format!("{decls}output o :: Dense(Dense(Element(0.0)))\no .= 0\nfor i = _, j = _\n  o[j, i] = {sum}\nend\n");
    let program = Program::parse(&across).unwrap();
    assert!(program.compile(Engine::Interp).is_ok());
    assert!(c_bytes(&across) < 300_000, "{}", c_bytes(&across));
}

/// A loop whose statements share no written tensor, too large lowered together, is lowered
/// as one loop per statement: a sum and a difference of two pairs of galloped operands (a
/// block list with fill 1 and a list each) take about 1 500 statements apart, and past
/// what the C compiler is given together.
#[test]
fn independent_statements_too_large_together_run_in_loops_of_their_own() {
    let k = Kernel {
        name: "sum_and_difference_galloping",
        text: "input x :: SparseBlockList(Element(1.0))\ninput z :: SparseList(Element(0.0))\ninput u :: SparseBlockList(Element(1.0))\ninput v :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput w :: SparseCOO{1}(Element(0.0))\ns .= 0\nw .= 0.0\nfor i = _\n  s[] += x[gallop(i)] * z[gallop(i)]\n  w[i] = u[gallop(i)] - v[gallop(i)]\nend\n",
        inputs: &[
            ("x", false, 0, 0),
            ("z", false, 0, 0),
            ("u", false, 0, 0),
            ("v", false, 0, 0),
        ],
    };
    small_kernel_matches_reference(&k, 3000);
}

/// Reads several statements of a loop make are read once, around them: a running sum of a
/// product and a difference of the same two galloped operands (the second statement
/// reads the first's sum, so they stay in one loop) took 17 189 lines of kernel IR, four
/// walks coiterated, past what the C compiler is given; with each operand walked once,
/// about 1 300.
#[test]
fn reads_shared_by_statements_of_a_loop_are_walked_once() {
    let k = Kernel {
        name: "running_sum_and_difference_galloping",
        text: "input x :: SparseBlockList(Element(1.0))\ninput z :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput w :: SparseCOO{1}(Element(0.0))\ns .= 0\nw .= 0.0\nfor i = _\n  s[] += x[gallop(i)] * z[gallop(i)]\n  w[i] = x[gallop(i)] - z[gallop(i)] + s[]\nend\n",
        inputs: &[("x", false, 0, 0), ("z", false, 0, 0)],
    };
    small_kernel_matches_reference(&k, 2000);
}

/// A read in a condition and in its branch (a masked copy), or in a condition and a loop
/// under it that does not change the read's indices (a column of a matrix scaled by the
/// entry of a sparse vector the condition tests), is read once, as with an explicit
/// `let`: the kernel is the same size, and walks `x` once rather than twice in lockstep
/// (89 and 95 lines of kernel IR before, 37 and 77 now).
#[test]
fn a_read_in_a_condition_and_under_it_is_walked_once() {
    let x = DenseArray::from_f64(&[6], &[0.0, 3.0, 0.25, 0.0, 1.0, -2.0]).unwrap();
    let head =
        "input x :: SparseList(Element(0.0))\noutput w :: Dense(Element(0.0))\nw .= 0\nfor i = _\n";
    let implicit = format!("{head}  if x[i] > 0.5\n    w[i] = x[i]\n  end\nend\n");
    let explicit =
        format!("{head}  let a = x[i]\n    if a > 0.5\n      w[i] = a\n    end\n  end\nend\n");
    assert_eq!(kernel_lines(&implicit), kernel_lines(&explicit));
    engines_match_reference(
        &Program::parse(&implicit).unwrap(),
        &[("x", &x)],
        &[],
        &implicit,
    );
    let head = "input A :: Dense(SparseList(Element(0.0)))\ninput x :: SparseList(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _\n";
    let implicit = format!(
        "{head}  if x[j] != 0.0\n    for i = _\n      y[i] += A[i, j] * x[j]\n    end\n  end\nend\n"
    );
    let explicit = format!(
        "{head}  let a = x[j]\n    if a != 0.0\n      for i = _\n        y[i] += A[i, j] * a\n      end\n    end\n  end\nend\n"
    );
    assert_eq!(kernel_lines(&implicit), kernel_lines(&explicit));
    let a = DenseArray::from_f64(
        &[4, 6],
        &(0..24)
            .map(|k| {
                if k % 3 == 0 {
                    (k % 5) as f64 - 2.0
                } else {
                    0.0
                }
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    engines_match_reference(
        &Program::parse(&implicit).unwrap(),
        &[("A", &a), ("x", &x)],
        &[],
        &implicit,
    );
}

/// Lines of the kernel IR of a program.
fn kernel_lines(text: &str) -> usize {
    Program::parse(text)
        .unwrap()
        .compile(Engine::Interp)
        .unwrap()
        .kernel()
        .to_string()
        .lines()
        .count()
}

/// The kernel of `k` is under `lines` lines of kernel IR, and (in the interpreter and in
/// C, strict and reassociated, C running it) matches the reference on sizes 0, 1, 2, 9 and
/// 40 and two kinds of data.
fn small_kernel_matches_reference(k: &Kernel, lines: usize) {
    let n = kernel_lines(k.text);
    assert!(n < lines, "{n} lines");
    for (seed, n) in [0, 1, 2, 9, 40].into_iter().enumerate() {
        for structure in [0, 2] {
            check_program(
                k,
                k.text,
                [n, 1, 1],
                0.4,
                seed as u64,
                structure,
                &[Engine::Interp, Engine::C],
                false,
                false,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// The read-only structured levels of issue #4.
const STRUCTURED: [&str; 8] = [
    "SparsePoint",
    "SparseInterval",
    "SparseBand",
    "SparseBlockList",
    "RunList",
    "SparseRunList",
    "SparseByteMap",
    "SparseHash",
];

fn structured_vectors() -> Vec<String> {
    STRUCTURED
        .iter()
        .map(|l| format!("{l}(Element(0.0))"))
        .chain(VECTORS.iter().map(|s| s.to_string()))
        .chain(["SparseCOO{1}(Element(0.0))".to_string()])
        .collect()
}

/// Each structured level as the inner level under Dense and SparseList, and as the
/// outer level over Dense and over itself.
fn structured_matrices() -> Vec<String> {
    STRUCTURED
        .iter()
        .flat_map(|l| {
            [
                format!("Dense({l}(Element(0.0)))"),
                format!("SparseList({l}(Element(0.0)))"),
                format!("{l}(Dense(Element(0.0)))"),
                format!("{l}({l}(Element(0.0)))"),
            ]
        })
        // One SparseCOO level spanning both modes, and one per mode.
        .chain([
            "SparseCOO{2}(Element(0.0))".to_string(),
            "SparseCOO{1}(SparseCOO{1}(Element(0.0)))".to_string(),
            "Dense(SparseCOO{1}(Element(0.0)))".to_string(),
        ])
        .collect()
}

#[test]
fn spmv_over_csc_has_no_loop_over_zeros() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/spmv.fin"
    ))
    .unwrap();
    let p = Program::parse(&text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    let ir = k.kernel().to_string();
    // One `for` (over columns) and, per column, one `while` counting over its stored
    // positions (the column's last stored index is within its size, so no clipped
    // stepper is needed); nothing else: the runs of zeros vanished.
    assert_eq!(ir.matches("for ").count(), 1, "{ir}");
    assert_eq!(ir.matches("while ").count(), 1, "{ir}");
    assert!(
        ir.contains("local v5: i64 A_lvl2_q\n")
            && ir.contains("local v6: i64 A_lvl2_q_stop\n")
            && ir.contains("while (v5 < v6)"),
        "a counted walk over A_lvl2_q < A_lvl2_q_stop: {ir}"
    );
    // The interpreter does one multiply-add per stored entry: 3 stored -> 3 stores.
    let a = DenseArray::from_rows_f64(&[
        &[1.0, 0.0, 0.0, 0.0],
        &[0.0, 0.0, 2.0, 0.0],
        &[0.0, 0.0, 0.0, 3.0],
    ])
    .unwrap();
    let mut t = HashMap::new();
    t.insert(
        "A".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(SparseList(Element(0.0)))").unwrap(),
            &a,
        )
        .unwrap(),
    );
    t.insert(
        "x".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(Element(0.0))").unwrap(),
            &DenseArray::from_f64(&[4], &[1.0; 4]).unwrap(),
        )
        .unwrap(),
    );
    let r = k.run(&mut t, &HashMap::new()).unwrap();
    assert_eq!(r.stats.unwrap().stores, 3);
}

#[test]
fn mismatched_inputs_are_clear_errors() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/spmv.fin"
    ))
    .unwrap();
    let p = Program::parse(&text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    let a = DenseArray::from_f64(&[2, 3], &[1.0; 6]).unwrap();
    let mut t = HashMap::new();
    t.insert(
        "A".to_string(),
        Tensor::from_dense(&Format::parse("Dense(Dense(Element(0.0)))").unwrap(), &a).unwrap(),
    );
    t.insert(
        "x".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(Element(0.0))").unwrap(),
            &DenseArray::from_f64(&[3], &[1.0; 3]).unwrap(),
        )
        .unwrap(),
    );
    let e = k.run(&mut t, &HashMap::new()).unwrap_err().to_string();
    assert!(e.contains("stored as Dense(Dense(Element(0.0)))"), "{e}");
    t.insert(
        "A".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(SparseList(Element(0.0)))").unwrap(),
            &a,
        )
        .unwrap(),
    );
    t.insert(
        "x".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(Element(0.0))").unwrap(),
            &DenseArray::from_f64(&[4], &[1.0; 4]).unwrap(),
        )
        .unwrap(),
    );
    let e = k.run(&mut t, &HashMap::new()).unwrap_err().to_string();
    assert!(
        e.contains("`j`") && e.contains("size 3") && e.contains("size 4"),
        "{e}"
    );
    // A read out of loop order compiles (concordized), with a warning for its sparse level.
    let k = Program::parse(&text.replace("y[i] += A[i, j] * x[j]", "y[i] += A[j, i] * x[j]"))
        .unwrap()
        .compile(Engine::Interp)
        .unwrap();
    assert!(
        k.warnings().iter().any(|w| w.contains("not in loop order")),
        "{:?}",
        k.warnings()
    );
}

/// Figs. 17-18: with the `i <= j` mask the compiled upper-triangle sum reads the value of
/// every stored entry of the upper triangle and of no other entry.
#[test]
fn upper_triangle_sum_reads_only_the_triangle() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/fig17_upper_triangle_sum.fin"
    ))
    .unwrap();
    let p = Program::parse(
        &text
            .replace("Element(0)", "Element(0.0)")
            .replace("Scalar(0)", "Scalar(0.0)"),
    )
    .unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    let val = k
        .kernel()
        .bufs
        .iter()
        .position(|b| b.name == "A_lvl3_val")
        .unwrap();
    for (rows, sum, upper_stored) in [
        (
            vec![
                vec![1.0, 0.0, 2.0],
                vec![0.0, 3.0, 0.0],
                vec![4.0, 0.0, 5.0],
            ],
            11.0,
            4,
        ),
        (
            vec![
                vec![1.0, 0.0, 2.0],
                vec![0.0, 3.0, 0.0],
                vec![4.0, 0.0, 5.0],
                vec![6.0, 7.0, 8.0],
            ],
            11.0,
            4,
        ),
        (
            vec![
                vec![0.0, 0.0, 2.0],
                vec![0.0, 0.0, 7.0],
                vec![4.0, 0.0, 5.0],
            ],
            14.0,
            3,
        ),
    ] {
        let r: Vec<&[f64]> = rows.iter().map(|r| r.as_slice()).collect();
        let a = DenseArray::from_rows_f64(&r).unwrap();
        let mut t = HashMap::new();
        t.insert(
            "A".to_string(),
            Tensor::from_dense(
                &Format::parse("Dense(SparseList(Element(0.0)))").unwrap(),
                &a,
            )
            .unwrap(),
        );
        let report = k.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(t["s"].get(&[]).unwrap(), finch::Value::F64(sum));
        assert_eq!(
            report.stats.unwrap().buf_loads[val],
            upper_stored,
            "{rows:?}\n{}",
            k.kernel()
        );
    }
}

/// Sparse outputs store the union (`+`) or intersection (`*`) of the operands' patterns:
/// fill regions write nothing.
#[test]
fn sparse_outputs_store_only_the_structure() {
    let f = Format::parse("SparseList(Element(0.0))").unwrap();
    let x = Tensor::from_dense(
        &f,
        &DenseArray::from_f64(&[8], &[1.0, 0.0, 2.0, 0.0, 0.0, 3.0, 0.0, 0.0]).unwrap(),
    )
    .unwrap();
    let z = Tensor::from_dense(
        &f,
        &DenseArray::from_f64(&[8], &[0.0, 0.0, 5.0, 0.0, 7.0, 3.0, 0.0, 1.0]).unwrap(),
    )
    .unwrap();
    for (op, stored, want) in [
        ("+", 5, vec![1.0, 0.0, 7.0, 0.0, 7.0, 6.0, 0.0, 1.0]),
        ("*", 2, vec![0.0, 0.0, 10.0, 0.0, 0.0, 9.0, 0.0, 0.0]),
    ] {
        let text = format!(
            "input x :: SparseList(Element(0.0))\ninput z :: SparseList(Element(0.0))\noutput w :: SparseList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] {op} z[i]\nend\n"
        );
        for engine in [Engine::Interp, Engine::C] {
            let k = Program::parse(&text).unwrap().compile(engine).unwrap();
            let mut t = HashMap::from([("x".to_string(), x.clone()), ("z".to_string(), z.clone())]);
            k.run(&mut t, &HashMap::new()).unwrap();
            assert_eq!(
                t["w"].countstored(),
                stored,
                "{op} {engine:?}\n{}",
                k.kernel()
            );
            let got: Vec<f64> = t["w"]
                .to_dense()
                .unwrap()
                .data
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(got, want, "{op} {engine:?}");
        }
    }
    // Writing a sparse output from two statements breaks the in-order, once-per-index
    // rule: the output is written through a hash table instead, and read back after.
    let two = "input x :: SparseList(Element(0.0))\noutput w :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\nw .= 0\ns .= 0\nfor i = _\n  w[i] = x[i]\nend\nfor i = _\n  w[i] += x[i]\nend\nfor i = _\n  s[] += w[i]\nend\n";
    for engine in [Engine::Interp, Engine::C] {
        let k = Program::parse(two).unwrap().compile(engine).unwrap();
        let mut t = HashMap::from([("x".to_string(), x.clone())]);
        k.run(&mut t, &HashMap::new()).unwrap();
        let got: Vec<f64> = t["w"]
            .to_dense()
            .unwrap()
            .data
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(got, [2.0, 0.0, 4.0, 0.0, 0.0, 6.0, 0.0, 0.0], "{engine:?}");
        assert_eq!(t["w"].countstored(), 3, "{engine:?}");
        assert_eq!(t["s"].to_dense().unwrap().data, [finch::Value::F64(12.0)]);
    }
    // So is a Pattern output (its hash table holds keys only).
    let pattern = "input x :: SparseList(Element(0.0))\noutput w :: SparseList(Pattern())\nw .= false\nfor i = _\n  w[i] = x[i] > 1.0\nend\nfor i = _\n  w[i] |= x[i] < 0.0\nend\n";
    for engine in [Engine::Interp, Engine::C] {
        let k = Program::parse(pattern).unwrap().compile(engine).unwrap();
        let mut t = HashMap::from([("x".to_string(), x.clone())]);
        k.run(&mut t, &HashMap::new()).unwrap();
        let got: Vec<bool> = t["w"]
            .to_dense()
            .unwrap()
            .data
            .iter()
            .map(|v| *v == finch::Value::Bool(true))
            .collect();
        let want = [false, false, true, false, false, true, false, false];
        assert_eq!(got, want, "{engine:?}");
        assert_eq!(t["w"].countstored(), 2, "{engine:?}");
    }
}

/// Updates by a value that changes nothing (`+= 0`: a stored zero run of a RunList times
/// `x`) claim no index of a single-entry output: a result the reference stores in a
/// SparsePoint or SparseInterval level is stored by the compiled program too, and one that
/// does not fit is refused by both. (Found by a differential fuzz against the reference.)
#[test]
fn identity_updates_claim_no_index_of_single_entry_outputs() {
    // `y[i] = sum_j A[j, i] x[j]`. Fiber 1 of A is one zero run (`y[1] += 0 * x[j]`), fiber
    // 3 holds 7 at j = 3; fiber 2 is empty (y = [0, 0, 7, 0]: fits) or holds 3 (two
    // non-zeros: fits neither format).
    let a = |fiber2: [f64; 4]| {
        let mut d = vec![0.0; 4];
        d.extend(fiber2);
        d.extend([0.0, 0.0, 7.0, 0.0]);
        d.extend([0.0; 4]);
        DenseArray::from_f64(&[4, 4], &d).unwrap()
    };
    let x = DenseArray::from_f64(&[4], &[5.0, 1.0, 1.0, 0.0]).unwrap();
    for out in ["SparsePoint", "SparseInterval"] {
        let text = format!("input A :: Dense(RunList(Element(0.0)))\ninput x :: SparseBand(Element(0.0))\noutput y :: {out}(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n");
        let p = Program::parse(&text).unwrap();
        let format = Format::parse(&format!("{out}(Element(0.0))")).unwrap();
        for (fiber2, fits) in [([0.0; 4], true), ([0.0, 3.0, 0.0, 0.0], false)] {
            let a = a(fiber2);
            let mut want = Bindings::new();
            want.insert("A", a.clone());
            want.insert("x", x.clone());
            p.run_reference(&mut want, &RunOptions::default()).unwrap();
            let y = want.get("y").unwrap();
            assert_eq!(Tensor::from_dense(&format, y).is_ok(), fits, "{out}: {y:?}");
            for engine in [Engine::Interp, Engine::C] {
                let mut t = HashMap::from([
                    (
                        "A".to_string(),
                        Tensor::from_dense(
                            &Format::parse("Dense(RunList(Element(0.0)))").unwrap(),
                            &a,
                        )
                        .unwrap(),
                    ),
                    (
                        "x".to_string(),
                        Tensor::from_dense(&Format::parse("SparseBand(Element(0.0))").unwrap(), &x)
                            .unwrap(),
                    ),
                ]);
                let got = p.compile(engine).unwrap().run(&mut t, &HashMap::new());
                assert_eq!(got.is_ok(), fits, "{engine:?}, {out}, {fiber2:?}: {got:?}");
                if fits {
                    assert_eq!(&t["y"].to_dense().unwrap(), y, "{engine:?}, {out}");
                }
            }
        }
    }
}

/// A single-entry output written at a second index with its fill (`r[j] <<max>>= A[i, j]`
/// over a column of negative values writes 0) holds what the reference stores: the kernel
/// flags the second index, and the program runs again with the output recorded as
/// entries, stored without its fill values. A result that does not fit is refused by every
/// engine, by name. (Found by a differential fuzz of nested loops against the reference.)
#[test]
fn written_fill_values_take_no_single_entry_place() {
    let matrix = |cols: [[f64; 2]; 3]| DenseArray::from_f64(&[2, 3], &cols.concat()).unwrap();
    // Columns 1 and 2 negative (r = [0, 0, 4]: fits), or column 1 positive (two entries).
    let fits = matrix([[-1.0, 0.0], [-2.0, 0.0], [0.0, 4.0]]);
    let overflows = matrix([[1.0, 0.0], [-2.0, 0.0], [0.0, 4.0]]);
    for out in ["SparsePoint", "SparseInterval"] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput r :: {out}(Element(0.0))\nr .= 0\nfor j = _, i = _\n  r[j] <<max>>= A[i, j]\nend\n");
        let p = Program::parse(&text).unwrap();
        engines_match_reference(&p, &[("A", &fits)], &[], &text);
        let mut reference = Bindings::new();
        reference.insert("A", overflows.clone());
        p.run_reference(&mut reference, &RunOptions::default())
            .unwrap();
        let format = Format::parse(&format!("{out}(Element(0.0))")).unwrap();
        assert!(Tensor::from_dense(&format, reference.get("r").unwrap()).is_err());
        let a = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let mut t =
                HashMap::from([("A".to_string(), Tensor::from_dense(&a, &overflows).unwrap())]);
            let e = p
                .compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .unwrap_err();
            assert!(
                e.to_string().contains("cannot store the result in `r`"),
                "{engine:?}: {e}"
            );
            assert!(!t.contains_key("r"), "{engine:?}");
        }
    }
    // A temporary is not stored: a SparsePoint one given two entries (written in order,
    // so the kernel flags the second) holds them in every engine, as in the reference.
    let text = "input A :: Dense(SparseList(Element(0.0)))\noutput y :: Dense(Element(0.0))\ntemp v :: SparsePoint(Element(0.0))\nv .= 0\nfor j = _, i = _\n  v[j] += A[i, j]\nend\ny .= 0\nfor j = _\n  y[j] = v[j]\nend\n";
    engines_match_reference(
        &Program::parse(text).unwrap(),
        &[("A", &overflows)],
        &[],
        text,
    );
}

/// A user's `let` named like the compiler's own bindings of repeated reads (`read0`) is a
/// different variable: the reads bound around the statement are not replaced by it.
#[test]
fn a_let_named_like_a_bound_read_stays_apart() {
    let text = "input x :: SparseList(Element(0.0))\ninput z :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  let read0 = z[i] + 100.0\n    s[] += x[i] * x[i] + read0\n  end\n  let read1 = x[i]\n    s[] += read1 * z[i]\n  end\nend\n";
    let x = DenseArray::from_f64(&[5], &[0.0, 3.0, -4.0, 0.0, 2.0]).unwrap();
    let z = DenseArray::from_f64(&[5], &[2.0, 0.0, 5.0, 0.0, -1.0]).unwrap();
    engines_match_reference(
        &Program::parse(text).unwrap(),
        &[("x", &x), ("z", &z)],
        &[],
        text,
    );
}

/// Lifecycles: a tensor is read or updated within one loop nest, not both. The program
/// is refused when it is made, so no engine (the reference included) runs it.
#[test]
fn lifecycle_errors_name_the_tensor() {
    let head = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] + 1.0\nend\n";
    for nest in [
        "for i = _\n  y[i] += y[i]\nend\n",
        // Inside a branch and a `let` of the nest.
        "for i = _\n  if x[i] > 0.0\n    let t = y[i]\n      y[i] = t\n    end\n  end\nend\n",
        // A loop nest inside a loop: the statement is the outer loop.
        "for j = _\n  for i = _\n    y[i] += y[j]\n  end\nend\n",
    ] {
        let e = Program::parse(&format!("{head}{nest}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`y` is read and written in the same loop nest"),
            "{nest}: {e}"
        );
    }
    // A temporary declared inside the statement is private to it; a scalar is exempt.
    let private = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ntemp t :: Dense(Element(0.0))\ns .= 0\nfor j = _\n  begin\n    t .= 0\n    for i = _\n      t[i] += x[i]\n    end\n    for i = _\n      s[] += t[i] * s[]\n    end\n  end\nend\n";
    Program::parse(private).unwrap_or_else(|e| panic!("{e}"));
    // Reading a dense output in a later loop nest is fine.
    let ok = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ny .= 0\nfor i = _\n  y[i] = x[i] + 1.0\nend\ns .= 0\nfor i = _\n  s[] += y[i]\nend\n";
    let k = Program::parse(ok).unwrap().compile(Engine::Interp).unwrap();
    let x = Tensor::from_dense(
        &Format::parse("Dense(Element(0.0))").unwrap(),
        &DenseArray::from_f64(&[3], &[1.0, 2.0, 3.0]).unwrap(),
    )
    .unwrap();
    let mut t = HashMap::from([("x".to_string(), x)]);
    k.run(&mut t, &HashMap::new()).unwrap();
    assert_eq!(t["s"].get(&[]).unwrap(), finch::Value::F64(9.0));
}

/// The paper programs the compiler takes reproduce the digest's vectors on both engines.
#[test]
fn compiled_paper_examples() {
    let example = |name: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples")
            .join(name);
        Program::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let stored = |p: &Program, name: &str, a: DenseArray| {
        let f = p.decl(name).unwrap().format.clone();
        (name.to_string(), Tensor::from_dense(&f, &a).unwrap())
    };
    let imat = |rows: &[&[i64]]| {
        let (m, n) = (rows.len(), rows[0].len());
        let mut a =
            DenseArray::filled(finch::ScalarType::I64, &[m, n], finch::Value::I64(0)).unwrap();
        for (i, r) in rows.iter().enumerate() {
            for (j, &x) in r.iter().enumerate() {
                a.set(&[i, j], finch::Value::I64(x)).unwrap();
            }
        }
        a
    };
    let out = |t: &HashMap<String, Tensor>, n: &str| -> Vec<f64> {
        t[n].to_dense()
            .unwrap()
            .data
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    for engine in [Engine::Interp, Engine::C] {
        let p = example("fig02_even_1.fin");
        let mut t = HashMap::from([
            stored(&p, "a", ints(&[1, 0, 2, 3, 0, 4, 5, 6], 0)),
            stored(&p, "b", ints(&[0, 7, 8, 9, 1, 2, 0, 3], 0)),
        ]);
        let compiled = p.compile(engine).unwrap();
        if finch::backend::c::available() {
            assert_eq!(compiled.engine(), engine, "{:?}", compiled.warnings());
        }
        compiled.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(out(&t, "c"), vec![0.0, 0.0, 0.0, 27.0, 0.0, 8.0, 0.0, 18.0]);

        let p = example("fig07_product_early_exit.fin");
        let mut t = HashMap::from([stored(&p, "A", ints(&[2, 3, 0, 5], 0))]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "p"), vec![0.0]);

        let p = example("fig19_spmv_symmetric.fin");
        let upper =
            DenseArray::from_rows_f64(&[&[0.0, 1.0, 0.0], &[0.0, 0.0, 4.0], &[0.0, 0.0, 0.0]])
                .unwrap();
        let mut t = HashMap::from([
            stored(&p, "A", upper),
            stored(
                &p,
                "D",
                DenseArray::from_f64(&[3], &[2.0, 3.0, 5.0]).unwrap(),
            ),
            stored(
                &p,
                "x",
                DenseArray::from_f64(&[3], &[1.0, 2.0, 3.0]).unwrap(),
            ),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "y"), vec![4.0, 19.0, 23.0]);

        let p = example("fig16_unfurl.fin");
        let mut t = HashMap::from([
            stored(&p, "B", imat(&[&[1, 0], &[0, 2], &[3, 0]])),
            stored(&p, "D", ints(&[0, 5], 0)),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "C"), vec![4.0, 0.0, 36.0, 5.0, 21.0, 5.0]);

        let p = example("fig21_spgemm_inner.fin");
        let mut t = HashMap::from([
            stored(&p, "AT", imat(&[&[1, 0], &[0, 3], &[2, 0]])),
            stored(&p, "B", imat(&[&[1, 0], &[0, 1], &[4, 0]])),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "C"), vec![9.0, 0.0, 0.0, 3.0]);
        assert_eq!(
            t["C"].countstored(),
            2,
            "the sparse result stores only the two nonzeros"
        );

        // Outer product: rank-one updates into a SparseHash(SparseHash) workspace.
        let p = example("fig21_spgemm_outer.fin");
        let mut t = HashMap::from([
            stored(&p, "A", imat(&[&[1, 0, 2], &[0, 3, 0]])),
            stored(&p, "BT", imat(&[&[1, 0, 4], &[0, 1, 0]])),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "C"), vec![9.0, 0.0, 0.0, 3.0]);
        assert_eq!(t["C"].countstored(), 2);
    }
}

/// Fig. 7: a product into a ShortCircuitScalar stops once it is 0: with a zero at
/// position k, at most k + 1 steps run however long the vector is. So does one into a
/// SparseShortCircuitScalar (declared with its fill, 1).
#[test]
fn short_circuit_product_stops_early() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/fig07_product_early_exit.fin"
    ))
    .unwrap();
    for scalar in ["ShortCircuitScalar(0)", "SparseShortCircuitScalar(1)"] {
        for format in [
            "SparseList(Element(0))",
            "Dense(Element(0))",
            "RunList(Element(0))",
            "SparseRunList(Element(0))",
            "SparseBand(Element(0))",
            "SparseBlockList(Element(0))",
            "SparseByteMap(Element(0))",
            "SparseHash(Element(0))",
        ] {
            let text = text
                .replace("SparseList(Element(0))", format)
                .replace("ShortCircuitScalar(0)", scalar);
            short_circuit_in(&text, format);
        }
    }
}

/// A SparseShortCircuitScalar both stops a reduction at an annihilator and remembers
/// whether it was written: Finch.jl's BFS step (a column's search stops at its first
/// frontier parent) against the reference, and its written flag after an empty loop and
/// a loop that writes it.
#[test]
fn sparse_short_circuit_scalar_stops_and_tracks_writes() {
    let bfs = "input A :: Dense(SparseList(Pattern()))\ninput y :: Dense(Element(false))\noutput x :: Dense(Element(false))\ntemp t :: SparseShortCircuitScalar(false)\nx .= false\nfor j = _\n  t .= false\n  for i = _\n    t[] |= A[i, j] && y[i]\n  end\n  x[j] = t[]\nend\n";
    let program = Program::parse(bfs).unwrap();
    let n = 300;
    // Column j holds rows j..j + 40 (mod n); the frontier y is every third vertex, so
    // every column's search stops within three entries.
    let mut a = vec![false; n * n];
    for j in 0..n {
        for k in 0..40 {
            a[j * n + (j + k) % n] = true;
        }
    }
    let y: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let bools = |shape: &[usize], v: &[bool]| {
        let data = v.iter().map(|&b| Value::Bool(b)).collect();
        DenseArray::from_data(ScalarType::Bool, shape, data, Value::Bool(false)).unwrap()
    };
    let (a, y) = (bools(&[n, n], &a), bools(&[n], &y));
    let mut reference = Bindings::new();
    reference.insert("A", a.clone());
    reference.insert("y", y.clone());
    program
        .run_reference(&mut reference, &RunOptions::default())
        .unwrap();
    let want = reference.get("x").unwrap().clone();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::from([
            (
                "A".to_string(),
                Tensor::from_dense(&program.decl("A").unwrap().format, &a).unwrap(),
            ),
            (
                "y".to_string(),
                Tensor::from_dense(&program.decl("y").unwrap().format, &y).unwrap(),
            ),
        ]);
        let r = program
            .compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(t["x"].to_dense().unwrap(), want, "{engine:?}");
        if let Some(stats) = r.stats {
            // Without the early exit the columns take 40 steps each.
            assert!(stats.iterations <= 5 * n as u64, "{stats:?}");
        }
    }
    let product = "input A :: SparseList(Element(0))\noutput p :: SparseShortCircuitScalar(1)\np .= 1\nfor j = _\n  p[] *= A[j]\nend\n";
    let program = Program::parse(product).unwrap();
    let f = program.decl("A").unwrap().format.clone();
    for engine in [Engine::Interp, Engine::C] {
        let k = program.compile(engine).unwrap();
        for (a, want, written) in [(vec![], 1, false), (vec![2, 3], 6, true)] {
            let mut t = HashMap::from([(
                "A".to_string(),
                Tensor::from_dense(&f, &ints(&a, 0)).unwrap(),
            )]);
            k.run(&mut t, &HashMap::new()).unwrap();
            assert_eq!(t["p"].get(&[]).unwrap(), finch::Value::I64(want));
            let finch::tensor::TensorStorage::Scalar(s) = t["p"].storage() else {
                panic!("p is a scalar")
            };
            assert_eq!(s.dirty, written, "{engine:?} on {a:?}");
        }
    }
}

fn short_circuit_in(text: &str, format: &str) {
    let p = Program::parse(text).unwrap();
    let f = p.decl("A").unwrap().format.clone();
    let k = p.compile(Engine::Interp).unwrap();
    let mut long = vec![2, 3, 0];
    long.extend(std::iter::repeat_n(5, 1000));
    // A block list also counts its step over the one block of [2, 3, 4].
    let short_steps = if format.starts_with("SparseBlockList") {
        4
    } else {
        3
    };
    for (a, want, max_steps) in [(long, 0, 4), (vec![2, 3, 4], 24, short_steps)] {
        let mut t = HashMap::from([(
            "A".to_string(),
            Tensor::from_dense(&f, &ints(&a, 0)).unwrap(),
        )]);
        let r = k.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(t["p"].get(&[]).unwrap(), finch::Value::I64(want));
        assert!(
            r.stats.clone().unwrap().iterations <= max_steps,
            "{format}: {:?}",
            r.stats
        );
        let c = p.compile(Engine::C).unwrap();
        c.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(t["p"].get(&[]).unwrap(), finch::Value::I64(want));
    }
}

#[test]
fn short_circuit_stops_at_a_gap_of_fill_values() {
    // `p[] *= x[i]` over [-5, -2, 3, 0, 0, 0, -4, 0, 0]: the reference stops at the first
    // zero with +0.0. A level whose gap of fill zeros and the next stored run or block come
    // in one step must not go on to the -4, which would give -0.0.
    let x = [-5.0, -2.0, 3.0, 0.0, 0.0, 0.0, -4.0, 0.0, 0.0];
    for level in [
        "SparseList",
        "Dense",
        "RunList",
        "SparseRunList",
        "SparseBand",
        "SparseBlockList",
        "SparseByteMap",
        "SparseHash",
        "SparseInterval",
    ] {
        // SparseBand and SparseInterval hold one block or one run: for them, a gap of
        // zeros and then the -4 alone.
        let mut values = x;
        if matches!(level, "SparseBand" | "SparseInterval") {
            values = [0.0, 0.0, -4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        }
        let a = DenseArray::from_f64(&[x.len()], &values).unwrap();
        let text = format!("input x :: {level}(Element(0.0))\noutput p :: ShortCircuitScalar(1.0)\np .= 1.0\nfor i = _\n  p[] *= x[i]\nend\n");
        let program = Program::parse(&text).unwrap();
        let mut reference = Bindings::new();
        reference.insert("x", a.clone());
        program
            .run_reference(&mut reference, &RunOptions::default())
            .unwrap();
        let want = reference.get("p").unwrap().get(&[]).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let k = program.compile(engine).unwrap();
            let format = Format::parse(&format!("{level}(Element(0.0))")).unwrap();
            let mut t =
                HashMap::from([("x".to_string(), Tensor::from_dense(&format, &a).unwrap())]);
            k.run(&mut t, &HashMap::new()).unwrap();
            let got = t["p"].get(&[]).unwrap();
            let bits = |v: &finch::Value| v.as_f64().map(f64::to_bits);
            assert_eq!(
                bits(&got),
                bits(&want),
                "{level} {engine:?}: {got:?} vs {want:?}"
            );
        }
    }
}

/// Gustavson's SpGEMM with a SparseByteMap workspace does work proportional to the stored
/// entries and products, not to the matrix size squared: the workspace is walked over its
/// sorted set positions and reset only where it was set.
#[test]
fn gustavson_workspace_touches_only_set_positions() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/spgemm_gustavson.fin"
    ))
    .unwrap();
    let p = Program::parse(&text).unwrap();
    let ir = p.compile(Engine::Interp).unwrap().kernel().to_string();
    assert!(
        ir.contains("sort "),
        "the workspace is sorted before it is read: {ir}"
    );
    let n = 600;
    let f = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
    let mut coo = finch::tensor::Coo::new(finch::ScalarType::F64, &[n, n]);
    for i in 0..n {
        coo.push(&[i, i], finch::Value::F64(2.0)).unwrap();
        coo.push(&[(i * 7) % n, i], finch::Value::F64(1.0)).unwrap();
    }
    let a = Tensor::from_coo(&f, &coo).unwrap();
    let mut t = HashMap::from([("A".to_string(), a.clone()), ("B".to_string(), a.clone())]);
    let k = p.compile(Engine::Interp).unwrap();
    let stats = k.run(&mut t, &HashMap::new()).unwrap().stats.unwrap();
    assert!(
        stats.iterations < 40 * n as u64,
        "{} iterations for n = {n}",
        stats.iterations
    );
    // And the product is right (C = A * A), against a direct sparse product.
    let entries = a.to_coo();
    let mut want: std::collections::BTreeMap<(usize, usize), f64> = Default::default();
    for x in 0..entries.len() {
        for y in 0..entries.len() {
            // A[i, k] * A[k, j]
            let (i, k1) = (entries.coords[0][x], entries.coords[1][x]);
            let (k2, j) = (entries.coords[0][y], entries.coords[1][y]);
            if k1 == k2 {
                let v = entries.vals[x].as_f64().unwrap() * entries.vals[y].as_f64().unwrap();
                *want.entry((i, j)).or_default() += v;
            }
        }
    }
    let got = t["C"].to_coo();
    let got: std::collections::BTreeMap<(usize, usize), f64> = (0..got.len())
        .map(|e| {
            (
                (got.coords[0][e], got.coords[1][e]),
                got.vals[e].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
}

/// Writing run-length output from run-length input accepts whole runs: the work follows
/// the number of runs, not the length (AcceptRun), and equal touching runs are merged.
#[test]
fn run_length_output_costs_one_step_per_run() {
    let text = "input x :: RunList(Element(0.0))\ninput z :: SparseRunList(Element(0.0))\noutput w :: SparseRunList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n";
    let p = Program::parse(text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    for n in [10_000usize, 20_000] {
        // 10 runs of x, 5 runs of z (the second half of each of its blocks is zero).
        let xs: Vec<f64> = (0..n).map(|i| (i * 10 / n) as f64 + 1.0).collect();
        let zs: Vec<f64> = (0..n)
            .map(|i| if (i * 10 / n) % 2 == 0 { 2.0 } else { 0.0 })
            .collect();
        let x = DenseArray::from_f64(&[n], &xs).unwrap();
        let z = DenseArray::from_f64(&[n], &zs).unwrap();
        let mut t = HashMap::from([
            (
                "x".to_string(),
                Tensor::from_dense(&Format::parse("RunList(Element(0.0))").unwrap(), &x).unwrap(),
            ),
            (
                "z".to_string(),
                Tensor::from_dense(&Format::parse("SparseRunList(Element(0.0))").unwrap(), &z)
                    .unwrap(),
            ),
        ]);
        let stats = k.run(&mut t, &HashMap::new()).unwrap().stats.unwrap();
        assert!(
            stats.iterations < 40,
            "{} iterations for n = {n}",
            stats.iterations
        );
        let w = t["w"].to_dense().unwrap();
        let want: Vec<f64> = xs.iter().zip(&zs).map(|(a, b)| a * b).collect();
        assert_eq!(w, DenseArray::from_f64(&[n], &want).unwrap());
        assert_eq!(t["w"].countstored(), 5, "one stored run per non-zero run");
    }
}

#[test]
fn reassociated_spmv_runs_eight_positions_at_a_time() {
    // Row-major SpMV over 32- and 64-bit indices: with `reassociate` the walk over a row's
    // entries becomes masked AVX-512 loads and gathers (chosen at run time where the CPU
    // has AVX-512); without it, the C keeps the scalar loop. Both match the reference
    // (integer-valued data: every summation order is exact).
    for format in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList{UInt32}(Element(0.0)))",
    ] {
        let text = format!("input A :: {format}\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n");
        let p = Program::parse(&text).unwrap();
        let strict = p.compile(Engine::C).unwrap();
        let fast = p
            .compile_with(
                Engine::C,
                &CompileOptions {
                    reassociate: true,
                    ..Default::default()
                },
            )
            .unwrap();
        if fast.engine() != Engine::C {
            return; // no C compiler: nothing to look at
        }
        let mode = finch::backend::c::CheckMode::Trusted;
        assert!(!strict.c_source(mode).unwrap().contains("_mm512"));
        let c = fast.c_source(mode).unwrap();
        assert!(
            c.contains("_mm512_mask_i64gather_pd") && c.contains("__builtin_cpu_supports"),
            "{c}"
        );
        let (m, n) = (157, 203);
        let a = DenseArray::from_f64(&[m, n], &data(m * n, 0.07, 11)).unwrap();
        let x = DenseArray::from_f64(&[m], &data(m, 0.9, 12)).unwrap();
        let mut dense = Bindings::new();
        dense.insert("A", a.clone());
        dense.insert("x", x.clone());
        p.run_reference(&mut dense, &RunOptions::default()).unwrap();
        let mut t = HashMap::from([
            (
                "A".to_string(),
                Tensor::from_dense(&Format::parse(format).unwrap(), &a).unwrap(),
            ),
            (
                "x".to_string(),
                Tensor::from_dense(&Format::parse("Dense(Element(0.0))").unwrap(), &x).unwrap(),
            ),
        ]);
        fast.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(&t["y"].to_dense().unwrap(), dense.get("y").unwrap());
    }
}

/// The C of row-major SpMV over `Dense(<level>(Element))` compiled with `reassociate`
/// (`None` where no C compiler is available).
fn reassociated_row_spmv_c(level: &str) -> Option<String> {
    row_spmv_c(level, true)
}

fn row_spmv_c(level: &str, reassociate: bool) -> Option<String> {
    let text = format!("input A :: Dense({level}(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n");
    let k = Program::parse(&text)
        .unwrap()
        .compile_with(
            Engine::C,
            &CompileOptions {
                reassociate,
                ..Default::default()
            },
        )
        .unwrap();
    (k.engine() == Engine::C).then(|| k.c_source(finch::backend::c::CheckMode::Trusted).unwrap())
}

/// The AVX-512 copy of a kernel in C (from its name to the end of its body), if it has one.
fn avx512_copy(c: &str) -> Option<&str> {
    vector_copy(c, "avx512")
}

#[test]
fn reassociated_block_rows_reduce_once_per_row() {
    // A SparseBlockList row is several blocks: with `reassociate`, each block's loop adds
    // into one vector of partial sums held across the row, reduced once after it.
    let Some(c) = reassociated_row_spmv_c("SparseBlockList") else {
        return;
    };
    let simd = avx512_copy(&c).expect("an AVX-512 copy");
    assert_eq!(simd.matches("_mm512_reduce_add_pd").count(), 1, "{simd}");
    // Each product adds into the partial sums in one fused multiply-add.
    assert!(simd.contains("_mm512_mask3_fmadd_pd("), "{simd}");
    assert!(!simd.contains("_mm512_mul_pd("), "{simd}");
    let held = simd.find("_mm512_setzero_pd").expect("a held vector");
    let walk = simd.find("while (1)").expect("the walk over blocks");
    assert!(
        held < walk,
        "the vector is declared before the walk over blocks:\n{simd}"
    );
}

/// The copy of a kernel in C named `_{isa}` (`avx512`, `avx2`, `scalar`; from its name to
/// the end of its body), if it has one.
fn vector_copy<'c>(c: &'c str, isa: &str) -> Option<&'c str> {
    let from = c.find(&format!("_{isa}("))?;
    let simd = &c[from..];
    Some(&simd[..simd.find("\n}\n").unwrap_or(simd.len())])
}

#[test]
fn avx2_copies_take_contiguous_rows_only() {
    // CPUs with AVX2 but not AVX-512 get a third copy: a block row adds its blocks' groups
    // of four into held partial sums (reduced once per row), a band row reads contiguous
    // runs; a SparseList row would need gathers, which AVX2 runs slower than scalar loads,
    // so CSR gets no AVX2 copy.
    let Some(blocks) = reassociated_row_spmv_c("SparseBlockList") else {
        return;
    };
    let simd = vector_copy(&blocks, "avx2").expect("an AVX2 copy");
    assert_eq!(simd.matches("finch_hsum4_pd(").count(), 1, "{simd}");
    assert!(simd.contains("_mm256_fmadd_pd("), "{simd}");
    assert!(!simd.contains("_mm512"), "{simd}");
    // The positions left after the groups run in the scalar loop that follows.
    let rest = &simd[simd.find("AVX2: 8, then 4").expect("a vectorized loop")..];
    assert!(rest.contains("for (; v"), "{simd}");
    assert!(
        blocks.contains("__builtin_cpu_supports(\"avx2\")"),
        "{blocks}"
    );
    let band = reassociated_row_spmv_c("SparseBand").expect("a C compiler");
    let simd = vector_copy(&band, "avx2").expect("an AVX2 copy");
    assert!(
        simd.contains("_mm256_loadu_pd(") && !simd.contains("gather"),
        "{simd}"
    );
    let csr = reassociated_row_spmv_c("SparseList").expect("a C compiler");
    assert!(vector_copy(&csr, "avx512").is_some(), "{csr}");
    assert!(vector_copy(&csr, "avx2").is_none(), "{csr}");
}

#[test]
fn pattern_rows_vectorize_like_valued_ones() {
    // A Pattern leaf reads `true`: `f64(true) * x[i]` folds to `x[i]` (exact), so the
    // row's loop has no cast left and runs as AVX-512 gathers like a valued one.
    let text = "input A :: Dense(SparseList(Pattern()))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n";
    let k = Program::parse(text)
        .unwrap()
        .compile_with(
            Engine::C,
            &CompileOptions {
                reassociate: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(!k.kernel().to_string().contains("true"), "{}", k.kernel());
    if k.engine() != Engine::C {
        return;
    }
    let c = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
    assert!(c.contains("_mm512_mask_i64gather_pd"), "{c}");
}

#[test]
fn reassociated_band_rows_are_contiguous_vector_loads() {
    // A SparseBand row is a dense run: with `reassociate`, its `for` loop reads the values
    // and `x` with masked vector loads, no gathers.
    let Some(c) = reassociated_row_spmv_c("SparseBand") else {
        return;
    };
    let vector = &c[c.find("AVX-512: 8 positions").expect("a vectorized loop")..];
    assert!(vector.contains("_mm512_maskz_loadu_pd"), "{c}");
    assert!(!vector.contains("gather"), "{c}");
}

/// Runs `p` on both engines with the inputs stored in their declared formats (or as
/// given in `stored`) and checks every output against the reference on `dense`.
fn engines_match_reference(
    p: &Program,
    dense: &[(&str, &DenseArray)],
    stored: &[(&str, Tensor)],
    what: &str,
) {
    let mut reference = Bindings::new();
    for (name, a) in dense {
        reference.insert(*name, (*a).clone());
    }
    p.run_reference(&mut reference, &RunOptions::default())
        .unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::new();
        for (name, a) in dense {
            let f = Format::parse(&p.decl(name).unwrap().format.to_string()).unwrap();
            t.insert(name.to_string(), Tensor::from_dense(&f, a).unwrap());
        }
        for (name, given) in stored {
            t.insert(name.to_string(), given.clone());
        }
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        for d in p
            .decls()
            .iter()
            .filter(|d| d.kind == finch::notation::DeclKind::Output)
        {
            assert_eq!(
                &t[&d.name].to_dense().unwrap(),
                reference.get(&d.name).unwrap(),
                "{engine:?}: {what}"
            );
        }
    }
}

/// A value a kernel writes that ends up the fill (here `0.0` and `-0.0` copied from a
/// dense input) is not stored, in every output level, as the reference stores its
/// result: the stored entries equal the reference's, bit for bit. Copying a RunList
/// vector of one entry into a SparseList stores one entry, not one per position.
#[test]
fn computed_fills_are_not_stored() {
    let x = [0.0, 1.5, 2.0, 0.0, -1.0, -0.0, 0.0, 4.0, 0.0];
    let x = DenseArray::from_f64(&[x.len()], &x).unwrap();
    let stored = |t: &Tensor| {
        let coo = t.to_coo();
        let bits: Vec<_> = coo
            .vals
            .iter()
            .map(|v| v.as_f64().map(f64::to_bits))
            .collect();
        (coo.coords, bits)
    };
    for out in [
        "SparseList",
        "SparseCOO{1}",
        "SparseBand",
        "SparseBlockList",
        "SparseByteMap",
        "SparseHash",
        "RunList",
        "SparseRunList",
    ] {
        let text = format!("input x :: Dense(Element(0.0))\noutput w :: {out}(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i]\nend\n");
        let p = Program::parse(&text).unwrap();
        let mut reference = Bindings::new();
        reference.insert("x", x.clone());
        p.run_reference(&mut reference, &RunOptions::default())
            .unwrap();
        let format = p.decl("w").unwrap().format.clone();
        let want = Tensor::from_dense(&format, reference.get("w").unwrap()).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            // (From coordinates, so that the dense input keeps its `-0.0`.)
            let mut coo = finch::tensor::Coo::new(ScalarType::F64, &[x.data.len()]);
            for (i, v) in x.data.iter().enumerate() {
                coo.push(&[i], *v).unwrap();
            }
            let f = p.decl("x").unwrap().format.clone();
            let mut t = HashMap::from([("x".to_string(), Tensor::from_coo(&f, &coo).unwrap())]);
            p.compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .unwrap();
            assert_eq!(stored(&t["w"]), stored(&want), "{out} {engine:?}");
        }
    }
    let n = 100_000;
    let mut one = vec![0.0; n];
    one[1] = 1.0;
    let one = DenseArray::from_f64(&[n], &one).unwrap();
    let text = "input x :: RunList(Element(0.0))\noutput w :: SparseList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i]\nend\n";
    let p = Program::parse(text).unwrap();
    let f = p.decl("x").unwrap().format.clone();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&f, &one).unwrap())]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(t["w"].countstored(), 1, "{engine:?}");
    }
}

/// A sum over every position beside a sparse output's write: where the operand holds its
/// fill the write stores nothing, so the fill between entries is one addition of its
/// length, not a loop (the interpreter counts iterations), and the results equal the
/// reference's.
#[test]
fn a_write_of_the_fill_does_not_keep_a_loop_over_the_fill() {
    let text = "input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput w :: SparseList(Element(0.0))\ns .= 0\nw .= 0\nfor i = _\n  s[] += x[i] + 1.0\n  w[i] = x[i] * 3.0\nend\n";
    let p = Program::parse(text).unwrap();
    let n = 1_000_000;
    let mut x = vec![0.0; n];
    x[1] = 2.0;
    x[n / 2] = -1.0;
    let x = DenseArray::from_f64(&[n], &x).unwrap();
    let f = p.decl("x").unwrap().format.clone();
    let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&f, &x).unwrap())]);
    let stats = p
        .compile(Engine::Interp)
        .unwrap()
        .run(&mut t, &HashMap::new())
        .unwrap()
        .stats
        .unwrap();
    assert!(stats.iterations < 100, "{stats:?}");
    assert_eq!(t["s"].get(&[]).unwrap(), Value::F64(n as f64 + 1.0));
    assert_eq!(t["w"].countstored(), 2);
    let small = DenseArray::from_f64(&[7], &[0.0, 2.0, 0.0, 0.0, -1.0, 0.0, 0.0]).unwrap();
    engines_match_reference(&p, &[("x", &small)], &[], "sum beside a fill write");
}

/// A RunList output's runs tile every fiber, also a fiber the kernel never reaches (its
/// loop under a condition that does not hold there): such a fiber is one run of fill.
#[test]
fn run_list_fibers_the_kernel_never_reaches_are_one_fill_run() {
    let text = "input x :: Dense(Element(0.0))\ninput y :: Dense(Element(0.0))\noutput w :: Dense(RunList(Element(0.0)))\nw .= 0\nfor j = _\n  if y[j] > 0.0\n    for i = _\n      w[i, j] = x[i]\n    end\n  end\nend\n";
    let p = Program::parse(text).unwrap();
    let x = DenseArray::from_f64(&[3], &[1.0, 1.0, 2.0]).unwrap();
    for y in [[0.0, 1.0, 1.0, 0.0], [0.0; 4]] {
        let y = DenseArray::from_f64(&[4], &y).unwrap();
        engines_match_reference(&p, &[("x", &x), ("y", &y)], &[], "RunList fibers");
    }
}

/// A SparseBand row over the whole level runs from the index before its block to its
/// last index with no clamping to the level's size: invariants I3-I4 and one clamp of
/// `last` keep both inside. The fill around the block is still visited exactly, for empty
/// rows whose `idx` is any value I4 allows and for a level of size 0.
#[test]
fn band_rows_need_no_clamps_and_their_fill_stays_inside() {
    let text = "input A :: Dense(SparseBand(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] + x[j]\nend\n";
    let p = Program::parse(text).unwrap();
    let ir = p.compile(Engine::Interp).unwrap().kernel().to_string();
    assert_eq!(ir.matches("min(").count(), 1, "{ir}");
    assert_eq!(ir.matches("max(").count(), 0, "{ir}");
    let band = Format::parse("Dense(SparseBand(Element(0.0)))").unwrap();
    // Columns (rows of the loop): a band, an empty row, a full row, an empty row.
    let rows = DenseArray::from_f64(
        &[5, 4],
        &[
            0.0, 1.0, 2.0, 0.0, 0.0, //
            0.0, 0.0, 0.0, 0.0, 0.0, //
            3.0, 4.0, 5.0, 6.0, 7.0, //
            0.0, 0.0, 0.0, 0.0, 0.0,
        ],
    )
    .unwrap();
    let x = DenseArray::from_f64(&[5], &[1.0, 10.0, 100.0, 1000.0, 10000.0]).unwrap();
    let empty = DenseArray::from_f64(&[0, 3], &[]).unwrap();
    let none = DenseArray::from_f64(&[0], &[]).unwrap();
    for (a, x, empty_idx) in [
        (&rows, &x, 5),
        (&rows, &x, 0),
        (&rows, &x, 3),
        (&empty, &none, 0),
    ] {
        // Every empty row's `idx` set to `empty_idx` (I4: at most the size).
        let (f, shape, storage) = Tensor::from_dense(&band, a).unwrap().into_parts();
        let finch::tensor::TensorStorage::Levels(finch::formats::LevelStorage::Dense(mut root)) =
            storage
        else {
            panic!("a Dense root")
        };
        let finch::formats::LevelStorage::SparseBand(b) = root.child.as_mut() else {
            panic!("a SparseBand level")
        };
        for r in 0..b.idx.len() {
            if b.ofs[r] == b.ofs[r + 1] {
                b.idx[r] = empty_idx;
            }
        }
        let storage =
            finch::tensor::TensorStorage::Levels(finch::formats::LevelStorage::Dense(root));
        let stored = Tensor::from_parts(f, shape, storage).unwrap();
        let what = format!("empty rows at {empty_idx}");
        engines_match_reference(&p, &[("A", a), ("x", x)], &[("A", stored)], &what);
    }
}

/// A walk over a SparseBlockList row from index 1 starts each block's loop at the block's
/// first index with no clipping and no test (blocks are sorted, disjoint and never empty);
/// a walk that starts inside a block (a window or a mask from 3, a shifted read) still
/// clips it.
#[test]
fn block_rows_from_the_start_need_no_clipping_and_ranges_inside_blocks_still_clip() {
    let programs = [
        ("for i = _, j = _\n  y[i] += A[j, i] * x[j]\nend", true),
        (
            "for i = _, j = _\n  y[i] += A[(3:6)(j), i] * x[(3:6)(j)]\nend",
            false,
        ),
        (
            "for i = _, j = _\n  if j >= 3\n    y[i] += A[j, i] * x[j]\n  end\nend",
            false,
        ),
        (
            "for i = _, j = _\n  y[i] += coalesce(A[~(j + 2), i], 0.0) * x[j]\nend",
            false,
        ),
    ];
    // Rows (loop `i`) of length 7 with blocks 2..=5, 1..=2 and 4..=7, 3..=3, none.
    let rows = DenseArray::from_f64(
        &[7, 4],
        &[
            0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0, //
            5.0, 6.0, 0.0, 7.0, 8.0, 9.0, 10.0, //
            0.0, 0.0, 11.0, 0.0, 0.0, 0.0, 0.0, //
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ],
    )
    .unwrap();
    let x = DenseArray::from_f64(&[7], &[1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]).unwrap();
    for (body, whole) in programs {
        let text = format!("input A :: Dense(SparseBlockList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\n{body}\n");
        let p = Program::parse(&text).unwrap();
        let ir = p.compile(Engine::Interp).unwrap().kernel().to_string();
        assert_eq!(!ir.contains("max("), whole, "{ir}");
        engines_match_reference(&p, &[("A", &rows), ("x", &x)], &[], &text);
    }
}

/// A strict row loop over long rows runs four rows at a time, and each row still adds its
/// terms one at a time in order: the compiled result equals the reference's and the
/// interpreter's exactly, on rows long and short, empty rows, and a number of rows that
/// leaves none, one, two or three to run alone at the end. The first, middle and last rows
/// decide between the plain loop (all three shorter than 8), the joint loop (one of 8 to
/// 15 at most) and the joint loop in strips with prefetch (one of 16 or more). The rows of
/// a band (whose inner loop runs under a test for an empty row) and of a dense matrix (no
/// test; 12 columns: the joint loop, 40: in strips).
#[test]
fn long_rows_run_four_at_a_time_in_order() {
    for (level, n) in [("SparseBand", 90), ("Dense", 12), ("Dense", 40)] {
        rows_run_four_at_a_time_in_order(level, n);
    }
}

fn rows_run_four_at_a_time_in_order(level: &str, n: usize) {
    let text = format!("input A :: Dense({level}(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n");
    let p = Program::parse(&text).unwrap();
    let k = p.compile(Engine::C).unwrap();
    if k.engine() == Engine::C {
        let c = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
        assert!(c.contains("4 rows at a time"), "{c}");
        // The joint loop with strips, and without.
        assert!(c.contains("for (int s_ = 0; s_ < 8; s_++) {"), "{c}");
        assert_eq!(c.matches("for (; k_ < m_; k_++) {").count(), 2, "{c}");
    }
    let mut value = order_sensitive_values();
    // Widths of the first, middle (`m / 2`) and last rows, over `m` rows.
    for (m, (first, middle, last)) in [41usize, 42, 43, 44].into_iter().flat_map(|m| {
        [
            (70usize, 1, 33),
            (3, 1, 33),
            (3, 70, 3),
            (3, 1, 3),
            (3, 12, 3),
            (9, 1, 15),
        ]
        .map(|w| (m, w))
    }) {
        let mut data = vec![0.0; n * m];
        for r in 0..m {
            let width = match r {
                0 => first,
                _ if r == m / 2 => middle,
                _ if r == m - 1 => last,
                // Groups of four rows all long (strips, then a rest), mixed, and of 8 to
                // 15 entries.
                _ => [
                    40, 70, 33, 50, 0, 3, 70, 1, 45, 60, 38, 29, 11, 9, 15, 8, 11, 0, 12, 10,
                ][r % 20],
            };
            let start = (r * 7) % (n - width.min(n - 1));
            for j in start..(start + width).min(n) {
                data[r * n + j] = value();
            }
        }
        spmv_matches_reference(
            &p,
            (n, m, &data),
            &format!(
                "{level}, {m} rows of {n}; first, middle, last rows {first}, {middle}, {last}"
            ),
        );
    }
}

/// `p`, an SpMV over `A` (`n` x `m`, dense values `data`) and `x`, gives the reference's
/// `y` on both engines.
fn spmv_matches_reference(p: &Program, (n, m, data): (usize, usize, &[f64]), what: &str) {
    let a = DenseArray::from_f64(&[n, m], data).unwrap();
    let xs: Vec<f64> = (0..n).map(|j| 1.0 + (j % 13) as f64 / 7.0).collect();
    let x = DenseArray::from_f64(&[n], &xs).unwrap();
    engines_match_reference(p, &[("A", &a), ("x", &x)], &[], what);
}

/// Pseudo-random values of magnitudes from 1e-8 to 1e8 and both signs: a sum of them in
/// another order than the reference's differs.
fn order_sensitive_values() -> impl FnMut() -> f64 {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 11
    };
    move || {
        let mag = 10f64.powi((next() % 17) as i32 - 8);
        let sign = if next() % 2 == 0 { 1.0 } else { -1.0 };
        sign * mag * (1.0 + (next() % 1000) as f64 / 1000.0)
    }
}

#[test]
fn block_rows_run_four_at_a_time_along_their_walks() {
    // Strict SpMV over SparseBlockList rows: where the probed rows' blocks hold 8 entries
    // or more on average, four rows run their blocks together, stretch by stretch, each
    // row moving on to its next block where its block ends; every row's additions stay in
    // order, so y is the reference's bit for bit.
    let text = "input A :: Dense(SparseBlockList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n";
    let p = Program::parse(text).unwrap();
    let k = p.compile(Engine::C).unwrap();
    if k.engine() == Engine::C {
        let c = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
        assert!(c.contains("4 rows at a time, along their walks"), "{c}");
    }
    let mut value = order_sensitive_values();
    // Each row's blocks (lengths), placed left to right with gaps of 1 to 3 columns: rows
    // without blocks, of one block, of many, of blocks of one entry, a full row, blocks
    // ending at the last column; in groups of four rows that end their walks together
    // and apart. Long blocks (the joint loop runs) and short ones (the plain loop runs).
    let long: &[&[usize]] = &[
        &[40],
        &[],
        &[10, 25, 12],
        &[1, 30, 2, 1],
        &[9],
        &[8, 20, 13, 17, 11],
        &[160],
        &[50, 3],
        &[12, 12, 12, 12],
        &[33, 1, 1, 1, 40],
        &[20, 20],
    ];
    let short: &[&[usize]] = &[&[1, 2, 1], &[3], &[], &[2, 2, 2, 2, 2], &[1]];
    // Over 524288 entries in all (estimated from 16 rows): two rows at a time, in strips.
    let far: &[&[usize]] = &[&[50, 50, 50, 50], &[45, 48, 47, 50], &[50, 1, 50, 49, 40]];
    for (blocks, what, n, counts) in [
        (long, "long blocks", 160, &[41usize, 42, 43, 44][..]),
        (short, "short blocks", 160, &[41, 42, 43, 44]),
        (far, "long blocks, many rows", 240, &[3301, 3302]),
    ] {
        for &m in counts {
            let mut data = vec![0.0; n * m];
            for r in 0..m {
                let mut j = r % 5;
                for len in blocks[(r * 7 + m) % blocks.len()] {
                    let start = j.min(n - 1);
                    let end = (start + len).min(n);
                    for c in start..end {
                        data[r * n + c] = value();
                    }
                    j = end + 1 + r % 3;
                }
            }
            spmv_matches_reference(&p, (n, m, &data), &format!("{m} rows of {n}, {what}"));
        }
    }
}

#[test]
fn loops_prefetch_the_loads_that_move_on() {
    // A band row's values (positions in the level) are prefetched ahead; `x`, read at the
    // row's own coordinates and again by the next rows, is not. A walk over a SparseList
    // row prefetches its index and value streams; `x` is gathered (or loaded at `idx`).
    // Vectorized loops prefetch once per group of eight positions; the scalar loops of a
    // kernel that keeps its order, once per strip of eight iterations.
    // The buffers prefetched (each once, in order of first mention).
    let prefetched = |c: &str| -> Vec<String> {
        c.lines()
            .filter(|l| l.contains("__builtin_prefetch"))
            .map(|l| {
                let name = |p: &str| {
                    c.lines()
                        .find(|d| d.contains(&format!(" *restrict {p} = ")))
                        .and_then(|d| d.rsplit("/* ").next())
                        .map(|n| n.trim_end_matches(" */").to_string())
                };
                // Rows run together read (and prefetch) through pointers of their own,
                // `const T *b.. = pN + ...`.
                let buffer = |p: &str| {
                    c.lines()
                        .find_map(|d| d.trim().split_once(&format!(" *{p} = ")))
                        .and_then(|(_, rest)| rest.split(' ').next())
                        .map_or(p.to_string(), str::to_string)
                };
                let at = l.split("(uintptr_t)(").nth(1).expect("an address");
                name(&buffer(at.split(' ').next().unwrap_or(""))).expect("a buffer")
            })
            .fold(Vec::new(), |mut seen, b| {
                if !seen.contains(&b) {
                    seen.push(b);
                }
                seen
            })
    };
    for reassociate in [true, false] {
        let Some(band) = row_spmv_c("SparseBand", reassociate) else {
            return;
        };
        assert_eq!(prefetched(&band), ["A_lvl3_val"], "{band}");
        let list = row_spmv_c("SparseList", reassociate).expect("C");
        assert_eq!(prefetched(&list), ["A_lvl2_idx", "A_lvl3_val"], "{list}");
        if !reassociate {
            assert!(!list.contains("_mm512"), "{list}");
            assert!(list.contains("for (int k_ = 0; k_ < 8; k_++) {"), "{list}");
            assert!(band.contains("for (int k_ = 0; k_ < 8; k_++, v"), "{band}");
        }
        // The last iterations of a band row, after its strips, run scalar: an empty asm
        // keeps cc from vectorizing a loop of at most seven iterations. A block's, in the
        // walk over a row's blocks, keep cc's vector pairs. A reassociating kernel's
        // AVX-512 copy has no strips (its loops run eight lanes at a time); its AVX2
        // copy's scalar rest after groups of four is kept scalar too.
        assert!(band.contains("__asm__(\"\");"), "{band}");
        assert!(
            !avx512_copy(&band).unwrap_or("").contains("__asm__"),
            "{band}"
        );
        let blocks = row_spmv_c("SparseBlockList", reassociate).expect("C");
        assert!(blocks.contains("__builtin_prefetch"), "{blocks}");
        let scalar = vector_copy(&blocks, "scalar").unwrap_or(&blocks);
        assert!(!scalar.contains("__asm__"), "{blocks}");
        if reassociate {
            let avx2 = vector_copy(&blocks, "avx2").expect("an AVX2 copy");
            assert!(avx2.contains("__asm__(\"\");"), "{blocks}");
        }
        // A loop no loop encloses prefetches every load that moves on with it: the
        // SparsePoint rows' `idx` and values, at the row's own position (`y` is written
        // and `x` is read at the stored index).
        let point = row_spmv_c("SparsePoint", reassociate).expect("C");
        assert_eq!(prefetched(&point), ["A_lvl2_idx", "A_lvl3_val"], "{point}");
    }
}

#[test]
fn let_variables_keep_their_type() {
    // A `let` variable has its value's type in the simplifier. It was taken for an `i64`
    // (a loop index), which is exact to reorder: the sum of three `f64` variables below
    // was sorted and gave 0.0 where the program's order gives 1.0 (both engines), and
    // `(x[i] | true) | x[i]` over `bool` folded `true` into the integer 1, a compile error.
    let f = |v: f64| DenseArray::from_f64(&[1], &[v]).unwrap();
    let sum = Program::parse(
        "input x :: Dense(Element(0.0))\ninput y :: Dense(Element(0.0))\ninput z :: Dense(Element(0.0))\noutput o :: Dense(Element(0.0))\no .= 0\nfor i = _\n  let a = x[i], b = y[i], c = z[i]\n    o[i] = c + b + a\n  end\nend\n",
    )
    .unwrap();
    let (x, y, z) = (f(1.0), f(-1e16), f(1e16));
    engines_match_reference(&sum, &[("x", &x), ("y", &y), ("z", &z)], &[], "c + b + a");
    let bits = DenseArray::from_data(
        ScalarType::Bool,
        &[70],
        (0..70).map(|k| Value::Bool(k % 3 == 0)).collect(),
        Value::Bool(false),
    )
    .unwrap();
    let bytes = DenseArray::from_data(
        ScalarType::U8,
        &[70],
        (0..70u8).map(|k| Value::U8(k.wrapping_mul(37))).collect(),
        Value::U8(0),
    )
    .unwrap();
    for (text, input) in [
        ("input x :: Dense(Element(false))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = (x[i] | true) | x[i]\nend\n", &bits),
        ("input x :: Dense(Element(false))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = x[i] | coalesce(x[~(i + 1)], true) | x[i]\nend\n", &bits),
        ("input x :: Dense(Element(0u8))\noutput o :: Dense(Element(0u8))\no .= 0u8\nfor i = _\n  o[i] = max(max(x[i], coalesce(x[~(i + 2)], 255u8)), x[i])\nend\n", &bytes),
    ] {
        engines_match_reference(&Program::parse(text).unwrap(), &[("x", input)], &[], text);
    }
}

#[test]
fn narrow_element_types_and_missing_values_compile_like_the_reference() {
    // Found by a differential fuzz of integer element types:
    // * a shifted read's first phase is `missing` (outside the vector), which has no type;
    //   it was taken for `f64`, so `max(s, 0)` became an `f64` and a `u8` program failed;
    // * `*=` over a run of n equal values is one `*= v ^ n`, and an integer power has its
    //   base's type (`i8` here), where it was computed in `i64` and failed to store;
    // * assigning `missing` does nothing (digest §5.3): the reference engine refused it.
    let vector = |ty: ScalarType, vals: &[i64], fill: Value| {
        DenseArray::from_data(
            ty,
            &[vals.len()],
            vals.iter()
                .map(|&v| Value::I64(v).convert_wrapping(ty).unwrap())
                .collect(),
            fill,
        )
        .unwrap()
    };
    let u8s = vector(ScalarType::U8, &[5, 7, 0, 0, 9, 3], Value::U8(0));
    let f64s = DenseArray::from_f64(&[6], &[5.0, 7.0, 0.0, 0.0, 9.0, -3.0]).unwrap();
    let i8s = vector(ScalarType::I8, &[5, 7, 7, 7, 1, 1, 3, 3], Value::I8(1));
    for (text, x) in [
        ("input x :: SparseList(Element(0u8))\noutput s :: Scalar(0u8)\ns .= 0u8\nfor i = _\n  s[] <<max>>= x[~(i - 1)] * x[i]\nend\n", &u8s),
        ("input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[~(i - 1)] * x[i]\nend\n", &f64s),
        ("input x :: RunList(Element(1i8))\noutput s :: Scalar(1i8)\ns .= 1i8\nfor i = _\n  s[] *= x[i]\nend\n", &i8s),
        ("input x :: SparseRunList(Element(1i8))\noutput s :: Scalar(1i8)\ns .= 1i8\nfor i = _\n  s[] *= x[i] | 2i8\nend\n", &i8s),
    ] {
        engines_match_reference(&Program::parse(text).unwrap(), &[("x", x)], &[], text);
    }
}

#[test]
fn strips_cover_a_cache_line_of_their_widest_stream() {
    // A strip covers one cache line of the widest stream it prefetches, and every stream is
    // prefetched two kilobytes ahead: Fig. 26's dense erosion reads bytes (`bool`), in
    // strips of 64 that cc runs as vectors, prefetching 2048 elements ahead (strips of
    // eight, 256 bytes ahead, made it four times slower). A row of SparseList{UInt32}
    // keeps strips of eight for its `f64` values and prefetches its `u32` indices 512
    // elements ahead.
    let k = Program::parse(include_str!("../../../examples/fig26_erosion_dense.fin"))
        .unwrap()
        .compile_with(Engine::C, &CompileOptions::default())
        .unwrap();
    if k.engine() != Engine::C {
        return;
    }
    let erosion = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
    assert!(
        erosion.contains("for (int k_ = 0; k_ < 64; k_++,"),
        "{erosion}"
    );
    assert!(!erosion.contains("k_ < 8;"), "{erosion}");
    assert!(erosion.contains(") + 2048u * sizeof(*"), "{erosion}");
    assert!(!erosion.contains(") + 256u * sizeof(*"), "{erosion}");
    let list = row_spmv_c("SparseList{UInt32}", false).expect("C");
    assert!(list.contains("for (int k_ = 0; k_ < 8; k_++) {"), "{list}");
    let ahead = |c: &str, n: &str| {
        c.lines()
            .filter(|l| l.contains(&format!(") + {n}u * sizeof(*")))
            .count()
    };
    assert_eq!((ahead(&list, "512"), ahead(&list, "256")), (1, 1), "{list}");
}

#[test]
fn a_repeated_read_is_read_once() {
    // `s[] += x[i] * x[i]` loads each stored value of `x` once (a `let`), like
    // `s[] += x[i] * 2.0`: the repeated read is not walked twice in lockstep.
    let x = DenseArray::from_f64(&[9], &[0.0, 3.0, 0.0, 0.0, -2.0, 0.0, 1.0, 0.0, 0.0]).unwrap();
    let f = Format::parse("SparseList(Element(0.0))").unwrap();
    let mut loads = Vec::new();
    for body in ["x[i] * x[i]", "x[i] * 2.0"] {
        let text = format!(
            "input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += {body}\nend\n"
        );
        let k = Program::parse(&text)
            .unwrap()
            .compile(Engine::Interp)
            .unwrap();
        let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&f, &x).unwrap())]);
        let r = k.run(&mut t, &HashMap::new()).unwrap();
        loads.push(r.stats.unwrap().loads);
        let want = if body.contains("2.0") { 4.0 } else { 14.0 };
        assert_eq!(t["s"].get(&[]).unwrap(), finch::Value::F64(want), "{body}");
    }
    assert_eq!(loads[0], loads[1], "loads of x[i] * x[i] vs x[i] * 2.0");
}

/// 3-D kernels over 3-level formats: every level kind at the root, in the middle and right
/// above the leaf (issue #4's "every level in every position").
const KERNELS_3D: [&str; 4] = [
    "input A :: {A}\noutput B :: {A}\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = A[i, j, k]\nend\n",
    "input A :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor k = _, j = _, i = _\n  s[] += A[i, j, k]\nend\n",
    "input A :: {A}\noutput B :: Dense(Dense(Dense(Element(0.0))))\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = A[i, j, k] * 2.0\nend\n",
    "input A :: {A}\ninput x :: Dense(Element(0.0))\noutput Y :: Dense(Dense(Element(0.0)))\nY .= 0\nfor k = _, j = _, i = _\n  Y[i, k] += A[i, j, k] * x[j]\nend\n",
];

fn level_names() -> Vec<&'static str> {
    STRUCTURED
        .iter()
        .copied()
        .chain(["Dense", "SparseList", "SparseList{UInt32}"])
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn three_level_formats_match_the_reference(
        k in 0usize..KERNELS_3D.len(),
        outer in prop::sample::select(level_names()),
        middle in prop::sample::select(level_names()),
        inner in prop::sample::select(level_names()),
        m in 0usize..5, n in 0usize..5, p in 0usize..5,
        density in prop::sample::select(vec![0.0, 0.3, 1.0]),
        seed in any::<u32>(),
    ) {
        let format = format!("{outer}({middle}({inner}(Element(0.0))))");
        check_3d(KERNELS_3D[k], &format, [m, n, p], density, seed as u64)?;
    }
}

/// Every kernel over SparseCOO inputs (one level spanning both modes, one level per mode,
/// under Dense), on fixed sizes including 0 and 1 and every density.
#[test]
fn coo_levels_match_the_reference() {
    let matrices = [
        "SparseCOO{2}(Element(0.0))",
        "SparseCOO{1}(SparseCOO{1}(Element(0.0)))",
        "Dense(SparseCOO{1}(Element(0.0)))",
    ];
    let vector = "SparseCOO{1}(Element(0.0))";
    let mut seed = 7;
    for k in &KERNELS {
        for (a, b) in [(0, 0), (0, 1), (1, 2), (2, 0)] {
            for sizes in [[0, 3, 2], [1, 1, 1], [5, 4, 3], [23, 6, 5]] {
                for density in [0.0, 0.2, 0.6, 1.0] {
                    seed += 1;
                    let formats = [matrices[a], matrices[b], vector, "Dense(Element(0.0))"];
                    if let Err(e) = check(k, &formats, sizes, density, seed) {
                        panic!("{}: {e}", k.name);
                    }
                }
            }
        }
    }
}

/// A 3-D kernel over `A` in `format`, on the interpreter and C, against the reference.
fn check_3d(
    kernel: &str,
    format: &str,
    [m, n, p]: [usize; 3],
    density: f64,
    seed: u64,
) -> Result<(), TestCaseError> {
    let text = kernel.replace("{A}", format);
    let program = Program::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    let a = DenseArray::from_f64(&[m, n, p], &data(m * n * p, density, seed)).unwrap();
    let (ta, a) = store(&Format::parse(format).unwrap(), a);
    let x = DenseArray::from_f64(&[n], &data(n, 0.8, seed + 1)).unwrap();
    let mut dense = Bindings::new();
    dense.insert("A", a);
    let uses_x = text.contains("input x");
    if uses_x {
        dense.insert("x", x.clone());
    }
    program
        .run_reference(&mut dense, &RunOptions::default())
        .map_err(|e| TestCaseError::fail(format!("reference: {e}")))?;
    for engine in [Engine::Interp, Engine::C] {
        let compiled = match program.compile(engine) {
            Ok(c) => c,
            Err(e) if e.to_string().contains("does not support the") => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text}"))),
        };
        let mut t = HashMap::from([("A".to_string(), ta.clone())]);
        if uses_x {
            t.insert(
                "x".to_string(),
                Tensor::from_dense(&Format::parse("Dense(Element(0.0))").unwrap(), &x).unwrap(),
            );
        }
        compiled
            .run(&mut t, &HashMap::new())
            .map_err(|e| TestCaseError::fail(format!("{engine:?}: {e}\n{text}")))?;
        for d in program
            .decls()
            .iter()
            .filter(|d| d.kind == finch::notation::DeclKind::Output)
        {
            let want = dense.get(&d.name).unwrap();
            let got = t[&d.name].to_dense().unwrap();
            prop_assert!(
                got.shape == want.shape && got.data.iter().zip(&want.data).all(|(a, b)| a.same(b)),
                "{engine:?} {format} [{m}, {n}, {p}]:\n got {:?}\nwant {:?}\n{}",
                got.data,
                want.data,
                compiled.kernel()
            );
        }
    }
    Ok(())
}

/// SparseCOO levels spanning two and three modes, at the root and under other levels,
/// read by the 3-D kernels; 3-D outputs written into SparseCOO levels, and into SparseHash
/// levels in any loop order (read back in the kernel too).
#[test]
fn coo_and_hash_levels_in_three_level_formats_match_the_reference() {
    let formats = [
        "SparseCOO{3}(Element(0.0))",
        "SparseCOO{2}(Dense(Element(0.0)))",
        "SparseCOO{2}(SparseList(Element(0.0)))",
        "Dense(SparseCOO{2}(Element(0.0)))",
        "SparseList(SparseCOO{2}(Element(0.0)))",
        "SparseCOO{1}(SparseCOO{2}(Element(0.0)))",
    ];
    let copies = [
        "input A :: {A}\noutput B :: SparseCOO{3}(Element(0.0))\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = A[i, j, k] * 2.0\nend\n",
        "input A :: {A}\noutput B :: Dense(SparseCOO{2}(Element(0.0)))\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = A[i, j, k]\nend\n",
        "input A :: {A}\noutput B :: SparseHash(SparseHash(SparseHash(Element(0.0))))\nB .= 0\nfor i = _, j = _, k = _\n  B[i, j, k] += A[i, j, k]\nend\n",
        "input A :: {A}\noutput B :: Dense(SparseHash(SparseHash(Element(0.0))))\nB .= 0\nfor k = _, i = _, j = _\n  B[i, j, k] += A[i, j, k] * 2.0\nend\n",
        "input A :: {A}\noutput B :: Dense(Dense(Dense(Element(0.0))))\ntemp w :: SparseHash(SparseHash(SparseHash(Element(0.0))))\nw .= 0\nfor j = _, k = _, i = _\n  w[i, j, k] += A[i, j, k]\nend\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = w[i, j, k] + 1.0\nend\n",
        "input A :: {A}\noutput B :: Dense(Dense(Dense(Element(0.0))))\ntemp w :: Dense(SparseHash(SparseHash(Element(0.0))))\nw .= 0\nfor i = _, k = _, j = _\n  w[i, j, k] += A[i, j, k]\nend\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = w[i, j, k] * 2.0\nend\n",
    ];
    let mut seed = 11;
    for kernel in KERNELS_3D.iter().chain(&copies) {
        for format in formats {
            for dims in [[0, 2, 3], [1, 1, 1], [3, 4, 2], [4, 1, 5]] {
                for density in [0.0, 0.3, 1.0] {
                    seed += 1;
                    if let Err(e) = check_3d(kernel, format, dims, density, seed) {
                        panic!("{e}");
                    }
                }
            }
        }
    }
}

/// Every structured level takes `follow` (a check against its entry, run or block, or a
/// binary search over its sorted ends), and those with sorted ends also `gallop`; levels
/// with one entry per fiber refuse `gallop` by name. Results match the reference.
#[test]
fn structured_levels_follow_and_gallop() {
    let find = |name: &str| KERNELS.iter().find(|k| k.name == name).unwrap();
    let follow = find("dot_follow");
    let gallop = find("dot_gallop_walk");
    for level in STRUCTURED {
        let x = "Dense(Element(0.0))";
        let z = format!("{level}(Element(0.0))");
        // `z[follow(i)]`: z is the level under test.
        let formats = [MATRICES[0], MATRICES[0], x, z.as_str()];
        let text = follow.text.replace("{x}", x).replace("{z}", &z);
        let p = Program::parse(&text).unwrap();
        p.compile(Engine::Interp)
            .unwrap_or_else(|e| panic!("follow into {level}: {e}"));
        for (n, density) in [(0, 0.5), (1, 1.0), (9, 0.4), (23, 0.7)] {
            check(follow, &formats, [n, n, n], density, n as u64 + 3).unwrap();
        }
        // `x[gallop(i)]`: x is the level under test.
        let formats = [MATRICES[0], MATRICES[0], z.as_str(), x];
        let text = gallop.text.replace("{x}", &z).replace("{z}", x);
        let p = Program::parse(&text).unwrap();
        match p.compile(Engine::Interp) {
            Ok(_) => {
                for (n, density) in [(0, 0.5), (1, 1.0), (9, 0.4), (23, 0.7)] {
                    check(gallop, &formats, [n, n, n], density, n as u64 + 5).unwrap();
                }
            }
            Err(e) => {
                assert!(
                    ["SparsePoint", "SparseInterval", "SparseBand"].contains(&level)
                        && e.to_string()
                            .contains("does not support the gallop protocol"),
                    "{level}: {e}"
                );
            }
        }
    }
}

/// Conversion is a copy: from every 2-level format into every 2-level format (each level
/// kind above Dense, SparseList and itself, and below Dense and SparseList), on the
/// interpreter, against the reference; a result the output format cannot hold (two
/// entries in a SparsePoint fiber) must be refused, never stored wrong.
#[test]
fn conversion_between_every_pair_of_two_level_formats() {
    let copy = Kernel {
        name: "copy",
        text:
            "input A :: {A}\noutput C :: {B}\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        inputs: &[("A", true, 0, 1)],
    };
    let formats = structured_matrices();
    let mut seed = 1;
    for from in &formats {
        for to in &formats {
            seed += 1;
            let f = [from.as_str(), to.as_str(), "", ""];
            for structure in [0, 2] {
                check_engines(
                    &copy,
                    &f,
                    [5, 4, 1],
                    0.4,
                    seed,
                    structure,
                    &[Engine::Interp],
                )
                .unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The conversions above, compiled to C, on random sizes and data.
    #[test]
    fn compiled_conversions_match_the_reference(
        from in prop::sample::select(structured_matrices()),
        to in prop::sample::select(structured_matrices()),
        m in sizes(), n in sizes(),
        structure in 0u8..4,
        seed in any::<u32>(),
    ) {
        let copy = Kernel {
            name: "copy",
            text: "input A :: {A}\noutput C :: {B}\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
            inputs: &[("A", true, 0, 1)],
        };
        let f = [from.as_str(), to.as_str(), "", ""];
        check_engines(&copy, &f, [m, n, 1], 0.4, seed as u64, structure, &[Engine::C])?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Windows with random bounds (empty, whole, at either end) over random vector
    /// formats and data, read into a dense result and reduced, on both engines.
    #[test]
    fn windows_match_the_reference(
        format in prop::sample::select(structured_vectors()),
        n in 0usize..24,
        a in 0usize..25, b in 0usize..25,
        density in prop::sample::select(vec![0.0, 0.3, 1.0]),
        seed in any::<u32>(),
    ) {
        let lo = 1 + a % (n + 1);
        let hi = (lo - 1 + b % (n + 2 - lo)).min(n);
        let text = format!(
            "input x :: {format}\ninput lo :: Scalar(0)\ninput hi :: Scalar(0)\noutput y :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ny .= 0\ns .= 0\nfor j = _\n  y[j] = x[(lo[]:hi[])(j)] * 2.0\n  s[] += x[(lo[]:hi[])(j)] * x[(lo[]:hi[])(j)]\nend\n"
        );
        let program = Program::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let f = Format::parse(&format).unwrap();
        let (tx, x) = store(&f, DenseArray::from_f64(&[n], &data(n, density, seed as u64)).unwrap());
        let int = |v: usize| DenseArray::from_data(
            finch::ScalarType::I64, &[], vec![finch::Value::I64(v as i64)], finch::Value::I64(0),
        ).unwrap();
        let mut dense = Bindings::new();
        dense.insert("x", x);
        dense.insert("lo", int(lo));
        dense.insert("hi", int(hi));
        program
            .run_reference(&mut dense, &RunOptions::default())
            .map_err(|e| TestCaseError::fail(format!("reference: {e}\n{text}")))?;
        let scalar = |v: usize| Tensor::from_dense(&Format::parse("Scalar(0)").unwrap(), &int(v)).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let mut t = HashMap::from([
                ("x".to_string(), tx.clone()),
                ("lo".to_string(), scalar(lo)),
                ("hi".to_string(), scalar(hi)),
            ]);
            program
                .compile(engine)
                .and_then(|k| k.run(&mut t, &HashMap::new()))
                .map_err(|e| TestCaseError::fail(format!("{engine:?}: {e}\n{text}")))?;
            for name in ["y", "s"] {
                prop_assert_eq!(&t[name].to_dense().unwrap(), dense.get(name).unwrap(), "{:?} {} [{}:{}]", engine, format, lo, hi);
            }
        }
    }
}

#[test]
fn nested_indirect_reads_through_a_sparse_index_vector() {
    // Found by a differential fuzz of indirect indexing: in `x[p[q[i]]]` with `p` sparse,
    // `p[q[i]]` is a Switch (stored or fill) until it is resolved, and `x` was concordized
    // at that unresolved index ("internal: an unresolved switch at a leaf").
    let q = ints(&[3, 1, 1, 4, 2], 1);
    let p = ints(&[1, 2, 1, 3], 1);
    let x = DenseArray::from_f64(&[3], &[10.0, -2.0, 0.5]).unwrap();
    for (p_format, q_format) in [
        ("SparseList", "Dense"),
        ("RunList", "SparseList"),
        ("SparseHash", "SparseRunList"),
    ] {
        let text = format!(
            "input p :: {p_format}(Element(1))\ninput q :: {q_format}(Element(1))\ninput x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput o :: Dense(Element(0.0))\ns .= 0\no .= 0\nfor i = _\n  s[] += x[p[q[i]]] * i\n  o[i] = x[p[q[i]]]\nend\n"
        );
        engines_match_reference(
            &Program::parse(&text).unwrap(),
            &[("p", &p), ("q", &q), ("x", &x)],
            &[],
            &text,
        );
    }
}

#[test]
fn statements_after_a_return_do_not_run() {
    // The compiled engines ran the statements after a top-level `return` (y = x + 1 where
    // the reference, as Finch, returns y = x): found by a differential fuzz of the
    // language's statements, as was an output never made.
    let x = DenseArray::from_f64(&[3], &[1.0, 2.0, 3.0]).unwrap();
    let head = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i]\nend\n";
    let tail = "for i = _\n  y[i] += 1.0\nend\n";
    for text in [
        format!("{head}return y\n{tail}"),
        format!("{head}begin\n  return y\nend\n{tail}"),
    ] {
        let p = Program::parse(&text).unwrap();
        engines_match_reference(&p, &[("x", &x)], &[], &text);
        let mut t = HashMap::from([(
            "x".to_string(),
            Tensor::from_dense(&Format::parse("Dense(Element(0.0))").unwrap(), &x).unwrap(),
        )]);
        p.compile(Engine::Interp)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(t["y"].to_dense().unwrap(), x, "{text}");
    }
    // An output the program never makes (declared only after the return) is an error in
    // every engine; the compiled ones gave it its fill value.
    let text = format!("input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\n{}return y\ns .= 1\n", &head[head.find("y .= 0").unwrap()..]);
    let e = Program::parse(&text).unwrap_err();
    assert!(
        e.to_string().contains("the output `s` is never declared"),
        "{e}"
    );
}

#[test]
fn ifelse_runs_only_the_branch_taken() {
    // `ifelse(d != 0, div(n, d), 0)` guards a division: the reference evaluated both
    // branches and refused the program at d = 0, where the compiled engines (and the
    // branch the program takes) divide only by non-zeros. Found by a differential fuzz of
    // the operators.
    let x = ints(&[4, 0, -3, 0, 7], 0);
    for format in ["Dense", "SparseList", "RunList"] {
        let text = format!("input x :: {format}(Element(0))\noutput o :: Dense(Element(0))\noutput s :: Scalar(0)\no .= 0\ns .= 0\nfor i = _\n  o[i] = ifelse(x[i] != 0, div(12, x[i]), -1)\n  s[] += ifelse(x[i] == 0, 5, rem(7, x[i]))\nend\n");
        engines_match_reference(&Program::parse(&text).unwrap(), &[("x", &x)], &[], &text);
    }
}

#[test]
fn and_and_or_short_circuit_in_every_engine() {
    // `x > 7 && 3 != rem(x, x - x)`: the right operand runs only where the left does not
    // decide, as in the reference engine (Julia's `&&`); the kernels evaluated both sides
    // (C's branch-free `&`) and failed on the division. Found by a differential fuzz of
    // the operators. A failing left operand still fails everywhere.
    let x = ints(&[1, 2, 3, 0], 0);
    for rhs in [
        "x[i] > 7 && 3 != rem(x[i], x[i] - x[i])",
        "x[i] < 7 || 3 != rem(x[i], x[i] - x[i])",
        "x[i] != 0 && rem(12, x[i]) == 0",
    ] {
        let text = format!("input x :: Dense(Element(0))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = {rhs}\nend\n");
        engines_match_reference(&Program::parse(&text).unwrap(), &[("x", &x)], &[], &text);
    }
    let text = "input x :: Dense(Element(0))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = 3 != rem(x[i], x[i] - x[i]) || x[i] < 7\nend\n";
    let p = Program::parse(text).unwrap();
    let mut reference = Bindings::new();
    reference.insert("x", x.clone());
    assert!(p
        .run_reference(&mut reference, &RunOptions::default())
        .is_err());
    let format = Format::parse("Dense(Element(0))").unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&format, &x).unwrap())]);
        assert!(
            p.compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .is_err(),
            "{engine:?}"
        );
    }
}
