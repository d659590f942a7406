//! Oracle tests of the compiler: each kernel is compiled for random input formats and run
//! on random data (sizes 0, 1, small, medium; empty, sparse and full) with the interpreter
//! and the C backend; the outputs must equal the dense reference interpreter's. Also
//! written output formats, 3-D formats, SparseCOO and SparseHash levels, conversions,
//! windows, and `follow` and `gallop` into every structured level.

mod common;

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program};
use proptest::prelude::*;

use common::*;

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

/// 3-D kernels over 3-level formats: every level kind at the root, in the middle and right
/// above the leaf (issue #4's "every level in every position").
const KERNELS_3D: [&str; 4] = [
    "input A :: {A}\noutput B :: {A}\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = A[i, j, k]\nend\n",
    "input A :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor k = _, j = _, i = _\n  s[] += A[i, j, k]\nend\n",
    "input A :: {A}\noutput B :: Dense(Dense(Dense(Element(0.0))))\nB .= 0\nfor k = _, j = _, i = _\n  B[i, j, k] = A[i, j, k] * 2.0\nend\n",
    "input A :: {A}\ninput x :: Dense(Element(0.0))\noutput Y :: Dense(Dense(Element(0.0)))\nY .= 0\nfor k = _, j = _, i = _\n  Y[i, k] += A[i, j, k] * x[j]\nend\n",
];

fn level_names() -> Vec<&'static str> {
    structured()
        .into_iter()
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
    for level in structured() {
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
